"""Position-dependent query scaling (QSCALE-*): q times ``1 + beta ln(1 + floor(p' / L))``, p' the
position id (Mistral) or p + 1 (Llama 4), computed in at least float32."""

from __future__ import annotations

from ._common import I64, KernelRunner, compute_dtype, tf


def k_query_scale(q, position_ids, *, form, beta, length):
    cd = compute_dtype(q.dtype)
    p = tf.cast(position_ids, I64) + (1 if form == "llama4" else 0)
    s = 1 + beta * tf.math.log1p(tf.cast(tf.math.floordiv(p, tf.constant(length, I64)), cd))
    return tf.cast(tf.cast(q, cd) * s[:, None, :, None], q.dtype)


class Ops(KernelRunner):
    """Adapter methods of the query-scaling family."""

    def query_scale_apply(self, q, position_ids, params):
        return self.run(k_query_scale, q, position_ids, form=params.form, beta=float(params.beta),
                        length=int(params.scale_length))

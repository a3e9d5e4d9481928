"""Position-dependent query scaling (QSCALE-*): q times ``1 + beta ln(1 + floor(p' / L))``, p' the
position id (Mistral) or p + 1 (Llama 4), computed in at least float32."""

from __future__ import annotations

import jax.numpy as jnp

from ._common import compute_dtype, kernel


@kernel("form", "beta", "length")
def query_scale(q, position_ids, form, beta, length):
    cd = compute_dtype(q.dtype)
    p = position_ids + (1 if form == "llama4" else 0)
    s = 1 + beta * jnp.log1p(jnp.floor_divide(p, length).astype(cd))
    return (q.astype(cd) * s[:, None, :, None]).astype(q.dtype)


class Ops:
    """Query-scaling operation of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def query_scale_apply(self, q, position_ids, params):
        return self.run(query_scale, q, position_ids, form=params.form, beta=float(params.beta),
                        length=int(params.scale_length))

"""M-RoPE (MROPE-*): each frequency reads the positions of its axis (temporal, height, width);
the prepared :class:`TFMRope`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._common import DTYPES, F64, KernelRunner, _rotate, compute_dtype, tf

if TYPE_CHECKING:
    from posenc.adapters.tf_adapter import TFAdapter


def k_mrope(position_ids, *, p, axes, dt):
    """MROPE-*: cos/sin ``[B, T, D/2]`` in the compute dtype; each frequency reads its axis' positions."""
    cd = compute_dtype(dt)
    D = p.head_dim
    w = tf.cast(tf.pow(tf.constant(p.rope_theta, F64), -(tf.range(0, D, 2, dtype=F64) / D)), cd)
    pos = tf.transpose(tf.gather(position_ids, axes), [1, 2, 0])  # [B, T, D/2]
    phi = tf.cast(pos, cd) * w
    return tf.cos(phi), tf.sin(phi)


def k_mrope_cos_sin(position_ids, *, p, axes, dt):
    """MROPE-*: half-width cos/sin ``[B, T, head_dim/2]`` in ``dt`` from position_ids ``[3, B, T]``."""
    c, s = k_mrope(position_ids, p=p, axes=axes, dt=dt)
    return tf.cast(c, dt), tf.cast(s, dt)


def k_mrope_apply(q, k, position_ids, *, p, axes, dt):
    """MROPE-*: q, k ``[B, H, T, D]`` rotated with half pairing over the whole head."""
    c, s = k_mrope(position_ids, p=p, axes=axes, dt=dt)
    D = p.head_dim
    return _rotate(q, c, s, D, "half"), _rotate(k, c, s, D, "half")


# ---- prepared operations ------------------------------------------------------------------------


def mrope_axes(params) -> tuple[int, ...]:
    """Axis (0 t, 1 h, 2 w) of each frequency (MROPE-SECTIONS contiguous / MROPE-INTERLEAVED)."""
    half, sec = params.head_dim // 2, params.mrope_section
    if params.layout == "contiguous":
        return tuple(a for a, n in enumerate(sec) for _ in range(n))
    return tuple(1 if k % 3 == 1 and k < 3 * sec[1] else 2 if k % 3 == 2 and k < 3 * sec[2] else 0
                 for k in range(half))


class TFMRope:
    """Prepared M-RoPE (MROPE-*): position_ids ``[3, B, T]``, half pairing over the whole head."""

    def __init__(self, adapter: "TFAdapter", params, dtype: tf.DType):
        self.a, self.p, self.dtype, self.axes = adapter, params, dtype, mrope_axes(params)

    def _check(self, position_ids):
        if position_ids.shape.rank != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {position_ids.shape.as_list()}")

    def cos_sin(self, position_ids):
        self._check(position_ids)
        return self.a.run(k_mrope_cos_sin, position_ids, p=self.p, axes=self.axes, dt=self.dtype)

    def apply(self, q, k, position_ids):
        self._check(position_ids)
        return self.a.run(k_mrope_apply, q, k, position_ids, p=self.p, axes=self.axes, dt=self.dtype)


class Ops(KernelRunner):
    """Adapter methods of the mrope family."""

    def mrope(self, params, *, dtype, device):
        return TFMRope(self, params, DTYPES[dtype])

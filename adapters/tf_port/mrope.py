"""M-RoPE (MROPE-*): each frequency reads the positions of its axis (temporal, height, width);
the frequencies and attention factor are the rope_type's over rotary_dim (MROPE-ROPE-TYPE,
MROPE-ATTENTION-SCALING: the rope port's rules on ``params.rope``), rotating the first
rotary_dim dims (MROPE-PARTIAL); the prepared :class:`TFMRope`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._common import DTYPES, F64, I64, KernelRunner, LayoutForms, _rotate, compute_dtype, tf
from .rope_scaling import _scaled_inv_freq, attention_factor

if TYPE_CHECKING:
    from posenc.adapters.tf_adapter import TFAdapter


def k_mrope(position_ids, *, p, axes, dt):
    """MROPE-*: ``a (cos, sin)`` ``[B, T, r/2]`` in the compute dtype; each frequency reads its
    axis' positions; dynamic / longrope use ``max(position_ids) + 1`` over all three axes (per call)."""
    cd = compute_dtype(dt)
    rp = p.rope
    pos64 = tf.cast(position_ids, I64)
    seq_len = tf.where(tf.size(pos64) > 0, tf.reduce_max(pos64) + 1, tf.constant(0, I64))
    cached = tf.constant(rp.max_position_embeddings or 0, I64)
    w, _, _ = _scaled_inv_freq(rp, seq_len, cached, tf.constant(rp.rope_theta, F64))
    pos = tf.transpose(tf.gather(position_ids, axes), [1, 2, 0])  # [B, T, r/2]
    phi = tf.cast(pos, cd) * tf.cast(w, cd)
    af = float(attention_factor(rp))
    return af * tf.cos(phi), af * tf.sin(phi)


def k_mrope_cos_sin(position_ids, *, p, axes, dt):
    """MROPE-*: half-width cos/sin ``[B, T, rotary_dim/2]`` in ``dt`` from position_ids ``[3, B, T]``."""
    c, s = k_mrope(position_ids, p=p, axes=axes, dt=dt)
    return tf.cast(c, dt), tf.cast(s, dt)


def k_mrope_apply(q, k, position_ids, *, p, axes, dt):
    """MROPE-*: q, k ``[B, H, T, D]`` rotated with the pairing (half or interleaved) over the first rotary_dim dims."""
    c, s = k_mrope(position_ids, p=p, axes=axes, dt=dt)
    r = p.rdim
    return _rotate(q, c, s, r, p.pairing), _rotate(k, c, s, r, p.pairing)


# ---- prepared operations ------------------------------------------------------------------------


def mrope_axes(params) -> tuple[int, ...]:
    """Axis (0 t, 1 h, 2 w) of each frequency (MROPE-SECTIONS contiguous / MROPE-INTERLEAVED)."""
    half, sec = params.rdim // 2, params.mrope_section
    if params.layout == "contiguous":
        return tuple(a for a, n in enumerate(sec) for _ in range(n))
    if params.layout == "hw_alternating":  # MROPE-HW-ALTERNATING: h, w in turn, then t
        return tuple((1 if k % 2 == 0 else 2) if k < sec[1] + sec[2] else 0 for k in range(half))
    return tuple(1 if k % 3 == 1 and k < 3 * sec[1] else 2 if k % 3 == 2 and k < 3 * sec[2] else 0
                 for k in range(half))


class TFMRope(LayoutForms):
    """Prepared M-RoPE (MROPE-*): position_ids ``[3, B, T]``, the pairing (half or interleaved) over the first rotary_dim dims."""

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

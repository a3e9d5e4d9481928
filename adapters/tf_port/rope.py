"""RoPE core (ROPE-*): angles, cos/sin and the rotation, the prepared :class:`TFRope`, and the
rotation by given cos/sin; the frequencies come from ``rope_scaling``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._common import DTYPES, F64, I64, KernelRunner, LayoutForms, _rotate, compute_dtype, tf, tf_device
from .rope_scaling import _scaled_inv_freq, attention_factor

if TYPE_CHECKING:
    from posenc.adapters.tf_adapter import TFAdapter


def _seq_len(position_ids):
    """``max(position_ids) + 1`` (0 for no positions), an int64 scalar tensor."""
    pos = tf.cast(position_ids, I64)
    return tf.where(tf.size(pos) > 0, tf.reduce_max(pos) + 1, tf.constant(0, I64))


def _angles_cos_sin(position_ids, w, af: float, cd, condense=None):
    pos = tf.cast(position_ids, cd)
    if condense is not None:  # ROPE-CONDENSE: the positions divided before the angle
        pos = pos / tf.constant(condense, cd)
    phi = pos[..., None] * tf.cast(w, cd)
    return af * tf.cos(phi), af * tf.sin(phi)


def k_rope_inv_freq(seq_len, cached, theta, *, p, cd):
    """``(inv_freq [pair_dim/2] in cd, cached', theta')`` (the state is unchanged when seq_len is 0)."""
    w, cached, theta = _scaled_inv_freq(p, seq_len, cached, theta)
    return tf.cast(w, cd), cached, theta


def k_rope_cos_sin(position_ids, cached, theta, *, p, cd, dt, af):
    """ROPE-ANGLE: ``af * (cos, sin)`` ``[B, T, pair_dim/2]`` in ``dt``, plus the new state."""
    w, cached, theta = k_rope_inv_freq(_seq_len(position_ids), cached, theta, p=p, cd=cd)
    c, s = _angles_cos_sin(position_ids, w, af, cd, p.condense_ratio)
    return tf.cast(c, dt), tf.cast(s, dt), w, cached, theta


def k_rope_apply(q, k, position_ids, cached, theta, *, p, cd, af):
    """ROPE-PAIR-*, ROPE-PARTIAL: rotated q, k in their dtype, plus the new state."""
    w, cached, theta = k_rope_inv_freq(_seq_len(position_ids), cached, theta, p=p, cd=cd)
    c, s = _angles_cos_sin(position_ids, w, af, cd, p.condense_ratio)
    r, pr = p.pair_dim, p.pairing
    s = s * p.sin_sign  # a turn by -phi is sin negated (ROPE-ROTATION-NEGATIVE)
    return _rotate(q, c, s, r, pr), _rotate(k, c, s, r, pr), w, cached, theta


def k_rotate_with_cos_sin(q, k, cos, sin, *, rotary_dim, pairing, sign=1):
    """ROPE-PAIR-*, ROPE-ROTATION-NEGATIVE: q, k ``[B, H, T, D]`` rotated by given half-width
    cos/sin ``[B, T, r/2]`` (``sign`` -1: by -phi), computed in the compute dtype of ``q``,
    rounded once to its dtype."""
    cd = compute_dtype(q.dtype)
    c, s = tf.cast(cos, cd), tf.cast(sin, cd) * sign
    return _rotate(q, c, s, rotary_dim, pairing), _rotate(k, c, s, rotary_dim, pairing)


# ---- prepared operations ------------------------------------------------------------------------


class TFRope(LayoutForms):
    """Prepared RoPE for one parameter set, dtype and device (ROPE-*, SCALE-*).

    ``dynamic`` and ``longrope`` recompute their frequencies in the kernel from each call's
    ``max(position_ids) + 1``; ``dynamic_policy='grow_until_reset'`` keeps transformers' state
    ``(cached, theta')`` across calls as tensors on this object (SCALE-DYNAMIC-GROW).
    """

    def __init__(self, adapter: "TFAdapter", params, dtype: tf.DType, device: str):
        self.a, self.p, self.dtype, self.device = adapter, params, dtype, device
        self.cd, self.af = compute_dtype(dtype), float(attention_factor(params))
        with tf.device(tf_device(device)):
            self._cached = tf.constant(params.max_position_embeddings or 0, I64)
            self._theta = tf.constant(params.rope_theta, F64)
        self._inv_freq, *_ = adapter.run(k_rope_inv_freq, 0, self._cached, self._theta, device=device,
                                         p=params, cd=self.cd)

    def inv_freq(self):
        """``(inv_freq [pair_dim/2] float32 (float64 for float64), attention_factor)`` of the last call."""
        return self._inv_freq, self.af

    def cos_sin(self, position_ids):
        c, s, self._inv_freq, self._cached, self._theta = self.a.run(
            k_rope_cos_sin, position_ids, self._cached, self._theta, p=self.p, cd=self.cd, dt=self.dtype, af=self.af)
        return c, s

    def apply(self, q, k, position_ids):
        q, k, self._inv_freq, self._cached, self._theta = self.a.run(
            k_rope_apply, q, k, position_ids, self._cached, self._theta, p=self.p, cd=self.cd, af=self.af)
        return q, k

    def apply_offsets(self, q, k, offsets):
        """rope.apply_row_offsets: row b's positions ``offsets[b] + t``."""
        t = tf.range(tf.shape(q)[2], dtype=offsets.dtype)
        return self.apply(q, k, offsets[:, None] + t[None])

    def apply_offset(self, q, k, offset: int):
        """rope.apply_offset: every row at positions ``offset + t``."""
        pos = offset + tf.range(tf.shape(q)[2], dtype=tf.int64)
        return self.apply(q, k, tf.broadcast_to(pos[None], [tf.shape(q)[0], tf.shape(q)[2]]))

    def apply_packed(self, q, k, cu_seqlens, offsets):
        """rope.apply_packed: document d is tokens ``cu_seqlens[d] ..`` at positions ``offsets[d] + t``."""
        n, cu = tf.shape(q)[0], tf.cast(cu_seqlens, offsets.dtype)
        i = tf.range(n, dtype=cu.dtype)
        doc = tf.searchsorted(cu, i, side="right") - 1
        pos = tf.gather(offsets, doc) + i - tf.gather(cu, doc)
        yq, yk = self.apply(tf.transpose(q, [1, 0, 2])[None], tf.transpose(k, [1, 0, 2])[None], pos[None])
        return tf.transpose(yq[0], [1, 0, 2]), tf.transpose(yk[0], [1, 0, 2])


class Ops(KernelRunner):
    """Adapter methods of the rope family."""

    def rope(self, params, *, dtype, device):
        return TFRope(self, params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        return self.run(k_rotate_with_cos_sin, q, k, cos, sin, rotary_dim=params.pair_dim, pairing=params.pairing,
                        sign=params.sin_sign)

    def rope_apply_with_cos_sin_hidden(self, q, k, cos, sin, params):
        """rope.apply_with_cos_sin_hidden: q, k ``[B, T, H * D]``, D = ``params.head_dim``."""
        B, T, D = q.shape[0], q.shape[1], params.head_dim
        yq, yk = self.rope_apply_with_cos_sin(tf.transpose(tf.reshape(q, [B, T, -1, D]), [0, 2, 1, 3]),
                                              tf.transpose(tf.reshape(k, [B, T, -1, D]), [0, 2, 1, 3]), cos, sin, params)
        return (tf.reshape(tf.transpose(yq, [0, 2, 1, 3]), [B, T, -1]),
                tf.reshape(tf.transpose(yk, [0, 2, 1, 3]), [B, T, -1]))

    def rope_apply_with_cos_sin_cache(self, q, k, cos_cache, sin_cache, position_ids, params):
        """rope.apply_with_cos_sin_cache: cos, sin rows ``cache[position_ids]``."""
        return self.rope_apply_with_cos_sin(q, k, tf.gather(cos_cache, position_ids), tf.gather(sin_cache, position_ids),
                                            params)

"""RoPE core (ROPE-*): the angles, cos/sin and rotation kernels, and the prepared :class:`JaxRope`
(which keeps the dynamic-NTK grow-until-reset state, SCALE-DYNAMIC-GROW)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from ._common import DTYPES, LayoutForms, arange_positions, compute_dtype, kernel, on_device, rotate
from .rope_scaling import attention_factor, scaled_inv_freq

if TYPE_CHECKING:
    from ..jax_adapter import JaxAdapter


def _rope_angles(position_ids, theta, p, cd):
    """``(af cos, af sin, inv_freq)`` in ``cd``; seq_len is taken from the (traced) positions."""
    seq_len = jnp.max(position_ids, initial=-1) + 1
    w = scaled_inv_freq(p, seq_len, theta).astype(cd)
    pos = position_ids.astype(cd)
    if p.condense_ratio is not None:  # ROPE-CONDENSE: the positions divided before the angle
        pos = pos / jnp.asarray(p.condense_ratio, cd)
    phi = pos[..., None] * w
    af = jnp.asarray(attention_factor(p), cd)
    return af * jnp.cos(phi), af * jnp.sin(phi), w


@kernel("p", "cd")
def rope_inv_freq(theta, p, cd):
    """ROPE-INV-FREQ / SCALE-*: the frequencies before any call (seq_len 0), held in ``cd``."""
    return scaled_inv_freq(p, 0, theta).astype(cd)


@kernel("p", "cd", "dtype")
def rope_cos_sin(position_ids, theta, p, cd, dtype):
    """ROPE-ANGLE: ``af (cos, sin)`` ``[B, T, pair_dim/2]`` in ``dtype``, and the call's inv_freq."""
    c, s, w = _rope_angles(position_ids, theta, p, cd)
    return c.astype(dtype), s.astype(dtype), w


@kernel("p", "cd")
def rope_apply(q, k, position_ids, theta, p, cd):
    """ROPE-PAIR-HALF / -INTERLEAVED / -DEINTERLEAVE, ROPE-PARTIAL: rotated q, k (and the call's inv_freq)."""
    c, s, w = _rope_angles(position_ids, theta, p, cd)
    s = s * p.sin_sign  # a turn by -phi is sin negated (ROPE-ROTATION-NEGATIVE)
    return rotate(q, c, s, p.pair_dim, p.pairing), rotate(k, c, s, p.pair_dim, p.pairing), w


@kernel("rotary_dim", "pairing", "sign")
def rope_apply_cos_sin(q, k, cos, sin, rotary_dim, pairing, sign=1):
    """Rotate with given half-width cos/sin (upcast to q's compute dtype); ``sign`` -1 turns by -phi
    (ROPE-ROTATION-NEGATIVE)."""
    cd = compute_dtype(q.dtype)
    c, s = cos.astype(cd), sin.astype(cd) * sign
    return rotate(q, c, s, rotary_dim, pairing), rotate(k, c, s, rotary_dim, pairing)


class JaxRope(LayoutForms):
    """Prepared RoPE for one parameter set, dtype and device (see the module docstring).

    ``dynamic`` (per-call policy) and ``longrope`` take each call's ``max(position_ids) + 1`` inside the
    kernel; ``dynamic_policy='grow_until_reset'`` keeps transformers' state here, on the Python object
    (SCALE-DYNAMIC-GROW), and passes theta' to the kernel as a traced scalar.
    """

    def __init__(self, adapter: "JaxAdapter", params, dtype: str, device: str):
        self.a, self.p, self.dtype, self.device = adapter, params, DTYPES[dtype], device
        self.cd = compute_dtype(self.dtype)
        self._grow = params.rope_type == "dynamic" and params.dynamic_policy == "grow_until_reset"
        self._cached, self._theta = params.max_position_embeddings, params.rope_theta
        with on_device(device):
            self._w = adapter.run(rope_inv_freq, self._theta_arg(), p=params, cd=self.cd)

    def _theta_arg(self):
        return jnp.asarray(self._theta, jnp.float64)

    def _update(self, position_ids) -> None:
        """SCALE-DYNAMIC-GROW (grow policy only): reads seq_len on the host, keeps theta' here."""
        if not self._grow:
            return
        p, lmax = self.p, self.p.max_position_embeddings
        pid = np.asarray(jax.device_get(position_ids))
        seq_len = int(pid.max()) + 1 if pid.size else 0
        if seq_len > self._cached:
            self._theta = p.rope_theta * (p.factor * seq_len / lmax - (p.factor - 1)) ** (p.rdim / (p.rdim - 2))
            self._cached = seq_len
        if seq_len < lmax and self._cached > lmax:
            self._theta, self._cached = p.rope_theta, lmax

    def inv_freq(self):
        return self._w, float(attention_factor(self.p))

    def cos_sin(self, position_ids):
        self._update(position_ids)
        c, s, self._w = self.a.run(rope_cos_sin, position_ids, self._theta_arg(), p=self.p, cd=self.cd,
                                   dtype=self.dtype)
        return c, s

    def apply(self, q, k, position_ids):
        self._update(position_ids)
        yq, yk, self._w = self.a.run(rope_apply, q, k, position_ids, self._theta_arg(), p=self.p, cd=self.cd)
        return yq, yk

    def apply_offsets(self, q, k, offsets):
        """rope.apply_row_offsets: row b's positions ``offsets[b] + t``."""
        return self.apply(q, k, self.a.run(arange_positions, offsets, batch=q.shape[0], seq_len=q.shape[2]))

    def apply_offset(self, q, k, offset: int):
        """rope.apply_offset: every row at positions ``offset + t``."""
        return self.apply_offsets(q, k, offset)

    def apply_packed(self, q, k, cu_seqlens, offsets):
        """rope.apply_packed: document d is tokens ``cu_seqlens[d] ..`` at positions ``offsets[d] + t``."""
        return self.apply_tokens(q, k, self.a.run(packed_token_positions, cu_seqlens, offsets, n=q.shape[0]))


@kernel("n")
def packed_token_positions(cu_seqlens, offsets, n: int):
    """rope.apply_packed: token i of document d (``cu_seqlens[d] <= i < cu_seqlens[d + 1]``) at
    ``offsets[d] + i - cu_seqlens[d]``, ``[n]``."""
    cu = cu_seqlens.astype(offsets.dtype)
    i = jnp.arange(n, dtype=cu.dtype)
    doc = jnp.searchsorted(cu, i, side="right") - 1
    return offsets[doc] + i - cu[doc]


class Ops:
    """RoPE operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def rope(self, params, *, dtype, device):
        return JaxRope(self, params, dtype, device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        return self.run(rope_apply_cos_sin, q, k, cos, sin, rotary_dim=params.pair_dim, pairing=params.pairing,
                        sign=params.sin_sign)

    def rope_apply_with_cos_sin_hidden(self, q, k, cos, sin, params):
        """rope.apply_with_cos_sin_hidden: q, k ``[B, T, H * D]``, D = ``params.head_dim``."""
        B, T, D = q.shape[0], q.shape[1], params.head_dim
        yq, yk = self.rope_apply_with_cos_sin(jnp.swapaxes(q.reshape(B, T, -1, D), 1, 2),
                                              jnp.swapaxes(k.reshape(B, T, -1, D), 1, 2), cos, sin, params)
        return jnp.swapaxes(yq, 1, 2).reshape(B, T, -1), jnp.swapaxes(yk, 1, 2).reshape(B, T, -1)

    def rope_apply_with_cos_sin_cache(self, q, k, cos_cache, sin_cache, position_ids, params):
        """rope.apply_with_cos_sin_cache: cos, sin rows ``cache[position_ids]``."""
        return self.rope_apply_with_cos_sin(q, k, cos_cache[position_ids], sin_cache[position_ids], params)

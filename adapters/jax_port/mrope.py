"""M-RoPE (MROPE-*): per-frequency axis positions from ``position_ids [3, B, T]``, the
frequencies and attention factor of the configured rope_type over rotary_dim (MROPE-ROPE-TYPE,
MROPE-ATTENTION-SCALING, the rope port's rules on ``params.rope``), the pairing (half or interleaved) over the first
rotary_dim dims (MROPE-PARTIAL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax.numpy as jnp

from ._common import DTYPES, LayoutForms, compute_dtype, kernel, rotate
from .rope_scaling import attention_factor, scaled_inv_freq

if TYPE_CHECKING:
    from ..jax_adapter import JaxAdapter


@kernel("p", "axes", "cd")
def mrope_cos_sin(position_ids, p, axes, cd):
    """MROPE-SECTIONS / MROPE-INTERLEAVED: ``a (cos, sin)`` ``[B, T, r/2]`` from ``position_ids
    [3, B, T]``, each frequency at the position of its axis (``axes``); dynamic / longrope read
    the (traced) ``max(position_ids) + 1`` over all three axes."""
    rp = p.rope
    seq_len = jnp.max(position_ids, initial=-1) + 1
    w = scaled_inv_freq(rp, seq_len, rp.rope_theta).astype(cd)
    pos = jnp.transpose(position_ids[jnp.asarray(axes)], (1, 2, 0))  # [B, T, r/2]
    phi = pos.astype(cd) * w
    af = jnp.asarray(attention_factor(rp), cd)
    return af * jnp.cos(phi), af * jnp.sin(phi)


@kernel("p", "axes", "cd", "dtype")
def mrope_cos_sin_out(position_ids, p, axes, cd, dtype):
    c, s = mrope_cos_sin(position_ids, p, axes, cd)
    return c.astype(dtype), s.astype(dtype)


@kernel("p", "axes", "cd")
def mrope_apply(q, k, position_ids, p, axes, cd):
    c, s = mrope_cos_sin(position_ids, p, axes, cd)
    return rotate(q, c, s, p.rdim, p.pairing), rotate(k, c, s, p.rdim, p.pairing)


class JaxMRope(LayoutForms):
    """Prepared M-RoPE (MROPE-*): the rope_type's float64 inv_freq held in the compute dtype,
    per-frequency axis positions gathered from ``position_ids [3, B, T]``, half pairing over the
    first rotary_dim dims."""

    def __init__(self, adapter: "JaxAdapter", params, dtype: str):
        self.a, self.p, self.dtype = adapter, params, DTYPES[dtype]
        self.kw = dict(p=params, axes=tuple(params.axes), cd=compute_dtype(self.dtype))

    def _check(self, position_ids):
        if position_ids.ndim != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {list(position_ids.shape)}")

    def cos_sin(self, position_ids):
        self._check(position_ids)
        return self.a.run(mrope_cos_sin_out, position_ids, **self.kw, dtype=self.dtype)

    def apply(self, q, k, position_ids):
        self._check(position_ids)
        return self.a.run(mrope_apply, q, k, position_ids, **self.kw)


class Ops:
    """M-RoPE operation of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def mrope(self, params, *, dtype, device):
        return JaxMRope(self, params, dtype)

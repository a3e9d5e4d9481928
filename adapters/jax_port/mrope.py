"""M-RoPE (MROPE-*): per-frequency axis positions from ``position_ids [3, B, T]``, half pairing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax.numpy as jnp

from ._common import DTYPES, compute_dtype, kernel, rotate

if TYPE_CHECKING:
    from ..jax_adapter import JaxAdapter


@kernel("head_dim", "theta", "axes", "cd")
def mrope_cos_sin(position_ids, head_dim, theta, axes, cd):
    """MROPE-SECTIONS / MROPE-INTERLEAVED: cos/sin ``[B, T, D/2]`` from ``position_ids [3, B, T]``,
    each frequency at the position of its axis (``axes``)."""
    w = (theta ** -(jnp.arange(0, head_dim, 2, dtype=jnp.float64) / head_dim)).astype(cd)
    pos = jnp.transpose(position_ids[jnp.asarray(axes)], (1, 2, 0))  # [B, T, D/2]
    phi = pos.astype(cd) * w
    return jnp.cos(phi), jnp.sin(phi)


@kernel("head_dim", "theta", "axes", "cd", "dtype")
def mrope_cos_sin_out(position_ids, head_dim, theta, axes, cd, dtype):
    c, s = mrope_cos_sin(position_ids, head_dim, theta, axes, cd)
    return c.astype(dtype), s.astype(dtype)


@kernel("head_dim", "theta", "axes", "cd")
def mrope_apply(q, k, position_ids, head_dim, theta, axes, cd):
    c, s = mrope_cos_sin(position_ids, head_dim, theta, axes, cd)
    return rotate(q, c, s, head_dim, "half"), rotate(k, c, s, head_dim, "half")


class JaxMRope:
    """Prepared M-RoPE (MROPE-*): float64 inv_freq held in the compute dtype, per-frequency axis
    positions gathered from ``position_ids [3, B, T]``, half pairing over the whole head."""

    def __init__(self, adapter: "JaxAdapter", params, dtype: str):
        self.a, self.p, self.dtype = adapter, params, DTYPES[dtype]
        self.kw = dict(head_dim=params.head_dim, theta=params.rope_theta, axes=tuple(params.axes),
                       cd=compute_dtype(self.dtype))

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

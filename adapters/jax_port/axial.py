"""Axial RoPE of vision encoders (AXIAL-*): each rotated pair reads one axis of ``position_ids
[A, B, T]`` at one of that axis's frequencies (shared, or Pixtral's alternating), with the
layout's pairs; the dims beyond the axes' share pass through; centred coordinates
(AXIAL-COORDINATES-CENTRED): ``2 pi ((2 i + 1) / n - 1)`` in the compute dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np

from ._common import DTYPES, LayoutForms, compute_dtype, kernel, rotate

if TYPE_CHECKING:
    from ..jax_adapter import JaxAdapter


def pair_exponents(p) -> tuple[float, ...]:
    """Each rotated pair's exponent e (frequency ``theta ** -e``; AXIAL-FREQUENCIES / -ALTERNATING)."""
    A, ad = p.num_axes, p.adim
    if p.frequencies == "shared":
        return tuple(2.0 * j / ad for _, j in p.pairs)
    return tuple(2.0 * (A * j + a) / (A * ad) for a, j in p.pairs)


@kernel("p", "cd")
def axial_cos_sin(position_ids, p, cd):
    w = (np.float64(p.rope_theta) ** -np.asarray(pair_exponents(p), np.float64)).astype(cd)
    axes = jnp.asarray([a for a, _ in p.pairs])
    pos = jnp.transpose(position_ids[axes], (1, 2, 0))  # [B, T, R/2]
    if p.coordinates == "index":
        x = pos.astype(cd)
    else:  # AXIAL-COORDINATES-CENTRED: 2 pi times the patch centre in (-1, 1)
        n = np.asarray([p.grid_size[a] for a, _ in p.pairs]).astype(cd)
        x = ((2 * pos + 1).astype(cd) / n - 1) * np.asarray(2 * np.pi, cd)
    phi = x * w
    return jnp.cos(phi), jnp.sin(phi)


@kernel("p", "cd", "dtype")
def axial_cos_sin_out(position_ids, p, cd, dtype):
    c, s = axial_cos_sin(position_ids, p, cd)
    return c.astype(dtype), s.astype(dtype)


def _rotate_axial(x, c, s, p):
    R, ad = p.rdim, p.adim
    if p.layout in ("split", "alternate", "interleaved"):
        return rotate(x, c, s, R, "interleaved" if p.layout == "interleaved" else "half")
    n = ad // 2
    parts = [rotate(x[..., b * ad:(b + 1) * ad], c[..., b * n:(b + 1) * n], s[..., b * n:(b + 1) * n], ad, "half")
             for b in range(p.num_axes)]
    return jnp.concatenate(parts + [x[..., R:]], axis=-1)


@kernel("p", "cd")
def axial_apply(q, k, position_ids, p, cd):
    c, s = axial_cos_sin(position_ids, p, cd)
    return _rotate_axial(q, c, s, p), _rotate_axial(k, c, s, p)


class JaxAxial(LayoutForms):
    """Prepared axial RoPE (AXIAL-*): per-pair frequencies in the compute dtype, positions gathered
    from ``position_ids [A, B, T]``."""

    def __init__(self, adapter: "JaxAdapter", params, dtype: str):
        self.a, self.p, self.dtype = adapter, params, DTYPES[dtype]
        self.kw = dict(p=params, cd=compute_dtype(self.dtype))

    def _check(self, position_ids):
        if position_ids.ndim != 3 or position_ids.shape[0] != self.p.num_axes:
            raise ValueError(f"position_ids must be [{self.p.num_axes}, B, T], got {list(position_ids.shape)}")
        if self.p.coordinates == "centred":
            pos, n = np.asarray(position_ids), np.asarray(self.p.grid_size).reshape(-1, 1, 1)
            if ((pos < 0) | (pos >= n)).any():
                raise ValueError(f"AXIAL-COORDINATES-CENTRED: position_ids must be patch indices of the grid "
                                 f"{list(self.p.grid_size)}")

    def cos_sin(self, position_ids):
        self._check(position_ids)
        return self.a.run(axial_cos_sin_out, position_ids, **self.kw, dtype=self.dtype)

    def apply(self, q, k, position_ids):
        self._check(position_ids)
        return self.a.run(axial_apply, q, k, position_ids, **self.kw)


class Ops:
    """Axial RoPE operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def axial(self, params, *, dtype, device):
        return JaxAxial(self, params, dtype)

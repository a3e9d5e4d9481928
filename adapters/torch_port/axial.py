"""Axial RoPE of vision encoders (AXIAL-*): each rotated pair reads one axis of ``position_ids
[A, B, T]`` at one of that axis's frequencies (shared, or Pixtral's alternating), with the
layout's pairs (split / alternate half pairing, interleaved adjacent pairs, blocks one
half-paired block per axis); the dims beyond the axes' share pass through.  With centred
coordinates (AXIAL-COORDINATES-CENTRED) a pair's frequency multiplies ``2 pi ((2 i + 1) / n - 1)``,
i the axis's patch index of n, computed in the compute dtype."""

from __future__ import annotations

import math

import torch

from ._common import DTYPES, LayoutForms, compute_dtype, rotate


def pair_frequencies(params, device) -> torch.Tensor:
    """Each rotated pair's frequency, float64 ``[A axis_dim / 2]`` (AXIAL-FREQUENCIES / -ALTERNATING)."""
    A, ad = params.num_axes, params.adim
    if params.frequencies == "shared":
        e = [2.0 * j / ad for _, j in params.pairs]
    else:
        e = [2.0 * (A * j + a) / (A * ad) for a, j in params.pairs]
    return torch.tensor(params.rope_theta, dtype=torch.float64, device=device) ** -torch.tensor(
        e, dtype=torch.float64, device=device)


def rotate_axial(x, c, s, params):
    """x ``[B, H, T, D]`` rotated by per-pair cos/sin ``[B, T, R/2]`` with the layout's pairs."""
    R, ad = params.rdim, params.adim
    if params.layout in ("split", "alternate", "interleaved"):
        return rotate(x, c, s, R, "interleaved" if params.layout == "interleaved" else "half")
    n = ad // 2
    parts = [rotate(x[..., b * ad:(b + 1) * ad], c[..., b * n:(b + 1) * n], s[..., b * n:(b + 1) * n], ad, "half")
             for b in range(params.num_axes)]
    return torch.cat(parts + [x[..., R:]], dim=-1)


class TorchAxial(LayoutForms):
    """Prepared axial RoPE: the float64 per-pair frequencies held in the compute dtype, each pair's
    axis position gathered from ``position_ids [A, B, T]``."""

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.dtype = params, dtype
        self.compute = compute_dtype(dtype)
        self._w = pair_frequencies(params, device).to(self.compute)
        self._axes = torch.tensor([a for a, _ in params.pairs], dtype=torch.int64, device=device)
        # centred: each pair's axis's patch count
        self._n = None if params.coordinates == "index" else torch.tensor(
            [params.grid_size[a] for a, _ in params.pairs], dtype=torch.int64, device=device)

    def _cos_sin(self, position_ids):
        if position_ids.dim() != 3 or position_ids.shape[0] != self.p.num_axes:
            raise ValueError(f"position_ids must be [{self.p.num_axes}, B, T], got {list(position_ids.shape)}")
        pos = position_ids[self._axes].permute(1, 2, 0)  # [B, T, R/2]
        if self._n is None:
            x = pos.to(self.compute)
        else:  # AXIAL-COORDINATES-CENTRED: 2 pi times the patch centre in (-1, 1)
            if bool(((pos < 0) | (pos >= self._n)).any()):
                raise ValueError(f"AXIAL-COORDINATES-CENTRED: position_ids must be patch indices of the grid "
                                 f"{list(self.p.grid_size)}")
            c = (2 * pos + 1).to(self.compute) / self._n.to(self.compute) - 1
            x = c * torch.tensor(2 * math.pi, dtype=self.compute, device=c.device)
        phi = x * self._w
        return torch.cos(phi), torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        return rotate_axial(q, c, s, self.p), rotate_axial(k, c, s, self.p)


class Ops:
    """Axial RoPE operations of the torch port."""

    def axial(self, params, *, dtype, device):
        return TorchAxial(params, DTYPES[dtype], device)

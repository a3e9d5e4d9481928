"""Multimodal RoPE (MROPE-*): Qwen2-VL contiguous and Qwen3-VL interleaved sections."""

from __future__ import annotations

import torch

from ._common import DTYPES, compute_dtype, rotate


def mrope_axes(params) -> list[int]:
    """Axis (0 t, 1 h, 2 w) of each frequency (MROPE-SECTIONS contiguous / MROPE-INTERLEAVED)."""
    half, sec = params.head_dim // 2, params.mrope_section
    if params.layout == "contiguous":
        return [a for a, n in enumerate(sec) for _ in range(n)]
    return [1 if k % 3 == 1 and k < 3 * sec[1] else 2 if k % 3 == 2 and k < 3 * sec[2] else 0
            for k in range(half)]


class TorchMRope:
    """Prepared M-RoPE (MROPE-*): float64 inv_freq held in the compute dtype, per-frequency axis
    positions gathered from ``position_ids [3, B, T]``, half pairing over the whole head."""

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.dtype, self.device = params, dtype, device
        self.compute = compute_dtype(dtype)
        D = params.head_dim
        w = params.rope_theta ** -(torch.arange(0, D, 2, dtype=torch.float64, device=device) / D)
        self._inv_freq = w.to(self.compute)
        self._axes = torch.tensor(mrope_axes(params), dtype=torch.int64, device=device)

    def _cos_sin(self, position_ids):
        if position_ids.dim() != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {list(position_ids.shape)}")
        pos = position_ids[self._axes].permute(1, 2, 0)  # [B, T, D/2]: position of each frequency's axis
        phi = pos.to(self.compute) * self._inv_freq
        return torch.cos(phi), torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        D = self.p.head_dim
        return rotate(q, c, s, D, "half"), rotate(k, c, s, D, "half")


class Ops:
    """M-RoPE operations of the torch port."""

    # ---- M-RoPE --------------------------------------------------------------------------
    def mrope(self, params, *, dtype, device):
        return TorchMRope(params, DTYPES[dtype], device)

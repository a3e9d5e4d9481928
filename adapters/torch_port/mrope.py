"""Multimodal RoPE (MROPE-*): Qwen2-VL contiguous and Qwen3-VL interleaved sections, the
frequencies and attention factor of the configured rope_type (MROPE-ROPE-TYPE,
MROPE-ATTENTION-SCALING) and partial rotary (MROPE-PARTIAL)."""

from __future__ import annotations

import torch

from ._common import DTYPES, LayoutForms, compute_dtype, rotate
from .rope_scaling import scaled_inv_freq


def mrope_axes(params) -> list[int]:
    """Axis (0 t, 1 h, 2 w) of each of the rotary_dim/2 frequencies (MROPE-SECTIONS contiguous /
    MROPE-INTERLEAVED)."""
    half, sec = params.rdim // 2, params.mrope_section
    if params.layout == "contiguous":
        return [a for a, n in enumerate(sec) for _ in range(n)]
    if params.layout == "hw_alternating":  # MROPE-HW-ALTERNATING: h, w in turn, then t
        return [(1 if k % 2 == 0 else 2) if k < sec[1] + sec[2] else 0 for k in range(half)]
    return [1 if k % 3 == 1 and k < 3 * sec[1] else 2 if k % 3 == 2 and k < 3 * sec[2] else 0
            for k in range(half)]


class TorchMRope(LayoutForms):
    """Prepared M-RoPE (MROPE-*): the 1-D rope_type's float64 inv_freq over rotary_dim
    (``params.rope``, the rope port's rules) held in the compute dtype, per-frequency axis
    positions gathered from ``position_ids [3, B, T]``, cos/sin times the attention factor,
    the pairing (half or interleaved) over the first rotary_dim dims.  dynamic / longrope recompute the frequencies
    from each call's ``max(position_ids) + 1`` over all three axes."""

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.rp, self.dtype, self.device = params, params.rope, dtype, device
        self.compute = compute_dtype(dtype)
        w, self._af = scaled_inv_freq(self.rp, None, device)
        self._inv_freq = w.to(self.compute)
        self._axes = torch.tensor(mrope_axes(params), dtype=torch.int64, device=device)

    def _cos_sin(self, position_ids):
        if position_ids.dim() != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {list(position_ids.shape)}")
        w, af = self._inv_freq, self._af
        if self.rp.rope_type in ("dynamic", "longrope"):
            seq_len = int(position_ids.max()) + 1 if position_ids.numel() else 0
            w64, af = scaled_inv_freq(self.rp, seq_len, self.device)
            w = w64.to(self.compute)
        pos = position_ids[self._axes].permute(1, 2, 0)  # [B, T, r/2]: position of each frequency's axis
        phi = pos.to(self.compute) * w
        return af * torch.cos(phi), af * torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        r = self.p.rdim
        return rotate(q, c, s, r, self.p.pairing), rotate(k, c, s, r, self.p.pairing)


class Ops:
    """M-RoPE operations of the torch port."""

    # ---- M-RoPE --------------------------------------------------------------------------
    def mrope(self, params, *, dtype, device):
        return TorchMRope(params, DTYPES[dtype], device)

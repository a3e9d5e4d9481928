"""Sinusoidal tables (SIN-*): Vaswani, T2T, fairseq / M2M100 and Whisper variants, in either block
order (SIN-ORDER-COS-FIRST), in radians or turns (SIN-UNITS-TURNS), times an output scale
(SIN-OUTPUT-SCALE)."""

from __future__ import annotations

import math

import torch

from posenc.spec.errors import DegenerateWidth

from ._common import DTYPES, compute_dtype, padding_aware_positions


class Ops:
    """Sinusoidal operations of the torch port."""

    # ---- sinusoidal --------------------------------------------------------------------
    def sinusoidal(self, position_ids, params, *, dtype, device):
        """``[B, T, D]``: SIN-VASWANI-INTERLEAVED / -CONCAT (the h - 1 variants: :meth:`_h_minus_1`);
        the frequencies in float64 (times 2π in turns), the angles and sin / cos in the compute dtype
        (at least float32), times ``scale`` there, rounded once to ``dtype``."""
        dt = DTYPES[dtype]
        cd = compute_dtype(dt)
        D = params.dim
        if params.variant != "vaswani":
            return self._h_minus_1(position_ids, params, dt, device)
        j = torch.arange(D, dtype=torch.float64, device=device)
        if params.layout == "interleaved":
            expo = 2 * torch.div(j, 2, rounding_mode="floor") / D
            is_sin = (torch.arange(D, device=device) % 2) == 0
        elif params.order == "sin_first":
            ns = (D + 1) // 2
            expo = torch.cat((2 * j[:ns] / D, 2 * j[: D - ns] / D))
            is_sin = torch.arange(D, device=device) < ns
        else:  # [cos | sin]: the cos block's floor(D/2) columns first
            nc = D // 2
            expo = torch.cat((2 * j[:nc] / D, 2 * j[: D - nc] / D))
            is_sin = torch.arange(D, device=device) >= nc
        w = params.base ** -expo
        if params.units == "turns":
            w = 2 * math.pi * w
        phi = position_ids.to(cd)[..., None] * w.to(cd)
        return _scaled(torch.where(is_sin, torch.sin(phi), torch.cos(phi)), params).to(dt)

    def _h_minus_1(self, position_ids, params, dt, device):
        """SIN-T2T / SIN-FAIRSEQ-POSITIONS / SIN-WHISPER: ``[sin | cos]`` of ``base^(-i/max(h-1, 1))``,
        a zero column for odd D, fairseq's pad rows zeroed; degenerate widths raise DegenerateWidth."""
        cd = compute_dtype(dt)
        D, v = params.dim, params.variant
        h = D // 2
        if v == "whisper" and D % 2:
            raise DegenerateWidth("SIN-WHISPER", D, "Whisper's sinusoids need an even number of channels")
        if v in ("fairseq", "whisper") and h == 1:
            raise DegenerateWidth("SIN-WHISPER" if v == "whisper" else "SIN-FAIRSEQ-POSITIONS", D,
                                  f"h = D // 2 = 1 makes the {v} divisor h - 1 zero")
        i = torch.arange(h, dtype=torch.float64, device=device)
        w = params.base ** (-i / max(h - 1, 1))
        if params.units == "turns":
            w = 2 * math.pi * w
        phi = position_ids.to(cd)[..., None] * w.to(cd)
        parts = [torch.sin(phi), torch.cos(phi)]
        if params.order == "cos_first":
            parts.reverse()
        if D % 2:
            parts.append(torch.zeros(phi.shape[:-1] + (1,), dtype=cd, device=phi.device))
        pe = torch.cat(parts, dim=-1)
        if v == "fairseq":
            pe = pe.masked_fill((position_ids == params.padding_idx)[..., None], 0.0)
        return _scaled(pe, params).to(dt)

    def fairseq_positions(self, input_ids, params, cache_length):
        """SIN-FAIRSEQ-POSITIONS: ``(cumsum(mask) + cache_length) * mask + padding_idx``."""
        return padding_aware_positions(input_ids, params.padding_idx, cache_length)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: self.sinusoidal(
            self.fairseq_positions(input_ids, params, cache_length), params, dtype=dtype, device=device)


def _scaled(pe, params):
    """SIN-OUTPUT-SCALE: the table times ``params.scale`` in its compute dtype (unchanged at 1)."""
    return pe if params.scale == 1.0 else pe * params.scale

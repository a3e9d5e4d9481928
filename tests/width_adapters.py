"""Adapters whose bug changes an output's shape: the rotary width of a fraction rounded up to the next
even width (DIV-ROPE-ROTARY-WIDTH-ROUNDED-UP: inv_freq and the cos/sin tables one pair longer), and a
table one garbage element longer, which no divergence gives (malformed).  Loaded by path."""

from __future__ import annotations

import math

import torch

from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchRope


class WidthRoundedUp(TorchAdapter):
    """Sizes ``partial_rotary_factor``'s width as ``2 * ceil(head_dim * f / 2)`` (the next even width)."""

    name = "broken-width-rounded-up"

    def rope(self, params, *, dtype, device):
        f = params.partial_rotary_factor
        if f is not None and params.rope_type != "longrope":
            width = 2 * math.ceil(params.head_dim * f / 2)
            if width <= params.head_dim:
                params = params.with_width(rotary_dim=width)
        return TorchRope(params, DTYPES[dtype], device)


class _PaddedRope(TorchRope):
    def inv_freq(self):
        w, a = super().inv_freq()
        return torch.cat([w, torch.zeros_like(w[:1])]), a


class InvFreqPadded(TorchAdapter):
    """inv_freq with a zero appended on a partial rotary (a buffer sized for the next width, its last
    slot never written): no divergence gives that, so the output is malformed, never a value verdict."""

    name = "broken-inv-freq-padded"

    def rope(self, params, *, dtype, device):
        return (_PaddedRope if params.rdim < params.head_dim else TorchRope)(params, DTYPES[dtype], device)

"""NoPE layers (NOPE-*): the per-layer RoPE flags and the identity of a NoPE layer."""

from __future__ import annotations

import torch


def nope_layer_flags(params, device) -> torch.Tensor:
    """NOPE-LAYER-FLAGS: 1 where the layer uses RoPE, 0 where NoPE."""
    n = params.num_hidden_layers
    if params.no_rope_layers is not None:
        return torch.tensor(params.no_rope_layers[:n], dtype=torch.int64, device=device)
    i = torch.arange(n, dtype=torch.int64, device=device)
    return ((i + 1) % params.no_rope_layer_interval != 0).to(torch.int64)


class Ops:
    """NoPE operations of the torch port."""

    # ---- NoPE ----------------------------------------------------------------------------
    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: the layer's flag must be 0; q and k are returned untouched."""
        flags = nope_layer_flags(params, "cpu")
        if not 0 <= layer_idx < len(flags) or int(flags[layer_idx]) != 0:
            raise ValueError(f"layer {layer_idx} is not a NoPE layer (flags {flags.tolist()})")
        return q, k

    def nope_layer_flags(self, params, *, device):
        return nope_layer_flags(params, device)

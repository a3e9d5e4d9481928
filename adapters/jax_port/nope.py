"""NoPE (NOPE-*): the per-layer RoPE/NoPE flags and the identity of a NoPE layer."""

from __future__ import annotations

import jax.numpy as jnp

from ._common import kernel, on_device


def nope_flags_host(params) -> list[int]:
    """NOPE-LAYER-FLAGS on the host: 1 where the layer uses RoPE, 0 where NoPE."""
    n = params.num_hidden_layers
    if params.no_rope_layers is not None:
        return list(params.no_rope_layers[:n])
    return [int((i + 1) % params.no_rope_layer_interval != 0) for i in range(n)]


@kernel("num_hidden_layers", "flags", "interval")
def nope_layer_flags(num_hidden_layers, flags, interval):
    """NOPE-LAYER-FLAGS: the given flags, or every ``interval``-th layer NoPE."""
    if flags is not None:
        return jnp.asarray(flags[:num_hidden_layers], jnp.int64)
    i = jnp.arange(num_hidden_layers, dtype=jnp.int64)
    return ((i + 1) % interval != 0).astype(jnp.int64)


class Ops:
    """NoPE operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: the layer's flag must be 0; q and k are returned untouched."""
        flags = nope_flags_host(params)
        if not 0 <= layer_idx < len(flags) or flags[layer_idx] != 0:
            raise ValueError(f"layer {layer_idx} is not a NoPE layer (flags {flags})")
        return q, k

    def nope_layer_flags(self, params, *, device):
        flags = tuple(params.no_rope_layers) if params.no_rope_layers is not None else None
        with on_device(device):
            return self.run(nope_layer_flags, num_hidden_layers=params.num_hidden_layers, flags=flags,
                            interval=params.no_rope_layer_interval)

"""NoPE (NOPE-*): the per-layer RoPE / NoPE flags and the identity of a NoPE layer."""

from __future__ import annotations

from ._common import I64, KernelRunner, tf


def k_nope_layer_flags(*, p):
    """NOPE-LAYER-FLAGS: 1 where the layer uses RoPE, 0 where NoPE."""
    n = p.num_hidden_layers
    if p.no_rope_layers is not None:
        return tf.constant(p.no_rope_layers[:n], I64)
    i = tf.range(n, dtype=I64)
    return tf.cast((i + 1) % p.no_rope_layer_interval != 0, I64)


class Ops(KernelRunner):
    """Adapter methods of the nope family."""

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: the layer's flag must be 0; q and k are returned untouched."""
        flags = self.nope_layer_flags(params, device="cpu").numpy().tolist()
        if not 0 <= layer_idx < len(flags) or flags[layer_idx] != 0:
            raise ValueError(f"layer {layer_idx} is not a NoPE layer (flags {flags})")
        return q, k

    def nope_layer_flags(self, params, *, device):
        return self.run(k_nope_layer_flags, device=device, p=params)

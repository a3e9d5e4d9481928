"""Per-layer-type RoPE (LAYERS-*) for any port with a ``rope`` operation: one prepared RoPE per
layer type (:meth:`~posenc.spec.models.LayerRopeParams.set_of`), layer ``layer_idx`` applying the
one of ``layer_types[layer_idx]`` and returning q and k untouched where its type has no RoPE.
Framework-free: the torch, jax and tensorflow ports re-export :class:`Ops`."""

from __future__ import annotations


class LayerRopeOp:
    """``apply(q, k, position_ids, layer_idx)`` -> ``(q', k')`` (LAYERS-SETS, LAYERS-NO-ROPE)."""

    def __init__(self, adapter, params, dtype: str, device: str):
        self.params = params
        self.ops = {}
        for lt in dict.fromkeys(params.layer_types):
            st = params.set_of(lt)
            self.ops[lt] = None if st is None else adapter.rope(st, dtype=dtype, device=device)

    def apply(self, q, k, position_ids, layer_idx):
        op = self.ops[self.params.layer_type(layer_idx)]
        return (q, k) if op is None else op.apply(q, k, position_ids)


class Ops:
    """The per-layer-type RoPE operation, over the port's own ``rope``."""

    def layer_rope(self, params, *, dtype, device):
        return LayerRopeOp(self, params, dtype, device)

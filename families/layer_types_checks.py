"""The per-layer-type family's oracle-free check: a layer whose type has no RoPE returns q and k
bit-identical (LAYERS-NO-ROPE's invariant ``identity``).  The golden test compares such a layer with
the rotation's bound, so that a rotated layer is diagnosed (DIV-LAYERS-NO-ROPE-ROTATED) against its
own rounding; this check holds the clause to what it states, exactly (up to ``tiny(dt)``, the
representation limit the tolerance rule allows every element, the golden comparison's too)."""

from __future__ import annotations

from posenc.harness.checks import clauses_of, identical_qk, load_golden, require_dtype

from . import check
from ._common import scalar


def _no_rope_layer(case) -> bool:
    return case.op == "layers.apply" and "layer_idx" in case.inputs and \
        case.params.set_for(scalar(case.inputs, "layer_idx")) is None


def _clauses(case) -> list[str]:
    return ["LAYERS-NO-ROPE"]


@check("layers_identity", invariant="identity", ops=("layers.apply",), select=_no_rope_layer, clauses=_clauses)
def layers_identity(request, adapter, device, dtype, case):
    """A layer of a type without RoPE returns q and k bit-identical, at the case's positions and
    shifted ones (spec/layer_types.yaml LAYERS-NO-ROPE: y_q == q, y_k == k)."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    identical_qk(adapter, case, dtype, device, clauses_of(request), g, "layers.apply",
                 f"layer {scalar(g.inputs, 'layer_idx')} has no RoPE, so")

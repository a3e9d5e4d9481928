"""The per-layer-type family's oracle-free check: a layer whose type has no RoPE returns q and k
bit-identical (LAYERS-NO-ROPE's invariant ``identity``).  The golden test compares such a layer with
the rotation's bound, so that a rotated layer is diagnosed (DIV-LAYERS-NO-ROPE-ROTATED) against its
own rounding; this check holds the clause to what it states, exactly."""

from __future__ import annotations

import numpy as np

from posenc.harness.checks import call_adapter, clauses_of, fail, load_golden, native, require_dtype, run_op

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
    cl = clauses_of(request)
    g = load_golden(case.id)
    layer = scalar(g.inputs, "layer_idx")
    for shift in (0, 1000, 131000):
        def go():  # contract-checked outputs, against the inputs as the adapter received them
            inputs = {**g.inputs, "position_ids": g.inputs["position_ids"] + shift}
            out = run_op(adapter, "layers.apply", case.params, inputs, dtype, device)
            return [(out[n], adapter.to_numpy(native(adapter, g.inputs[n], dtype, device, n))) for n in ("q", "k")]
        for name, (y, x) in zip(("q", "k"), call_adapter(adapter, case, dtype, cl, go)):
            if y.shape != x.shape or not np.array_equal(y, x):
                n = int(np.sum(y != x)) if y.shape == x.shape else -1
                fail(cl, adapter, case, dtype, f"positions shifted by {shift}: layer {layer} has no RoPE, so {name} must "
                     f"come back bit-identical; " + (f"{n} elements differ" if n >= 0 else
                                                     f"shape {list(y.shape)} != {list(x.shape)}"))

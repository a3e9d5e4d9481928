"""The NoPE family's oracle-free check: a NoPE layer returns q and k bit-identical."""

from __future__ import annotations

import numpy as np

from posenc.harness.checks import call_adapter, clauses_of, fail, load_golden, native, require_dtype, run_op

from . import check


@check("nope_identity", invariant="identity", ops=("nope.apply",))
def nope_identity(request, adapter, device, dtype, case):
    """A NoPE layer returns q and k bit-identical, for the case's positions and shifted ones."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)
    for shift in (0, 1000, 131000):
        def go():  # contract-checked outputs, against the inputs as the adapter received them
            inputs = {**g.inputs, "position_ids": g.inputs["position_ids"] + shift}
            out = run_op(adapter, "nope.apply", case.params, inputs, dtype, device)
            return [(out[n], adapter.to_numpy(native(adapter, g.inputs[n], dtype, device, n))) for n in ("q", "k")]
        for name, (y, x) in zip(("q", "k"), call_adapter(adapter, case, dtype, cl, go)):
            if y.shape != x.shape or not np.array_equal(y, x):
                n = int(np.sum(y != x)) if y.shape == x.shape else -1
                fail(cl, adapter, case, dtype, f"positions shifted by {shift}: NoPE {name} must come back "
                     f"bit-identical; " + (f"{n} elements differ" if n >= 0 else f"shape {list(y.shape)} != {list(x.shape)}"))

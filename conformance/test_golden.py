"""Every golden case, compared element-wise under the spec's tolerance rule.

Test IDs: ``test_golden[<dtype>-<case>@<CLAUSE+...>]``.  On failure the message names the
clauses, the worst element, and the known divergences whose mutants reproduce the output.
"""

import numpy as np
import pytest

from posenc.adapters import Unsupported
from posenc.conformance.runner import run_case
from posenc.conformance.suite import load_golden, params, require_dtype, run_and_check


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(lambda c: True))
def test_golden(adapter, device, dtype, case):
    run_and_check(adapter, case, dtype, device)


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(lambda c: c.op == "position_ids.left_pad", lambda c: ["POS-LEFT-PAD-FILL"]))
def test_left_pad_fill(adapter, device, dtype, case, left_pad_fill):
    """Opt-in (``--left-pad-fill N``): padded slots hold exactly N (HF generate: 0 in 5.x, 1 in 4.x)."""
    if left_pad_fill is None:
        raise Unsupported("opt-in clause POS-LEFT-PAD-FILL: pass --left-pad-fill N to require a fill value")
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    got = run_case(adapter, g, dtype, device)["position_ids"]
    pad = ~g.outputs["position_ids.compared"]
    bad = np.argwhere(pad & (got != left_pad_fill))
    assert bad.size == 0, (f"POS-LEFT-PAD-FILL: padded slots must hold {left_pad_fill}; "
                           f"got {got[tuple(bad[0])]} at {bad[0].tolist()} (position_ids {got.tolist()})")

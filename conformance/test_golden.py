"""Every golden case, compared element-wise under the spec's tolerance rule.

Test IDs: ``test_golden[<dtype>-<case>@<CLAUSE+...>]``.  On failure the message names the
clauses, the worst element, and the known divergences whose mutants reproduce the output.
"""

import numpy as np
import pytest

from posenc.conformance.runner import run_case
from posenc.conformance.suite import call_adapter, fail, load_golden, params, require_dtype, run_and_check


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(lambda c: True))
def test_golden(adapter, device, dtype, case):
    run_and_check(adapter, case, dtype, device)


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(lambda c: c.op == "position_ids.left_pad", lambda c: ["POS-LEFT-PAD-FILL"]))
def test_left_pad_fill(adapter, device, dtype, case, left_pad_fill):
    """Opt-in (``--left-pad-fill N``): padded slots hold exactly N (HF generate: 0 in 5.x, 1 in 4.x).

    Deselected (and named in the report header) when ``--left-pad-fill`` is not given.
    """
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    cl = ("POS-LEFT-PAD-FILL",)
    got = call_adapter(adapter, case, dtype, cl, run_case, adapter, g, dtype, device)["position_ids"]
    bad = np.argwhere(~g.outputs["position_ids.compared"] & (got != left_pad_fill))
    if bad.size:
        fail(cl, adapter, case, dtype, f"padded slots must hold {left_pad_fill}; got {got[tuple(bad[0])]} at "
             f"{bad[0].tolist()} (position_ids {got.tolist()})")

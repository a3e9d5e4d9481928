"""Every golden case, compared element-wise under the spec's tolerance rule.

Test IDs: ``test_golden[<dtype>-<case>@<CLAUSE+...>]`` (through the call forms: ``test_call_forms.py``).  On failure the message names the
clauses, the worst element, and the known divergences whose mutants reproduce the output.
"""

import pytest

from posenc.conformance.collect import params
from posenc.harness.failure import run_and_check


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(lambda c: True))
def test_golden(adapter, device, dtype, case):
    run_and_check(adapter, case, dtype, device)

"""Every golden case, compared element-wise under the spec's tolerance rule.

Test IDs: ``test_golden[<dtype>-<case>@<CLAUSE+...>]``.  On failure the message names the
clauses, the worst element, and the known divergences whose mutants reproduce the output.
"""

import pytest

from posenc.conformance.collect import form_params, params
from posenc.harness.failure import run_and_check


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(lambda c: True))
def test_golden(adapter, device, dtype, case):
    run_and_check(adapter, case, dtype, device)


@pytest.mark.posenc
@pytest.mark.parametrize("case,form", form_params())
def test_golden_form(adapter, device, dtype, case, form):
    """The golden case through one of its operation's call forms (spec ``form_of``): converted into the
    form, run, converted back and judged by the same golden."""
    run_and_check(adapter, case, dtype, device, form=form)

"""Every golden case of an operation with call forms (spec ``form_of``), through each form the case can be put
in and the adapter serves (``call_forms``): converted into the form, run, converted back and judged by the
same golden.

Test IDs: ``test_call_form[<dtype>-<case>~<form>@ROPE-CALL-FORM]``.
"""

import pytest

from posenc.conformance.collect import form_params
from posenc.harness.failure import run_and_check


@pytest.mark.posenc
@pytest.mark.parametrize("case,form", form_params())
def test_call_form(adapter, device, dtype, case, form):
    """The golden case through one of its operation's call forms (spec ``form_of``): converted into the
    form, run, converted back and judged by the same golden."""
    run_and_check(adapter, case, dtype, device, form=form)

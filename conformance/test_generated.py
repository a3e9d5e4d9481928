"""Generated cases: every operation with a generator, on drawn parameters and inputs.

Test IDs: ``test_generated[<dtype>-<operation>]``.  See :mod:`posenc.harness.generation` and :mod:`posenc.conformance.generated`.
"""

import pytest

from posenc.conformance.collect import generated_params
from posenc.conformance.generated import excuse_generated, report_generated, run_generated
from posenc.harness.failure import require_dtype


@pytest.mark.posenc
@pytest.mark.parametrize("op", generated_params())
def test_generated(request, adapter, device, dtype, op):
    excuses = excuse_generated(request.config, op, dtype)
    try:
        require_dtype(adapter, dtype)
        outcomes = run_generated(request.config, adapter, device, dtype, op, excuses)
    finally:  # the generated expectation lines' coverage, whatever the verdict (judged at the end of the run)
        excuses.attach(request.node)
    report_generated(request, op, dtype, outcomes, excuses)

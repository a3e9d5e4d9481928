"""The T5 family's oracle-free check: decoding one query at a time (cache_length growing, one
prepared callable) gives the prefill's bias rows."""

from __future__ import annotations

import numpy as np

from posenc.harness.checks import (
    assert_conforms,
    call_adapter,
    checked_outputs,
    clauses_of,
    load_golden,
    native_inputs,
    require_dtype,
    rows,
)

from . import check


@check("bias_cache_equals_prefill", invariant="cache_prefill", ops=("t5.bias",))
def t5_cache_equals_prefill(request, adapter, device, dtype, case):
    """Decoding one query at a time (cache_length grows, one prepared callable) gives the prefill's rows."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)
    x = g.inputs
    tq = int(x["query_length"])
    tab = native_inputs(adapter, {"table": x["table"]}, dtype, device)["table"]
    f = call_adapter(adapter, case, dtype, cl, adapter.t5_bias, case.params, {"table": tab},
                     dtype=dtype, device=device)
    tk, c0 = int(x["key_length"]), int(x["cache_length"])
    for t in range(tq):
        xt = {**x, "query_length": np.asarray(1), "cache_length": np.asarray(c0 + t)}
        out = call_adapter(adapter, case, dtype, cl,
                           lambda: checked_outputs(adapter, case.op, f(1, tk, cache_length=c0 + t), dtype, device))
        assert_conforms(adapter, rows(g, t, tk, xt), out, dtype,
                        f"decode step {t} with cache_length {c0 + t} on one prepared callable", cl)

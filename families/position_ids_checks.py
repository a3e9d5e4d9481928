"""The position-id family's oracle-free checks (decode equals prefill, left padding equals no
padding) and the opt-in POS-LEFT-PAD-FILL check (``--left-pad-fill N``)."""

from __future__ import annotations

import numpy as np

from posenc.harness.checks import (
    call_adapter,
    clauses_of,
    exact_decode_steps,
    fail,
    left_pad_rows,
    load_golden,
    require_dtype,
    run_case,
)

from . import check


@check("cache_equals_prefill", invariant="cache_prefill", ops=("position_ids.decode",))
def decode_equals_prefill(request, adapter, device, dtype, case):
    """position_ids decoded one token at a time (cache_length growing) equal the prefill's."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    x = g.inputs
    cl = int(x["cache_length"])

    def call(t):
        return adapter.position_ids("decode", device=device, batch=int(x["batch"]), seq_len=1, cache_length=cl + t)
    exact_decode_steps(adapter, case, dtype, device, clauses_of(request), g, "position_ids", range(int(x["seq_len"])), call,
                       lambda t: {"batch": x["batch"], "seq_len": np.asarray(1), "cache_length": np.asarray(cl + t)})


@check("left_pad_equals_unpadded", invariant="left_pad", ops=("position_ids.left_pad",))
def left_pad_equals_unpadded(request, adapter, device, dtype, case):
    """A left-padded row equals the same row without padding, at its real tokens."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    left_pad_rows(adapter, case, dtype, device, cl, load_golden(case.id),
                  lambda nm: adapter.position_ids("left_pad", device=device, attention_mask=nm, cache_length=0))


@check("left_pad_fill", ops=("position_ids.left_pad",), select=lambda c: c.op == "position_ids.left_pad",
       clauses=lambda c: ["POS-LEFT-PAD-FILL"])
def left_pad_fill(request, adapter, device, dtype, case):
    """Opt-in (``--left-pad-fill N``): padded slots hold exactly N (HF generate: 0 in 5.x, 1 in 4.x).

    Deselected (and named in the report header) when ``--left-pad-fill`` is not given.
    """
    fill = request.getfixturevalue("left_pad_fill")
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    cl = ("POS-LEFT-PAD-FILL",)
    got = call_adapter(adapter, case, dtype, cl, run_case, adapter, g, dtype, device)["position_ids"]
    bad = np.argwhere(~g.outputs["position_ids.compared"] & (got != fill))
    if bad.size:
        fail(cl, adapter, case, dtype, f"padded slots must hold {fill}; got {got[tuple(bad[0])]} at "
             f"{bad[0].tolist()} (position_ids {got.tolist()})")

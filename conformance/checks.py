"""Oracle-free checks: helpers the families' check modules share, and the pytest test functions
built from the registered checks (:func:`posenc.families.check`).

A check is one test function, ``test_<name>``, parametrized over the cases whose clauses declare
its invariant (or its own selection), dispatching each case to the handler its family
registered for the case's operation.  These need no golden output, so they catch bugs a golden
of the same wrong shape would miss, and they exercise state: decode loops call one prepared
operation several times.
"""

from __future__ import annotations

import numpy as np
import pytest

from posenc import families
from posenc.adapters import Unsupported

from .golden import Golden
from .runner import checked_outputs, native_inputs, record, recording
from .suite import ConformanceFailure, call_adapter, fail, params, rediagnosed, with_invariant


def clauses_of(request) -> tuple[str, ...]:
    """The clauses the running check test is parametrized with (its ID lists them)."""
    return tuple(request.node.get_closest_marker("clauses").args)


def step(g: Golden, t: int, inputs: dict, t_axis: dict) -> Golden:
    """Golden for decode step ``t``: the step's own inputs, outputs and scales sliced at ``t``."""
    def cut(d):
        return {n: np.take(v, [t], axis=t_axis[n]) for n, v in d.items() if n in t_axis}
    return Golden(g.case, inputs, cut(g.outputs), cut(g.dtype_scales), cut(g.angle_scales), g.angle_based)


def rows(g: Golden, t: int, tk: int, inputs: dict) -> Golden:
    """Golden of query row ``t`` over the first ``tk`` keys (outputs, masks and scales)."""
    def cut(d):
        return {n: np.asarray(v)[..., t:t + 1, :tk] for n, v in d.items()}
    return Golden(g.case, inputs, cut(g.outputs), cut(g.dtype_scales), cut(g.angle_scales), g.angle_based)


def exact_decode_steps(adapter, case, dtype, device, cl, g: Golden, name: str, steps, call, inputs=None) -> None:
    """Integer outputs decoded one step at a time (``call(t)``) equal the prefill's column ``t``;
    ``inputs(t)``: step ``t`` as the operation's NumPy inputs, recorded with its outputs so that a
    failure is diagnosed on the steps (``runner.record``)."""
    c0 = int(g.inputs.get("cache_length", 0))
    for t in steps:
        out = call_adapter(adapter, case, dtype, cl, lambda: checked_outputs(adapter, case.op, call(t), dtype, device))
        if inputs is not None:
            record(case.op, case.params, inputs(t), out)
        got = out[name]
        want = g.outputs[name][:, t:t + 1]
        if got.shape != want.shape or not np.array_equal(got, want):
            fail(cl, adapter, case, dtype, f"decode step {t} (cache_length {c0 + t}): got {got.tolist()}, "
                 f"the prefill gives {want.tolist()}")


def left_pad_rows(adapter, case, dtype, device, cl, g: Golden, positions) -> None:
    """Each left-padded row equals the same row without padding at its real tokens;
    ``positions(native_mask)`` is the adapter's positions of one row."""
    m = g.inputs["attention_mask"]
    checked = 0
    for b in range(m.shape[0]):
        real = m[b] == 1
        first = int(np.argmax(real))
        if first == 0 or not real[first:].all():
            continue  # only left-padded rows: padding before every real token
        outs = []
        for mask in (m[b:b + 1], m[b:b + 1, first:]):
            nm = native_inputs(adapter, {"m": mask}, dtype, device)["m"]
            out = call_adapter(adapter, case, dtype, cl, lambda: checked_outputs(
                adapter, case.op, positions(nm), dtype, device))
            record(case.op, case.params, {"attention_mask": mask, "cache_length": np.asarray(0)}, out)
            outs.append(next(iter(out.values())))
        if not np.array_equal(outs[0][:, first:], outs[1]):
            fail(cl, adapter, case, dtype, f"row {b}: the left-padded positions {outs[0].tolist()} differ at the "
                 f"real tokens from the unpadded row's {outs[1].tolist()}")
        checked += 1
    if not checked:
        raise Unsupported("case has no left-padded row")


def build_test(check: families.Check):
    """The pytest test function of one registered check (``test_<name>``)."""
    if check.select is not None:
        cases = params(check.select, check.clauses)
    else:
        cases = with_invariant(check.invariant, tuple(check.handlers))

    def test(request, adapter, device, dtype, case):
        with recording() as calls:
            try:
                check.handlers[case.op](request, adapter, device, dtype, case)
                return
            except ConformanceFailure as e:
                failure = e
        # raised outside the except block (no chained traceback): diagnosed on the check's own calls
        raise rediagnosed(failure, case, calls, dtype) or failure

    test.__name__ = test.__qualname__ = f"test_{check.name}"
    test.__doc__ = check.doc
    return pytest.mark.posenc(pytest.mark.parametrize("case", cases)(test))


def check_tests() -> dict:
    """``{test_<name>: function}`` of every registered check, for a test module's globals."""
    return {f"test_{c.name}": build_test(c) for c in families.checks().values()}

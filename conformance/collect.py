"""Collection: the suite's parametrized tests, built from what the families registered.

``test_golden`` runs every registered golden case (:func:`params`), ``test_<name>`` every
registered oracle-free check on the cases whose clauses declare its invariant (:func:`check_tests`:
one test function per check, dispatching each case to the handler its family registered for the
case's operation) and ``test_generated`` every operation with a generator (:func:`generated_params`).
Test IDs are ``<case>@<CLAUSE+...>`` (the clauses are a pytest marker too).  Nothing here names a
family: everything comes from :mod:`posenc.registry`.
"""

from __future__ import annotations

import zlib
from typing import Callable, Iterable, Optional

import pytest

from posenc import registry
from posenc.harness.failure import ConformanceFailure, as_form_failure, invariant_clauses, rediagnosed
from posenc.harness.generation import form_candidates, spread_forms
from posenc.harness.runner import recording, through_form
from posenc.registry import all_cases
from posenc.registry.cases import Case


def params(select: Callable[[Case], bool], clauses: Optional[Callable[[Case], Iterable[str]]] = None):
    """``pytest.param`` per selected case, id ``<case>@<CLAUSE+...>``, marked with its clauses."""
    out = []
    for c in all_cases():
        if select(c):
            cl = tuple(clauses(c)) if clauses else c.clauses
            out.append(pytest.param(c, id=f"{c.id}@{'+'.join(cl)}", marks=pytest.mark.clauses(*cl)))
    return out


def form_params():
    """``pytest.param(case, form_op)`` per golden case and call form of its operation that the case can be
    put in (spec ``form_of``; a case whose positions are not ``offset + t`` has no offset form: not collected,
    never by looping), id ``<case>~<form>@<CLAUSE+...>``, marked with the form's own clauses (ROPE-CALL-FORM:
    the case's clauses are the primary's test's)."""
    from posenc.registry.forms import form_clauses, forms_of
    out = []
    for c in all_cases():
        for f in forms_of(c.op):
            if f.why_not(c.params, _read_inputs(c, f.reads)) is not None:
                continue
            form, clauses = registry.operation(f.op).form, form_clauses(f.op)
            out.append(pytest.param(c, f.op, id=f"{c.id}~{form}@{'+'.join(clauses)}", marks=pytest.mark.clauses(*clauses)))
    return out


def _read_inputs(c: Case, names: tuple[str, ...]) -> dict:
    """The case's inputs ``names`` as NumPy (the others None, not generated): what a form's ``why_not`` reads."""
    from posenc.harness.golden import case_inputs
    sub = Case(c.id, c.op, c.clauses, c.params, {n: v for n, v in c.inputs.items() if n in names})
    got = case_inputs(sub) if names else {}
    return {n: got.get(n) for n in c.inputs}


def with_invariant(invariant: str, ops: tuple[str, ...]):
    """Cases of ``ops`` whose clauses declare ``invariant``; the id names those clauses."""
    wanted = invariant_clauses(invariant)
    return params(lambda c: c.op in ops and bool(wanted & set(c.clauses)),
                  lambda c: [x for x in c.clauses if x in wanted])


def build_test(check: registry.Check):
    """The pytest test function of one registered check (``test_<name>``)."""
    if check.select is not None:
        cases = params(check.select, check.clauses)
    else:
        cases = with_invariant(check.invariant, tuple(check.handlers))

    spread: dict = {}  # the served forms -> {case ID: form}, made on the first test (the adapter is known then)

    def test(request, adapter, device, dtype, case):
        form = check_form(adapter, case, [p.values[0] for p in cases], spread)
        with recording() as calls, through_form(form) as routed:
            try:
                check.handlers[case.op](request, adapter, device, dtype, case)
                return
            except ConformanceFailure as e:
                failure = e
        # raised outside the except block (no chained traceback): diagnosed on the check's own calls
        failure = rediagnosed(failure, case, calls, dtype, adapter) or failure
        if routed:  # a check that calls the prepared object itself (decode steps) makes no call through a form
            failure.msg = (f"{failure.msg}\n  (the check's {case.op} calls ran through call form {form}, this case's "
                           "among the check's cases: the served forms are spread over them)")
            if _passes(check, request, adapter, device, dtype, case):
                failure = as_form_failure(failure, form, case.op, f"this check on {case.id} called directly")
        raise failure

    test.__name__ = test.__qualname__ = f"test_{check.name}"
    test.__doc__ = check.doc
    return pytest.mark.posenc(pytest.mark.parametrize("case", cases)(test))


def _passes(check: registry.Check, request, adapter, device, dtype, case: Case) -> bool:
    """The check passes on ``case`` with its calls made to the primary operation (no call form): a
    failure through a form is then the form's own.  The failure path only."""
    try:
        check.handlers[case.op](request, adapter, device, dtype, case)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - failing, unsupported or raising: not the form's alone
        return False
    return True


def check_form(adapter, case: Case, cases: list[Case], memo: dict):
    """The call form an oracle-free check of ``case`` runs through: one of the forms of its operation the
    adapter serves (``call_forms``) that the case can be put in, or the primary (None) -- the checks are
    shared across the forms, never multiplied (as generated examples are).  The forms are spread over the
    check's ``cases`` (:func:`~posenc.harness.generation.spread_forms`: every form some case can be put in is
    used), kept in ``memo`` per set of served forms."""
    served = tuple(getattr(adapter, "call_forms", ()) or ())
    if served not in memo:
        memo[served] = spread_forms({c.id: form_candidates(adapter, c.op, c.params, _form_inputs(c)) for c in cases},
                                    {c.id: _pick(c) for c in cases})
    return memo[served].get(case.id)


def _pick(case: Case) -> int:
    return zlib.crc32(case.id.encode())


def _form_inputs(case: Case) -> dict:
    """What the call forms of the case's operation read to decide whether the case has their form."""
    from posenc.registry.forms import forms_of
    return _read_inputs(case, tuple(dict.fromkeys(n for f in forms_of(case.op) for n in f.reads)))


def check_tests() -> dict:
    """``{test_<name>: function}`` of every registered check, for a test module's globals."""
    return {f"test_{c.name}": build_test(c) for c in registry.checks().values()}


def generated_params():
    """``pytest.param`` per operation with a generator, id ``<op>@<CLAUSE+...>``."""
    out = []
    for op in registry.generators():
        cl = tuple(registry.operation(op).clauses)
        out.append(pytest.param(op, id=f"{op}", marks=pytest.mark.clauses(*cl)))
    return out

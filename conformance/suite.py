"""Helpers shared by the conformance test modules: case selection, golden loading, asserts."""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Optional

import numpy as np
import pytest

from posenc.adapters import Adapter, Unsupported
from posenc.spec import load_spec

from . import golden as _golden
from .cases import CASES, Case
from .runner import compare_outputs, diagnose, run_case

_SPEC = load_spec()


def invariant_clauses(invariant: str) -> set[str]:
    return {c.id for c in _SPEC.clauses.values() if invariant in c.invariants}


def params(select: Callable[[Case], bool], clauses: Optional[Callable[[Case], Iterable[str]]] = None):
    """``pytest.param`` per selected case, id ``<case>@<CLAUSE+...>``, marked with its clauses."""
    out = []
    for c in CASES:
        if select(c):
            cl = tuple(clauses(c)) if clauses else c.clauses
            out.append(pytest.param(c, id=f"{c.id}@{'+'.join(cl)}", marks=pytest.mark.clauses(*cl)))
    return out


def with_invariant(invariant: str, ops: tuple[str, ...]):
    """Cases of ``ops`` whose clauses declare ``invariant``; the id names those clauses."""
    wanted = invariant_clauses(invariant)
    return params(lambda c: c.op in ops and bool(wanted & set(c.clauses)),
                  lambda c: [x for x in c.clauses if x in wanted])


@functools.lru_cache(maxsize=None)
def _manifest():
    return _golden.read_manifest()


@functools.lru_cache(maxsize=64)
def load_golden(case_id: str) -> _golden.Golden:
    case = next(c for c in CASES if c.id == case_id)
    return _golden.load(case, manifest=_manifest())


def require_dtype(adapter: Adapter, dtype: str) -> None:
    if dtype not in adapter.dtypes:
        raise Unsupported(f"adapter {adapter.name!r} does not support dtype {dtype}")


def assert_conforms(adapter: Adapter, g: _golden.Golden, outputs: dict[str, np.ndarray], dtype: str,
                    what: str = "") -> None:
    """Fail with the clause IDs, the worst element and the matching known divergences."""
    cmps = compare_outputs(g, outputs, dtype)
    bad = [c for c in cmps if not c.ok]
    if not bad:
        return
    lines = [f"{', '.join(g.case.clauses)} violated by {adapter.name} on case {g.case.id} ({dtype}){what}:"]
    lines += [f"  {c.message}" for c in bad]
    matches = diagnose(_SPEC, g, outputs, dtype)
    if matches:
        lines.append("  diagnosis: the output matches known divergence(s):")
        lines += [f"    {m.divergence} (violates {', '.join(m.violates)}): {m.description} "
                  f"[max |err|/bound {m.ratio:.3g}]" for m in matches]
    else:
        lines.append("  diagnosis: no known divergence reproduces this output")
    pytest.fail("\n".join(lines), pytrace=False)


def run_and_check(adapter: Adapter, case: Case, dtype: str, device: str) -> dict[str, np.ndarray]:
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    out = run_case(adapter, g, dtype, device)
    assert_conforms(adapter, g, out, dtype)
    return out

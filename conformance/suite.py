"""Deprecated: what checks used from here is in the check author's façade :mod:`posenc.harness.checks`
(``call_adapter``, ``fail``, ``load_golden``, ``require_dtype``, ``assert_conforms``, ...; defined in
:mod:`posenc.harness.failure`); the case selection of the suite's tests is
:mod:`posenc.conformance.collect`.  Kept for one release (spec 0.4.x); importing it warns."""

from __future__ import annotations

import warnings

from posenc import registry
from posenc.conformance.collect import params, with_invariant  # noqa: F401 - re-exported
from posenc.harness.failure import (ConformanceFailure, assert_conforms, call_adapter,  # noqa: F401 - re-exported
                                    contradicted_diagnoses, diagnosis_lines, fail, invariant_clauses, is_timeout,
                                    load_golden, rediagnosed, require_dtype, run_and_check, separation_lines)

warnings.warn("posenc.conformance.suite is deprecated: import call_adapter, fail, load_golden, require_dtype, "
              "assert_conforms ... from posenc.harness.checks", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    if name == "_SPEC":  # the loaded spec, as before
        return registry.spec()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

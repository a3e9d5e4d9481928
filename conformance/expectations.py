"""Implementer-owned expectation files: the known divergences of a third-party implementation.

Format (YAML)::

    expected_failures:
      - test_id: "test_golden[bfloat16-<case>@<CLAUSES>]"   # exact pytest test name
        clause: ROPE-PRECISION                               # a clause the failure violates
        divergence: DIV-ROPE-BF16-INV-FREQ                   # a spec divergence, or DIV-UNNAMED-<...>
        evidence: "issue link or source line"
        library: transformers                                 # a key of the adapter's versions()
        library_version: "5.24.0"

Strict: a listed test that passes fails the run; a listed test that fails with another
diagnosed divergence fails the run; a listed test the adapter reports unsupported fails the
run; a line matching no test (for any dtype) is stale and fails the run; a line recorded for
another library version must be re-verified.  ``DIV-UNNAMED-<NAME>`` records a
library-specific divergence the spec has no mutant for (its diagnosis is not checked); use it
also for oracle-free checks, which carry no diagnosis.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posenc.spec.models import DTYPES

UNNAMED = "DIV-UNNAMED-"
_DTYPE = re.compile(r"\[(" + "|".join(DTYPES) + r")-")


class Expectation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    test_id: str = Field(min_length=1)
    clause: str
    divergence: str
    evidence: str = Field(min_length=1)
    library: str
    library_version: str


class ExpectationFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expected_failures: list[Expectation]


class ExpectationError(ValueError):
    """A malformed or inconsistent expectation file; the message names file and field."""


def load(path: Path, spec, versions: dict[str, str]) -> dict[str, Expectation]:
    """Read and validate an expectation file; returns ``{test_id: entry}``."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ExpectationError(f"expectation file {path}: {e}") from None
    try:
        parsed = ExpectationFile.model_validate(raw)
    except ValidationError as e:
        msgs = [f"{path}: {'.'.join(str(x) for x in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()]
        raise ExpectationError("\n".join(msgs)) from None
    out: dict[str, Expectation] = {}
    for i, e in enumerate(parsed.expected_failures):
        where = f"{path}: expected_failures.{i}"
        if e.clause not in spec.clauses:
            raise ExpectationError(f"{where}.clause: unknown clause {e.clause!r}")
        if e.divergence not in spec.divergences and not e.divergence.startswith(UNNAMED):
            raise ExpectationError(f"{where}.divergence: unknown divergence {e.divergence!r} "
                                   f"(use {UNNAMED}<NAME> for one the spec does not name)")
        if e.library not in versions:
            raise ExpectationError(f"{where}.library: the adapter reports no version for {e.library!r} "
                                   f"(it reports {', '.join(versions) or 'none'})")
        if versions[e.library] != e.library_version:
            raise ExpectationError(f"{where}.library_version: recorded for {e.library} {e.library_version}, "
                                   f"running {versions[e.library]}: re-verify the line and update it")
        if e.test_id in out:
            raise ExpectationError(f"{where}.test_id: {e.test_id!r} listed twice")
        out[e.test_id] = e
    return out


def without_dtype(test_id: str) -> str:
    """The test ID with its dtype parameter removed (staleness is judged across dtypes)."""
    return _DTYPE.sub("[", test_id, count=1)

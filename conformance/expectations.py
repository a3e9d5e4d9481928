"""Implementer-owned expectation files: the known divergences of a third-party implementation.

Format 2 (YAML), one line per (golden case, check) and the dtypes at which it fails that way::

    format: 2
    expected_failures:
      - case: scale-dynamic-apply            # the golden case ID
        check: golden                        # the test function without test_: golden, relative, ...
        dtypes: [bfloat16, float16]          # the dtypes at which it fails this way
        clause: SCALE-DYNAMIC-NTK            # a clause the failure violates
        divergence: DIV-SCALE-DYNAMIC-UNIFORM-DIVISION   # a spec divergence, or DIV-UNNAMED-<NAME>
        evidence: "issue link or source line"
        library: keras-hub                   # a key of the adapter's versions()
        library_version: "0.32.0"

A divergence seen in generated cases is recorded by operation, dtype and a condition on the
drawn case's parameters (``check: generated``, no ``case``)::

      - check: generated
        operation: <family>.<operation>   # the generated test's operation (its test ID)
        where: {rope_type: yarn, truncate: false}   # optional: the parameters where it shows
        dtypes: [float32]
        clause: SCALE-YARN-RAMP
        divergence: DIV-UNNAMED-YARN-NO-TRUNCATE    # or a spec divergence
        finding: "beta_fast 32 where 16 is specified"   # an unnamed line: what the inference says
        evidence: "issue link or source line"
        library: mylib
        library_version: "1.2.0"

``where`` keys are parameter names, checked at load (a field of the parameter model of the
operation's cases or of a model nested in it, ``rope.factor`` dotted where a name is ambiguous),
each value one allowed value or a list of them, compared with the field as the case holds it
(``null``: a field left unset, which takes the spec's default); a case without that parameter
does not meet the condition.  A generated example's failure is excused by the first such line
(file order) whose operation, dtype and condition it meets and that explains it: a named line
when the diagnosis names its divergence, an unnamed line when no divergence is named and an
inferred line that says what the output is (not the fallback's element counts, not a "closest
fit") states what its ``finding`` states, fact for fact (:func:`finding_matches`: each part between
"; " in full, a trailing aside in parentheses ignored, spaces and case ignored; a finding of one bug
never excuses a line that states a second; an unnamed golden line may carry a
``finding`` too, and then excuses only what it matches).  Never a malformed output or an
exception.  The line is stale (the run fails) when the generated cases it covers ran and all
passed; "not exercised" (reported, not a failure) when no
drawn case met its condition.

Strict: a listed (case, check, dtype) that passes fails the run; one that fails with another
diagnosed divergence fails the run; one the adapter reports unsupported fails the run; a line
whose (case, check) matches no collected test at any dtype is stale and fails the run; a line
recorded for another library version must be re-verified.  ``DIV-UNNAMED-<NAME>`` records a
library-specific divergence the spec has no mutant for, and oracle-free checks, which carry
no diagnosis; it never excuses a failure the kit diagnosed as a named divergence.  Two lines
with the same (case, check) and a common dtype are an error.

The old format (format 1: no ``format:`` key, lines keyed by ``test_id``, one per dtype) is
rejected; ``posenc expectations convert FILE`` rewrites such a file.
``posenc expectations init --from-report REPORT`` drafts a file from a ``--report-json``
report (:mod:`posenc.conformance.expectation_drafts`).
"""

from __future__ import annotations

import difflib
import json
import re
import reprlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Optional, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from posenc.conformance.findings import (  # noqa: F401 - the matching rule's names, re-exported
    MIN_FACT,
    MIN_FINDING,
    _parts,
    _without_aside,
    facts,
    finding_matches,
    no_finding_note,
    substantive,
)
from posenc.conformance.expectation_keys import PRIMARY, form_key, form_names, key_of, seen_as  # noqa: F401 - key_of re-exported
from posenc.conformance.expectation_keys import _param_names
from posenc.harness.inference import flat_params, is_finding, says_nonfinite
from posenc.spec import read_yaml
from posenc.spec.models import DTYPES

FORMAT = 2
UNNAMED = "DIV-UNNAMED-"
FILL_ME = "DIV-UNNAMED-FILL-ME"
TODO_EVIDENCE = "TODO: link the issue or source line"
_OLD_ID = re.compile(r"^test_(?P<check>\w+)\[(?:(?P<dtype>" + "|".join(DTYPES) + r")-)?(?P<case>[^@\]]+)(?:@[^\]]*)?\]$")
_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9._+-]*$")
_FIELDS = ("case", "check", "operation", "where", "forms", "dtypes", "clause", "divergence", "finding", "evidence", "library",
           "library_version")
GENERATED = "generated"
#: A number standing on its own in a message (not the digits of a name: float32, e_0, rope_theta, cuda:0).
NUMBER = re.compile(r"(?<![\w.:])[-+]?\d+(\.\d+)?(e[-+]?\d+)?(?![\w])")
Scalar = Union[None, StrictBool, StrictInt, StrictFloat, str]


class Expectation(BaseModel):
    """One line: ``(case, check)`` fails at each of ``dtypes`` with ``divergence``; or, with ``check:
    generated``, the generated cases of ``operation`` whose parameters meet ``where`` do."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    case: Optional[str] = Field(default=None, min_length=1)
    check: str = Field(min_length=1)
    operation: Optional[str] = Field(default=None, min_length=1)
    where: tuple[tuple[str, tuple[Scalar, ...]], ...] = ()
    #: the call forms it holds for (spec ``form``: ``token_major``, ``packed``, ...; ``primary``: the operation's
    #: own call): a case's tests through them (default: the primary's only), or the generated examples run
    #: through them (default: every call)
    forms: tuple[str, ...] = ()
    dtypes: tuple[Literal[DTYPES], ...] = Field(min_length=1)  # type: ignore[valid-type]
    clause: str
    divergence: str
    finding: Optional[str] = Field(default=None, min_length=1)
    evidence: str = Field(min_length=1)
    library: str
    library_version: str

    @field_validator("dtypes")
    @classmethod
    def _unique(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"a dtype is listed twice: {list(v)}")
        return v

    @field_validator("forms")
    @classmethod
    def _forms(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"a form is listed twice: {list(v)}")
        return v

    @field_validator("where", mode="before")
    @classmethod
    def _where(cls, v):
        """``{name: value or [values]}`` as sorted ``((name, (values...)), ...)`` (hashable: lines are frozen)."""
        if isinstance(v, tuple):
            return v
        if v is None:
            return ()
        if not isinstance(v, dict):
            raise ValueError(f"a mapping of parameter names to a value or a list of values, got {type(v).__name__}")
        out = []
        for k, val in v.items():
            if not isinstance(k, str) or not _PARAM.match(k):
                raise ValueError(f"{k!r} is not a parameter name (a field name, dotted for a nested one)")
            vals = tuple(val) if isinstance(val, list) else (val,)
            if not vals or any(x is not None and not isinstance(x, (str, int, float)) for x in vals):
                raise ValueError(f"{k}: a value (string, number, true / false, null) or a non-empty list, got {reprlib.repr(val)}")
            if any(isinstance(x, float) and x != x for x in vals):
                raise ValueError(f"{k}: NaN equals no value, so the line would cover nothing")
            out.append((k, vals))
        return tuple(sorted(out))

    @model_validator(mode="after")
    def _shape(self):
        if self.check == GENERATED:
            if self.case is not None:
                raise ValueError("a generated line has no case: it names the operation (operation:) and, optionally, "
                                 "the parameters where the divergence shows (where:)")
            if self.operation is None:
                raise ValueError("a generated line needs the operation of the generated test (operation: "
                                 "<family>.<operation>, as in its test ID test_generated[<dtype>-<operation>])")
            if not self.named and self.finding is None:
                raise ValueError(f"an unnamed generated line ({self.divergence}) needs the finding the inference "
                                 "states (finding:): it excuses only failures whose inferred lines state what it states")
        else:
            if self.case is None:
                raise ValueError("a line needs the case ID (case:), or check: generated with operation:")
            if self.operation is not None:
                raise ValueError("operation: only a generated line (check: generated) has one")
            if self.where:
                raise ValueError("where: only a generated line (check: generated) has one")
            if self.forms and "~" in self.case:
                raise ValueError(f"case {self.case!r} names its form after '~': give the case alone with forms:, or "
                                 "the one test's case without forms:")
        if self.finding is not None and not substantive(self.finding):
            raise ValueError(f"finding {self.finding!r} says too little to explain a failure: give the inference's "
                             f"words (at least {MIN_FINDING} letters and digits outside the * wildcards, and "
                             f"{MIN_FACT} in each part between '; ')")
        if self.named and self.finding is not None:
            raise ValueError(f"finding: only an unnamed line has one ({self.divergence} is named: the diagnosis says it)")
        return self

    @property
    def named(self) -> bool:
        """True for a spec divergence, False for ``DIV-UNNAMED-<NAME>``."""
        return not self.divergence.startswith(UNNAMED)

    @property
    def generated(self) -> bool:
        return self.check == GENERATED

    def covers(self, op: str, params, dtype: str) -> bool:
        """Whether a generated case of ``op`` with ``params`` (its parameter model) at ``dtype`` is one
        this line records."""
        primary, form = seen_as(op)  # an example run through a call form: its primary's line, if forms allows
        if not self.generated or primary != self.operation or dtype not in self.dtypes:
            return False
        if self.forms and form not in self.forms:
            return False
        flat = flat_params(params)
        for key, allowed in self.where:
            value = _lookup(flat, key)
            if value is _MISSING or not any(_same(value, a) for a in allowed):
                return False
        return True

    def explains(self, divergences: tuple[str, ...], inferred: Iterable[str]) -> bool:
        """Whether this (generated) line explains a failure the diagnosis named ``divergences`` for and
        the inference said ``inferred`` of."""
        if self.named:
            return self.divergence in divergences
        if divergences:
            return False  # an unnamed line never excuses a named divergence
        if self.finding is None:  # a golden line without a finding: any undiagnosed failure of its case
            return not self.generated and not says_nonfinite(inferred)  # ... but never NaN / inf
        return any(finding_matches(self.finding, x) for x in inferred if is_finding(x))

    def label(self) -> str:
        """How a message names the line's subject."""
        forms = f" through {', '.join(self.forms)}" if self.forms else ""
        if self.generated:
            cond = ", ".join(f"{k}: {list(v) if len(v) > 1 else v[0]}" for k, v in self.where)
            return f"generated {self.operation}" + (f" where {cond}" if cond else "") + forms
        return f"case {self.case!r}, check {self.check!r}" + forms

    def keys(self) -> list[tuple[str, str]]:
        """The ``(case key, check)`` of each test the line records (``<case>~<form>`` per form of ``forms``:
        :func:`~posenc.conformance.expectation_keys.key_of`); none for a generated line."""
        if self.generated:
            return []
        return [(form_key(str(self.case), f), self.check) for f in (self.forms or (PRIMARY,))]


_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_MISSING = object()


def _lookup(flat: dict[str, Any], key: str):
    """The value of ``key``: a full dotted path, else the one path ending in ``.key``; else missing."""
    if key in flat:
        return flat[key]
    hits = [p for p in flat if p.endswith("." + key)]
    return flat[hits[0]] if len(hits) == 1 else _MISSING


def _same(value, allowed) -> bool:
    if value is None or allowed is None:
        return value is None and allowed is None
    if isinstance(value, bool) or isinstance(allowed, bool):
        return isinstance(value, bool) and isinstance(allowed, bool) and value == allowed
    if isinstance(value, (int, float)) and isinstance(allowed, str):  # YAML 1.1 reads 1e4 as a string
        try:
            allowed = float(allowed)
        except ValueError:
            return False
    if isinstance(value, int) and isinstance(allowed, int):
        return value == allowed
    if isinstance(value, (int, float)) and isinstance(allowed, (int, float)):
        return float(value) == float(allowed)
    if isinstance(value, (list, tuple)):
        return str(list(value)) == str(allowed)
    return str(value) == str(allowed)


class ExpectationFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal[2]
    expected_failures: list[Expectation]


class ExpectationError(ValueError):
    """A malformed or inconsistent expectation file; the message names file and field."""


class Expectations:
    """The validated lines of one expectation file (or none), indexed by (case, check, dtype).

    ``path`` is the file (None: no file); iterating gives the lines in file order.
    """

    def __init__(self, entries: Iterable[Expectation] = (), path: Optional[Path] = None):
        self.path = path
        self.entries: tuple[Expectation, ...] = tuple(entries)
        self._index: dict[tuple[str, str, str], int] = {}
        for i, e in enumerate(self.entries):
            if e.generated:
                continue  # by operation and condition: applied in file order
            for d in e.dtypes:
                for case, check in e.keys():
                    j = self._index.setdefault((case, check, d), i)
                    if j != i:
                        raise ExpectationError(
                            f"{path}: expected_failures.{j} and expected_failures.{i}: case {case!r}, check "
                            f"{check!r} listed twice for dtype {d} (one line per case, form, check and dtype)")

    def __iter__(self) -> Iterator[Expectation]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, case_id: Optional[str], check: str, dtype: Optional[str]) -> Optional[Expectation]:
        """The line expecting ``check`` of case ``case_id`` to fail at ``dtype``, or None."""
        i = self._index.get((case_id, check, dtype))  # type: ignore[arg-type]
        return None if i is None else self.entries[i]

    def lookup_through_forms(self, case_id: Optional[str], check: str, dtype: Optional[str]) -> Optional[Expectation]:
        """The first line of ``check`` of case ``case_id`` at ``dtype`` with ``forms:`` (an oracle-free check's
        test is one test whatever form its calls go through: its line names the forms it holds for), or None."""
        if case_id is None or check == "golden" or "~" in case_id:  # a golden's form has a test of its own
            return None
        return next((e for name in sorted(form_names() - {PRIMARY})
                     if (e := self.lookup(form_key(case_id, name), check, dtype)) is not None), None)

    def excuse_generated(self, clauses: set[str], dtype: str, divergences: tuple[str, ...], case=None,
                         inferred: Iterable[str] = ()) -> Optional[Expectation]:
        """A line that excuses a failure of a generated (property-based) case, or None.

        ``clauses``: the clause IDs the failed check covers; ``divergences``: the divergence IDs
        the diagnosis named; ``case``: the drawn case (its ``op`` and ``params``); ``inferred``: what
        the inference said where no divergence was named.  First a generated line covering the case
        that explains the failure (:meth:`Expectation.covers`, :meth:`Expectation.explains`); else
        a named line of a golden or invariant test (never ``DIV-UNNAMED-*``) whose divergence is
        among ``divergences``, whose clause is in ``clauses`` and whose dtypes include ``dtype``;
        the first such line in file order.  A line with ``forms:`` excuses only an example run through
        one of its forms (an example of the primary operation is :data:`PRIMARY`'s).
        """
        inferred = tuple(inferred)
        form = PRIMARY if case is None else seen_as(case.op)[1]
        if case is not None:
            for e in self.covering(case.op, case.params, dtype):
                if e.explains(tuple(divergences), inferred):
                    return e
            if self.generated_lines(seen_as(case.op)[0], dtype):
                return None  # the file scopes this operation's generated failures by its own lines
        for e in self.entries:
            if (not e.generated and e.named and e.divergence in divergences and e.clause in clauses
                    and dtype in e.dtypes and (not e.forms or form in e.forms)):
                return e
        return None

    def covering(self, op: str, params, dtype: str) -> list[Expectation]:
        """The generated lines that cover a case of ``op`` with ``params`` at ``dtype``, in file order."""
        return [e for e in self.entries if e.generated and e.covers(op, params, dtype)]

    def generated_lines(self, op: str, dtype: str) -> list[int]:
        """The indices of the generated lines of ``op`` recorded at ``dtype``."""
        return [i for i, e in enumerate(self.entries) if e.generated and e.operation == op and dtype in e.dtypes]

    def judge_generated(self, tally: dict[int, list[int]]) -> tuple[list[str], list[str]]:
        """``(stale, not exercised)`` messages of the generated lines from ``tally``: line index ->
        ``[cases covered, of them passed, of them excused]`` summed over the generated tests that
        ran (a line none of whose tests ran is not judged).  Stale: covered cases ran and all passed;
        not exercised: no drawn case met the line's condition."""
        stale, idle = [], []
        for i, (covered, passed, excused) in sorted(tally.items()):
            e = self.entries[i]
            where = f"{self.path}: expected_failures.{i}: {e.label()} ({e.divergence})"
            if covered == 0:
                idle.append(f"{where}: not exercised: no drawn case met its operation, dtype and condition (or the "
                            "adapter supports none)")
            elif passed == covered:
                stale.append(f"{where}: the {covered} drawn case(s) it covers all passed: stale line")
            elif excused == 0:
                idle.append(f"{where}: excused none of the {covered} drawn case(s) it covers (an earlier line "
                            "explained them, or they failed otherwise)")
        return stale, idle

    def position(self, entry: Expectation) -> int:
        """The index of ``entry`` in ``expected_failures`` (for messages)."""
        return next(i for i, e in enumerate(self.entries) if e is entry)

    def stale(self, collected: set[tuple[str, str]]) -> list[str]:
        """One message per line whose (case, check) is not among ``collected`` at any dtype."""
        cases = sorted({c for c, _ in collected})
        out = []
        for i, e in enumerate(self.entries):
            for case, check in e.keys():  # a generated line is judged on the cases it covers (judge_generated)
                if (case, check) in collected or (check != "golden" and (case.split("~")[0], check) in collected):
                    continue  # a check's line with forms: the check's one test
                near = difflib.get_close_matches(case, cases, n=1) if (case not in cases) else []
                hint = f" (did you mean case {near[0]!r}?)" if near else ""
                out.append(f"{self.path}: expected_failures.{i}: case {case!r}, check {check!r} ({e.divergence}) "
                           f"matches no test at any dtype{hint}: stale line")
        return out


def _read_yaml(path: Path, text: Optional[str] = None):
    """The YAML document of expectation file ``path`` (of ``text`` when given): unreadable, malformed or with
    a key written twice (at any depth), an :class:`ExpectationError` naming the file, the line and the key."""
    try:
        return read_yaml(Path(path).read_text(encoding="utf-8") if text is None else text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ExpectationError(f"expectation file {path}: {e}") from None


def _validation_error(path, e: ValidationError) -> ExpectationError:
    msgs = [f"{path}: {'.'.join(str(x) for x in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()]
    return ExpectationError("\n".join(msgs))


def parse(raw, path) -> list[Expectation]:
    """Validate the YAML data of a format-2 file (no spec or version checks).

    Raises :class:`ExpectationError`; a file of the old format (no ``format:`` key) is rejected
    with the ``posenc expectations convert`` command that rewrites it.
    """
    if isinstance(raw, dict) and "format" not in raw:
        old = any(isinstance(x, dict) and "test_id" in x for x in raw.get("expected_failures") or [])
        what = "lines keyed by test_id (format 1)" if old else "no `format: 2` key"
        raise ExpectationError(f"{path}: an expectation file of the old format ({what}): "
                               f"run `posenc expectations convert {path}` to rewrite it as format {FORMAT}")
    try:
        return ExpectationFile.model_validate(raw).expected_failures
    except ValidationError as e:
        raise _validation_error(path, e) from None


def load(path: Path, spec, versions: dict[str, str]) -> Expectations:
    """Read and validate an expectation file against the spec and the adapter's ``versions()``.

    Returns :class:`Expectations`.  Raises :class:`ExpectationError` naming the file and the
    field: unreadable YAML, old format, unknown clause or divergence, a library the adapter
    reports no version for, another library version (re-verify), overlapping lines.
    """
    entries = parse(_read_yaml(path), path)
    for i, e in enumerate(entries):
        where = f"{path}: expected_failures.{i}"
        if e.clause not in spec.clauses:
            raise ExpectationError(f"{where}.clause: unknown clause {e.clause!r}")
        if e.divergence not in spec.divergences and e.named:
            raise ExpectationError(f"{where}.divergence: unknown divergence {e.divergence!r} "
                                   f"(use {UNNAMED}<NAME> for one the spec does not name)")
        if e.named and spec.divergences[e.divergence].superseded_by:
            raise ExpectationError(f"{where}.divergence: {e.divergence} is superseded by "
                                   f"{', '.join(spec.divergences[e.divergence].superseded_by)} (it is no longer "
                                   "diagnosed): record the successor that describes the failure")
        if e.evidence.strip().startswith(TODO_EVIDENCE) or e.divergence == FILL_ME:
            raise ExpectationError(f"{where}: a draft line of `posenc expectations init` (evidence TODO or "
                                   f"{FILL_ME}): fill in the evidence and the divergence before using the file")
        bad_forms = sorted(set(e.forms) - form_names())
        if bad_forms:
            raise ExpectationError(f"{where}.forms: {', '.join(map(repr, bad_forms))}: not a call form (known: "
                                   f"{', '.join(sorted(form_names()))})")
        ops = getattr(spec, "operations", None)
        if e.generated and ops is not None and e.operation not in ops:
            near = difflib.get_close_matches(e.operation, list(ops), n=1)
            raise ExpectationError(f"{where}.operation: unknown operation {e.operation!r}"
                                   + (f" (did you mean {near[0]!r}?)" if near else f"; known: {', '.join(sorted(ops))}"))
        form_op = ops.get(e.operation) if e.generated and ops is not None else None
        if getattr(form_op, "form_of", None):  # generated examples run under the primary's test ID
            raise ExpectationError(f"{where}.operation: {e.operation} is a call form of {form_op.form_of}, which has no "
                                   f"generated test of its own: write operation: {form_op.form_of} with forms: "
                                   f"[{form_op.form}]")
        known, compound_names = _param_names(e.operation) if e.where else (None, set())
        unknown = [k for k, _ in e.where if known is not None and k not in known]
        compound = [k for k, _ in e.where if k in compound_names]
        if compound and not unknown:
            raise ExpectationError(f"{where}.where: {', '.join(map(repr, compound))}: a list-valued or nested "
                                   "parameter cannot be a condition (a YAML list reads as alternative values): condition on a "
                                   "plain field (a number, string or true / false) instead")
        if unknown:
            names = sorted(known)
            near = [m for k in unknown for m in difflib.get_close_matches(k, names, n=1)]
            raise ExpectationError(f"{where}.where: {', '.join(map(repr, unknown))}: not a parameter of "
                                   f"{e.operation}'s cases" + (f" (did you mean {', '.join(map(repr, near))}?)" if near
                                                               else f"; its parameters: {', '.join(names)}"))
        if e.generated and e.clause not in _clauses_of(spec, e):
            raise ExpectationError(f"{where}.clause: {e.clause} is neither a clause of {e.operation}'s family nor "
                                   f"violated by {e.divergence}")
        if e.library not in versions:
            raise ExpectationError(f"{where}.library: the adapter reports no version for {e.library!r} "
                                   f"(it reports {', '.join(versions) or 'none'})")
        if versions[e.library] != e.library_version:
            raise ExpectationError(f"{where}.library_version: recorded for {e.library} {e.library_version}, "
                                   f"running {versions[e.library]}: re-verify the line and update it")
    return Expectations(entries, Path(path))


def _clauses_of(spec, e: Expectation) -> set[str]:
    """The clauses a generated line may name: its operation's family's, and those its divergence violates."""
    out = set(spec.divergences[e.divergence].violates) if e.named and e.divergence in spec.divergences else set()
    op = spec.operations.get(e.operation)
    out |= set(getattr(op, "clauses", None) or ())
    fam = spec.families.get(str(e.operation).split(".", 1)[0])
    if fam is not None:
        out |= {c.id for c in fam.clauses}
    return out


# ---- writing files (converting an old file and drafting one from a report:
# posenc.conformance.expectation_drafts) ----------------------------------------------------------


def _scalar(v: str) -> str:
    plain = _PLAIN.match(v) and isinstance(read_yaml(v), str)
    return v if plain else json.dumps(v, ensure_ascii=False)


def dump(entries: list[dict], header: str = "") -> str:
    """Format-2 YAML text: ``header`` (comment lines, kept verbatim), then the lines.

    ``entries``: dicts with the fields of :class:`Expectation`; ``evidence`` and
    ``library_version`` are always quoted.
    """
    out = [header.rstrip("\n")] if header.strip() else []
    out.append(f"format: {FORMAT}")
    if not entries:
        return "\n".join(out + ["expected_failures: []"]) + "\n"
    out.append("expected_failures:")
    for e in entries:
        first = True
        for k in _FIELDS:
            v = e.get(k)
            if v is None or (k == "where" and e.get("check") != GENERATED):
                continue  # a field the line does not have (a golden line's operation, where, finding)
            if k == "forms" and not v:
                continue
            if k in ("dtypes", "forms"):
                text = "[" + ", ".join(v) + "]"
            elif k == "where":
                text = yaml.safe_dump(dict(v), default_flow_style=True, allow_unicode=True).strip()
            elif k in ("evidence", "library_version", "finding"):
                text = json.dumps(str(v), ensure_ascii=False)
            else:
                text = _scalar(str(v))
            out.append(f"{'  - ' if first else '    '}{k}: {text}")
            first = False
    return "\n".join(out) + "\n"


def merge(lines: list[dict]) -> list[dict]:
    """Merge lines that differ only by dtype into one ``dtypes`` list (first occurrence's place;
    dtypes in the kit's order float64, float32, bfloat16, float16), and lines whose ``finding`` differs
    only by values read off the outputs to the digits each dtype resolves ("attention factor 1.261" at
    float32, "1.26" at bfloat16: within bfloat16's resolution, 2^-7 relative): those values become ``*``.
    Findings whose numbers differ by more (+3 and -1) are other bugs: never merged."""
    merged: dict[tuple, dict] = {}
    said: dict[tuple, list[str]] = {}  # the findings merged into each line, as drafted
    for ln in lines:
        base = tuple(json.dumps(NUMBER.sub("#", ln[k]) if k == "finding" and ln.get(k) else ln.get(k), sort_keys=True)
                     for k in _FIELDS if k != "dtypes")
        key = next((k for k in merged if k[:-1] == base and all(_close(f, ln.get("finding")) for f in said[k])),
                   base + (sum(k[:-1] == base for k in merged),))
        if key in merged:
            merged[key]["dtypes"] = [*merged[key]["dtypes"], *ln["dtypes"]]
            said[key].append(ln.get("finding"))
        else:
            merged[key], said[key] = dict(ln, dtypes=list(ln["dtypes"])), [ln.get("finding")]
    for key, m in merged.items():
        m["dtypes"] = sorted(set(m["dtypes"]), key=DTYPES.index)
        if m.get("finding") and len(set(said[key])) > 1:
            m["finding"] = _numbers_that_differ_as_stars(said[key])
    return list(merged.values())


def _numbers(text: Optional[str]) -> list[str]:
    return [m.group(0) for m in NUMBER.finditer(text or "")]


def _close(a: Optional[str], b: Optional[str]) -> bool:
    """Whether two findings' numbers (same text otherwise) agree to bfloat16's resolution (2^-7 relative)."""
    return all(x == y or abs(float(x) - float(y)) <= 2.0**-7 * max(abs(float(x)), abs(float(y)))
               for x, y in zip(_numbers(a), _numbers(b)))


def _numbers_that_differ_as_stars(findings: list[str]) -> str:
    """The first of ``findings`` (the same text but for their numbers) with each number that any of the
    others has otherwise, at the same place, as ``*``."""
    columns = list(zip(*(_numbers(f) for f in findings)))
    it = iter(columns)
    return NUMBER.sub(lambda m: m.group(0) if len(set(next(it))) == 1 else "*", findings[0])


def leading_comments(text: str) -> str:
    """The comment block a file starts with (comment and blank lines before the first key)."""
    lines = []
    for ln in text.splitlines():
        if ln.strip() and not ln.lstrip().startswith("#"):
            break
        lines.append(ln)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)

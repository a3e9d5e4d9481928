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

Strict: a listed (case, check, dtype) that passes fails the run; one that fails with another
diagnosed divergence fails the run; one the adapter reports unsupported fails the run; a line
whose (case, check) matches no collected test at any dtype is stale and fails the run; a line
recorded for another library version must be re-verified.  ``DIV-UNNAMED-<NAME>`` records a
library-specific divergence the spec has no mutant for, and oracle-free checks, which carry
no diagnosis; it never excuses a failure the kit diagnosed as a named divergence.  Two lines
with the same (case, check) and a common dtype are an error.

The old format (format 1: no ``format:`` key, lines keyed by ``test_id``, one per dtype) is
rejected; ``posenc expectations convert FILE`` rewrites such a file (:func:`convert_file`).
``posenc expectations init --from-report REPORT`` drafts a file from a ``--report-json``
report (:func:`draft_from_report`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Iterator, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from posenc.spec import read_yaml
from posenc.spec.models import DTYPES

FORMAT = 2
UNNAMED = "DIV-UNNAMED-"
FILL_ME = "DIV-UNNAMED-FILL-ME"
TODO_EVIDENCE = "TODO: link the issue or source line"
_OLD_ID = re.compile(r"^test_(?P<check>\w+)\[(?:(?P<dtype>" + "|".join(DTYPES) + r")-)?(?P<case>[^@\]]+)(?:@[^\]]*)?\]$")
_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9._+-]*$")
_FIELDS = ("case", "check", "dtypes", "clause", "divergence", "evidence", "library", "library_version")


class Expectation(BaseModel):
    """One line: ``(case, check)`` fails at each of ``dtypes`` with ``divergence``."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    case: str = Field(min_length=1)
    check: str = Field(min_length=1)
    dtypes: tuple[Literal[DTYPES], ...] = Field(min_length=1)  # type: ignore[valid-type]
    clause: str
    divergence: str
    evidence: str = Field(min_length=1)
    library: str
    library_version: str

    @field_validator("dtypes")
    @classmethod
    def _unique(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"a dtype is listed twice: {list(v)}")
        return v

    @property
    def named(self) -> bool:
        """True for a spec divergence, False for ``DIV-UNNAMED-<NAME>``."""
        return not self.divergence.startswith(UNNAMED)


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
            for d in e.dtypes:
                j = self._index.setdefault((e.case, e.check, d), i)
                if j != i:
                    raise ExpectationError(
                        f"{path}: expected_failures.{j} and expected_failures.{i}: case {e.case!r}, check "
                        f"{e.check!r} listed twice for dtype {d} (one line per case, check and dtype)")

    def __iter__(self) -> Iterator[Expectation]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, case_id: Optional[str], check: str, dtype: Optional[str]) -> Optional[Expectation]:
        """The line expecting ``check`` of case ``case_id`` to fail at ``dtype``, or None."""
        i = self._index.get((case_id, check, dtype))  # type: ignore[arg-type]
        return None if i is None else self.entries[i]

    def excuse_generated(self, clauses: set[str], dtype: str, divergences: tuple[str, ...]) -> Optional[Expectation]:
        """A line that excuses a failure of a generated (property-based) case, or None.

        ``clauses``: the clause IDs the failed check covers; ``divergences``: the divergence IDs
        the diagnosis named.  Only a named line (never ``DIV-UNNAMED-*``) whose divergence is among
        ``divergences``, whose clause is in ``clauses`` and whose dtypes include ``dtype`` excuses
        it; the first such line in file order is returned.
        """
        for e in self.entries:
            if e.named and e.divergence in divergences and e.clause in clauses and dtype in e.dtypes:
                return e
        return None

    def position(self, entry: Expectation) -> int:
        """The index of ``entry`` in ``expected_failures`` (for messages)."""
        return next(i for i, e in enumerate(self.entries) if e is entry)

    def stale(self, collected: set[tuple[str, str]]) -> list[str]:
        """One message per line whose (case, check) is not among ``collected`` at any dtype."""
        import difflib
        cases = sorted({c for c, _ in collected})
        out = []
        for i, e in enumerate(self.entries):
            if (e.case, e.check) in collected:
                continue
            near = difflib.get_close_matches(e.case, cases, n=1) if (e.case not in cases) else []
            hint = f" (did you mean case {near[0]!r}?)" if near else ""
            out.append(f"{self.path}: expected_failures.{i}: case {e.case!r}, check {e.check!r} ({e.divergence}) "
                       f"matches no test at any dtype{hint}: stale line")
        return out


def _read_yaml(path: Path):
    try:
        return read_yaml(Path(path).read_text(encoding="utf-8"))
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
        if e.evidence.strip() == TODO_EVIDENCE or e.divergence == FILL_ME:
            raise ExpectationError(f"{where}: a draft line of `posenc expectations init` (evidence TODO or "
                                   f"{FILL_ME}): fill in the evidence and the divergence before using the file")
        if e.check == "generated":
            raise ExpectationError(f"{where}.check: a generated test is excused only by its diagnosis (the "
                                   "divergence a line records for one of its clauses at its dtype), never by a "
                                   "line of its own: record the divergence on a golden case")
        if e.library not in versions:
            raise ExpectationError(f"{where}.library: the adapter reports no version for {e.library!r} "
                                   f"(it reports {', '.join(versions) or 'none'})")
        if versions[e.library] != e.library_version:
            raise ExpectationError(f"{where}.library_version: recorded for {e.library} {e.library_version}, "
                                   f"running {versions[e.library]}: re-verify the line and update it")
    return Expectations(entries, Path(path))


def key_of(item) -> tuple[Optional[str], str, Optional[str]]:
    """``(case_id, check, dtype)`` of a collected pytest item.

    ``check`` is the test function's name without ``test_``; ``case_id`` the ``case``
    parameter's ``.id`` (or the parameter itself when it is a string; else the parametrization
    ID without the dtype and the ``@CLAUSES`` suffix; None for an unparametrized test);
    ``dtype`` the ``dtype`` parameter or None.
    """
    name = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    dtype = params.get("dtype")
    case = params.get("case")
    case_id = case if isinstance(case, str) else getattr(case, "id", None)
    if case_id is None and callspec is not None:
        parts = callspec.id.split("-")
        if dtype in parts:  # the dtype parameter's own ID component
            parts.remove(dtype)
        case_id = "-".join(parts).split("@", 1)[0] or None
    return case_id, name.removeprefix("test_"), dtype


# ---- writing files: convert (format 1 -> 2) and draft (from a report) ---------------------------


def _scalar(v: str) -> str:
    plain = _PLAIN.match(v) and isinstance(yaml.safe_load(v), str)
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
        for k in _FIELDS:
            v = e[k]
            if k == "dtypes":
                text = "[" + ", ".join(v) + "]"
            elif k in ("evidence", "library_version"):
                text = json.dumps(str(v), ensure_ascii=False)
            else:
                text = _scalar(str(v))
            out.append(f"{'  - ' if k == 'case' else '    '}{k}: {text}")
    return "\n".join(out) + "\n"


def merge(lines: list[dict]) -> list[dict]:
    """Merge lines that differ only by dtype into one ``dtypes`` list (first occurrence's place;
    dtypes in the kit's order float64, float32, bfloat16, float16)."""
    merged: dict[tuple, dict] = {}
    for ln in lines:
        key = tuple(ln[k] for k in _FIELDS if k != "dtypes")
        if key in merged:
            merged[key]["dtypes"] = [*merged[key]["dtypes"], *ln["dtypes"]]
        else:
            merged[key] = dict(ln, dtypes=list(ln["dtypes"]))
    for m in merged.values():
        m["dtypes"] = sorted(set(m["dtypes"]), key=DTYPES.index)
    return list(merged.values())


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


def convert_text(text: str, path="<text>") -> tuple[str, int, int]:
    """Rewrite a format-1 file's text as format 2: ``(new text, old line count, new line count)``.

    Each ``test_id`` (``test_<check>[<dtype>-<case>@<CLAUSES>]``) becomes ``case``, ``check``
    and ``dtypes``; lines that differ only by dtype are merged; the leading comment block is
    kept, other comments are dropped.  Raises :class:`ExpectationError` on a file that is
    already format 2, malformed, or has a test ID that does not parse.
    """
    raw = yaml.safe_load(text)
    if isinstance(raw, dict) and "format" in raw:
        raise ExpectationError(f"{path}: already has `format: {raw['format']}`: nothing to convert")
    if not isinstance(raw, dict) or not isinstance(raw.get("expected_failures"), list):
        raise ExpectationError(f"{path}: not an expectation file (no expected_failures list)")
    lines = []
    for i, old in enumerate(raw["expected_failures"]):
        tid = old.get("test_id") if isinstance(old, dict) else None
        m = _OLD_ID.match(str(tid or ""))
        if not m or not m["dtype"]:
            raise ExpectationError(f"{path}: expected_failures.{i}.test_id: {tid!r} is not "
                                   "test_<check>[<dtype>-<case>@<CLAUSES>]")
        rest = {k: old.get(k) for k in _FIELDS[3:]}
        missing = [k for k, v in rest.items() if v is None] + [k for k in old if k != "test_id" and k not in rest]
        if missing:
            raise ExpectationError(f"{path}: expected_failures.{i}: missing or unknown fields {', '.join(missing)}")
        lines.append({"case": m["case"], "check": m["check"], "dtypes": [m["dtype"]], **rest})
    new = merge(lines)
    out = dump(new, leading_comments(text))
    parse(yaml.safe_load(out), path)  # the written text is a valid format-2 file
    return out, len(lines), len(new)


def convert_file(path: Path) -> Optional[tuple[int, int]]:
    """Rewrite ``path`` in place as format 2; returns (old line count, new line count), or None
    (file untouched) when it already has a ``format:`` key.  Raises :class:`ExpectationError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ExpectationError(f"expectation file {path}: {e}") from None
    raw = _read_yaml(path)
    if isinstance(raw, dict) and "format" in raw:
        parse(raw, path)  # a format-2 file must be valid; another format is an error
        return None
    new, n_old, n_new = convert_text(text, path)
    path.write_text(new, encoding="utf-8")
    return n_old, n_new


def _library(report: dict) -> tuple[str, str]:
    """The library a drafted line records: the ``versions`` key the adapter's name contains (the
    wrapped library: ``transformers`` in ``hf-transformers``), else the one matching the
    framework, else the first key; ``("FILL-ME", "FILL-ME")`` when the report has none."""
    versions = report.get("versions") or {}
    name = str(report.get("adapter", ""))
    for key in versions:
        if key in name and key != report.get("framework"):
            return key, str(versions[key])
    key = report.get("framework") if report.get("framework") in versions else next(iter(versions), None)
    return (key, str(versions[key])) if key else ("FILL-ME", "FILL-ME")


def draft_from_report(report: dict) -> tuple[str, int]:
    """A format-2 file drafted from a ``--report-json`` report: ``(text, number of lines)``.

    One line per failed record (``outcome == "failed"``) that reached a verdict on the values:
    its first diagnosed divergence (``DIV-UNNAMED-FILL-ME`` when the diagnosis named none), the
    first clause it violated, merged across dtypes; ``evidence`` is a TODO.  Records that ended
    in an exception or a malformed output (``raised``) or have no case are left out: no line can
    excuse them.  Raises :class:`ExpectationError` for a report without ``report_format``.
    """
    if "report_format" not in report or "results" not in report:
        raise ExpectationError("not a --report-json report of this kit (no report_format / results)")
    library, version = _library(report)
    lines, skipped = [], 0
    for r in report["results"]:
        if r.get("outcome") != "failed" or str(r.get("reason", "")).startswith("[XPASS"):
            continue  # a listed test that passed (strict XPASS) is no divergence to record
        if r.get("raised") or not r.get("case") or not r.get("dtype") or r.get("check") == "generated":
            skipped += 1
            continue
        diag = r.get("diagnosis") or []
        clause = (r.get("violated") or r.get("clauses") or ["FILL-ME"])[0]
        lines.append({"case": r["case"], "check": r["check"], "dtypes": [r["dtype"]], "clause": clause,
                      "divergence": diag[0]["divergence"] if diag else FILL_ME, "evidence": TODO_EVIDENCE,
                      "library": library, "library_version": version})
    merged = merge(lines)
    header = "\n".join([
        f"# Known divergences of the {report.get('adapter')} adapter "
        f"({', '.join(f'{k} {v}' for k, v in (report.get('versions') or {}).items()) or 'no versions'}).",
        f"# DRAFT written by `posenc expectations init` from a --report-json report (spec {report.get('spec_version')}).",
        "# Before committing: fill in every `evidence:` (the issue link or the library source line that",
        f"# causes the divergence; a line still saying {TODO_EVIDENCE!r} explains nothing), replace",
        f"# {FILL_ME} by a DIV-UNNAMED-<NAME> that says what the library does (the kit diagnosed no",
        "# known divergence there), and check that each clause is the one the failure violates.",
    ] + ([f"# Left out: {skipped} failure(s) that raised, returned a malformed output or have no case (no",
          "# expectation line can excuse them), or of generated tests (a generated failure is excused by the",
          "# line of a golden or invariant test that records its diagnosed divergence for one of its clauses",
          "# at its dtype)."] if skipped else []))
    return dump(merged, header), len(merged)

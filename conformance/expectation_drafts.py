"""Writing expectation files (:mod:`posenc.conformance.expectations`): an old file (format 1, lines
keyed by ``test_id``) rewritten as format 2 (``posenc expectations convert``), and a file drafted from a
``--report-json`` report (``posenc expectations init --from-report``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from posenc.conformance.expectations import (
    _OLD_ID,
    FILL_ME,
    GENERATED,
    NUMBER,
    TODO_EVIDENCE,
    ExpectationError,
    _parts,
    _read_yaml,
    _without_aside,
    dump,
    leading_comments,
    merge,
    parse,
)
from posenc.harness.inference import is_finding


def draft_finding(inferred: str) -> str:
    """A finding drafted from an inferred line: each of its facts (the parts between "; ") without a
    trailing parenthetical (commentary whose wording differs between cases), each specified value
    (``where <number> is specified``: it differs from one drawn case to the next) as ``*``; the values
    the implementation used are kept.  Every fact stays: a finding matches only a line stating all of
    them (:func:`posenc.conformance.expectations.finding_matches`)."""
    return "; ".join(re.sub(r"(?P<w>\bwhere )" + NUMBER.pattern + r"(?P<s> is specified)", r"\g<w>*\g<s>",
                            _without_aside(p).strip()) for p in _parts(str(inferred)) if p.strip())


def convert_text(text: str, path="<text>") -> tuple[str, int, int]:
    """Rewrite a format-1 file's text as format 2: ``(new text, old line count, new line count)``.

    Each ``test_id`` (``test_<check>[<dtype>-<case>@<CLAUSES>]``) becomes ``case``, ``check``
    and ``dtypes``; lines that differ only by dtype are merged; the leading comment block is
    kept, other comments are dropped.  Raises :class:`ExpectationError` on a file that is
    already format 2, malformed, or has a test ID that does not parse.
    """
    raw = _read_yaml(path, text)
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
        rest = {k: old.get(k) for k in ("clause", "divergence", "evidence", "library", "library_version")}
        missing = [k for k, v in rest.items() if v is None] + [k for k in old if k != "test_id" and k not in rest]
        if missing:
            raise ExpectationError(f"{path}: expected_failures.{i}: missing or unknown fields {', '.join(missing)}")
        lines.append({"case": m["case"], "check": m["check"], "dtypes": [m["dtype"]], **rest})
    new = merge(lines)
    out = dump(new, leading_comments(text))
    parse(_read_yaml(path, out), path)  # the written text is a valid format-2 file
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


def own_clause(record: dict) -> str:
    """The clause a drafted line records: the first violated clause among the failing test's own, else the
    first violated clause of their family (what the failing run counted the failure under), else the
    test's first clause; never another family's clause a divergence named.
    A failure the diagnosis does not name goes under the clause of the parameter its inference found a
    value for (:func:`_clause_of_finding`: "attention factor 1.25 where 1 is specified" under
    ROPE-ATTENTION-FACTOR, not the case's first clause, a pairing's), or, where the inference says it is a
    precision, the case's precision clause (ROPE-PRECISION)."""
    own = _strings(record.get("clauses"))
    violated = _strings(record.get("violated"))
    mine = [c for c in violated if c in own]
    if not mine and record.get("diagnosis"):  # a named failure: what the failing run counted it under, where it is
        from posenc import registry  # of the test's own family (bf16 angles seen by a pairing case's relative
        # check: ROPE-PRECISION, not ROPE-PAIR-HALF; the loader allows a clause the named divergence violates)
        sp = registry.spec()
        fams = {sp.family_of_clause(c) for c in own if c in sp.clauses}
        mine = [c for c in violated if c in sp.clauses and sp.family_of_clause(c) in fams]
    if not record.get("diagnosis"):
        findings = [x for x in _strings(record.get("inferred")) if is_finding(x)]
        if any(x.startswith("precision:") for x in findings):
            mine = [c for c in mine or own if c.endswith("-PRECISION")] + mine
        elif findings and (fitted := _clause_of_finding(findings[0], own, record.get("check") == GENERATED)):
            return fitted
    return (mine or own or _strings(record.get("violated")) or ["FILL-ME"])[0]


def _clause_of_finding(finding: str, own: list[str], wider: bool) -> Optional[str]:
    """The clause of the first fact of ``finding`` (its parts between "; ") that names one: the clause whose
    parameter the fact gives a value for (a spec clause's ``parameters``, ``_`` read as a space: "attention
    factor", "rope_theta", "beta_fast"), the longest name said first (``attention_factor`` before
    ``factor``), one of the test's own clauses (``own``) or, where ``wider`` (a generated line, which may
    name any clause of its operation's family), one of their families'; for a fact about the positions
    used, the test's own angle clause (ROPE-ANGLE); about the frequencies, its inverse-frequency clause
    (ROPE-INV-FREQ).  None where no fact names one (a pairing: the first violated clause is as good)."""
    from posenc import registry
    sp = registry.spec()
    fams = {sp.family_of_clause(c) for c in own if c in sp.clauses}
    pool = [c for c in own if c in sp.clauses] + \
        [c for c in sp.clauses if wider and c not in own and sp.family_of_clause(c) in fams]
    by_word = {" positions ": "-ANGLE", " the inverse frequencies ": "-INV-FREQ", " frequencies ": "-INV-FREQ"}
    for part in _parts(str(finding)):
        fact = " " + re.sub(r"[^\w.]+", " ", part.lower().replace("_", " ")).strip() + " "
        said = [(len(n), -i, c) for i, c in enumerate(pool) for n in
                (p.name.replace("_", " ") for p in sp.clauses[c].parameters or ()) if f" {n} " in fact]
        if said:
            return max(said)[2]
        # an input, not a parameter (the positions an angle used), or the frequencies pair by pair
        suffix = next((x for w, x in by_word.items() if fact.startswith(w)), None)
        hit = next((c for c in own if suffix and c.endswith(suffix)), None)
        if hit:
            return hit
    return None


def _strings(v) -> list[str]:
    """A report field that lists strings, as a list (one string given alone is one item, not its letters)."""
    return [v] if isinstance(v, str) else [str(x) for x in v or ()]


def left_out_of_draft(report: dict) -> list[str]:
    """The failures :func:`draft_from_report` drafts no line for, each ``"<test_id>: <why>"``."""
    return _draft_lines(report)[1]


def _named(r: dict, agreed: dict, refuted: frozenset = frozenset()) -> Optional[str]:
    """The divergence a drafted line names: the diagnosis's closest, or of several that reproduce the
    output equally well (a tie, e.g. a NaN every mutant gives), one the report does not refute at that
    dtype (``refuted``: its ``contradicted`` list), then the one it names alone on the most other failures
    at that dtype (``agreed``) -- not whichever the catalogue lists first."""
    diag = r.get("diagnosis") or []
    if not diag:
        return None
    tied = [d["divergence"] for d in diag if d.get("ratio") == diag[0].get("ratio")]
    return max(tied, key=lambda n: ((n, r.get("dtype")) not in refuted, agreed.get((n, r.get("dtype")), 0),
                                    -tied.index(n)))


def _draft_lines(report: dict) -> tuple[list[dict], list[str]]:
    """The drafted lines (before merging) and the failures left out, each ``"<test_id>: <why>"``."""
    if "report_format" not in report or "results" not in report:
        raise ExpectationError("not a --report-json report of this kit (no report_format / results)")
    library, version = _library(report)
    failed = [r for r in report["results"]  # a listed test that passed (strict XPASS) is no divergence to record
              if r.get("outcome") == "failed" and not str(r.get("reason", "")).startswith("[XPASS")]
    agreed: dict = {}
    for r in failed:
        if len(r.get("diagnosis") or ()) == 1:
            key = (r["diagnosis"][0]["divergence"], r.get("dtype"))
            agreed[key] = agreed.get(key, 0) + 1
    # a tie is never broken for a divergence the same report's contradicted list refutes at that dtype
    refuted = frozenset((c.get("divergence"), c.get("dtype")) for c in report.get("contradicted") or ()
                        if isinstance(c, dict))
    lines, left = [], []
    for r in failed:
        if r.get("raised") or not r.get("case") or not r.get("dtype"):
            left.append(f"{r.get('test_id')}: {'raised or returned a malformed output' if r.get('raised') else 'no case'}")
            continue
        named = _named(r, agreed, refuted)
        diag = r.get("diagnosis") or []
        tied = [d["divergence"] for d in diag if d.get("ratio") == diag[0].get("ratio") and d["divergence"] != named]
        line = {"check": r["check"], "dtypes": [r["dtype"]], "clause": own_clause(r), "divergence": named or FILL_ME,
                "evidence": TODO_EVIDENCE + (f" (a tie: {', '.join(tied)} reproduce this output as well as {named}; "
                                             "keep the one the library's source shows)" if tied else ""),
                "library": library, "library_version": version}
        inferred = [x for x in _strings(r.get("inferred")) if x.strip() and is_finding(x)]
        if r["check"] == GENERATED:
            if not named and not inferred:  # neither named nor inferred: nothing a line could say it is
                left.append(f"{r.get('test_id')}: no divergence reproduces it and the inference states no finding "
                            "(element counts and a closest fit are not one)")
                continue
            line.update(operation=r["case"], where={}, finding=None if named else draft_finding(inferred[0]))
        else:
            line["case"] = r["case"]
            if not named and inferred:  # an unnamed golden line too excuses only what it says
                line["finding"] = draft_finding(inferred[0])
        lines.append(line)
    return lines, left


def draft_from_report(report: dict) -> tuple[str, int]:
    """A format-2 file drafted from a ``--report-json`` report: ``(text, number of lines)``.

    One line per failed record (``outcome == "failed"``) that reached a verdict on the values:
    its diagnosed divergence by :func:`_named` (``DIV-UNNAMED-FILL-ME`` when the diagnosis named none), its
    clause by :func:`own_clause`, merged across dtypes; ``evidence`` is a TODO.  A generated test's
    record becomes a generated line (``operation``, ``where: {}``, and, unnamed, a ``finding`` by
    :func:`draft_finding` from its first inferred line that is a finding).  Records that ended in an
    exception or a malformed output (``raised``), have no case, or (generated) were neither named
    nor inferred are left out: no line can excuse them.  Raises :class:`ExpectationError` for a report without ``report_format``.
    """
    lines, left = _draft_lines(report)
    skipped = len(left)
    merged = merge(lines)
    header = "\n".join([
        f"# Known divergences of the {report.get('adapter')} adapter "
        f"({', '.join(f'{k} {v}' for k, v in (report.get('versions') or {}).items()) or 'no versions'}).",
        f"# DRAFT written by `posenc expectations init` from a --report-json report (spec {report.get('spec_version')}).",
        "# Before committing: fill in every `evidence:` (the issue link or the library source line that",
        f"# causes the divergence; a line still saying {TODO_EVIDENCE!r} explains nothing), replace",
        f"# {FILL_ME} by a DIV-UNNAMED-<NAME> that says what the library does (the kit diagnosed no",
        "# known divergence there), and check that each clause is the one the failure violates.",
        "# A generated line (check: generated) covers every drawn case of its operation at its dtypes:",
        "# narrow it with `where: {name: value}` to the parameters where the divergence shows. An unnamed",
        "# one excuses only failures whose inferred lines match its `finding:` (drafted from the shrunk case's",
        "# inference, the specified values as `*`, which matches any text: check that the rest holds for",
        "# every case, e.g. a value the implementation used that depends on the case). An unnamed golden line",
        "# gets a finding too when the inference stated one; without one it excuses any failure of its case",
        "# the diagnosis does not name, except a NaN / inf output.",
    ] + ([f"# Left out: {skipped} failure(s) that raised, returned a malformed output, have no case, or (of a",
          "# generated test) were neither named nor said what they are by the inference (element counts and a",
          "# closest fit are not a finding): no expectation line can excuse them."]
         if skipped else []))
    return dump(merged, header), len(merged)

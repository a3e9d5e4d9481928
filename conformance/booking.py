"""Where a test's verdict is booked: the expectation lines it meets, the per-clause counts, the
``--report-json`` record (``report_format`` :data:`REPORT_FORMAT`, docs/report-json.md), the failure's plot
and the command that reruns it.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from pathlib import Path
from typing import Optional

import pytest

from posenc import registry
from posenc.conformance import expectations as expectations_mod
from posenc.conformance.crashes import LEDGER_KEY
from posenc.conformance.generated import generated_examples
from posenc.conformance.state import DEFAULT_TIMEOUT, EXPECTATIONS_DIR, State, model_attns
from posenc.conformance.stops import INTERRUPT_KEY, node_interrupted
from posenc.spec import SPEC_VERSION
from posenc.spec.errors import exception_text


def clauses_of_item(item) -> list[str]:
    m = item.get_closest_marker("clauses")
    return list(m.args) if m else []


def expectation_entry(st: State, item):
    """The expectation line of a collected item (its case, check and dtype) -- for an oracle-free check's test,
    a line of it with ``forms:`` too -- or None."""
    key = expectations_mod.key_of(item)
    return st.expectations.lookup(*key) or st.expectations.lookup_through_forms(*key)


def line_clauses(st: State, item, e) -> set[str]:
    """The clauses expectation line ``e`` of ``item`` may give: the test's, those its divergence violates and,
    for a line with ``forms:``, the forms' own (ROPE-CALL-FORM: a bug of a form alone is counted there)."""
    allowed = set(clauses_of_item(item))
    div = st.spec.divergences.get(e.divergence)
    if div:
        allowed |= set(div.violates)
    if e.forms:
        from posenc.registry.forms import CALL_FORMS, form_clauses
        allowed |= {c for op in CALL_FORMS if expectations_mod.seen_as(op)[1] in e.forms for c in form_clauses(op)}
    return allowed


def inherited_entry(st: State, item, exc):
    """For a call form's test with no line of its own that failed: the named line of its case's primary test
    when the diagnosis names that line's divergence (the case's recorded bug, seen through the form); else
    None.  Not strict: the form's test may pass or be unsupported (only ``forms:`` lists a form's test)."""
    case_id, check, dtype = expectations_mod.key_of(item)
    if case_id is None or "~" not in case_id:
        return None
    e = st.expectations.lookup(case_id.split("~", 1)[0], check, dtype)
    found = getattr(exc, "divergences", None) or ()
    return e if e is not None and e.named and e.divergence in found and not getattr(exc, "raised", True) else None


TEST_ID = re.compile(r"test_(?P<check>\w+)\[(?P<dtype>[a-z0-9]+)-(?P<case>[^@\]]+)(?:@(?P<clauses>[^\]]+))?\]")


def skip_reason(rep) -> str:
    return rep.longrepr[2].removeprefix("Skipped: ") if isinstance(rep.longrepr, tuple) else ""


#: Lines of a failure report that say nothing by themselves: section borders (``____ test ____``,
#: ``---- Captured ... ----``), a traceback's header, pytest's location line (``file.py:12: ValueError``),
#: the chained-exception separators, source lines and blank ``E`` lines.
_NOT_A_REASON = re.compile(
    r"^\s*$|^[_=\-!+]{3,}|[_=\-!+]{3,}$|^Traceback \(most recent call last\):|^\S+:\d+: \S+$|^\s*File \"|"
    r"^(The above exception was the direct cause|During handling of the above exception)|^E\s*$|^>? {3}")


def reason_line(rep) -> str:
    """What is wrong, in one line, from a failure report the kit did not write (an exception outside
    the adapter's call, a Hypothesis error, a worker pytest-xdist lost): the exception line pytest
    found (``reprcrash``), else the last line of the text that is no border, traceback header,
    location or source line."""
    crash = getattr(getattr(rep, "longrepr", None), "reprcrash", None)
    message = str(getattr(crash, "message", "") or "").strip()
    if message:
        return message.splitlines()[0].strip()
    text = str(getattr(rep, "longreprtext", None) or getattr(rep, "longrepr", None) or "")
    for line in reversed(text.strip().splitlines()):
        if not _NOT_A_REASON.search(line):
            return re.sub(r"^E\s+", "", line).strip()
    return ""


def crash_payload(st: State, report) -> Optional[dict]:
    """The verdict of a test whose worker process died (an exit, a signal, an OOM kill, a
    --posenc-timeout): failed under the clauses of its ID, by ID, with the cause; the report's
    text gets the clause header."""
    name = report.nodeid.rsplit("::", 1)[-1]
    m = TEST_ID.fullmatch(name)
    if m is None:
        return None
    check, dtype, case = m["check"], m["dtype"], m["case"]
    clauses = m["clauses"].split("+") if m["clauses"] else []
    if not clauses and check == "generated":
        try:
            clauses = list(registry.operation(case).clauses)
        except KeyError:
            pass
    cause = reason_line(report) or "the worker process died"
    limit = st.config.getoption("--posenc-timeout")
    text = (f"{', '.join(clauses)}: {st.adapter.name} crashed its process on case {case} ({dtype}): {cause}; "
            f"an exit, a signal, an out-of-memory kill{f' or --posenc-timeout ({limit:g} s)' if limit else ''} "
            "(the worker's stderr above says which). The worker was restarted")
    report.longrepr = text
    node = report.nodeid if Path(report.nodeid.split("::")[0]).is_absolute() else \
        str(Path(str(st.config.rootpath)) / report.nodeid)
    report.sections.append(("posenc rerun", rerun_line(st.config, node, dtype)))
    record = {"test_id": name, "case": case, "check": check, "dtype": dtype, "clauses": clauses,
              "outcome": "failed", "violated": clauses, "divergence": None, "expected_reason": None,
              "diagnosis": [], "inferred": [], "raised": True, "reason": text[:300], "generated": None,
              "counted": {c: "failed" for c in clauses}}
    st.crashes.append(report.nodeid)
    return {"kind": "failed", "counted": {c: "failed" for c in clauses}, "record": record, "partly_unsupported": None,
            "kit_error": None, "nodeid": report.nodeid}


def book(st: State, payload: dict) -> None:
    """Count one test's verdict (``rep.posenc`` of its report) in the run's state."""
    kind = payload["kind"]
    if kind in ("passed", "diverges (expected)"):
        st.checked += 1
    if kind in ("failed", "kit error"):
        st.failed += 1
    if kind == "kit error":
        st.kit_errors.append(payload["kit_error"])
    for c, k in payload["counted"].items():
        st.outcomes[c][k] += 1
    if st.plot_dir is not None:  # --plot-dir: every record says whether it has a picture
        payload["record"].setdefault("plot", None)
    st.records.append(payload["record"])
    st.booked.add(payload["nodeid"])
    if payload["partly_unsupported"]:
        st.partly_unsupported.append(payload["partly_unsupported"])
    if payload["record"].get("not_checkable"):  # elements the rule's bound does not constrain (spec.tolerance)
        st.not_checkable = [st.not_checkable[0] + payload["record"]["not_checkable"], st.not_checkable[1] + 1] \
            if st.not_checkable else [payload["record"]["not_checkable"], 1]
    for i, *counts in payload.get("lines") or ():  # a generated test's expectation lines: cases covered, ...
        t = st.line_tally.setdefault(int(i), [0, 0, 0])
        for k, n in enumerate(counts):
            t[k] += int(n)


class Booker:
    """Books every report where the run is summarised: the pytest process itself, or, under
    pytest-xdist, the controller (a worker only attaches ``rep.posenc`` and forwards the report)."""

    def __init__(self, st: State):
        self.st = st

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter prints a crash report
    def pytest_runtest_logreport(self, report):
        payload = getattr(report, "posenc", None)
        if payload is None and report.failed and report.when not in ("setup", "call", "teardown"):
            if node_interrupted(report):  # a KeyboardInterrupt stopped it: no verdict, as in a serial run
                return
            payload = crash_payload(self.st, report)  # pytest-xdist: the worker died inside the test
        if payload is not None:
            book(self.st, payload)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):  # what the workers will run
        self.st.scheduled = set(ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        """pytest-xdist's crash report of a worker a KeyboardInterrupt stopped: not a failure (a serial
        run reports nothing for the test it interrupted; the summary names the interrupt)."""
        if report.failed and report.when not in ("setup", "call", "teardown") and node_interrupted(report):
            return "", "", ""
        return None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):  # pytest-xdist controller: the run's crash credits, shared
        if self.st.crash_ledger:
            node.workerinput[LEDGER_KEY] = self.st.crash_ledger

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):  # pytest-xdist controller: a worker's stale lines, its interrupt
        out = getattr(node, "workeroutput", None) or {}
        for line in out.get("posenc_stale", []):
            if line not in self.st.stale:
                self.st.stale.append(line)
        if out.get(INTERRUPT_KEY) and not self.st.interrupted:
            self.st.interrupted = out[INTERRUPT_KEY]


def checked_plot_dir(config) -> Optional[Path]:
    """``--plot-dir DIR``: matplotlib importable (else a usage error naming the ``[docs]`` extra),
    an --adapter run, the folder made; the absolute path, or None without the option."""
    given = config.getoption("--plot-dir")
    if not given:
        return None
    if config.getoption("--model"):
        raise pytest.UsageError("--plot-dir: the model-level suite (--model) draws no plots; it plots the "
                                "failing cases of an --adapter run")
    from posenc.harness.failure_plots import PlotsUnavailable, require_matplotlib
    try:
        require_matplotlib()
    except PlotsUnavailable as e:
        raise pytest.UsageError(str(e)) from None
    p = Path(given).resolve()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise pytest.UsageError(f"--plot-dir {given}: {exception_text(e)}") from None
    if not os.access(p, os.W_OK):
        raise pytest.UsageError(f"--plot-dir {given}: is not writable")
    return p


def plot_failed(item, rep, exc, record: dict, plot_dir: Path) -> None:
    """Draw a failed test's picture (a failure that compared values: golden, generated, an
    invariant check's first call out of tolerance) and link it in ``record["plot"]``: the path
    relative to the --report-json file's folder (else absolute).  A plot that cannot be drawn never
    changes the verdict: the report's ``posenc plot`` section says why."""
    data = getattr(exc, "plot_data", None)
    if data is None or record.get("raised"):
        return
    from posenc.harness.failure_plots import plot_failure, plot_name
    try:
        diag = record.get("diagnosis") or []
        path = plot_failure(plot_dir / plot_name(item.name, item.nodeid), data, test_id=item.name,
                            clauses=record.get("violated") or record.get("clauses") or (),
                            divergence=diag[0]["divergence"] if diag else None)
    except Exception as e:  # noqa: BLE001 - the verdict stands without its picture
        rep.sections.append(("posenc plot", f"not drawn: {type(e).__name__}: {exception_text(e)}"))
        return
    if path is None:
        return
    report = item.config.getoption("--report-json")
    link = str(path)
    if report:
        try:
            link = Path(os.path.relpath(path, Path(report).resolve().parent)).as_posix()
        except ValueError:  # another drive
            pass
    record["plot"] = link
    rep.sections.append(("posenc plot", str(path)))


def unexpect(rep, longrepr: str) -> None:
    """Turn a strict xfail (the expected divergence) into a plain failure with ``longrepr``."""
    rep.outcome = "failed"
    if hasattr(rep, "wasxfail"):
        del rep.wasxfail
    rep.longrepr = longrepr


def judge_expected(item, rep, exc, entry, path) -> None:
    """Keep an expected divergence only if the test failed the way its line says.

    Failed instead: an exception or a malformed output (no verdict on the values, never
    excused); a diagnosis that does not name the line's divergence (for a ``DIV-UNNAMED-*``
    line: a diagnosis that names any divergence); an unsupported report.  A pass is already a
    strict XPASS failure.
    """
    where = f"{item.nodeid}: listed as expected divergence {entry.divergence} ({path})"
    form = getattr(exc, "form", None)  # the failure is this call form's own (the primary passes)
    name = expectations_mod.seen_as(form)[1] if form else expectations_mod.PRIMARY
    check_test = expectations_mod.key_of(item)[1] not in ("golden", "generated")  # one test, whatever form
    if hasattr(rep, "wasxfail") and not getattr(exc, "raised", True) and check_test and (
            name not in (entry.forms or (expectations_mod.PRIMARY,))):
        held = f"forms: [{', '.join(entry.forms)}]" if entry.forms else "no forms: (the operation's own call)"
        unexpect(rep, f"{where} with {held}, but the failure is "
                      + (f"call form {form}'s own (the operation itself passes): record it with forms: [{name}]"
                         if form else "the operation's own call") + f":\n{exc.msg}")
    elif hasattr(rep, "wasxfail") and getattr(exc, "raised", True):
        unexpect(rep, f"{where}, but the test did not reach a verdict on the values:\n"
                       f"{getattr(exc, 'msg', None) or f'{type(exc).__name__}: {exc}'}")
    elif hasattr(rep, "wasxfail"):
        found = getattr(exc, "divergences", None)
        if found is not None and entry.divergence not in found and (entry.named or found):
            # failed, but not the way the expectation file says: a different bug hides behind it
            why = (f"but the output matches {', '.join(found) or 'no known divergence'}" if entry.named else
                   f"but the kit diagnosed the named divergence(s) {', '.join(found)}: an unnamed line "
                   "never excuses a named divergence (record that one instead)")
            unexpect(rep, f"{item.nodeid}: expected divergence {entry.divergence} ({path}), {why}:\n{exc.msg}")
        elif found is not None and not entry.explains(tuple(found), getattr(exc, "inferred", ()) or ()):
            # an unnamed line with a finding: the inference must say it
            note = expectations_mod.no_finding_note(getattr(exc, "inferred", ()) or ())
            unexpect(rep, f"{item.nodeid}: expected divergence {entry.divergence} ({path}), but no inferred line "
                          f"matches its finding {entry.finding!r}{note}:\n{exc.msg}")
    elif rep.outcome == "skipped":
        unexpect(rep, f"{where} but reported {rep.longrepr[2] if isinstance(rep.longrepr, tuple) else 'skipped'}")


def rerun_command(item) -> str:
    """A command that reruns exactly this test, as pasted (same adapter, device, dtype, options)."""
    dtype = item.callspec.params.get("dtype", "float32") if hasattr(item, "callspec") else "float32"
    return rerun_line(item.config, f"{item.path}::{item.name}", dtype)


def rerun_line(config, node: str, dtype: str) -> str:
    opt = config.getoption
    which = "--model" if opt("--model") else "--adapter"
    cmd = ["pytest", node, which, opt(which), "--device", opt("--device"), "--dtype", dtype]
    for name in ("--expectations", "--left-pad-fill", "--posenc-examples", "--posenc-seed", "--attn"):
        if opt(name) is not None:
            cmd += [name, str(opt(name))]
    if opt("--posenc-timeout") != DEFAULT_TIMEOUT:
        cmd += ["--posenc-timeout", f"{opt('--posenc-timeout'):g}"]
    if opt("--posenc-isolation") != "process":
        cmd += ["--posenc-isolation", opt("--posenc-isolation")]
    return " ".join(shlex.quote(str(c)) for c in cmd)


#: ``report_format`` of ``--report-json`` (docs/report-json.md, conformance/report_schema.json):
#: bumped when a field changes meaning or is removed; adding a field does not bump it.
REPORT_FORMAT = 1


def ratio_or_none(x) -> Optional[float]:
    x = float(x)
    return x if math.isfinite(x) else None


OUTCOME_NAMES = {"diverges (expected)": "diverges", "kit error": "error"}  # report names of the kinds


def record_of(item, rep, kind: str, entry, violated, exc=None, counted=None) -> dict:
    """One test's verdict for ``--report-json`` (and ``posenc matrix``); fields: docs/report-json.md."""
    callspec = getattr(item, "callspec", None)
    case_id, check, dtype = expectations_mod.key_of(item)
    reason = ""
    if kind in ("unsupported", "n/a") and isinstance(rep.longrepr, tuple):
        reason = rep.longrepr[2].removeprefix("Skipped: ").removeprefix("unsupported: ").removeprefix("n/a: ")
    elif kind == "kit error":
        reason = str(exc)[:300]
    elif kind == "failed":
        from posenc.harness.failure import ConformanceFailure
        # the kit's failure says what is wrong in one line; anything else: its report's last line
        reason = (exc.reason if isinstance(exc, ConformanceFailure) else reason_line(rep))[:300]
    diverges = kind == "diverges (expected)"
    return {
        "test_id": item.name,
        "case": case_id,
        "check": check,
        "dtype": callspec.params.get("dtype") if callspec else dtype,
        "clauses": clauses_of_item(item),
        "outcome": OUTCOME_NAMES.get(kind, kind),
        "violated": list(violated or []),
        "divergence": entry.divergence if entry and diverges else None,
        "expected_reason": entry.evidence if entry and diverges else None,
        "diagnosis": [{"divergence": m.divergence, "violates": list(m.violates), "ratio": ratio_or_none(m.ratio)}
                      for m in getattr(exc, "matches", ()) or ()] if kind != "passed" else [],
        "inferred": [str(x) for x in getattr(exc, "inferred", ()) or ()] if kind != "passed" else [],
        "raised": bool(getattr(exc, "raised", True)) if kind == "failed" and exc is not None else False,
        "reason": reason,
        "generated": dict(item.user_properties).get("generated"),
        "params": getattr(exc, "params", None) if kind == "failed" else None,
        "partly_unsupported": dict(item.user_properties).get("posenc_partly_unsupported"),
        "not_checkable": int(dict(item.user_properties).get("posenc_not_checkable", 0)),
        "counted": {c: OUTCOME_NAMES.get(k, k) for c, k in (counted or {}).items()},
    }


def expectations_given(config, st: State) -> Optional[str]:
    """The expectation file as given on the command line; a default one as ``adapters/expectations/<file>``
    (its place among the kit's folders, the same from a checkout and from a wheel), so that reports do
    not depend on the machine."""
    given = config.getoption("--expectations")
    if given is not None:
        return str(given)
    if st.expectations_path is None:
        return None
    try:
        return "adapters/expectations/" + st.expectations_path.relative_to(EXPECTATIONS_DIR).as_posix()
    except ValueError:
        return str(st.expectations_path)


def report(config, st: State, exit_status: int) -> dict:
    """The ``--report-json`` document (format :data:`REPORT_FORMAT`)."""
    a = st.adapter
    return {
        "report_format": REPORT_FORMAT,
        "adapter": a.name, "framework": a.framework, "versions": st.versions, "device": st.device,
        "model": None if st.model_info is None else {"architecture": st.model_info["architecture"],
                                                     "kind": st.model_info["kind"],
                                                     "attn_implementations": list(model_attns(config)),
                                                     "notes": str(a.notes or "")},
        "dtypes": st.dtypes, "spec_version": SPEC_VERSION, "exit_status": int(exit_status),
        "expectations": expectations_given(config, st),
        "examples": generated_examples(config),
        # the dtype of its cos/sin tables at bfloat16 / float16 (ROPE-TABLE-DTYPE)
        "table_dtype": st.table_dtype,
        # the call forms it serves (ROPE-CALL-FORM): each golden of their primary runs through them too
        "call_forms": list(st.call_forms),
        # false for a run cut short (Ctrl-C, -x / --maxfail, an internal error): its results are
        # the tests that ran; posenc matrix refuses it
        "complete": st.complete,
        # diagnoses the run contradicts: the named divergence's mutant fails a golden case that passed
        "contradicted": st.contradicted,
        # generated expectation lines (check: generated): stale ones fail the run; not exercised ones are
        # reported (no drawn case met them)
        "lines_stale": st.lines_stale,
        "lines_not_exercised": st.lines_not_exercised,
        "results": st.records,
    }


def write_not_checkable(tr, counted: list[int]) -> None:
    """The summary's line on the compared elements the rule's bound does not constrain (``[elements, tests]``;
    nothing when none): spec.tolerance.not_checkable."""
    if counted:
        tr.write_line(f"posenc: {counted[0]} compared element(s) in {counted[1]} test(s) not checkable at their dtype: "
                      "the float32 angle term of their bound reaches twice their magnitude, the largest error a "
                      "rotation can make, so any output of that magnitude passes there (spec.tolerance.not_checkable; "
                      "long positions, high frequencies; per test: the report's not_checkable); elements whose bound "
                      "lies between once and twice their magnitude are constrained only loosely", yellow=True)


def write_contradicted(tr, contradicted: list[dict]) -> None:
    """The summary's lines of :func:`posenc.harness.failure.contradicted_diagnoses` (none: nothing)."""
    if not contradicted:
        return
    tr.write_line("posenc: diagnoses this run contradicts (a golden case refutes the divergence: the bug "
                  "agrees with it only on the failing calls, or a second bug shows on that case; rerun the "
                  "case with -k to compare):", yellow=True)
    for c in contradicted:
        why = (f"its mutant fails golden case {c['case']}, which passed" if c["golden"] == "passed" else
               f"its mutant changes golden case {c['case']}, which {c['golden']} (not as it: another bug, or "
               f"a second one, shows there)" if c["golden"].startswith(("failed as ", "diverges (expected) as "))
               else f"the golden test of case {c['case']} failed without naming it")
        tr.write_line(f"  {c['divergence']} (named for {c['failures']} failure(s) at {c['dtype']}): {why}")

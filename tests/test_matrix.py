"""The conformance matrix: --report-json records from real runs, aggregated into cells."""

from __future__ import annotations

import json
from pathlib import Path

from posenc.conformance import matrix

BROKEN = str(Path(__file__).resolve().parent / "broken_adapters.py")


def _report(run_suite, tmp_path, adapter, *args):
    out = tmp_path / "r.json"
    r = run_suite(adapter, "--report-json", str(out), *args)
    return r, json.loads(out.read_text())


def test_report_json_records_every_verdict(run_suite, tmp_path):
    r, rep = _report(run_suite, tmp_path, f"{BROKEN}:PairingSwapped", "--dtype", "float32",
                     "-k", "test_golden and (rope-llama3-8b or sin-)")
    outcomes = r.parseoutcomes()
    assert rep["adapter"] == "broken-pairing-swapped" and rep["exit_status"] == 1
    by = {}
    for rec in rep["results"]:
        by.setdefault(rec["outcome"], []).append(rec)
    assert len(by["failed"]) == outcomes["failed"] and len(by["passed"]) == outcomes["passed"]
    failed = by["failed"][0]
    assert failed["dtype"] == "float32" and "rope-llama3-8b" in failed["test_id"]
    assert failed["violated"] == ["ROPE-PAIR-HALF"]  # the diagnosed divergence, within the test's clauses


def test_cells_from_a_real_run(run_suite, tmp_path):
    """One adapter failing pairing and one conforming: FAIL cells name the count, pass cells pass."""
    _, bad = _report(run_suite, tmp_path, f"{BROKEN}:PairingSwapped", "--dtype", "float32",
                     "-k", "test_golden and rope-llama3-8b")
    _, good = _report(run_suite, tmp_path, "torch", "--dtype", "float32", "-k", "test_golden and rope-llama3-8b")
    m = matrix.aggregate([bad, good])
    cells = m["cells"]["float32"]
    assert cells["ROPE-PAIR-HALF"]["torch"]["verdict"] == "pass"
    assert cells["ROPE-PAIR-HALF"]["broken-pairing-swapped"]["verdict"].startswith("FAIL ")
    assert m["adapters"][0]["failures"] and not m["adapters"][1]["failures"]
    md = matrix.markdown(m)
    assert "| ROPE-PAIR-HALF | FAIL" in md and "`broken-pairing-swapped`" in md


def test_cell_verdicts():
    from collections import Counter
    assert matrix._cell(Counter(), set()) == "."
    assert matrix._cell(Counter(passed=3), set()) == "pass"
    assert matrix._cell(Counter(passed=2, unsupported=1), set()) == "pass (1/3 unsupported)"
    assert matrix._cell(Counter(unsupported=2), set()) == "unsupported"
    assert matrix._cell(Counter(passed=1, diverges=1), {"DIV-X"}) == "diverges: DIV-X (1/2 pass)"
    assert matrix._cell(Counter(passed=5, failed=1, diverges=1), {"DIV-X"}) == "FAIL 1/7"

"""The conformance matrix: --report-json records from real runs, aggregated into cells."""

from __future__ import annotations

import json
from pathlib import Path

from posenc.tools import matrix, runs

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


def test_check_prints_what_changed(run_suite, tmp_path, monkeypatch, capsys):
    """``posenc matrix --check`` on stale files fails and prints the markdown diff (a CI log must
    say which cell changed), and passes on the files it wrote itself."""
    r, good = _report(run_suite, tmp_path, "torch", "--dtype", "float32", "-k", "test_golden and rope-llama3-8b")
    good["exit_status"] = 0
    monkeypatch.setattr(runs, "run_adapter", lambda name, *a, **k: (good, "1 passed in 0.1s", 0.1))
    out = tmp_path / "docs"
    assert matrix.main(["torch"], "float32", out, check=False, jobs=1) == 0
    assert matrix.main(["torch"], "float32", out, check=True, jobs=1) == 0
    assert "matrix: fresh" in capsys.readouterr().out
    md = out / matrix.MD_NAME
    md.write_text(md.read_text().replace("| pass |", "| FAIL 1/1 |", 1))
    assert matrix.main(["torch"], "float32", out, check=True, jobs=1) == 1
    text = capsys.readouterr().out
    assert "is stale" in text and "-| " in text and "FAIL 1/1" in text and "+| " in text


def test_a_run_cut_short_is_marked_and_refused(run_suite, tmp_path, monkeypatch, capsys):
    """-x stops at the first failure: the summary says the run was cut short, the report says
    complete: false, and posenc matrix fails rather than write its cells."""
    r, rep = _report(run_suite, tmp_path, f"{BROKEN}:PairingSwapped", "--dtype", "float32", "-x",
                     "-k", "test_golden and (rope-llama3-8b or sin-)")
    assert r.ret == 1 and rep["complete"] is False
    assert "posenc: the run was cut short" in r.stdout.str()
    monkeypatch.setattr(runs, "run_adapter", lambda name, *a, **k: (rep, "1 failed in 0.1s", 0.1))
    assert matrix.main(["broken"], "float32", tmp_path / "docs", check=False, jobs=1) == 1
    out = capsys.readouterr().out
    assert "cut short" in out and not (tmp_path / "docs" / matrix.MD_NAME).read_text().count("broken-pairing")


def test_model_matrix_cells_and_the_committed_rows():
    """The model matrix sums each (model, attention, scenario) up over the dtypes; the committed one
    has a row per architecture of the hf: models and a column per scenario."""
    import json

    from posenc import families
    from posenc.tools import model_matrix as mm

    def r(outcome, div=None):
        return {"outcome": outcome, "divergence": div}
    assert mm._cell({"float32": r("passed"), "bfloat16": r("passed")}) == "pass"
    assert mm._cell({"float32": r("n/a")}) == "n/a"
    assert mm._cell({"float64": r("diverges", "DIV-X"), "float32": r("passed")}) == "diverges: DIV-X (float64); pass (float32)"
    assert mm._cell({"float64": r("diverges", "DIV-X"), "float32": r("diverges", "DIV-X")}) == "diverges: DIV-X"
    assert mm._cell({"float32": r("failed"), "float16": r("passed")}) == "FAIL float32; pass (float16)"
    root = Path(__file__).resolve().parent.parent
    committed = json.loads((root / "docs" / mm.JSON_NAME).read_text())
    assert [m["model"] for m in committed["models"]] == mm.default_models()
    assert [s["clause"] for s in committed["scenarios"]] == list(families.scenarios())
    assert all(m["exit_status"] == 0 and m["totals"]["failed"] == 0 for m in committed["models"])
    ci = (root / ".ci" / "run").read_text()
    assert "posenc matrix --check" in ci and "docs/example_model_adapter.py" in ci

"""``pytest conformance -n N`` (pytest-xdist) gives what a serial run gives: the per-clause
summary, the ``--report-json`` verdicts, the exit code and the expectation strictness.

The workers attach each test's verdict to its report (``rep.posenc``); the controller books the
reports it receives (``booking.Booker``).  Runs in subprocesses, as a user runs them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import posenc.conformance

CONFORMANCE_DIR = Path(posenc.conformance.__file__).resolve().parent
BROKEN = Path(__file__).resolve().parent / "broken_adapters.py"


def _run(pytester, adapter, *args, n=None):
    extra = ("-n", str(n)) if n else ("-p", "no:xdist")
    return pytester.runpytest_subprocess(str(CONFORMANCE_DIR), "--adapter", adapter, "-p", "no:cacheprovider",
                                         "--import-mode=importlib", *extra, *args)


def _table(text: str) -> list[str]:
    """The per-clause summary rows (clause and four counts)."""
    return sorted(ln for ln in text.splitlines() if re.fullmatch(r"[A-Z0-9-]+( +\d+){4}", ln.strip()))


def _expectation_file(tmp_path: Path, case: str, evidence: str) -> Path:
    """One golden expectation line: float32 pairing swapped (ROPE-PAIR-HALF) of ``case``."""
    import torch
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"""format: 2
expected_failures:
  - case: {case}
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: {evidence}
    library: torch
    library_version: "{torch.__version__}"
""")
    return exp


def _results(path: Path) -> list[dict]:
    return sorted(json.loads(path.read_text())["results"], key=lambda r: r["test_id"])


def test_xdist_run_equals_serial_run(pytester, tmp_path):
    """A failing adapter, golden + invariant + generated tests at two dtypes: the same exit code,
    summary rows, partly-unsupported lines and report records with -n 2 as without."""
    sel = ["--dtype", "float32,bfloat16", "-k", "rope-llama3-8b or (test_generated and rope.apply)"]
    runs = {}
    for n in (None, 2):
        out = tmp_path / f"r{n}.json"
        r = _run(pytester, f"{BROKEN}:PairingSwapped", "--report-json", str(out), *sel, n=n)
        runs[n] = (r.ret, _table(r.stdout.str()), _results(out), r.stdout.str())
    (ret1, table1, res1, text1), (ret2, table2, res2, text2) = runs[None], runs[2]
    assert ret1 == ret2 == 1
    assert table1 and table1 == table2, (table1, table2)
    assert any(" 0 " not in row.split(None, 1)[1][:12] for row in table1)  # some clause has failures
    assert res1 == res2
    assert {r["outcome"] for r in res1} >= {"passed", "failed"}
    assert "posenc conformance: broken-pairing-swapped" in text2


def test_xdist_nothing_checked_fails(pytester):
    """An adapter that supports nothing exits 1 under -n 2, as in a serial run."""
    for n in (None, 2):
        r = _run(pytester, f"{BROKEN}:NothingSupported", "-k", "rope-llama3-8b", n=n)
        assert r.ret == 1, (n, r.stdout.str()[-1500:])
        assert "a run that checks nothing fails" in r.stdout.str()


def test_xdist_stale_expectation_line_is_a_usage_error(pytester, tmp_path):
    """A stale expectation line stops both runs with exit code 4 and the line named (no
    INTERNALERROR, no test run)."""
    exp = _expectation_file(tmp_path, "rope-no-such-case", "a line whose case was renamed")
    for n in (None, 2):
        r = _run(pytester, "torch", "--expectations", str(exp), n=n)
        text = r.stdout.str() + r.stderr.str()
        assert r.ret == 4, (n, text[-1500:])
        assert "rope-no-such-case" in text and "stale line" in text and "INTERNALERROR" not in text
        assert " passed" not in r.stdout.str().splitlines()[-1]


@pytest.mark.parametrize("n", [None, 2])
def test_xdist_expected_divergence_is_booked_once(pytester, tmp_path, n):
    """An expectation line that holds: xfail booked under the line's clause, exit 0."""
    exp = _expectation_file(tmp_path, "rope-llama3-8b", "the planted pairing bug of tests/broken_adapters.py")
    out = tmp_path / "r.json"
    r = _run(pytester, f"{BROKEN}:PairingSwapped", "--expectations", str(exp), "--report-json", str(out),
             "-k", "test_golden and rope-llama3-8b and not scattered", n=n)
    assert r.ret == 0, r.stdout.str()[-2000:]
    rows = {row.split()[0]: row.split()[1:] for row in _table(r.stdout.str())}
    assert rows["ROPE-PAIR-HALF"] == ["0", "0", "1", "0"], rows
    recs = _results(out)
    assert [x["outcome"] for x in recs] == ["diverges"] and recs[0]["divergence"] == "DIV-ROPE-PAIRING-SWAPPED"


def test_a_crashed_or_hung_worker_fails_its_test_by_id_and_the_run_goes_on(pytester, tmp_path, monkeypatch):
    """-n 1 with the adapter in the xdist worker itself (--posenc-isolation none: the xdist worker is
    the isolation): os._exit inside one case and a sleep past --posenc-timeout inside another each
    fail that test, under the clauses of its ID, in the summary and the report; the others pass."""
    monkeypatch.setenv("POSENC_TEST_HANG", "1")
    out = tmp_path / "r.json"
    r = _run(pytester, f"{BROKEN}:ExitsInOneCase", "--posenc-isolation", "none", "--posenc-timeout", "5",
             "--report-json", str(out),
             "-k", "test_golden and (sin-concat-d7 or sin-concat-d10 or sin-interleaved-d8 or sin-concat-d8)", n=1)
    text = r.stdout.str()
    assert r.ret == 1, text[-2000:]
    assert "SIN-VASWANI-CONCAT: broken-exits crashed its process on case sin-concat-d7 (float32)" in text
    assert "crashed its process on case sin-concat-d10-base1e6" in text  # the timer thread ended the worker
    rows = {row.split()[0]: row.split()[1:] for row in _table(text)}
    assert rows["SIN-VASWANI-CONCAT"] == ["1", "2", "0", "0"] and rows["SIN-VASWANI-INTERLEAVED"][:2] == ["1", "0"]
    rep = json.loads(out.read_text())
    failed = sorted(x["case"] for x in rep["results"] if x["outcome"] == "failed")
    assert failed == ["sin-concat-d10-base1e6", "sin-concat-d7"] and rep["complete"] is True
    assert all(x["raised"] and x["violated"] == ["SIN-VASWANI-CONCAT"] for x in rep["results"] if x["outcome"] == "failed")


def test_the_third_crash_ends_the_run_naming_the_first(pytester, tmp_path, monkeypatch):
    """An adapter in the xdist worker itself (--posenc-isolation none) that dies on every case:
    after three crashed workers the rest is not run, the summary names the first crash, the
    report is incomplete and the run fails."""
    monkeypatch.setenv("POSENC_TEST_CRASH_ALL", "1")
    out = tmp_path / "r.json"
    r = _run(pytester, f"{BROKEN}:ExitsInOneCase", "--posenc-isolation", "none", "--report-json", str(out),
             "-k", "test_golden and sin-", n=1)
    text = r.stdout.str()
    assert r.ret == 1
    assert "did not run: pytest-xdist stopped after 3 crashed worker(s)" in text and "first crash: conformance/" in text
    rep = json.loads(out.read_text())
    assert rep["complete"] is False and [x["outcome"] for x in rep["results"]].count("failed") == 3


def test_serial_timeout_names_the_test(pytester, monkeypatch):
    """Without -n: SIGALRM ends the hung call, the test fails with the clause header, the run goes on."""
    monkeypatch.setenv("POSENC_TEST_HANG", "1")
    r = _run(pytester, f"{BROKEN}:ExitsInOneCase", "--posenc-timeout", "8",  # loading torch counts (test_isolation)
             "-k", "test_golden and (sin-concat-d10 or sin-concat-d8)")
    text = r.stdout.str()
    assert r.ret == 1 and "SIN-VASWANI-CONCAT: broken-exits did not finish test_golden[float32-sin-concat-d10" in text
    assert "within 8 s (--posenc-timeout)" in text and "1 passed" in text


# ---- a crash, a hang, a KeyboardInterrupt read the same with -n N as without ------------------------

def _same_crash_numbers(text: str) -> str:
    """Crash numbers depend on which xdist worker crashes first: compared without them."""
    return re.sub(r"crash \d+ of", "crash # of", text)


def _crash_lines(text: str) -> list[str]:
    return sorted(_same_crash_numbers(ln.strip()) for ln in text.splitlines()
                  if "AdapterCrashed:" in ln or "did not finish" in ln or "crashed its process" in ln)


def test_a_crash_and_a_hang_read_the_same_serially_and_under_xdist(pytester, tmp_path, monkeypatch):
    """os._exit in one case, a sleep past --posenc-timeout in another: with -n 2 the terminal's
    failure lines and the report's reasons are a serial run's (the hang "did not finish within
    S s", never a crash of an xdist worker), and so are the verdicts and the exit code."""
    monkeypatch.setenv("POSENC_TEST_HANG", "1")
    runs = {}
    for n in (None, 2):
        out = tmp_path / f"r{n}.json"
        r = _run(pytester, f"{BROKEN}:ExitsInOneCase", "--posenc-timeout", "8", "--report-json", str(out), "-k",
                 "test_golden and (sin-concat-d7 or sin-concat-d10 or sin-interleaved-d8 or sin-concat-d8)", n=n)
        text = r.stdout.str()
        reasons = sorted((x["test_id"], x["outcome"], _same_crash_numbers(x["reason"])) for x in _results(out))
        runs[n] = (r.ret, reasons, _crash_lines(text), _table(text))
    assert runs[None][0] == runs[2][0] == 1
    assert runs[None][1] == runs[2][1], (runs[None][1], runs[2][1])
    assert runs[None][2] == runs[2][2] and len(runs[2][2]) >= 2, (runs[None][2], runs[2][2])
    assert runs[None][3] == runs[2][3]
    hang = [x for x in runs[2][1] if "sin-concat-d10" in x[0]]
    assert hang and "within 8 s (--posenc-timeout)" in hang[0][2] and "crashed its process" not in hang[0][2]


def test_an_adapters_keyboard_interrupt_stops_both_runs_alike(pytester, tmp_path):
    """The adapter raises KeyboardInterrupt itself: the run stops as at the user's Ctrl-C, serially
    and with -n 2 -- exit status INTERRUPTED, an incomplete report, no verdict (no crash) for the
    interrupted test, and the same line naming the interrupt and its test."""
    runs = {}
    for n in (None, 2):
        out = tmp_path / f"r{n}.json"
        r = _run(pytester, f"{BROKEN}:InterruptsInOneCase", "--report-json", str(out), "-k",
                 "test_golden and (sin-concat-d8 or sin-interleaved-d8)", n=n)
        text = r.stdout.str()
        rep = json.loads(out.read_text())
        line = [ln for ln in text.splitlines() if ln.startswith("posenc: the run was stopped by")]
        runs[n] = (r.ret, rep["complete"], line)
        assert not [x for x in rep["results"] if x["outcome"] == "failed"], (n, rep["results"])
        # (xdist's own "replacing crashed worker" line aside: it restarts the interrupted xdist worker)
        assert "crashed its process" not in text and "crashed while running" not in text, (n, text[-2000:])
        assert " failed" not in text.splitlines()[-1], (n, text[-2000:])
    assert runs[None] == runs[2], runs
    assert runs[2][0] == pytest.ExitCode.INTERRUPTED and runs[2][1] is False
    assert runs[2][2] == [("posenc: the run was stopped by a KeyboardInterrupt (raised by the adapter in its process "
                           "during sinusoidal.table: the adapter's own) in conformance/test_golden.py::"
                           "test_golden[float32-sin-concat-d8@SIN-VASWANI-CONCAT]")]

"""A divergence whose bug changes an output's shape (a rotary width rounded up: inv_freq and the cos/sin
tables one pair longer) is named and can be recorded like any value divergence (a new user's trial of
issue 29: the shape error reached no verdict, so `expectations init` drafted nothing and a hand-written
line was refused); an output of a shape no divergence gives stays malformed, never excused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from posenc import cli
from posenc.conformance import expectations as exp

HERE = Path(__file__).resolve().parent
WIDTH_UP = f"{HERE / 'width_adapters.py'}:WidthRoundedUp"
PADDED = f"{HERE / 'width_adapters.py'}:InvFreqPadded"
TABLES = ("-k", "test_golden and (rope-inv-freq-fraction or rope-cos-sin-fraction)")


def _outcomes(r) -> dict:
    return {k: v for k, v in r.parseoutcomes().items() if k != "deselected"}


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_a_width_rounded_up_is_named_on_the_tables(run_suite, isolation):
    r = run_suite(WIDTH_UP, *TABLES, "--dtype", "float32", "--posenc-isolation", isolation)
    out = r.stdout.str()
    assert r.ret == 1 and _outcomes(r).get("failed", 0) >= 2, out[-3000:]
    assert "output 'inv_freq' has shape [15], the operation table says [14]: the shape (and values) a known" in out
    failures = out.split("short test summary info")[0]  # the summary may repeat each message (wide terminals)
    assert failures.count("    DIV-ROPE-ROTARY-WIDTH-ROUNDED-UP (violates") == _outcomes(r)["failed"], out[-3000:]


def test_init_drafts_the_shape_divergence_and_the_rerun_is_green(run_suite, tmp_path):
    report, draft = tmp_path / "report.json", tmp_path / "draft.yaml"
    k = ("-k", "fraction", "--dtype", "float32,bfloat16")
    assert run_suite(WIDTH_UP, *k, "--report-json", str(report)).ret == 1
    assert cli.main(["expectations", "init", "--from-report", str(report), "--out", str(draft)]) == 0
    lines = exp.parse(yaml.safe_load(draft.read_text()), draft)
    tables = [e for e in lines if e.case and ("inv-freq" in e.case or "cos-sin" in e.case)]
    assert tables and all(e.divergence == "DIV-ROPE-ROTARY-WIDTH-ROUNDED-UP" for e in tables), lines
    draft.write_text(draft.read_text().replace(exp.TODO_EVIDENCE, "planted"))
    r = run_suite(WIDTH_UP, *k, "--expectations", str(draft))
    assert r.ret == 0 and "failed" not in _outcomes(r) and _outcomes(r)["xfailed"] >= len(lines), r.stdout.str()[-3000:]


def test_a_shape_no_divergence_gives_is_malformed_and_never_excused(run_suite, tmp_path):
    r = run_suite(PADDED, *TABLES, "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and "OutputShapeError" in out and "the shape (and values) a known" not in out, out[-3000:]
    line = {"check": "golden", "case": "rope-inv-freq-fraction-96-0.3", "dtypes": ["float32"],
            "clause": "ROPE-ROTARY-FRACTION", "divergence": "DIV-ROPE-ROTARY-WIDTH-ROUNDED-UP", "evidence": "planted",
            "library": "torch", "library_version": __import__("torch").__version__}
    p = tmp_path / "exp.yaml"
    p.write_text(exp.dump([line]))
    r = run_suite(PADDED, "-k", "test_golden and rope-inv-freq-fraction-96-0.3", "--dtype", "float32",
                  "--expectations", str(p))
    assert r.ret == 1 and _outcomes(r).get("failed") == 1, r.stdout.str()[-3000:]

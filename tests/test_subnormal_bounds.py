"""The golden comparison and every invariant check apply one subnormal and zero allowance (issue 28, finding 3).

The tolerance rule (spec/tolerance.py, README "Tolerance rule") allows every float element ``tiny(dt)``, the
spacing of ``dt``'s subnormals (a value below it cannot be stored), even where the spec states the output
exactly (spec/nope.yaml: "returned bit-identical: only tiny(dt) allowed"; learned gathers likewise).  So an
implementation that returns the smallest subnormal wherever the exact output is 0, and the exact result
elsewhere, conforms: the golden comparison passes it, and so must every check that judges the same outputs
(before: test_pair_norm failed it with "ratio inf", the identity, pass-through and row checks with
"bit-identical").  Four subnormal spacings are beyond what an element with no error scale is allowed: the
golden comparison and the checks then fail it alike."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from posenc.spec.tolerance import EPS, TINY, compare, identical, relative_floor

ADAPTER = str(Path(__file__).resolve().parent / "subnormal_adapter.py")
#: the checks that judge an output whose exact value is 0 in some golden case (a zero pair, a zero input
#: passed through or returned as is, a zero row of a table)
ZERO_JUDGES = ("pair_norm", "passthrough_tail", "nope_identity", "layers_identity", "row_range")


def _outcomes(rep: Path) -> dict[str, dict[str, set[str]]]:
    by = defaultdict(lambda: defaultdict(set))
    for x in json.loads(rep.read_text())["results"]:
        by[x["check"]][x["outcome"]].add(f"{x['dtype']}-{x['case']}")
    return by


def test_subnormals_where_the_output_is_zero_pass_every_check(run_suite, tmp_path):
    rep = tmp_path / "r.json"
    r = run_suite(f"{ADAPTER}:SubnormalZeros", "--dtype", "all", "--report-json", str(rep))
    out = r.stdout.str()
    assert r.ret == 0, "\n".join(ln for ln in out.splitlines() if ln.startswith(("FAILED", "  ", "E ")))[-4000:]
    by = _outcomes(rep)
    for check in ("golden", *ZERO_JUDGES):  # each of them ran, on every dtype, and passed
        assert {k.split("-", 1)[0] for k in by[check]["passed"]} == {"float64", "float32", "bfloat16", "float16"}, check
        assert not by[check]["failed"], (check, by[check]["failed"])


def test_four_subnormals_fail_the_golden_and_the_checks_alike(run_suite, tmp_path):
    """The control: the adapter does put values where the exact output is 0 in the cases these checks run
    (else the test above could not fail), and beyond tiny(dt) both the golden comparison and the check fail."""
    rep = tmp_path / "r.json"
    r = run_suite(f"{ADAPTER}:FourSubnormals", "--dtype", "all", "--report-json", str(rep), "-k",
                  " or ".join(ZERO_JUDGES) + " or (test_golden and (nope-apply-explicit or rope-rotation-negative-figure))")
    assert r.ret == 1
    by = _outcomes(rep)
    for check in ZERO_JUDGES:
        assert by[check]["failed"], (check, dict(by[check]))
    for dt in ("float64", "float32", "bfloat16", "float16"):  # an identity's zero: golden and check fail together
        assert f"{dt}-nope-apply-explicit" in by["golden"]["failed"] & by["nope_identity"]["failed"], dt


def test_the_rule_helpers_agree_with_the_golden_comparison():
    """``identical`` (the exact outputs' rule) passes exactly what ``compare`` passes with no error scale, and
    ``relative_floor`` lies above the subnormal range (a ratio is judged only where rounding is relative)."""
    for dt in ("float64", "float32", "bfloat16", "float16"):
        exact = np.array([0.0, 0.0, -0.0, 1.0, np.inf, 0.0, 0.0, np.nan])
        got = np.array([TINY[dt], -TINY[dt], 0.0, 1.0, np.inf, 2 * TINY[dt], np.nan, 0.0])
        same = identical(got, exact, dt)
        assert same.tolist() == [True, True, True, True, True, False, False, False], dt
        for i in range(len(exact)):
            if np.isfinite(exact[i]):
                assert compare("y", got[i:i + 1], exact[i:i + 1], dtype=dt).ok == bool(same[i]), (dt, i)
        assert relative_floor(dt) == 100 * TINY[dt] / EPS[dt] > TINY[dt] / EPS[dt]  # 100 x the smallest normal

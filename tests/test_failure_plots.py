"""``--plot-dir DIR``: a PNG per failing case (posenc.harness.failure_plots), linked from the
``--report-json`` record's ``plot`` field; without matplotlib a usage error naming the extra."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc.conformance
from posenc.harness import failure_plots as fp

CONFORMANCE_DIR = Path(posenc.conformance.__file__).resolve().parent
BROKEN = str(Path(__file__).resolve().parent / "broken_adapters.py")
PNG = b"\x89PNG\r\n\x1a\n"


# matplotlib (the [docs] extra, part of [test]) imported before pytester's in-process runs snapshot
# sys.modules: a run that imports it first would leave half of it to be imported again afterwards
import matplotlib  # noqa: E402
import matplotlib.backends.backend_agg  # noqa: E402,F401
import matplotlib.figure  # noqa: E402,F401

#: matplotlib's cache folder under the real HOME (pytester's runs get a fresh HOME: no font cache)
MPL_CACHE = matplotlib.get_cachedir()


def _check_schema(report: dict) -> None:
    """The report schema check of tests/test_expectations.py (jsonschema or its structural check)."""
    spec = importlib.util.spec_from_file_location("_posenc_test_expectations",
                                                  Path(__file__).resolve().parent / "test_expectations.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod._check_schema(report)


def _plotted(report_path: Path, records: list[dict]) -> None:
    """Every failed record that compared values links a PNG that exists; no other record does."""
    for r in records:
        if r["outcome"] == "failed" and not r["raised"]:
            assert isinstance(r["plot"], str), r["test_id"]
            png = report_path.parent / r["plot"]
            assert png.is_file() and png.read_bytes()[:8] == PNG, (r["test_id"], png)
        else:
            assert r["plot"] is None, (r["test_id"], r["outcome"], r["plot"])


# ---- a run --------------------------------------------------------------------------------------


def test_a_failing_run_writes_a_png_per_failure_and_links_it(run_suite, tmp_path):
    """The pairing bug (DIV-ROPE-PAIRING-SWAPPED) on one case: golden and invariant checks fail, the
    relative check passes; each failure has its own PNG, linked relative to the report's folder."""
    plots, report = tmp_path / "plots", tmp_path / "out" / "r.json"
    report.parent.mkdir()
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "rope-tiny-half", "--plot-dir", str(plots),
                  "--report-json", str(report))
    assert r.ret == 1, r.stdout.str()[-2000:]
    doc = json.loads(report.read_text())
    _check_schema(doc)
    recs = doc["results"]
    failed = [x for x in recs if x["outcome"] == "failed"]
    assert failed and any(x["outcome"] == "passed" for x in recs)
    assert any(x["check"] == "golden" for x in failed) and any(x["check"] != "golden" for x in failed)
    _plotted(report, recs)
    links = [x["plot"] for x in failed]
    assert len(set(links)) == len(links)  # one file per failing test
    assert all(link.startswith("../plots/") for link in links)  # relative to the report's folder
    assert sorted(p.name for p in plots.iterdir()) == sorted(Path(link).name for link in links)  # nothing else
    golden = next(x for x in failed if x["check"] == "golden")
    assert golden["diagnosis"][0]["divergence"] == "DIV-ROPE-PAIRING-SWAPPED"
    assert "posenc plot" in r.stdout.str()  # the failure's report names the file


def test_a_generated_failure_plots_its_shrunk_example(run_suite, tmp_path):
    report = tmp_path / "r.json"
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_generated and float32-rope.apply and not cos_sin",
                  "--plot-dir", str(tmp_path / "plots"), "--report-json", str(report))
    assert r.ret == 1
    recs = json.loads(report.read_text())["results"]
    assert recs and all(x["check"] == "generated" and x["outcome"] == "failed" for x in recs)
    _plotted(report, recs)


def test_a_failure_without_values_gets_no_plot(run_suite, tmp_path):
    """A malformed output (q/k transposed: a wrong shape) is a failure that compared nothing: plot null."""
    report = tmp_path / "r.json"
    r = run_suite(f"{BROKEN}:Transposed", "-k", "test_golden and rope-llama3-8b", "--plot-dir",
                  str(tmp_path / "plots"), "--report-json", str(report))
    assert r.ret == 1
    recs = json.loads(report.read_text())["results"]
    assert recs and all(x["outcome"] == "failed" and x["raised"] and x["plot"] is None for x in recs)
    assert not list((tmp_path / "plots").iterdir())


def test_a_nan_output_is_plotted(run_suite, tmp_path):
    """NaN where the reference is finite: compared values (ratio inf), so a picture, with no divergence."""
    report = tmp_path / "r.json"
    r = run_suite(f"{BROKEN}:NaNOutput", "-k", "test_golden and sin-interleaved-d8", "--plot-dir",
                  str(tmp_path / "plots"), "--report-json", str(report))
    assert r.ret == 1
    recs = json.loads(report.read_text())["results"]
    assert len(recs) == 1 and recs[0]["diagnosis"] == []
    _plotted(report, recs)


def test_without_plot_dir_records_have_no_plot_field(run_suite, tmp_path):
    report = tmp_path / "r.json"
    run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_golden and rope-tiny-half", "--report-json", str(report))
    recs = json.loads(report.read_text())["results"]
    assert recs and all("plot" not in x for x in recs)


def test_xdist_workers_write_distinct_files_under_a_relative_dir(pytester, monkeypatch):
    """-n 2, --plot-dir and --report-json relative to the run's folder: the workers' plots land
    there, one per failing test, and the controller's report links them."""
    # pytester's HOME is a fresh folder: keep matplotlib's font cache (else each process rebuilds it)
    monkeypatch.setenv("MPLCONFIGDIR", MPL_CACHE)
    r = pytester.runpytest_subprocess(
        str(CONFORMANCE_DIR), "--adapter", f"{BROKEN}:PairingSwapped", "-p", "no:cacheprovider",
        "--import-mode=importlib", "-n", "2", "-k", "rope-tiny-half", "--plot-dir", "plots",
        "--report-json", "r.json")
    assert r.ret == 1, r.stdout.str()[-2000:]
    report = pytester.path / "r.json"
    recs = json.loads(report.read_text())["results"]
    _plotted(report, recs)
    links = [x["plot"] for x in recs if x["plot"]]
    assert len(links) >= 4 and len(set(links)) == len(links)
    assert sorted(p.name for p in (pytester.path / "plots").iterdir()) == sorted(Path(x).name for x in links)


# ---- missing matplotlib and usage errors -----------------------------------------------------------


def test_missing_matplotlib_names_the_docs_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(fp.PlotsUnavailable, match=r"pip install 'posenc-conformance\[docs\]'"):
        fp.require_matplotlib()


def test_missing_matplotlib_is_a_usage_error_at_startup(tmp_path):
    """In a process where matplotlib cannot be imported, --plot-dir fails before any test runs
    (exit status 4), naming the extra; no plot folder is made."""
    code = ("import sys; sys.modules['matplotlib'] = None; import pytest; "
            f"sys.exit(pytest.main([{str(CONFORMANCE_DIR)!r}, '--adapter', {BROKEN + ':PairingSwapped'!r}, "
            "'-p', 'no:cacheprovider', '-p', 'no:xdist', '--import-mode=importlib', '--posenc-isolation', 'none', "
            f"'-k', 'rope-tiny-half', '--plot-dir', {str(tmp_path / 'plots')!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
    assert "posenc-conformance[docs]" in p.stderr and "--plot-dir" in p.stderr
    assert "passed" not in p.stdout and "failed" not in p.stdout
    assert not (tmp_path / "plots").exists()


def test_plot_dir_with_model_is_a_usage_error(pytester):
    r = pytester.runpytest_inprocess(str(CONFORMANCE_DIR), "--model", "hf:llama", "--plot-dir",
                                     str(pytester.path / "plots"), "-p", "no:cacheprovider",
                                     "--import-mode=importlib")
    assert r.ret == 4
    assert "--plot-dir: the model-level suite" in r.stderr.str()


# ---- the reductions the plot draws ------------------------------------------------------------------


def test_series_reduces_by_position_and_by_channel():
    """[B, Hq, T, D] = [1, 2, 3, 4]: max over the other axes, per T and per D; the mutant likewise."""
    ref = np.zeros((1, 2, 3, 4))
    bound = np.full(ref.shape, 0.5)
    out = ref.copy()
    out[0, 1, 2, 3] = 2.5   # ratio 5 at t=2, d=3
    out[0, 0, 0, 1] = -1.0  # ratio 2 at t=0, d=1
    out[0, 0, 2, 1] = 0.25  # ratio 0.5 at t=2, d=1 (below the other at d=1 and t=2)
    mut = ref.copy()
    mut[0, 0, 1, 0] = 0.5   # ratio 1 at t=1, d=0
    s = fp.series("q", "[B, Hq, T, D]", ref, out, bound, mutant=mut)
    assert (s.axes.position, s.axes.feature) == (2, 3)
    assert s.axes.feature_label.startswith("channel d")
    np.testing.assert_array_equal(s.by_position, [2.0, 0.0, 5.0])
    np.testing.assert_array_equal(s.by_feature, [0.0, 2.0, 0.0, 5.0])
    np.testing.assert_array_equal(s.mutant_by_position, [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(s.mutant_by_feature, [1.0, 0.0, 0.0, 0.0])
    assert s.worst == 5.0


def test_series_of_cos_is_by_pair_and_of_a_bias_by_head():
    ref = np.zeros((1, 2, 3))  # [B, T, pair_dim // 2]
    out = ref.copy()
    out[0, 1, 2] = 3.0
    s = fp.series("cos", "[B, T, pair_dim // 2]", ref, out, 1.0)
    assert s.axes.feature_label == "pair i"
    np.testing.assert_array_equal(s.by_position, [0.0, 3.0])
    np.testing.assert_array_equal(s.by_feature, [0.0, 0.0, 3.0])
    bias = np.zeros((4, 2, 5))  # [H, query_length, key_length]
    got = bias.copy()
    got[3, 1, 4] = 7.0
    s = fp.series("bias", "[H, query_length, key_length]", bias, got, 1.0)
    assert (s.axes.position, s.axes.feature, s.axes.feature_label) == (1, 0, "head (H)")
    np.testing.assert_array_equal(s.by_position, [0.0, 7.0])
    np.testing.assert_array_equal(s.by_feature, [0.0, 0.0, 0.0, 7.0])


def test_axes_of_conditional_star_and_rank_one_shapes():
    alibi = "[B, num_heads, query_length, S] if form == 'bloom' else [num_heads, query_length, key_length]"
    assert (fp.axes_of(alibi, 4).position, fp.axes_of(alibi, 4).feature) == (2, 1)
    assert (fp.axes_of(alibi, 3).position, fp.axes_of(alibi, 3).feature) == (1, 0)
    assert (fp.axes_of("[*R, E]", 3).position, fp.axes_of("[*R, E]", 3).feature) == (0, 2)
    slopes = fp.axes_of("[num_heads]", 1)
    assert (slopes.position, slopes.feature, slopes.feature_label) == (None, 0, "head (num_heads)")
    inv = fp.axes_of("[pair_dim // 2]", 1)
    assert (inv.position, inv.feature, inv.feature_label) == (None, 0, "pair i")
    assert (fp.axes_of("[B, S - cache_length, E]", 3).position, fp.axes_of("[1, cu_seqlens[-1]]", 2).position) == (1, 1)


def test_ratio_array_follows_the_tolerance_rule():
    ref = np.array([1.0, 2.0, 3.0, 4.0])
    out = np.array([1.0, 2.5, np.nan, 4.0 + 1e-9])
    r = fp.ratio_array(ref, out, np.array([0.0, 0.25, 1.0, 1.0]))
    assert r[0] == 0.0 and r[1] == 2.0 and r[2] == np.inf and 0 < r[3] < 1e-8
    masked = fp.ratio_array(ref, out, 0.25, compared=np.array([True, False, False, True]))
    assert masked[1] == masked[2] == 0.0
    ints = fp.ratio_array(np.array([1, 2, 3]), np.array([1, 5, 3]), 0.0)
    np.testing.assert_array_equal(ints, [0.0, np.inf, 0.0])


def test_plot_names_are_safe_and_unique():
    a = fp.plot_name("test_golden[float32-x/y@A+B]", "conformance/test_golden.py::test_golden[float32-x/y@A+B]")
    b = fp.plot_name("test_golden[float32-x_y@A_B]", "conformance/test_golden.py::test_golden[float32-x_y@A_B]")
    assert a != b and a.endswith(".png")
    assert all(ch.isalnum() or ch in "._-" for ch in a + b)
    long = fp.plot_name("test_x[" + "a" * 500 + "]", "n")
    assert len(long) < 140


def test_draw_writes_a_png_from_arrays(tmp_path):
    ref = np.zeros((1, 1, 4, 2))
    out = ref + np.array([0.0, 1.0])
    s = fp.series("q", "[B, Hq, T, D]", ref, out, 0.5, mutant=out)
    s2 = fp.series("slopes", "[num_heads]", np.zeros(3), np.array([0.0, np.inf, 0.0]), 1.0)
    path = fp.draw(tmp_path / "x.png", "a title", [s, s2], "DIV-X")
    assert path.read_bytes()[:8] == PNG

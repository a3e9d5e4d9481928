"""The conformance suite itself: it passes on conforming adapters and catches broken ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import posenc.conformance
from posenc.adapters import load_adapter
from posenc.spec.errors import UsageError

BROKEN = Path(__file__).resolve().parent / "broken_adapters.py"
CONFORMANCE_DIR = Path(posenc.conformance.__file__).resolve().parent


#: The conforming adapters run whole here, at every dtype: numpy, the reference's port, which is no column of the
#: matrix (`posenc.tools.matrix.EXCLUDED`). Every other registered adapter, torch and transformers included, is
#: run at every dtype by CI's matrix step, which fails on any failure or stale cell (`posenc matrix --check`), and
#: torch at float32 by the README's first command: run here again they only cost CI time.
CONFORMING = {"numpy": "all"}


@pytest.mark.parametrize("adapter", list(CONFORMING))
def test_suite_passes_on_conforming_adapters(run_suite, adapter):
    r = run_suite(adapter, "--dtype", CONFORMING[adapter])
    o = r.parseoutcomes()
    assert r.ret == 0, r.stdout.str()[-4000:]
    assert o.get("passed", 0) > 100 and not o.get("failed")


# (adapter class, dtype, divergence the diagnosis must name, or None where the failure is structural); the
# whole-suite runs of PairingSwapped, CacheOffByOne and ClampedLookup at float32 are tests/test_isolation.py's
# parity runs (BROKEN_NAMED there), which assert the same
BROKEN_CASES = [
    ("Bf16Angles", "float32", "DIV-ROPE-BF16-ANGLE-PRODUCT"),
    ("Bf16Angles", "bfloat16", "DIV-ROPE-BF16-ANGLE-PRODUCT"),
    ("Bf16Angles", "float64", "DIV-ROPE-BF16-ANGLE-PRODUCT"),
    ("Bf16InvFreq", "float32", "DIV-ROPE-BF16-INV-FREQ"),
    ("Bf16InvFreq", "bfloat16", "DIV-ROPE-BF16-INV-FREQ"),
    ("TailRotated", "float32", "DIV-ROPE-TAIL-ROTATED"),
    ("OptOffsetZero", "float32", "DIV-LEARNED-OPT-NO-OFFSET"),
    ("TokenTypeIgnored", "bfloat16", "DIV-LEARNED-TOKEN-TYPE-IGNORED"),
    ("WrongDtype", "bfloat16", None),
    ("Transposed", "float32", None),
    ("NaNOutput", "float32", None),
    ("AlibiNaiveSlopes", "float32", "DIV-ALIBI-SLOPES-NON-POW2"),
    ("AlibiNaiveSlopes", "bfloat16", "DIV-ALIBI-SLOPES-NON-POW2"),
    ("AlibiSignFlipped", "float16", "DIV-ALIBI-SIGN"),
    ("T5RelSignFlipped", "float32", "DIV-T5-REL-SIGN"),
    ("T5CacheIgnored", "bfloat16", "DIV-T5-CACHE-IGNORED"),
    ("FairseqPadRowKept", "float32", "DIV-SIN-PAD-ROW-NOT-ZEROED"),
    ("FairseqPadRowKept", "bfloat16", "DIV-SIN-PAD-ROW-NOT-ZEROED"),
    ("RobertaArangePositions", "float32", "DIV-LEARNED-ROBERTA-ARANGE"),
    ("MRopeTemporalOnly", "float32", "DIV-MROPE-TEMPORAL-ONLY"),
    ("MRopeTemporalOnly", "bfloat16", "DIV-MROPE-TEMPORAL-ONLY"),
    ("MRopeInterleavedAsContiguous", "float32", "DIV-MROPE-INTERLEAVED-AS-CONTIGUOUS"),
    ("NopeFlagsInverted", "float32", "DIV-NOPE-FLAGS-INVERTED"),
    ("NopeStillRotates", "bfloat16", None),
]


#: The call forms of the rope goldens (test_call_form) only on the rope-tiny ones here: a broken adapter's
#: value bug fails its goldens through every form it serves, each diagnosed again (20 forms x 62 goldens);
#: the forms' own failures are the subject of tests/test_call_forms.py and tests/test_rope_forms.py.
FORMS_ON_TINY = ("-k", "not test_call_form or rope-tiny")


@pytest.mark.parametrize("name,dtype,divergence", BROKEN_CASES, ids=[f"{a}-{d}" for a, d, _ in BROKEN_CASES])
def test_suite_catches_broken_adapter(run_suite, name, dtype, divergence):
    r = run_suite(f"{BROKEN}:{name}", "--dtype", dtype, *FORMS_ON_TINY)
    out = r.stdout.str()
    assert r.ret == 1, out[-3000:]
    assert r.parseoutcomes().get("failed", 0) >= 1
    if divergence:
        assert f"diagnosis: the output matches known divergence(s):\n    {divergence}" in out or \
            f"    {divergence} (violates" in out, out[-3000:]


def test_clamped_lookup_named(run_suite):
    out = run_suite(f"{BROKEN}:ClampedLookup").stdout.str()
    assert "LEARNED-ROW-RANGE" in out and "test_row_range" in out


def test_wrong_dtype_message(run_suite):
    out = run_suite(f"{BROKEN}:WrongDtype", "--dtype", "float16").stdout.str()
    assert "has dtype float32, requested float16" in out


def test_run_that_checks_nothing_fails(run_suite):
    r = run_suite(f"{BROKEN}:NothingSupported")
    out = r.stdout.str()
    assert r.ret != 0 and "a run that checks nothing fails" in out
    assert "unsupported: adapter 'nothing-supported' does not implement rope" in out


def test_unsupported_is_reported_with_reason(run_suite):
    r = run_suite(f"{BROKEN}:NothingSupported", "-k", "sin-")
    assert "unsupported: adapter 'nothing-supported' does not implement sinusoidal" in r.stdout.str()


def test_unknown_adapter_lists_registered():
    with pytest.raises(UsageError) as e:
        load_adapter("no-such-adapter")
    for name in ("numpy", "torch", "hf-transformers"):
        assert name in str(e.value)


def test_unknown_adapter_is_usage_error(run_suite):
    r = run_suite("no-such-adapter")
    assert r.ret == 4 and "registered adapters" in r.stderr.str()


def test_unavailable_device_is_usage_error(run_suite):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present here")
    r = run_suite("torch", "--device", "cuda")
    assert r.ret == 4 and "not available" in r.stderr.str()
    r = run_suite("numpy", "--device", "cuda")
    assert r.ret == 4 and "supports cpu" in r.stderr.str()


def test_bad_dtype_is_usage_error(run_suite):
    r = run_suite("numpy", "--dtype", "float8")
    assert r.ret == 4 and "unknown dtype" in r.stderr.str()


def test_missing_adapter_option_is_usage_error(pytester):
    r = pytester.runpytest_inprocess(str(CONFORMANCE_DIR), "-p", "no:cacheprovider", "--import-mode=importlib")
    assert r.ret != 0 and "needs --adapter" in (r.stdout.str() + r.stderr.str())


def test_adapter_by_module_attr_and_path(run_suite):
    assert run_suite("posenc.adapters.numpy_adapter:NumpyAdapter", "-k", "tiny").ret == 0
    assert run_suite(f"{BROKEN}:PairingSwapped", "-k", "sin- and not rope").ret == 0  # only RoPE is broken there


def test_report_header_names_everything(run_suite):
    out = run_suite("torch", "-k", "rope-tiny-half", "-v").stdout.str()
    from posenc.spec import SPEC_VERSION
    assert f"posenc spec {SPEC_VERSION}: adapter torch (torch; torch " in out
    assert "posenc device cpu, dtypes float32" in out


def _write_expectations(tmp_path, lines: str):
    p = tmp_path / "exp.yaml"
    p.write_text("format: 2\nexpected_failures:\n" + lines)
    return str(p)


def test_expectation_file_turns_known_failure_into_divergence(run_suite, tmp_path):
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: rope-tiny-half
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: deliberately broken adapter
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_golden and rope-tiny-half", "--expectations", exp)
    assert r.ret == 0 and r.parseoutcomes().get("xfailed") == 1, r.stdout.str()[-2000:]


def test_expectation_that_passes_is_an_error(run_suite, tmp_path):
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: rope-tiny-half
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: claims a failure that does not happen
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite("torch", "-k", "test_golden and rope-tiny-half", "--expectations", exp)
    assert r.ret == 1 and "XPASS(strict)" in r.stdout.str()


def test_stale_expectation_line_fails(run_suite, tmp_path):
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: no-such-case
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: stale
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite("torch", "--expectations", exp)
    assert r.ret == 4 and "stale line" in r.stderr.str()


def test_expectation_for_other_library_version_fails(run_suite, tmp_path):
    exp = _write_expectations(tmp_path, """
  - case: rope-tiny-half
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: old
    library: torch
    library_version: "1.0.0"
""")
    r = run_suite("torch", "--expectations", exp)
    assert r.ret == 4 and "re-verify" in r.stderr.str()


def test_expectation_with_unknown_clause_fails(run_suite, tmp_path):
    exp = _write_expectations(tmp_path, """
  - case: x
    check: golden
    dtypes: [float32]
    clause: ROPE-NOPE
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: e
    library: torch
    library_version: "1"
""")
    r = run_suite("torch", "--expectations", exp)
    assert r.ret == 4 and "expected_failures.0.clause: unknown clause 'ROPE-NOPE'" in r.stderr.str()


def test_tampered_golden_is_named(run_suite, monkeypatch, tmp_path):
    import shutil

    from posenc.harness import golden
    from posenc.harness import failure as suite
    d = tmp_path / "golden"
    shutil.copytree(golden.GOLDEN_DIR, d)
    f = d / "rope-tiny-half.npz"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    monkeypatch.setattr(golden, "GOLDEN_DIR", d)
    suite._manifest.cache_clear()
    suite.load_golden.cache_clear()
    monkeypatch.setattr(suite, "_manifest", lambda directory: golden.read_manifest(d))
    orig = golden.load
    monkeypatch.setattr(golden, "load", lambda case, directory=d, manifest=None: orig(case, d, manifest))
    r = run_suite("torch", "-k", "test_golden and rope-tiny-half")
    suite.load_golden.cache_clear()
    assert r.ret == 1 and "rope-tiny-half.npz: sha256 does not match the manifest" in r.stdout.str()


def test_golden_edited_with_its_manifest_is_a_kit_error(run_suite, monkeypatch, tmp_path):
    """An output scaled in the npz with the manifest's sha256 rewritten (so only a recomputation
    can tell) is refused on load: a kit error naming the file, in the summary and the report, never
    a failure of the adapter or a clause; an adapter that matches the edit gains nothing."""
    import hashlib
    import io
    import json
    import shutil

    from posenc.harness import golden
    from posenc.harness import failure as suite
    d = tmp_path / "golden"
    shutil.copytree(golden.GOLDEN_DIR, d)
    f = d / "rope-tiny-half.npz"
    with np.load(f, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["output/q"] = arrays["output/q"] * 2
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    f.write_bytes(buf.getvalue())
    m = json.loads((d / "manifest.json").read_text())
    next(e for e in m["cases"] if e["id"] == "rope-tiny-half").update(sha256=hashlib.sha256(buf.getvalue()).hexdigest(),
                                                                     size=len(buf.getvalue()))
    (d / "manifest.json").write_text(json.dumps(m))
    suite._manifest.cache_clear()
    suite.load_golden.cache_clear()
    monkeypatch.setattr(suite, "_manifest", lambda directory: golden.read_manifest(d))
    orig = golden.load
    monkeypatch.setattr(golden, "load", lambda case, directory=d, manifest=None: orig(case, d, manifest))
    rep = tmp_path / "r.json"
    r = run_suite("torch", "--report-json", str(rep), "-k", "test_golden and (rope-tiny-half or rope-llama3-8b)")
    suite.load_golden.cache_clear()
    out = r.stdout.str()
    assert r.ret == 1, out[-2000:]
    assert "posenc kit error" in out and "rope-tiny-half.npz: output 'q' differs from the reference's recomputation" in out
    assert "1 kit error(s)" in out
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines() if ln.startswith("ROPE-PAIR-HALF ")}
    assert rows["ROPE-PAIR-HALF"][1] == "0", rows  # not booked as a failure of the clause
    recs = [x for x in json.loads(rep.read_text())["results"] if x["case"] == "rope-tiny-half"]
    assert recs and all(x["outcome"] == "error" and "recomputation" in x["reason"] for x in recs), recs


def test_expectation_with_the_wrong_divergence_fails(run_suite, tmp_path):
    """A listed failure that fails for another reason is not hidden: the divergence is checked."""
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: rope-llama3-8b
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: claims a pairing bug where the angles are in bf16
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite(f"{BROKEN}:Bf16Angles", "-k", "test_golden and llama3-8b and not scattered", "--expectations", exp)
    out = r.stdout.str()
    assert r.ret == 1 and "expected divergence DIV-ROPE-PAIRING-SWAPPED" in out
    assert "but the output matches DIV-ROPE-BF16-ANGLE-PRODUCT" in out


@pytest.mark.parametrize("divergence", ["DIV-SIN-LAYOUT-SWAPPED", "DIV-UNNAMED-ANYTHING"])
def test_expectation_never_explains_an_exception(run_suite, tmp_path, divergence):
    """An adapter that raises (or returns a malformed output) reaches no verdict on the values:
    no expectation line, named or unnamed, turns that into an expected divergence."""
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: sin-interleaved-d8
    check: golden
    dtypes: [bfloat16]
    clause: SIN-VASWANI-INTERLEAVED
    divergence: {divergence}
    evidence: claims a divergence where the adapter returns the wrong dtype
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite(f"{BROKEN}:WrongDtype", "-k", "test_golden and sin-interleaved-d8", "--dtype", "bfloat16",
                  "--expectations", exp)
    out = r.stdout.str()
    assert r.ret == 1 and "did not reach a verdict on the values" in out, out[-2000:]


def test_expected_divergence_counts_under_its_recorded_clause(run_suite, tmp_path):
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: rope-neox-20b
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: deliberately broken adapter
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_golden and rope-neox-20b", "--expectations", exp)
    lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.lines if ln.startswith("ROPE-")}
    assert r.ret == 0 and lines["ROPE-PAIR-HALF"] == ["0", "0", "1", "0"], r.stdout.str()[-1500:]
    assert "ROPE-PARTIAL" not in lines  # neither checked nor violated here: the file names the clause


def test_expectation_clause_must_belong_to_the_test(run_suite, tmp_path):
    import torch
    exp = _write_expectations(tmp_path, f"""
  - case: rope-tiny-half
    check: golden
    dtypes: [float32]
    clause: LEARNED-OPT-OFFSET
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: wrong clause
    library: torch
    library_version: "{torch.__version__}"
""")
    r = run_suite("torch", "--expectations", exp)
    assert r.ret == 4 and "clause LEARNED-OPT-OFFSET is neither checked by the test" in r.stderr.str()


def test_failures_are_counted_under_the_diagnosed_clause(run_suite, tmp_path):
    """Every failure the diagnosis names a bf16 divergence for is booked under ROPE-PRECISION alone, though
    its case lists the pairing, the angle and more; one it names nothing for (the adapter's bf16 base
    frequencies where dynamic NTK and LongRoPE recompute theirs per call: another bug) under all of them."""
    report = tmp_path / "r.json"
    out = run_suite(f"{BROKEN}:Bf16Angles", "-k", "test_golden", "--report-json", str(report)).stdout.str()
    row = next(line for line in out.splitlines() if line.startswith("ROPE-PRECISION "))
    assert int(row.split()[2]) >= 10  # failed column
    failed = [r for r in json.loads(report.read_text())["results"] if r["outcome"] == "failed"]
    named = [r for r in failed if r["diagnosis"]]
    assert len(named) >= 10 and all(r["violated"] == ["ROPE-PRECISION"] for r in named), named[:2]
    assert all(sorted(r["violated"]) == sorted(r["clauses"]) for r in failed if not r["diagnosis"])


def test_decode_steps_are_diagnosed(run_suite):
    out = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_cache_equals_prefill and llama3-8b and not scattered").stdout.str()
    assert "decode step 0 of one prepared operation" in out
    assert "    DIV-ROPE-PAIRING-SWAPPED (violates" in out


def test_selecting_only_failures_is_not_called_empty(run_suite):
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_golden and rope-tiny-half")
    assert r.ret == 1 and "checks nothing" not in r.stdout.str()


def test_probe_says_when_nothing_rotates(run_suite):
    out = run_suite(f"{BROKEN}:NoRotation", "-k", "test_pairing_probe and tiny-half").stdout.str()
    assert "nothing but index 0 is lit: e_0 was not rotated at position 1" in out


def test_the_pairing_probe_says_a_small_rotation_is_one_at_bf16(run_suite):
    """Positions / 40: at bf16 the probe's lit threshold (0.07) is above sin(1/40); the probe says
    e_0 turned by about 0.025 rad, never that it was not rotated."""
    out = run_suite(f"{BROKEN}:PositionsCondensed", "--dtype", "bfloat16",
                    "-k", "test_pairing_probe and rope-tiny-half").stdout.str()
    assert "e_0 turned by about 0.025 rad where 1 rad is due (index 4 holds 0.025" in out, out[-3000:]
    assert "was not rotated" not in out


def test_exception_in_an_operation_names_the_clauses(run_suite):
    out = run_suite(f"{BROKEN}:OptOffsetZeroChecked", "-k", "test_golden and opt-125m-embeddings and not end").stdout.str()
    assert "LEARNED-OPT-POSITIONS, LEARNED-OPT-OFFSET: broken-opt-offset-0-checked fails case" in out
    assert "PositionOutOfRange: LEARNED-ROW-RANGE" in out


def test_left_pad_fill_is_opt_in(run_suite):
    out = run_suite("torch", "-v").stdout.str()
    assert "opt-in clauses not requested: POS-LEFT-PAD-FILL" in out and "test_left_pad_fill" not in out
    r = run_suite("hf-transformers", "-k", "left_pad_fill", "--left-pad-fill", "1")
    assert r.ret == 1 and "padded slots must hold 1" in r.stdout.str()
    assert run_suite("hf-transformers", "-k", "left_pad_fill", "--left-pad-fill", "0").ret == 0


def test_a_skip_inside_the_adapter_is_a_failure(run_suite):
    r = run_suite(f"{BROKEN}:ImportOrSkip", "-k", "rope-tiny-half")
    out = r.stdout.str()
    assert r.ret == 1 and "only posenc.adapters.Unsupported reports an unsupported case" in out


_LINE = "case: x, check: golden, dtypes: [float32], clause: ROPE-PAIR-HALF, divergence: DIV-ROPE-PAIRING-SWAPPED, evidence: e"


@pytest.mark.parametrize("body,message", [
    ("format: 2\nexpected_failure: []\n", "expected_failure: Extra inputs are not permitted"),
    ("format: 2\nexpected_failures:\n  - {case: 12, check: golden, dtypes: [float32], clause: ROPE-PAIR-HALF, "
     "divergence: DIV-ROPE-PAIRING-SWAPPED, evidence: e, library: torch, library_version: '1'}\n",
     "expected_failures.0.case: Input should be a valid string"),
    ("format: 2\nexpected_failures:\n  - {" + _LINE + ", library: flash_attn, library_version: '1'}\n",
     "reports no version for 'flash_attn'"),
    ("format: 2\nexpected_failures:\n  - {" + _LINE.replace("float32]", "float32, float32]")
     + ", library: torch, library_version: '1'}\n", "a dtype is listed twice"),
    ("format: 3\nexpected_failures: []\n", "format: Input should be 2"),
    ("expected_failures: []\n", "run `posenc expectations convert "),
])
def test_malformed_expectation_files_are_named(run_suite, tmp_path, body, message):
    p = tmp_path / "exp.yaml"
    p.write_text(body)
    r = run_suite("torch", "--expectations", str(p))
    assert r.ret == 4 and message in r.stderr.str(), r.stderr.str()


def test_expectation_for_an_unsupported_test_fails(run_suite, tmp_path):
    exp = _write_expectations(tmp_path, f"""
  - case: rope-tiny-half
    check: golden
    dtypes: [float32]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: the adapter cannot even run it
    library: torch
    library_version: "{__import__('torch').__version__}"
""")
    r = run_suite(f"{BROKEN}:NothingSupported", "-k", "test_golden and rope-tiny-half", "--expectations", exp)
    assert r.ret == 1 and "but reported Skipped: unsupported: adapter" in r.stdout.str()


def test_stale_line_for_a_dtype_not_run_is_still_stale(run_suite, tmp_path):
    exp = _write_expectations(tmp_path, f"""
  - case: no-such-case
    check: golden
    dtypes: [bfloat16]
    clause: ROPE-PAIR-HALF
    divergence: DIV-ROPE-PAIRING-SWAPPED
    evidence: stale
    library: torch
    library_version: "{__import__('torch').__version__}"
""")
    r = run_suite("torch", "--expectations", exp)
    assert r.ret == 4 and "stale line" in r.stderr.str()


def test_in_place_adapter_is_named_and_cannot_touch_the_goldens(run_suite):
    """A RoPE kernel that writes its (correct) result into q and k fails with the in-place message
    at every dtype, and the kit's cached golden inputs are unchanged afterwards: float64 included,
    where torch.from_numpy would share memory with them."""
    from posenc.harness import golden
    from posenc.harness import failure as suite
    r = run_suite(f"{BROKEN}:InPlaceRope", "--dtype", "float64,float32", "-k", "rope-llama3-8b and not generated")
    out = r.stdout.str()
    assert r.ret == 1 and "modified its input 'q' in place" in out, out[-3000:]
    assert "ROPE-PAIR-HALF" in out and "posenc rerun" in out
    failed = r.parseoutcomes()["failed"]
    assert failed >= 2 and out.count("modified its input") >= failed
    g = suite.load_golden("rope-llama3-8b")
    fresh = golden.case_inputs(g.case)
    for name, a in g.inputs.items():
        assert np.array_equal(a, fresh[name]), name
        assert not a.flags.writeable


def test_non_native_output_is_a_contract_failure(run_suite):
    """A NumPy array from a torch adapter: a clause-named failure saying what the output is, in
    golden and generated tests alike (no AttributeError from inside the kit)."""
    r = run_suite(f"{BROKEN}:NumpyOutput", "-k", "(sin- and test_golden) or (test_generated and sinusoidal.table)")
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes()["failed"] >= 2
    assert "output 'pe' is a numpy.ndarray, not the adapter's native array type (torch.Tensor" in out, out[-3000:]
    assert "AttributeError" not in out


@pytest.mark.parametrize("source,message", [
    ("def broken(:\n", "importing {path} raised SyntaxError"),
    ("import no_such_module_posenc\n", "importing {path} raised ModuleNotFoundError: No module named 'no_such_module_posenc'"),
    ("from posenc.adapters.torch_adapter import TorchAdapter\n"
     "class A(TorchAdapter):\n    def __init__(self):\n        raise RuntimeError('no GPU context')\nADAPTER = A\n",
     "constructing the adapter raised RuntimeError: no GPU context"),
    ("from posenc.adapters.torch_adapter import TorchAdapter\n"
     "class A(TorchAdapter):\n    def versions(self):\n        raise OSError('no metadata')\nADAPTER = A\n",
     "versions() raised OSError: no metadata"),
])
def test_a_broken_adapter_file_is_a_one_line_usage_error(run_suite, tmp_path, source, message):
    path = tmp_path / "my_adapter.py"
    path.write_text(source)
    r = run_suite(str(path))
    err = r.stderr.str()
    assert r.ret == 4 and message.format(path=path) in err, err
    assert "INTERNALERROR" not in err and "Traceback" not in err


def test_an_unwritable_report_path_is_refused_before_the_run(run_suite, tmp_path):
    r = run_suite("torch", "--report-json", str(tmp_path / "no" / "such" / "dir" / "r.json"))
    assert r.ret == 4 and "--report-json" in r.stderr.str() and "does not exist" in r.stderr.str()
    assert "passed" not in r.stdout.str()


def test_wrong_dtype_on_decode_steps_is_a_contract_failure(run_suite):
    """The decode check calls one prepared RoPE step by step: its outputs are contract-checked too."""
    r = run_suite(f"{BROKEN}:UpcastOnDecode", "--dtype", "bfloat16", "-k", "cache_equals_prefill and rope-llama3-8b")
    out = r.stdout.str()
    assert r.ret == 1 and "output 'q' has dtype float32, requested bfloat16" in out, out[-2000:]


def test_pytest_outcomes_and_base_exceptions_from_an_operation_are_failures(run_suite, tmp_path):
    import json
    rep = tmp_path / "r.json"
    r = run_suite(f"{BROKEN}:RaisesPytestOutcomes", "--report-json", str(rep),
                  "-k", "test_golden and (sin-interleaved-d8 or alibi-slopes-8 or t5-buckets-figures-bidirectional)")
    out = r.stdout.str()
    assert r.ret == 1 and "INTERNALERROR" not in out + r.stderr.str()
    assert "the adapter raised pytest's XFailed (not today)" in out
    assert "SystemExit: 3" in out and "GeneratorExit" in out
    recs = json.loads(rep.read_text())["results"]
    assert recs and all(x["outcome"] == "failed" and x["raised"] for x in recs), recs


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_adapter_rounding_its_inputs_to_bf16_fails_the_generated_cases(run_suite, dtype):
    """Golden inputs are on a 1/64 grid (exact in every dtype, so one file serves all four);
    generated cases at float32 / float64 draw full-precision inputs, so rounding them to bf16
    inside the adapter is caught wherever an operation takes float inputs."""
    r = run_suite(f"{BROKEN}:RoundsInputsToBf16", "--dtype", dtype, "-k",
                  "test_generated and (rope.apply or learned.gpt2 or t5.bias or attention.probs)")
    out = r.stdout.str()
    for op in ("rope.apply", "learned.gpt2", "t5.bias", "attention.probs"):
        assert f"test_generated.py::test_generated[{dtype}-{op}]" in out.split("short test summary")[-1], op
    assert r.ret == 1 and "passed" not in out.splitlines()[-1]


def test_generated_inputs_are_full_precision_only_at_float32_and_float64():
    from posenc.harness.generation import drawn_examples, example_golden
    import ml_dtypes
    c, seed = drawn_examples("rope.apply", "float32", 1)[0]
    for dtype, exact_bf16 in (("float32", False), ("float64", False), ("bfloat16", True), ("float16", True)):
        q = example_golden(c, seed, dtype).inputs["q"]
        assert np.array_equal(q.astype(ml_dtypes.bfloat16).astype(np.float64), q) is exact_bf16, dtype
    q32 = example_golden(c, seed, "float32").inputs["q"]
    assert np.array_equal(q32.astype(np.float32).astype(np.float64), q32)  # the reference sees what the adapter gets

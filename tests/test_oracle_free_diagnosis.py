"""Oracle-free checks name the bug: a failure is diagnosed on the operation calls the check made
(each compared with the reference on the same inputs, then with every divergence's mutant), and
the diagnosis considers every divergence with a mutant form for the operation, whatever family
its clause is in (a RoPE precision bug seen in a SCALE-* or M-RoPE case)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posenc import families
from posenc.harness import golden
from posenc.harness import diagnosis, runner
from posenc.registry import all_cases
from posenc.harness.failure import ConformanceFailure, rediagnosed

BROKEN = str(Path(__file__).resolve().parent / "broken_adapters.py")
POSITIONS = f"{BROKEN}:PositionsInActivationDtype"


def _failures(run_suite, tmp_path, adapter: str, *args) -> dict:
    out = tmp_path / "report.json"
    r = run_suite(adapter, "--report-json", str(out), *args)
    assert r.ret == 1, r.stdout.str()[-3000:]
    rep = json.loads(out.read_text())
    return {t["test_id"]: t for t in rep["results"] if t["outcome"] == "failed"}, r.stdout.str()


@pytest.mark.parametrize("dtype, divergence", [("bfloat16", "DIV-ROPE-BF16-POSITIONS"),
                                               ("float16", "DIV-ROPE-F16-POSITIONS")])
def test_relative_positions_check_names_the_precision_bug(run_suite, tmp_path, dtype, divergence):
    """rotary-embedding-torch's bug (positions built in the activation dtype) fails the relative-
    position check, which has no golden: the check's six calls say which bug it is."""
    fails, text = _failures(run_suite, tmp_path, POSITIONS, "--dtype", dtype,
                            "-k", "test_relative and rope-tiny-interleaved")
    (t,) = fails.values()
    # the check's calls start each row at its own position, so rounding the row's offset first
    # (DIV-ROPE-POSITION-OFFSET-ROUNDED) gives the same positions there: both are named, nothing else
    assert sorted(d["divergence"] for d in t["diagnosis"]) == sorted([divergence, "DIV-ROPE-POSITION-OFFSET-ROUNDED"])
    assert t["violated"] == ["ROPE-PRECISION"]  # the clause the bug violates, not the check's ROPE-ANGLE
    assert "compared with the reference on the same inputs: out of tolerance in" in text
    assert "of the check's 6 operation call(s)" in text and "position_ids [[" in text
    assert t["reason"].startswith("<R(m)q, R(n)k> must depend only on m - n")  # the check's own verdict first


def test_pair_norm_and_permutation_checks_name_it_too(run_suite, tmp_path):
    fails, _ = _failures(run_suite, tmp_path, POSITIONS, "--dtype", "float16",
                         "-k", "(test_pair_norm or test_permutation) and rope-llama4-interleaved")
    assert len(fails) == 2
    for t in fails.values():
        assert "DIV-ROPE-F16-POSITIONS" in [d["divergence"] for d in t["diagnosis"]], t


def test_a_precision_bug_is_named_in_scale_and_mrope_cases(run_suite, tmp_path):
    """Before, only divergences of the case's own clause families were tried: a ROPE-PRECISION bug
    in a SCALE-YARN golden, a dynamic-NTK call sequence (one stateful frequency provider across
    calls) or the M-RoPE text check (its 1-D RoPE calls) had no name."""
    fails, _ = _failures(run_suite, tmp_path, POSITIONS, "--dtype", "bfloat16,float16", "-k",
                         "(test_golden and (scale-yarn-qwen2.5 or scale-dynamic-grow)) or "
                         "(test_mrope_text_reduces_to_rope and mrope-qwen2-vl-text)")
    want = {"bfloat16": "DIV-ROPE-BF16-POSITIONS", "float16": "DIV-ROPE-F16-POSITIONS"}
    seen = set()
    for tid, t in fails.items():
        assert want[t["dtype"]] in [d["divergence"] for d in t["diagnosis"]], (tid, t["diagnosis"], t["inferred"])
        seen.add((t["check"], t["case"]))
    assert {("mrope_text_reduces_to_rope", "mrope-qwen2-vl-text"), ("golden", "scale-dynamic-grow")} <= seen


def test_decode_steps_are_diagnosed(run_suite, tmp_path):
    """A check that decodes step by step through a prepared object records each step as an
    operation call: the cache off-by-one is named on the decode check as on the golden."""
    fails, text = _failures(run_suite, tmp_path, f"{BROKEN}:CacheOffByOne", "--dtype", "float32",
                            "-k", "test_cache_equals_prefill and pos-decode")
    assert fails and all([d["divergence"] for d in t["diagnosis"]] == ["DIV-POS-CACHE-OFF-BY-ONE"]
                         for t in fails.values())
    assert "(position_ids.decode, batch 3, seq_len 1, cache_length 7)" in text


def test_undiagnosed_steps_say_what_the_output_is(run_suite, tmp_path):
    """No divergence reproduces OPT positions +1 on decode steps: the failure says so and infers it."""
    fails, text = _failures(run_suite, tmp_path, f"{BROKEN}:CacheOffByOne", "--dtype", "float32",
                            "-k", "test_cache_equals_prefill and opt-125m-positions-cache")
    (t,) = fails.values()
    assert t["diagnosis"] == [] and t["violated"] == ["LEARNED-OPT-POSITIONS"]
    assert "no known divergence reproduces the outputs of all of the check's calls" in text
    assert "inferred (call 1): positions are the specified ones +1 everywhere" in text


# ---- rediagnosed / diagnose_calls directly -------------------------------------------------------

def _case(cid):
    return next(c for c in all_cases() if c.id == cid)


def _failure(case, diagnosed=False):
    return ConformanceFailure(f"{case.clauses[0]}: x fails case {case.id}", case.clauses, diagnosed=diagnosed)


def _call(case, outputs):
    g = golden.load(case)
    return runner.Call(case.op, case.params, dict(g.inputs), outputs)


def test_calls_within_the_reference_tolerance_add_nothing():
    """The check's own rule failed where no call is out of the reference's tolerance: no second
    verdict is made up (the failure is raised as it was)."""
    c = _case("rope-tiny-interleaved")
    g = golden.load(c)
    e = _failure(c)
    assert rediagnosed(e, c, [_call(c, {n: np.asarray(v) for n, v in g.outputs.items()})], "float32") is None
    assert rediagnosed(e, c, [], "float32") is None


def test_a_failure_already_compared_with_the_reference_is_not_diagnosed_twice():
    c = _case("rope-tiny-interleaved")
    g = golden.load(c)
    wrong = {n: -np.asarray(v) for n, v in g.outputs.items()}
    assert rediagnosed(_failure(c, diagnosed=True), c, [_call(c, wrong)], "float32") is None
    again = rediagnosed(_failure(c), c, [_call(c, wrong)], "float32")
    assert again is not None and again.diagnosed and "out of tolerance in 1 of the check's 1" in again.msg


def test_a_divergence_must_reproduce_every_call():
    """Two calls: one the pairing-swapped mutant reproduces, one it does not (the reference's
    output, negated): no match, though the first call alone would name it."""
    c = _case("rope-tiny-half")
    g = golden.load(c)
    d = families.spec().divergences["DIV-ROPE-PAIRING-SWAPPED"]
    swapped = diagnosis.mutant_outputs(d, g, "float32")
    one = diagnosis.diagnose_calls(families.spec(), c, [_call(c, swapped)], "float32")
    assert "DIV-ROPE-PAIRING-SWAPPED" in [m.divergence for m in one.matches]
    neg = {n: -np.asarray(v) for n, v in g.outputs.items()}
    two = diagnosis.diagnose_calls(families.spec(), c, [_call(c, swapped), _call(c, neg)], "float32")
    assert two.wrong == (0, 1) and "DIV-ROPE-PAIRING-SWAPPED" not in [m.divergence for m in two.matches]


def test_a_call_of_an_operation_without_a_mutant_form_must_be_the_reference():
    """MutantAdapter's rule: where the mutant has no form, the output is the reference's; a wrong
    output there is not explained by that divergence."""
    c = _case("rope-tiny-half")
    g = golden.load(c)
    d = families.spec().divergences["DIV-ROPE-PAIRING-SWAPPED"]
    swapped = diagnosis.mutant_outputs(d, g, "float32")
    pos = _case("pos-decode")
    pg = golden.load(pos)
    right = runner.Call(pos.op, pos.params, dict(pg.inputs), {n: np.asarray(v) for n, v in pg.outputs.items()})
    off = runner.Call(pos.op, pos.params, dict(pg.inputs), {n: np.asarray(v) + 1 for n, v in pg.outputs.items()})
    names = [m.divergence for m in diagnosis.diagnose_calls(families.spec(), c, [_call(c, swapped), right],
                                                         "float32").matches]
    assert "DIV-ROPE-PAIRING-SWAPPED" in names
    names = [m.divergence for m in diagnosis.diagnose_calls(families.spec(), c, [_call(c, swapped), off],
                                                         "float32").matches]
    assert "DIV-ROPE-PAIRING-SWAPPED" not in names


# ---- the oracle-free RoPE checks read the k output too ------------------------------------------

@pytest.mark.parametrize("adapter", ["KNotRotated", "KRotatedBackwards"])
def test_relative_positions_check_reads_k_through_its_own_slot(run_suite, tmp_path, adapter):
    """<R(m)q, R(n)k> takes R(n)k from the k output: k left unrotated, or rotated by -phi (scores
    then depend on m + n), fails it; the pairing probe reads k as well: an unrotated k lights
    nothing, a k rotated by -phi lights the right index with the wrong sign (the direction,
    ROPE-ROTATION-NEGATIVE's concern); -phi keeps every pair norm."""
    fails, text = _failures(run_suite, tmp_path, f"{BROKEN}:{adapter}", "--dtype", "float32",
                            "-k", "rope-tiny-half and (test_relative or test_pairing_probe or test_pair_norm)")
    assert {t["check"] for t in fails.values()} == {"relative", "pairing_probe"}
    if adapter == "KNotRotated":
        assert all([d["divergence"] for d in t["diagnosis"]] == ["DIV-ROPE-K-NOT-ROTATED"] for t in fails.values())
        assert "k: half pairing: e_0 at position 1 must light index 4" in text
    else:
        assert "inferred (call 1): k only (q within tolerance): sin has the wrong sign" in text
        assert "k: e_0 at position 1 must light index 4 with 0.8415 (rotation positive); got -0.8415: the pair " \
               "turns the other way" in text


def test_a_nan_output_never_makes_the_allowed_difference_nan(run_suite, tmp_path):
    fails, text = _failures(run_suite, tmp_path, POSITIONS, "--dtype", "float16",
                            "-k", "test_relative and rope-tiny-half")
    assert "shifted by 65536 gives nan (allowed difference nan)" not in text
    assert "shifted by 65536 gives nan (allowed difference " in text


# ---- a diagnosis the run contradicts ----------------------------------------------------------

def test_a_diagnosis_contradicted_by_a_passing_golden_is_flagged(run_suite, tmp_path):
    """+1 on every position, but only in calls that reach 60000: the long cases match
    DIV-ROPE-POSITIONS-OFF-BY-ONE exactly, the short ones pass -- which that divergence's mutant
    would fail.  The summary says so; the verdicts stay as they are."""
    fails, text = _failures(run_suite, tmp_path, f"{BROKEN}:OffByOneWhenLong", "--dtype", "float32",
                            "-k", "test_golden and (rope-llama3-8b or rope-tiny-half)")
    assert ["DIV-ROPE-POSITIONS-OFF-BY-ONE"] in [[d["divergence"] for d in t["diagnosis"]] for t in fails.values()]
    assert "posenc: diagnoses this run contradicts" in text
    assert "DIV-ROPE-POSITIONS-OFF-BY-ONE (named for 2 failure(s) at float32): its mutant fails golden case " \
           "rope-tiny-half, which passed" in text


def test_only_goldens_of_the_failing_kind_of_case_refute(run_suite, tmp_path):
    """A pairing swapped under YaRN only: the YaRN goldens name DIV-ROPE-PAIRING-SWAPPED; the
    default-RoPE golden passes and the divergence's mutant would fail it, but it is another kind of
    case (rope_type default), so it refutes nothing.  The failures' parameters are in the report."""
    out = tmp_path / "report.json"
    r = run_suite(f"{BROKEN}:PairingSwappedUnderYarn", "--dtype", "float32", "--report-json", str(out),
                  "-k", "test_golden and (scale-yarn-qwen2.5 or rope-tiny-half)")
    rep = json.loads(out.read_text())
    got = {t["case"]: t for t in rep["results"]}
    assert got["rope-tiny-half"]["outcome"] == "passed" and got["rope-tiny-half"]["params"] is None
    yarn = got["scale-yarn-qwen2.5"]
    assert yarn["outcome"] == "failed" and yarn["diagnosis"][0]["divergence"] == "DIV-ROPE-PAIRING-SWAPPED"
    assert yarn["params"]["rope_type"] == "yarn" and yarn["params"]["pairing"] == "half"
    assert r.ret == 1 and rep["contradicted"] == [] and "diagnoses this run contradicts" not in r.stdout.str()


def test_a_real_bug_is_not_flagged_as_contradicted(run_suite, tmp_path):
    out = tmp_path / "report.json"
    r = run_suite(f"{BROKEN}:PairingSwapped", "--report-json", str(out), "-k", "test_golden and rope-")
    rep = json.loads(out.read_text())
    assert r.ret == 1 and any(t["diagnosis"] for t in rep["results"])
    assert rep["contradicted"] == [] and "diagnoses this run contradicts" not in r.stdout.str()


def test_a_check_s_name_its_case_s_golden_refutes_is_flagged(run_suite, tmp_path):
    """Positions x 2 look like +1 at position 1, the pairing probe's only position: the probe names
    an off-by-one, the golden of the same case (more positions) names none."""
    out = tmp_path / "report.json"
    r = run_suite(f"{BROKEN}:PositionsDoubled", "--report-json", str(out),
                  "-k", "rope-tiny-partial-half and (test_golden or test_pairing_probe)")
    rep = json.loads(out.read_text())
    probe = next(t for t in rep["results"] if t["check"] == "pairing_probe")
    name = probe["diagnosis"][0]["divergence"]  # an off-by-one: at position 1, x 2 is + 1
    assert name in ("DIV-ROPE-POSITIONS-OFF-BY-ONE", "DIV-ROPE-DECODE-OFF-BY-ONE")
    assert {"divergence": name, "dtype": "float32", "failures": 1,
            "case": "rope-tiny-partial-half", "golden": "failed without it"} in rep["contradicted"]
    assert "the golden test of case rope-tiny-partial-half failed without naming it" in r.stdout.str()


def test_a_name_a_golden_of_the_same_kind_failed_as_another_divergence_is_flagged():
    """A generated float16 rope.cos_sin failure named DIV-ROPE-F16-COS-SIN while the golden that
    separates the two (rope-cos-sin-nanochat-d20, of the same kind of case) failed as
    DIV-ROPE-F16-ANGLES only (an x-transformers trial): the golden's output is not the named mutant's.
    Where the golden's diagnosis lists the name as well, nothing is flagged."""
    from posenc.harness.failure import contradicted_diagnoses, load_golden
    params = load_golden("rope-cos-sin-nanochat-d20").case.params.model_dump(mode="json")
    gen = {"test_id": "test_generated[float16-rope.cos_sin]", "check": "generated", "case": "rope.cos_sin",
           "dtype": "float16", "outcome": "failed", "raised": False, "params": params,
           "diagnosis": [{"divergence": "DIV-ROPE-F16-COS-SIN", "violates": ["ROPE-PRECISION"], "ratio": 0.05}]}
    gold = {"test_id": "test_golden[float16-rope-cos-sin-nanochat-d20@ROPE-ANGLE]", "check": "golden",
            "case": "rope-cos-sin-nanochat-d20", "dtype": "float16", "outcome": "failed", "raised": False,
            "diagnosis": [{"divergence": "DIV-ROPE-F16-ANGLES", "violates": ["ROPE-PRECISION"], "ratio": 0.1}]}
    assert contradicted_diagnoses([gen, gold]) == [
        {"divergence": "DIV-ROPE-F16-COS-SIN", "dtype": "float16", "failures": 1, "case": "rope-cos-sin-nanochat-d20",
         "golden": "failed as DIV-ROPE-F16-ANGLES"}]
    both = {**gold, "diagnosis": gold["diagnosis"] + [{"divergence": "DIV-ROPE-F16-COS-SIN", "violates": [], "ratio": 0.5}]}
    assert contradicted_diagnoses([gen, both]) == []
    other_kind = {**gen, "params": {**params, "pairing": "interleaved"}}
    assert contradicted_diagnoses([other_kind, gold]) == []


def test_a_name_that_holds_only_at_2k_minus_1_is_refuted_by_the_off_grid_goldens(run_suite, tmp_path):
    """+1 on positions >= 8192 reproduces DIV-ROPE-BF16-POSITIONS on the proportional and YaRN-mscale
    goldens (their long positions are 2^k - 1, which bfloat16 rounds up by 1); the off-grid goldens of
    the same kinds fail as no divergence, and say where: the run flags the name."""
    out = tmp_path / "report.json"
    r = run_suite(f"{BROKEN}:PlusOneOnLongPositions", "--dtype", "float32", "--report-json", str(out),
                  "-k", "test_golden and (proportional or mscale)")
    rep = json.loads(out.read_text())
    got = {t["case"]: t for t in rep["results"] if t["outcome"] == "failed"}
    assert [d["divergence"] for d in got["scale-proportional"]["diagnosis"]] == ["DIV-ROPE-BF16-POSITIONS"]
    off = got["scale-yarn-mscale-ratio-off-grid"]
    assert off["diagnosis"] == [] and off["inferred"] == [
        "only positions >= 8193 are off; the positions used differ from the specified ones at 2 tokens: "
        "[0, 1] 8193 -> 8194, [0, 2] 100003 -> 100004"]
    flagged = {c["divergence"]: c for c in rep["contradicted"]}["DIV-ROPE-BF16-POSITIONS"]
    assert flagged["case"].endswith("-off-grid") and flagged["golden"] == "failed as no known divergence"
    assert "which failed as no known divergence (not as it: another bug, or a second one, shows there)" \
        in r.stdout.str()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_a_uniform_amplitude_error_the_element_bound_lets_pass_fails_the_pair_norm_mean(run_suite, tmp_path, dtype):
    """cos and sin 2.5 % too large: at bfloat16 every element is within its bound, but the mean pair
    norm is 1.025 x, beyond three biased roundings; at every dtype the pair-norm check fails."""
    fails, text = _failures(run_suite, tmp_path, f"{BROKEN}:AmplitudeTwoAndAHalfPercent", "--dtype", dtype,
                            "-k", "rope-llama3-8b and not scattered and (test_pair_norm or test_golden)")
    assert any(t["check"] == "pair_norm" for t in fails.values())
    if dtype == "bfloat16":
        assert {t["check"] for t in fails.values()} == {"pair_norm"}  # the golden passes: the gap it closes
        assert "x 1.025 on average over" in text and "a systematic amplitude error beyond bfloat16's rounding" in text


def test_a_layer_without_rope_must_come_back_bit_identical(run_suite, tmp_path):
    """q x (1 + 2^-22) on the layers without RoPE: the golden test (the rotation's bound, for naming a
    rotated layer) lets it pass at float32; LAYERS-NO-ROPE's identity check does not."""
    fails, text = _failures(run_suite, tmp_path, f"{BROKEN}:NoRopeLayersNotIdentical", "--dtype", "float32",
                            "-k", "layers-cohere2 and (test_golden or test_layers_identity)")
    assert fails and {t["check"] for t in fails.values()} == {"layers_identity"}
    assert "layer 3 has no RoPE, so q must come back bit-identical" in text


def test_a_failure_is_counted_under_the_case_s_clause_the_divergence_violates(run_suite, tmp_path):
    """sin's sign flipped violates every pairing clause and ROPE-ANGLE (its tables are wrong): the golden
    of a half-pairing case counts it under the two of the case's clauses it violates, ROPE-PAIR-HALF and
    ROPE-ANGLE, and the decode check (ROPE-ANGLE's invariant) under its own clause, which it violates."""
    a = tmp_path / "sign.py"
    a.write_text("from posenc.adapters.reference_adapter import MutantAdapter\n"
                 "ADAPTER = lambda: MutantAdapter('DIV-ROPE-SIN-SIGN-FLIPPED')\n")
    fails, _ = _failures(run_suite, tmp_path, str(a), "-k",
                         "rope-llama3-8b and not scattered and (test_golden or test_cache_equals_prefill)")
    assert {t["check"]: t["counted"] for t in fails.values()} == {
        "golden": {"ROPE-PAIR-HALF": "failed", "ROPE-ANGLE": "failed"}, "cache_equals_prefill": {"ROPE-ANGLE": "failed"}}


def _mutant_file(tmp_path, div: str) -> str:
    a = tmp_path / f"{div.lower()}.py"
    a.write_text(f"from posenc.adapters.reference_adapter import MutantAdapter\nADAPTER = lambda: MutantAdapter({div!r})\n")
    return str(a)


def test_a_golden_that_judged_no_values_refutes_nothing(run_suite, tmp_path):
    """The learned off-by-one mutant raises on the cache golden (a row past the table): that
    golden reached no verdict on the values, so the decode check's correct name stands."""
    out = tmp_path / "report.json"
    run_suite(_mutant_file(tmp_path, "DIV-LEARNED-POSITIONS-OFF-BY-ONE"), "--report-json", str(out),
              "-k", "gpt2-small-cache and not test_generated")
    rep = json.loads(out.read_text())
    assert any(t["raised"] for t in rep["results"] if t["check"] == "golden")
    assert ["DIV-LEARNED-POSITIONS-OFF-BY-ONE"] in [[d["divergence"] for d in t["diagnosis"]] for t in rep["results"]]
    assert rep["contradicted"] == []


def test_only_goldens_of_the_failing_operation_refute(run_suite, tmp_path):
    """rotary-embedding-torch holds positions in bfloat16 in forward() (rope.apply) only; its
    cos/sin path conforms, and its passing rope.cos_sin goldens do not refute the name."""
    pytest.importorskip("rotary_embedding_torch")
    empty = tmp_path / "none.yaml"
    empty.write_text("format: 2\nexpected_failures: []\n")
    out = tmp_path / "report.json"
    run_suite("rotary-embedding-torch", "--dtype", "bfloat16", "--expectations", str(empty), "--report-json",
              str(out), "-k", "test_golden and (rope-gptj-6b or rope-cos-sin-neox-20b)")
    rep = json.loads(out.read_text())
    assert {t["case"]: t["outcome"] for t in rep["results"]} == {"rope-gptj-6b": "failed",
                                                                "rope-cos-sin-neox-20b": "passed"}
    assert rep["contradicted"] == []


def test_the_case_clause_comes_from_the_closest_match(run_suite, tmp_path):
    """YaRN's factor overridden is matched first, a dropped factor second: a pair-norm check of
    an interleaved YaRN case is booked under the closest match's SCALE-YARN-FACTOR first, never
    under a clause only the weaker match violates (expectations init drafts violated[0])."""
    fails, _ = _failures(run_suite, tmp_path, _mutant_file(tmp_path, "DIV-SCALE-YARN-FACTOR-OVERRIDE"),
                         "-k", "scale-interleaved-yarn and test_pair_norm")
    (t,) = fails.values()
    assert t["diagnosis"][0]["divergence"] == "DIV-SCALE-YARN-FACTOR-OVERRIDE"
    assert t["violated"][0] == "SCALE-YARN-FACTOR"

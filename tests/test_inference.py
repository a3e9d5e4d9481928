"""Inference beyond the divergence catalogue (posenc.harness.inference): planted bugs that no
registered mutant describes are named by what they are, every claim reproduces the output, a
conforming output infers nothing, and garbage gives the fallback without raising."""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest

from posenc import families
from posenc.families.rope_inference import estimate_frequencies, estimate_positions
from posenc.harness import inference as infer_mod
from posenc.harness.inference import infer
from posenc.harness.failure import load_golden
from posenc.harness.golden import computed
from posenc.reference import alibi, rope, t5
from posenc.reference.rounding import round_to_dtype
from posenc.spec.models import AlibiParams, RopeParams


def _cast(out, dtype="float32"):
    return {n: np.asarray(v).astype(dtype) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
            for n, v in out.items() if not n.endswith(".compared")}


def _infer(case, params=None, inputs=None, post=None, dtype="float32"):
    """infer() on the reference of ``case`` computed with other params / inputs, or post-processed."""
    g = load_golden(case)
    out = families.reference_of(g.case.op).fn(params or g.case.params, inputs or g.inputs)
    out = _cast(post(g, out) if post else out, "float32" if dtype == "bfloat16" else dtype)
    return infer(g, out, dtype)


def _one(sentences):
    assert len(sentences) == 1, sentences
    assert not sentences[0].startswith("closest fit"), sentences
    return sentences[0]


def _with(case, **update):
    g = load_golden(case)
    return g, g.case.params.model_copy(update=update)


# ---- RoPE ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_positions_plus_one_on_every_token(dtype):
    g = load_golden("rope-llama3-8b")
    s = _one(_infer("rope-llama3-8b", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 1}, dtype=dtype))
    assert "+1 on every token" in s


def test_positions_plus_one_on_decode_steps_only():
    g = load_golden("scale-dynamic-per-call")
    x = {k: (v + 1 if k != "position_ids.0" else v) for k, v in g.inputs.items()}
    s = _one(_infer("scale-dynamic-per-call", inputs=x))
    assert "+1 on decode steps" in s and "first call is right" in s


def test_positions_restart_at_zero():
    g = load_golden("rope-neox-20b")
    pid = g.inputs["position_ids"]
    restarted = np.broadcast_to(np.arange(7), pid.shape).copy()
    s = _one(_infer("rope-neox-20b", inputs={**g.inputs, "position_ids": restarted}))
    assert "restart at 0" in s and "100.." in s and "2041.." in s


def test_rows_use_row_zero_positions():
    g = load_golden("rope-neox-20b")
    pid = g.inputs["position_ids"]
    s = _one(_infer("rope-neox-20b", inputs={**g.inputs, "position_ids": np.repeat(pid[:1] + 5, 3, 0)}))
    assert "row 0's positions" in s or "per row" in s


def test_positions_off_on_the_last_token():
    g = load_golden("rope-neox-20b")
    pid = g.inputs["position_ids"].copy()
    pid[:, -1] += 1
    assert "+1 on the last token" in _one(_infer("rope-neox-20b", inputs={**g.inputs, "position_ids": pid}))


def test_theta_10000_where_500000_is_specified():
    g, p = _with("rope-llama3-8b", rope_theta=10000.0)
    s = _one(_infer("rope-llama3-8b", params=p))
    theta = float(re.search(r"θ \(rope_theta\) ([0-9.e+]+) where 500000", s).group(1))
    assert abs(theta / 10000 - 1) < 0.01


def test_theta_on_cos_sin_and_inv_freq():
    _, p = _with("rope-cos-sin-neox-20b", rope_theta=50000.0)
    assert "θ (rope_theta) 50000 where 10000" in _one(_infer("rope-cos-sin-neox-20b", params=p))
    _, p = _with("rope-inv-freq-llama3", rope_theta=10000.0)
    assert "θ (rope_theta) 10000 where 500000" in _one(_infer("rope-inv-freq-llama3", params=p))


def test_frequencies_times_half():
    g = load_golden("rope-neox-20b")
    p = g.case.params
    w, _ = rope.inv_freq(p)

    def half(g, out):
        phi = g.inputs["position_ids"][..., None] * w * 0.5
        return {n: rope.apply_with_cos_sin(g.inputs[n], np.cos(phi), np.sin(phi), p.rdim, p.pairing) for n in "qk"}
    assert "frequencies × 0.5" in _one(_infer("rope-neox-20b", post=half))


def test_linear_factor_applied_twice():
    _, p = _with("scale-linear-factor-4", factor=16.0)
    s = _one(_infer("scale-linear-factor-4", params=p))
    assert "frequencies × 0.25" in s and "applied twice" in s


@pytest.mark.parametrize("case,other", [("rope-llama3-8b", "interleaved"), ("rope-gptj-6b", "half")])
def test_other_pairing(case, other):
    _, p = _with(case, pairing=other)
    assert f"{other} pairs applied" in _one(_infer(case, params=p))


@pytest.mark.parametrize("case", ["rope-llama3-8b", "rope-apply-cos-sin-half", "mrope-qwen2-vl-vision"])
def test_k_unrotated(case):
    assert _one(_infer(case, post=lambda g, o: {"q": o["q"], "k": g.inputs["k"]})).startswith("k is returned unrotated")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_small_turn_is_not_called_unrotated(dtype):
    """The pairing probe (e_0 at position 1) turned by 1/64 rad with magnitude 1 (a litgpt trial: YaRN's
    blend inverted, the mscale rule wrong) is within a half dtype's bound of no turn at all, but an
    unrotated tensor is the input bit for bit: neither "returned unrotated" nor "positions -1" (every
    token at position 0) may fit; the one frequency seen, × 1/64, does."""
    g0 = load_golden("scale-yarn-beta-fast-4")
    p = g0.case.params
    x = np.zeros((1, 1, 1, p.head_dim))
    x[..., 0] = 1.0
    g = computed(g0.case, {"q": x, "k": x, "position_ids": np.ones((1, 1), np.int64)})
    y = x.copy()
    y[..., p.pair_dim // 2] = 1 / 64  # magnitude ~1: cos(1/64) rounds to 1 at both dtypes
    s = " ".join(infer(g, {"q": y.astype(np.float32), "k": y.astype(np.float32)}, dtype))
    assert "unrotated" not in s and "-1" not in s, s
    assert "attention factor 1 where" in s and "frequencies × 0.01562" in s, s
    # the unrotated probe itself is still named, exactly
    assert infer(g, {"q": x, "k": x}, dtype)[0].startswith("q and k are returned unrotated")


def test_attention_factor_dropped():
    _, p = _with("rope-attention-factor", attention_factor=1.0)
    s = _one(_infer("rope-attention-factor", params=p))
    assert "attention factor 1 where 1.25 is specified" in s


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_an_attention_factor_is_said_to_the_digits_the_dtype_resolves(dtype):
    """1.25 read off bfloat16 outputs is 1.249 to four digits (hostile review): said as 1.25 at every dtype, so a
    finding recorded at float32 holds at bfloat16; a value the dtype does resolve keeps its digits."""
    _, p = _with("rope-llama3-8b", attention_factor=1.25)
    rounded = _infer("rope-llama3-8b", params=p, dtype=dtype,
                     post=lambda g, o: {n: round_to_dtype(v, dtype) if n in ("q", "k") else v for n, v in o.items()})
    assert "attention factor 1.25 where 1 is specified" in _one(rounded)
    assert infer_mod.sig_at(1.249, "bfloat16") == "1.25" and infer_mod.sig_at(1.249, "float32") == "1.249"
    assert infer_mod.sig_at(1.2437, "float16") == "1.244"


def test_attention_factor_dropped_and_positions_off():
    g, p = _with("rope-cos-sin-factor", attention_factor=1.0)
    s = _one(_infer("rope-cos-sin-factor", params=p, inputs={"position_ids": g.inputs["position_ids"] + 2}))
    assert "attention factor 1 where 1.25" in s and "+2 on every token" in s


def _yarn_calls_golden():
    """A generated-like YaRN rope.cos_sin_calls case (a new-user trial's: head 4, θ e^5, factor 296 / 148)."""
    from posenc.families import Case, pos
    from posenc.harness import golden
    p = RopeParams(head_dim=4, rope_theta=148.4131591025766, rope_type="yarn", original_max_position_embeddings=148,
                   max_position_embeddings=296)
    c = Case("yarn-calls-trial", "rope.cos_sin_calls", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), p,
             {"position_ids.0": pos([0]), "position_ids.1": pos([3]), "position_ids.2": pos([5, 6, 290])})
    return golden.computed(c, golden.case_inputs(c))


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
@pytest.mark.parametrize("case", ["yarn-calls-trial", "scale-yarn-qwen2.5", "scale-yarn-mscale-all-dim-alone"])
def test_attention_factor_is_said_when_the_frequencies_are_wrong_too(case, dtype):
    """litgpt 0.5.13's YaRN: the blend inverted (DIV-SCALE-YARN-BLEND-INVERTED) and attention factor 1
    (DIV-SCALE-YARN-MSCALE-ALONE) together.  No single divergence reproduces the output, but every pair's
    magnitude is uniformly 1, and the angles are a catalogued divergence's: both said, at every dtype (the
    trial's two-pair case: the blend inverted equals the betas swapped there; a truncated band tells them
    apart)."""
    from posenc import registry
    from posenc.reference.rounding import round_to_dtype
    g = _yarn_calls_golden() if case == "yarn-calls-trial" else load_golden(case)
    p = g.case.params.model_copy(update={"attention_factor": 1.0})
    out = registry.run_mutant("scale_yarn_blend_inverted", g.case.op, p, g.inputs, None)
    out = {n: np.asarray(v) if dtype == "float64" else round_to_dtype(np.asarray(v), dtype).astype(np.float32)
           for n, v in out.items()}
    af = rope.inv_freq(g.case.params)[1]
    lines = infer(g, out, dtype)
    assert lines[0].startswith(f"attention factor 1 where {af:.4g} is specified"), lines
    named = ("DIV-SCALE-YARN-BLEND-INVERTED", "DIV-SCALE-YARN-BETAS-SWAPPED") if case == "yarn-calls-trial" else \
        ("DIV-SCALE-YARN-BLEND-INVERTED",)
    assert any(f"a second bug: the angles are {d}'s" in lines[0] for d in named), lines
    assert any("elements wrong" in x for x in lines[1:]), lines


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_a_magnitude_bug_with_angles_no_divergence_gives_is_said_with_them_unexplained(dtype):
    """Attention factor 1 and every pair's angle off by its own small factor (no catalogued divergence's):
    the magnitude is said, and that the angles are wrong too, in a way no model reproduces."""
    from posenc.reference.rounding import round_to_dtype
    g = _yarn_calls_golden()
    out = {}
    for n in g.outputs:
        if n.startswith("cos"):
            k = n[3:]
            phi = np.arctan2(g.outputs["sin" + k], g.outputs["cos" + k]) * (1 + 0.05 * np.arange(2) + 0.03)
            out["cos" + k], out["sin" + k] = np.cos(phi), np.sin(phi)
    out = {n: v if dtype == "float64" else round_to_dtype(v, dtype).astype(np.float32) for n, v in out.items()}
    lines = infer(g, out, dtype)
    assert lines[0].startswith("attention factor 1 where") and "the angles are wrong too" in lines[0], lines


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
@pytest.mark.parametrize("far", [False, True])
def test_per_pair_frequencies_are_the_last_finding_on_frequencies(dtype, far):
    """Each pair at its own wrong frequency, no model's nor a parameter's (litgpt's YaRN on a two-pair head:
    the blend inverted and the band clamped): said per pair as ratios, the positions right; also where the
    calls hold only far positions (1000, 1001), which leave the angle of one position ambiguous."""
    from posenc.families import Case, pos
    from posenc.harness import golden
    from posenc.reference.rounding import round_to_dtype
    p = RopeParams(head_dim=4, rope_theta=148.4131591025766, rope_type="yarn", original_max_position_embeddings=403,
                   max_position_embeddings=806, mscale=1.0, mscale_all_dim=1.0)
    calls = {"position_ids.0": pos([1000]), "position_ids.1": pos([1001])} if far else \
        {"position_ids.0": pos([0]), "position_ids.1": pos([3]), "position_ids.2": pos([5, 6, 290])}
    g = golden.computed(Case("c", "rope.cos_sin_calls", ("SCALE-YARN-RAMP",), p, calls), golden.case_inputs(
        Case("c", "rope.cos_sin_calls", ("SCALE-YARN-RAMP",), p, calls)))
    w = rope.inv_freq(p)[0] * np.array([0.125, 1.778])
    out = {}
    for key in calls:
        k = key[12:]
        ang = np.asarray(g.inputs[key], float)[..., None] * w
        out["cos" + k], out["sin" + k] = (round_to_dtype(f(ang) * rope.inv_freq(p)[1], dtype) for f in (np.cos, np.sin))
    s = _one(infer(g, out, dtype)[:1])
    assert s.startswith("the inverse frequencies are not the specified ones: pair 0 × 0.125, pair 1 × 1.778"), s


@pytest.mark.parametrize("extra", [False, True])
def test_per_pair_ratios_are_to_the_specified_frequencies_and_name_every_pair(extra):
    """Scattered positions up to 65536 (hostile review): the ratios are to the specified frequencies, not to
    an estimate of them that far positions alias (it said pair 0 × -10.81 for 0.5); and every pair is said,
    so a line recorded for the first pairs' bug does not excuse another on the last pairs (it ended "...")."""
    g = load_golden("rope-llama3-8b-scattered")
    p = g.case.params
    r = np.ones(p.rdim // 2)
    r[:7] = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97]
    if extra:
        r[-4:] = 0.5
    ang = np.asarray(g.inputs["position_ids"], float)[..., None] * (rope.inv_freq(p)[0] * r)
    out = {n: rope.apply_with_cos_sin(g.inputs[n], 1.25 * np.cos(ang), 1.25 * np.sin(ang), p.pair_dim, p.pairing,
                                      p.rotation) for n in ("q", "k")}
    s = _one(infer(g, out, "float32")[:1])
    want = "pair 0 × 0.5, pair 1 × 0.6, pair 2 × 0.7, pair 3 × 0.8, pair 4 × 0.9, pair 5 × 0.95, pair 6 × 0.97, "
    want += "pairs 7-59 × 1, pairs 60-63 × 0.5" if extra else "pairs 7-63 × 1"
    assert s.endswith("the inverse frequencies are not the specified ones: " + want), s


def test_no_per_pair_frequencies_from_one_far_position():
    """One token at 131071 (a decode check's call): any frequency w + 2πk / 131071 gives its angles, so no
    ratio is said (the kit said "pair 0 × 0.0005629, pair 2 × -0.001067, ..." on the fresh trial's file)."""
    from posenc.families import Case, pos
    from posenc.harness import golden
    p = RopeParams(head_dim=8, rope_theta=10000.0)
    c = Case("c", "rope.cos_sin_calls", ("ROPE-ANGLE",), p, {"position_ids.0": pos([131071])})
    g = golden.computed(c, golden.case_inputs(c))
    ang = 131071.0 * rope.inv_freq(p)[0] * np.array([0.5, 1, 1, 1])
    lines = infer(g, {"cos.0": np.cos(ang)[None, None], "sin.0": np.sin(ang)[None, None]}, "float64")
    assert lines and not any("missing" in x for x in lines), lines  # the failure was read
    assert not any("inverse frequencies are not" in x for x in lines), lines


@pytest.mark.parametrize("head_dim,theta", [(4, 73.10687570218391), (4, 354.9129424360684),
                                            (6, 22.352984391256268), (4, 10000.0)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_shift_on_every_token_is_said_where_one_far_row_is_ambiguous(head_dim, theta, dtype):
    """Two or three frequencies at position 70000 and at 0: another position fits the far row's angles
    within the tolerance, so per-row estimates said "off by a constant per row (row 0.0: -69998, row
    0.1: +3)" for positions +3 on every token (issue 29's redrawn generated cases; the θ are ones where
    they did); the simpler model that reproduces the output is said, without a note on frequencies
    (default RoPE's do not depend on the positions)."""
    from posenc.families import Case, pos
    from posenc.harness import golden
    p = RopeParams(head_dim=head_dim, rope_theta=theta)
    calls = {"position_ids.0": pos([70000]), "position_ids.1": pos([0])}
    c = Case("c", "rope.cos_sin_calls", ("ROPE-ANGLE",), p, calls)
    g = golden.computed(c, golden.case_inputs(c))
    out = families.reference_of(c.op).fn(p, {**g.inputs, **{k: v + 3 for k, v in calls.items()}})
    s = _one(infer(g, _cast(out, dtype), dtype))
    assert s == "positions are the specified ones +3 on every token", s


@pytest.mark.parametrize("head_dim,theta", [(4, 73.10687570218391), (4, 354.9129424360684), (6, 22.352984391256268)])
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_per_row_shifts_are_said_nearest_the_specified_positions(head_dim, theta, dtype):
    """Each row its own shift (+5 at 70000, +3 at 0): of the far row's positions the tolerance cannot tell
    apart, the one nearest the specified position is said (it was -69998 at these θ)."""
    from posenc.families import Case, pos
    from posenc.harness import golden
    p = RopeParams(head_dim=head_dim, rope_theta=theta)
    calls = {"position_ids.0": pos([70000]), "position_ids.1": pos([0])}
    c = Case("c", "rope.cos_sin_calls", ("ROPE-ANGLE",), p, calls)
    g = golden.computed(c, golden.case_inputs(c))
    used = {"position_ids.0": pos([70005]), "position_ids.1": pos([3])}
    out = families.reference_of(c.op).fn(p, {**g.inputs, **used})
    s = _one(infer(g, _cast(out, "float32" if dtype == "bfloat16" else dtype), dtype))
    assert s == "positions are off by a constant per row (row 0.0: +5, row 0.1: +3)", s


@pytest.mark.parametrize("theta", [294.3169203856112, 982.4380251707703])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("bug,said", [
    ("restart", "positions restart at 0 (positions 0..2 instead of 70000.., 0..)"),
    ("double", "positions are the specified ones × 2 on every token (the same angles as frequencies × 2)")],
    ids=["restart", "double"])
def test_a_named_position_pattern_is_not_said_as_the_nearest_offsets(theta, dtype, bug, said):
    """Head_dim 4 at 70000: some position near the specified one fits the far row as well as the one used, within
    the tolerance.  The nearest is only a tie-break among per-row offsets: a restart at 0 was said "off by a
    constant per row (row 0: -43, row 1: +0)", positions x 2 "differ ... 70000 -> 70043, ..., 1 -> 2"."""
    from posenc.families import Case
    from posenc.harness import golden
    p = RopeParams(head_dim=4, rope_theta=theta)
    pid = np.array([[70000, 70001, 70002], [0, 1, 2]])
    c = Case("c", "rope.cos_sin", ("ROPE-ANGLE",), p, {"position_ids": pid})
    g = golden.computed(c, golden.case_inputs(c))
    used = np.array([[0, 1, 2], [0, 1, 2]]) if bug == "restart" else 2 * pid
    out = families.reference_of(c.op).fn(p, {**g.inputs, "position_ids": used})
    assert _one(infer(g, _cast(out), dtype)) == said


def test_the_phase_slack_is_the_tolerance_rules_angle_term():
    """Hand-derived: head_dim 4, θ 10000 (w = 1, 0.01; e = 0, 1/2) at position 70000, float32: the largest
    w_i (1 + e_i ln θ) is pair 0's 1, so 4 eps32 (70000 + 1) + 4 eps32 = 0.0334 rad -- not the 0.68 rad that
    tied aliases 77 positions apart (hostile review); at 1e6 still far below π."""
    from posenc.families.rope_estimates import phase_slack
    eps = float(np.finfo(np.float32).eps)
    assert phase_slack(np.array([[70000]]), np.array([1.0, 0.01]), 10000.0, "float32") == pytest.approx(4 * eps * 70002)
    w = np.array([1.0, 0.5])  # pair 1's rate 0.5 (1 + ln θ / 2) exceeds pair 0's at θ 1e6: 0.5 * 7.91 = 3.95
    assert phase_slack(np.array([[0]]), w, 1e6, "bfloat16") == pytest.approx(4 * eps * 0.5 * (1 + math.log(1e6) / 2)
                                                                               + 4 * 2 ** -7)
    assert phase_slack(np.array([[10 ** 6]]), np.array([1.0, 0.01]), 500000.0, "float32") < 0.5


def test_frequencies_from_far_positions_only():
    """Positions 1000 and 1001 alone: the nearest position's angle / 1000 is one of many turns; the two
    positions' angle difference is the frequency itself (the first estimate's residual was 0.13 rad)."""
    w = np.array([0.1250016, 0.0820857])
    phi = np.angle(np.exp(1j * np.multiply.outer(np.array([1000.0, 1001.0]), w)))
    est, res = estimate_frequencies(phi, np.array([1000.0, 1001.0]))
    np.testing.assert_allclose(est, w, rtol=1e-9)
    assert res < 1e-9


@pytest.mark.parametrize("case,other", [("rope-llama3-8b", "interleaved"), ("rope-gptj-6b", "half")])
def test_other_pairing_with_a_magnitude(case, other):
    """The other pairing and cos/sin × 1.25 (hostile review: element counts only; each alone was said)."""
    _, p = _with(case, pairing=other, attention_factor=1.25)
    s = _one(_infer(case, params=p))
    assert s == f"attention factor 1.25 where 1 is specified; a second bug: {other} pairs applied where " \
                f"{load_golden(case).case.params.pairing} pairs are specified", s


@pytest.mark.parametrize("case", ["rope-cos-sin-factor", "rope-cos-sin-llama3"])
def test_sin_sign_flipped_on_cos_sin(case):
    assert "wrong sign" in _one(_infer(case, post=lambda g, o: {"cos": o["cos"], "sin": -o["sin"]}))


def test_sin_sign_flipped_on_apply():
    g = load_golden("rope-interleaved-factor")
    p = g.case.params
    c, s = rope.cos_sin(g.inputs["position_ids"], p)
    out = {n: rope.apply_with_cos_sin(g.inputs[n], c, -s, p.rdim, p.pairing) for n in "qk"}
    assert "wrong sign" in _one(infer(g, _cast(out), "float32"))


@pytest.mark.parametrize("case", ["rope-nanochat-d20", "rope-rotation-negative-interleaved-partial",
                                  "rope-apply-cos-sin-negative-half"])
def test_a_standard_rotation_where_negative_is_specified(case):
    """An implementation that ignores ROPE-ROTATION-NEGATIVE (a NanoChat port with the common
    rotate_half): named as the other direction, +phi where -phi is specified."""
    g, positive = _with(case, rotation="positive")
    s = _one(_infer(case, params=positive))
    assert "wrong sign" in s and "+φ where -φ is specified" in s, s


def test_a_negative_rotation_with_its_positions_off():
    """The position models read the table's angles, not the rotation's: -phi at positions + 1 is
    "+1 on every token", not a sign or frequency story."""
    g = load_golden("rope-nanochat-d20")
    s = _one(_infer("rope-nanochat-d20", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 1}))
    assert "+1 on every token" in s, s


def test_estimators_recover_positions_and_frequencies():
    w = 500000.0 ** (-np.arange(0, 128, 2) / 128)
    pid = np.array([0, 1, 7, 4095, 65536, 131071], float)
    phi = (np.multiply.outer(pid, w) + np.pi) % (2 * np.pi) - np.pi
    P, res = estimate_positions(phi, w)
    assert np.allclose(P, pid, atol=1e-3) and res.max() < 1e-6
    w2, res2 = estimate_frequencies(phi, pid)
    assert np.allclose(w2, w, rtol=1e-6) and res2 < 1e-6


def test_mrope_positions_shifted_on_every_axis():
    g = load_golden("mrope-qwen2-vl-vision")
    s = _one(_infer("mrope-qwen2-vl-vision", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 2}))
    assert "+2 on every token and axis" in s


@pytest.mark.parametrize("axis, name, k", [(0, "temporal", 1), (1, "height", -2), (2, "width", 3)])
def test_mrope_positions_shifted_on_one_axis(axis, name, k):
    """One axis's positions off (a vision grid's height counted from 1), the others right: said by axis."""
    g = load_golden("mrope-qwen2-vl-vision")
    pid = np.array(g.inputs["position_ids"], copy=True)
    pid[axis] += k
    s = _one(_infer("mrope-qwen2-vl-vision", inputs={**g.inputs, "position_ids": pid}))
    assert f"the {name} axis's positions are the specified ones {k:+d} (the other axes right)" in s, s


def test_a_near_fit_is_a_closest_fit_with_its_residual_then_the_fallback():
    g = load_golden("rope-llama3-8b")

    def almost(g, out):
        out["q"][0, 0, 0, 0] += 1e-4  # one element off: +1 no longer reproduces the output exactly
        return out
    lines = _infer("rope-llama3-8b", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 1}, post=almost)
    assert lines[0].startswith("closest fit: positions are the specified ones +1 on every token (residual:")
    assert lines[1].startswith("q: ") and "elements wrong" in lines[1]


# ---- tables and biases ---------------------------------------------------------------------------

@pytest.mark.parametrize("case,table,k", [("gpt2-small-prefill", "wpe", 2), ("opt-125m-embeddings", "table", 2),
                                          ("bert-base-default-token-types", "position_embeddings", -1),
                                          ("lookup-gpt2-wpe", "table", 3)])
def test_learned_rows_shifted(case, table, k):
    g = load_golden(case)
    s = _one(_infer(case, inputs={**g.inputs, table: np.roll(g.inputs[table], -k, axis=0)}))
    assert f"read {abs(k)} row" in s and ("later" if k > 0 else "earlier") in s
    if case.startswith("opt"):
        assert "OPT offset applied twice" in s


def test_opt_rows_plus_two():
    assert "+2 everywhere (OPT's offset 2 applied twice?)" in _one(
        _infer("opt-125m-rows", post=lambda g, o: {"rows": o["rows"] + 2}))


def test_sinusoid_rows_shifted():
    g = load_golden("sin-interleaved-d512")
    s = _one(_infer("sin-interleaved-d512", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 2}))
    assert "read 2 rows later" in s


@pytest.mark.parametrize("case", ["alibi-slopes-12", "alibi-causal-12", "alibi-bloom-mask"])
def test_alibi_slopes_times_two(case):
    name = "slopes" if case.startswith("alibi-slopes") else "bias"
    assert "slopes are the specified ones × 2" in _one(_infer(case, post=lambda g, o: {name: o[name] * 2}))


@pytest.mark.parametrize("case", ["alibi-slopes-12", "alibi-causal-12"])
def test_alibi_slopes_of_16_heads_for_12(case):
    m, m16 = alibi.slopes(AlibiParams(num_heads=12)), alibi.slopes(AlibiParams(num_heads=16))[:12]

    def wrong(g, o):
        return {"slopes": m16} if "slopes" in o else {"bias": o["bias"] / m[:, None, None] * m16[:, None, None]}
    assert "slopes of 16 heads used for 12" in _one(_infer(case, post=wrong))


def test_alibi_bias_max():
    p = AlibiParams(num_heads=12, alibi_bias_max=4.0)
    assert "alibi_bias_max 4 where 8" in _one(_infer("alibi-causal-12", params=p))


def test_t5_buckets_plus_one():
    assert "buckets are the specified ones +1" in _one(
        _infer("t5-base-buckets-bidirectional", post=lambda g, o: {"buckets": o["buckets"] + 1}))


def test_t5_bias_buckets_plus_one():
    def plus_one(g, o):
        x = g.inputs
        rel = t5.relative_positions(int(x["query_length"]), int(x["key_length"]), int(x["cache_length"]))
        b = np.minimum(t5.buckets(rel, g.case.params) + 1, 31)
        return {"bias": np.transpose(x["table"][b], (2, 0, 1))}
    assert "buckets are the specified ones +1" in _one(_infer("t5-base-bias-decoder", post=plus_one))


def test_t5_bias_relative_positions_off():
    g = load_golden("t5-base-bias-encoder")
    s = _one(_infer("t5-base-bias-encoder", inputs={**g.inputs, "cache_length": np.asarray(1)}))
    assert "relative positions off by -1" in s


# ---- no inference, fallback, robustness -----------------------------------------------------------

@pytest.mark.parametrize("case", ["rope-llama3-8b", "rope-cos-sin-factor", "gpt2-small-prefill", "alibi-causal-12",
                                  "t5-base-bias-decoder", "opt-125m-rows", "mrope-qwen2-vl-vision"])
def test_a_correct_output_infers_nothing(case):
    assert _infer(case) == []


def test_precision_bug_gives_the_position_fallback():
    g = load_golden("rope-llama3-8b")
    pid = g.inputs["position_ids"]

    def drift(g, o):
        return {n: o[n] + 1e-9 * pid[:, None, :, None].astype(float) ** 2 for n in "qk"}
    lines = _infer("rope-llama3-8b", post=drift)
    assert lines and all("only positions >= 131067 are wrong (error grows with position" in s for s in lines)


@pytest.mark.parametrize("garbage", ["nan", "inf", "random", "shape", "missing", "junk"])
def test_garbage_gives_the_fallback_without_raising(garbage):
    g = load_golden("rope-neox-20b")
    rng = np.random.default_rng(0)
    ref = g.outputs
    out = {"nan": {n: np.full(v.shape, np.nan) for n, v in ref.items()},
           "inf": {n: np.full(v.shape, np.inf) for n, v in ref.items()},
           "random": {n: rng.normal(size=v.shape) for n, v in ref.items()},
           "shape": {n: v[:1] for n, v in ref.items()},
           "missing": {"q": ref["q"]},
           "junk": {"q": "junk", "k": None}}[garbage]
    lines = infer(g, out, "float32")
    assert lines and not any(s.startswith("closest fit") and "e+0" in s for s in lines[1:])
    assert all(s.startswith(("q", "k")) for s in lines), lines


def test_infer_never_raises_on_a_broken_golden():
    g = load_golden("rope-neox-20b")
    broken = type(g)(g.case, {}, g.outputs, g.dtype_scales, g.angle_scales, g.angle_based)
    lines = infer(broken, {n: v + 1 for n, v in g.outputs.items()}, "float32")
    assert isinstance(lines, list) and all(isinstance(s, str) for s in lines)


def test_conformance_failure_carries_the_inferred_sentences():
    from posenc.adapters.reference_adapter import ReferenceAdapter
    from posenc.harness.failure import ConformanceFailure, assert_conforms
    g = load_golden("rope-llama3-8b")
    x = {**g.inputs, "position_ids": g.inputs["position_ids"] + 3}
    out = families.reference_of("rope.apply").fn(g.case.params, x)
    with pytest.raises(ConformanceFailure) as e:
        assert_conforms(ReferenceAdapter(), g, _cast(out), "float32")
    assert e.value.inferred == ("positions are the specified ones +3 on every token",)
    assert "\n  inferred: positions are the specified ones +3 on every token" in str(e.value.msg)
    assert ConformanceFailure("m", ("X",)).inferred == ()


# ---- end to end: the suite prints the inferred sentence ---------------------------------------------

ADAPTER = '''
import numpy as np
from posenc.adapters.reference_adapter import ReferenceAdapter


class PlusThree(ReferenceAdapter):
    """rope.apply at position_ids + 3: a bug no catalogued divergence describes (+1 is catalogued)."""
    name = "plus-three-rope"

    def compute(self, op, params, inputs, dtype, state=None):
        if op == "rope.apply":
            inputs = {**inputs, "position_ids": np.asarray(inputs["position_ids"]) + 3}
        return super().compute(op, params, inputs, dtype, state)


ADAPTER = PlusThree
'''


def test_suite_prints_the_inferred_offset(run_suite, tmp_path):
    path = tmp_path / "plus_three.py"
    path.write_text(textwrap.dedent(ADAPTER))
    r = run_suite(str(path), "-k", "rope")
    out = r.stdout.str()
    assert r.ret != 0, out[-3000:]
    assert "diagnosis: no known divergence reproduces this output" in out, out[-3000:]
    assert "inferred: positions are the specified ones +3 on every token" in out, out[-3000:]


def test_the_fallback_tabulates_the_error_by_position_from_the_first_wrong_token():
    """Tokens 1 and 3 of batch row 1 wrong, token 2 NaN: the table is row 1's, from token 1, its
    entries the tokens' positions with their errors (inf for the NaN, at most 1 where right)."""
    g = load_golden("rope-neox-20b")
    pid = g.inputs["position_ids"]
    assert pid.shape == (3, 7)

    def hit(g, o):
        q = o["q"].copy()
        q[1, :, [1, 3]] += 1.0
        q[1, 0, 2, 0] = np.nan
        return {"q": q, "k": o["k"]}
    lines = _infer("rope-neox-20b", post=hit)
    table = [s for s in lines if "by position from its first wrong token" in s]
    assert len(table) == 1, lines
    assert "row 1 |err|/bound" in table[0]
    cells = table[0].split("(token 1; max over the other axes): ", 1)[1].split(";", 1)[0].split(", ")
    assert [c.split(": ")[0] for c in cells] == [str(int(p)) for p in pid[1, 1:]]
    vals = [c.split(": ")[1] for c in cells]
    assert vals[1] == "inf" and float(vals[0]) > 1 and float(vals[2]) > 1
    assert len(vals) == 6 and all(float(v) <= 1 for v in vals[3:])  # right: within the bound


# ---- the registration -------------------------------------------------------------------------------

def test_inference_models_are_the_families_registrations():
    """The harness's inference knows no family: the models it tries for an operation are the ones its
    family registered (``@families.inference``), the fallback's facts too (``@families.inference_notes``)."""
    from posenc import registry
    models, notes = registry.inferences("rope.apply")
    assert [m.__module__ for m in models] == ["posenc.families.rope_inference"]
    assert [n.__module__ for n in notes] == ["posenc.families.rope_inference"]
    assert registry.inferences("nope.apply") == ([], [])


def test_a_broken_model_skips_only_itself(monkeypatch):
    """A registered model that raises or returns garbage is skipped; the other models of the operation
    still name the bug."""
    from posenc import registry
    g = load_golden("rope-llama3-8b")
    bad = [lambda ctx: 1 / 0, lambda ctx: None, lambda ctx: [("not a candidate",), 7]]
    monkeypatch.setitem(registry.INFERENCES, "rope.apply", bad + list(registry.INFERENCES["rope.apply"]))
    s = _one(_infer("rope-llama3-8b", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 1}))
    assert "+1 on every token" in s


def test_an_inference_for_an_undeclared_operation_is_named(monkeypatch):
    """A registration for an operation no spec file declares is a one-line error when the checks load
    (``posenc spec validate``, the suite's start), never a silently empty inference."""
    from posenc import registry
    from posenc.spec.errors import SpecError

    def toy_model(ctx):
        return []
    monkeypatch.setitem(registry.INFERENCES, "toy.nosuch", [toy_model])
    monkeypatch.setitem(registry._LOADED, "checks", False)  # load again: the modules are imported already
    with pytest.raises(SpecError, match=r"inference model .*toy_model: registered for operation 'toy.nosuch'"):
        registry.load_checks()


@pytest.mark.parametrize("case, theta", [
    ("scale-linear-factor-4", 50000.0), ("scale-yarn-qwen2.5", 10000.0), ("scale-yarn-qwen2.5-inv-freq", 500000.0),
    ("scale-yarn-deepseek-v3", 1000000.0), ("scale-llama3.1-8b", 10000.0), ("scale-llama3.1-8b-inv-freq", 1000000.0),
    ("scale-llama3-bands-2-8-cos-sin", 10000.0), ("scale-proportional", 10000.0), ("scale-proportional-factor", 50000.0),
    ("scale-llama3-partial", 10000.0), ("scale-yarn-betas-16-2", 500000.0),
    ("scale-longrope-explicit-factor", 500000.0)])
def test_theta_under_a_scaling_is_recovered(case, theta):
    """A scaled rope_type computed with another θ: the scaling's own frequencies at that θ
    (rope_inference.fit_theta), said as the θ used where another is specified."""
    g, p = _with(case, rope_theta=theta)
    s = _one(_infer(case, params=p))
    m = re.search(r"θ \(rope_theta\) ([0-9.e+]+) where ([0-9.e+]+) is specified", s)
    assert m, s
    assert abs(float(m.group(1)) / theta - 1) < 0.01 and float(m.group(2)) == g.case.params.rope_theta, s


def test_fit_theta_says_nothing_for_theta_itself_or_another_law():
    from posenc.families.rope_inference import fit_theta
    p = load_golden("scale-yarn-qwen2.5-inv-freq").case.params
    w, _ = rope.inv_freq(p)
    assert fit_theta(p, w) is None  # θ itself: another model's business
    assert fit_theta(p, w[::-1].copy()) is None  # no θ gives these frequencies
    assert abs(fit_theta(p, rope.inv_freq(p.model_copy(update={"rope_theta": 12345.0}))[0]) / 12345.0 - 1) < 1e-6


@pytest.mark.parametrize("case, dtype, low", [("rope-apply-cos-sin-half", "float64", "float32"),
                                              ("bert-base-token-types", "float64", "float32"),
                                              ("rope-llama3-8b", "float32", "bfloat16"),
                                              ("scale-llama3.1-8b", "float32", "bfloat16")])
def test_a_lower_precision_computation_is_named_as_precision(case, dtype, low):
    """A run computed at a lower precision and returned at the run's (the kit's torch port run at
    float32 for a float64 run, at bfloat16 for a float32 one) is said to be that, not a wrong rotation."""
    from posenc.adapters import load_adapter
    from posenc.harness.runner import run_case
    g = load_golden(case)
    out = run_case(load_adapter("torch"), g, low, "cpu")
    out = {n: np.asarray(v, np.float64).astype(dtype) for n, v in out.items()}
    s = _one(infer(g, out, dtype))
    said = "half (bfloat16 or float16)" if low == "bfloat16" else low
    assert s.startswith(f"precision: every output is right to {said} precision but not to {dtype}'s"), s


@pytest.mark.parametrize("case, field", [("lookup-gpt2-wpe", "dim"), ("sin-concat-d512", "dim")])
def test_a_uniform_scale_is_said_by_the_parameter_it_is_a_power_of(case, field):
    """Every output the reference times one constant (x-transformers' AbsolutePositionalEmbedding
    returns table[row] * dim ** -0.5): said as 1/√<field> where the constant is one, else as the number."""
    g = load_golden(case)
    v = float(getattr(g.case.params, field))
    s = _one(_infer(case, post=lambda g, o: {n: x * v ** -0.5 if np.asarray(x).dtype.kind == "f" else x
                                              for n, x in o.items()}))
    assert s.startswith(f"every output is the specified one scaled by 1/√{field} ("), s
    s = _one(_infer(case, post=lambda g, o: {n: x * 1.37 if np.asarray(x).dtype.kind == "f" else x
                                             for n, x in o.items()}))
    assert s == "every output is the specified one × 1.37", s


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", ["lookup-gpt2-wpe", "sin-concat-d512"])
def test_a_uniform_scale_at_half_precision_is_said_by_its_parameter_the_same_way(case, dtype):
    """At bfloat16 the measured constant is off by the dtype's rounding (x-transformers' trial: × 0.7085,
    then × 0.7069 on the next example): the parameter's power is still recognised and said at its
    exact value, so a recorded finding matches every example."""
    from posenc.reference.rounding import round_to_dtype as _rounded
    g = load_golden(case)
    v = g.case.params.dim
    out = {n: _rounded(np.asarray(x) * v ** -0.5, dtype) for n, x in g.outputs.items()
           if np.asarray(x).dtype.kind == "f" and not n.endswith(".compared")}
    assert _one(infer(g, out, dtype)) == f"every output is the specified one scaled by 1/√dim (dim {v}: × {v ** -0.5:.4g})"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("case", ["rope-llama3-8b", "rope-cos-sin-nanochat-d20", "scale-yarn-qwen2.5"])
def test_angles_computed_in_bfloat16_are_said_by_their_order(case, dtype):
    """Angles computed in bfloat16 (a rotary module cast by .to()): reproduced step by step and said
    so, at every run dtype -- bfloat16 named at a float16 or float32 run too -- not as element counts."""
    from posenc.adapters import load_adapter
    from posenc.harness.runner import run_case
    from tests.broken_adapters import Bf16Angles
    g = load_golden(case)
    out = {n: np.asarray(v, np.float64) for n, v in run_case(Bf16Angles(), g, dtype, "cpu").items()}
    assert _one(infer(g, out, dtype)).startswith(
        "the angles computed in bfloat16, each step rounded: round(round(p) * round(inv_freq)) (the spec requires")
    right = {n: np.asarray(v, np.float64) for n, v in run_case(load_adapter("torch"), g, dtype, "cpu").items()}
    assert infer(g, right, dtype) == []  # a correct run: nothing to say


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_linear_factor_divided_in_half_precision_is_said_by_its_order(dtype):
    """x-transformers 2.31.10: ``einsum(t, inv_freq) / interpolation_factor`` after ``.to(dtype)`` -- the
    product rounded, then divided by the Python float and rounded again (x_transformers.py:879)."""
    from posenc.reference.rounding import round_to_dtype

    def r(v):
        return round_to_dtype(v, dtype)
    from dataclasses import replace

    from posenc.harness import golden
    g = load_golden("scale-linear-factor-4")  # at factor 2.5: dividing by 4 commutes with rounding
    p = g.case.params.model_copy(update={"factor": 2.5})
    g = golden.computed(replace(g.case, params=p), g.inputs)
    base = p.rope_theta ** (-np.arange(0, p.rdim, 2) / p.rdim)
    phi = r(r(r(g.inputs["position_ids"].astype(float))[..., None] * r(base)) / p.factor)
    out = {n: r(rope.apply_with_cos_sin(g.inputs[n], np.cos(phi), np.sin(phi), p.pair_dim, p.pairing))
           for n in ("q", "k")}
    assert _one(infer(g, out, dtype)) == (
        f"the angles computed in {dtype}, each step rounded: round(round(round(p) * round(base_inv_freq)) / factor) "
        "(the spec requires float32 angles at every dtype; linear factor 2.5)")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", ["rope-llama3-8b", "scale-proportional-gemma4", "scale-longrope-max-position-at-original",
                                  "rope-attention-factor"])
@pytest.mark.parametrize("theta", [1.05, 1.0 / 1.05])
def test_a_wrong_theta_at_half_precision_is_never_said_to_be_rounding(case, dtype, theta):
    """θ 5 % off, rounded to a half dtype (a hostile review): whatever the inference says, it is not a
    precision -- at small exponents the angle error is within half's rounding, but it turns every
    angle the same way."""
    from posenc.reference.rounding import round_to_dtype
    g = load_golden(case)
    p = g.case.params.model_copy(update={"rope_theta": g.case.params.rope_theta * theta})
    out = {n: round_to_dtype(v, dtype) for n, v in families.reference_of(g.case.op).fn(p, g.inputs).items()
           if not n.endswith(".compared")}
    said = infer(g, out, dtype)
    assert said and not any(x.startswith(("precision", "the angles")) for x in said), said


@pytest.mark.parametrize("case", ["rope-inv-freq-llama3", "scale-llama3.1-8b-inv-freq", "rope-inv-freq-factor"])
def test_inv_freq_held_in_float16_is_said_as_precision(case):
    """x-transformers' inv_freq buffer cast to float16, then divided by its interpolation factor in
    float16 (two roundings no divergence's mutant emulates): inv_freq, compared at float32 whatever the
    dtype, is right to float16's precision -- said so, not as element counts."""
    from posenc.reference.rounding import round_to_dtype as _rounded
    g = load_golden(case)
    f = float(getattr(g.case.params, "factor", None) or 1.0)
    out = {"inv_freq": _rounded(_rounded(g.outputs["inv_freq"] * f, "float16") / f, "float16"),
           "attention_factor": g.outputs["attention_factor"]}
    assert _one(infer(g, out, "float16")).startswith("precision: inv_freq is right to float16 precision, not to float32's")


def test_a_table_held_in_float32_in_a_float64_run_is_said_as_rounded():
    """A T5 bias table loaded into a float32 parameter before the model is moved to float64 (a
    trial's adapter): the exact gather is the specified values rounded to float32."""
    from posenc.harness import golden
    g = load_golden("t5-base-bias-decoder")
    table = np.random.default_rng(0).standard_normal(g.inputs["table"].shape)
    g = golden.computed(g.case, {**g.inputs, "table": table})
    out = {"bias": g.outputs["bias"].astype(np.float32).astype(np.float64)}
    assert _one(infer(g, out, "float64")).startswith("precision: every output is the specified value rounded to float32")


@pytest.mark.parametrize("case, field, value", [
    ("scale-yarn-qwen2.5", "factor", 8.0), ("scale-llama3.1-8b", "low_freq_factor", 2.0),
    ("scale-llama3.1-8b", "high_freq_factor", 8.0), ("t5-base-bias-decoder", "max_distance", 256),
    ("sin-concat-d512", "base", 500.0), ("scale-yarn-betas-16-2", "beta_fast", 32.0)])
def test_a_parameter_at_another_value_is_said(case, field, value):
    """No model of the family explains the output, but the case's own parameters at one other value
    do: the inference says which value the implementation used ("YaRN factor 8 where 4")."""
    g, p = _with(case, **{field: value})
    s = _one(_infer(case, params=p))
    assert s.startswith(f"{field} {value:g} where ") and s.endswith(" is specified") or field in s, s


def test_an_unset_parameter_given_a_value_is_said_with_the_values_the_output_allows():
    """The case leaves YaRN's beta_fast to its rule (32); the implementation used 16.  The inference
    tries the unset fields from their declared domains, says the field was given a value where it is
    unset, and -- since beta moves integer ramp bounds, so an interval of values gives the same output --
    the interval, which holds 16, never one value as if it were pinned."""
    g, p = _with("scale-yarn-qwen2.5", beta_fast=16.0)
    assert g.case.params.beta_fast is None
    s = _one(_infer("scale-yarn-qwen2.5", params=p))
    m = re.fullmatch(r"beta_fast ([0-9.]+) where it is unset \(the rule's default applies\) "
                     r"\(any value from ([0-9.]+) to ([0-9.]+) gives this output\)", s)
    assert m and float(m.group(2)) <= 16.0 <= float(m.group(3)), s


def test_a_parameter_the_output_pins_is_said_without_an_interval():
    g, p = _with("scale-yarn-qwen2.5", factor=8.0)
    s = _one(_infer("scale-yarn-qwen2.5", params=p))
    assert s == "factor 8 where 4 is specified", s


@pytest.mark.parametrize("case, axis, k", [("axial-qwen2.5-vl-vision", 1, 1), ("axial-pixtral", 0, -2),
                                           ("axial-figure-3-axes-apply", 2, 3)])
def test_axial_coordinates_shifted_on_one_axis(case, axis, k):
    g = load_golden(case)
    pid = np.array(g.inputs["position_ids"], copy=True)
    pid[axis] += k
    s = _one(_infer(case, inputs={**g.inputs, "position_ids": pid}))
    assert s == f"axis {axis}'s coordinates are the specified ones {k:+d} (the other axes right)", s


def test_axial_coordinates_shifted_on_every_axis():
    g = load_golden("axial-qwen2.5-vl-vision")
    s = _one(_infer("axial-qwen2.5-vl-vision", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 2}))
    assert s == "coordinates are the specified ones +2 on every axis", s


@pytest.mark.parametrize("case, ratio", [("rope-llama3-8b", 1 + 1e-5), ("rope-tiny-partial-half", 1.0001)])
def test_a_slightly_wrong_theta_is_neither_precision_nor_a_parameter_that_changes_nothing(case, ratio):
    """θ off by 1e-5 or 1e-4 at float32 (a hostile review's finding): the error is far below half's
    rounding, so not "precision", and a candidate whose implied output is the reference's own (the
    attention factor 1 spelt out, a head_dim the case does not read) never fits a failing output."""
    from posenc.harness.runner import compare_outputs
    from posenc.registry import reference_of
    g = load_golden(case)
    p = g.case.params.model_copy(update={"rope_theta": g.case.params.rope_theta * ratio})
    out = {n: np.asarray(v, np.float64).astype(np.float32) for n, v in reference_of("rope.apply").fn(p, g.inputs).items()}
    assert not all(c.ok for c in compare_outputs(g, out, "float32"))
    lines = infer(g, out, "float32")
    assert lines and not any(x.startswith("precision:") for x in lines), lines
    assert not any("attention_factor 1 where" in x or "head_dim" in x or "× 1" == x[-3:] for x in lines), lines


def test_an_implied_output_with_nan_the_output_lacks_never_fits():
    """A model whose implied output is NaN where the adapter's is finite does not reproduce it (its bound
    there is NaN, which passed every comparison): the litgpt trial's float32 decode steps at positions
    past float16's range were said to be "the angles computed in float16, each step rounded"."""
    from posenc.harness.inference import InferenceContext
    g = load_golden("scale-yarn-qwen2.5")
    out = {n: np.asarray(v, np.float32) * 1.01 for n, v in g.outputs.items() if not n.endswith(".compared")}
    ctx = InferenceContext(g, out, "float32", ["q", "k"])
    assert ctx.fit({n: np.full_like(np.asarray(g.outputs[n], np.float64), np.nan) for n in ("q", "k")}) == \
        (False, float("inf"))
    assert ctx.fit({n: np.asarray(g.outputs[n], np.float64) * 1.01 for n in ("q", "k")})[0]
    assert not any("each step rounded" in x for x in infer(g, out, "float32"))


# ---- condensed positions (ROPE-CONDENSE): "the specified one" is the condensed angle ------------------

@pytest.mark.parametrize("case, applied, said", [
    ("rope-cos-sin-condense-3", 9.0, "every angle is 0.3333 times the specified one"),  # ratio applied twice
    ("rope-condense-interleaved-partial", 0.5, "the specified ones × 4 on every token"),  # multiplied, not divided
])
def test_condensed_angle_ratio_is_relative_to_the_condensed_angle(case, applied, said):
    """An output condensed by another ratio is said against the specified (condensed) angle: every angle is
    c / c' times it -- not c' relative to the uncondensed angle, which the spec never asks for."""
    g, wrong = _with(case, condense_ratio=applied)
    s = _one(_infer(case, params=wrong))
    assert said in s, s


def test_condensed_positions_right_are_not_called_wrong_frequencies():
    """The positions read one off at a condensed case (p - 1 condensed): said as positions, never as
    inverse frequencies scaled by 1 / c (the condensing the spec asks for)."""
    g = load_golden("rope-cos-sin-condense-3")
    s = _one(_infer("rope-cos-sin-condense-3", inputs={**g.inputs, "position_ids": g.inputs["position_ids"] + 1}))
    assert "+1 on every token" in s, s

"""The RoPE core divergence catalogue (spec 0.4.0): each mutant *is* the bug its divergence names
(hand-derived checks on small inputs), each is caught and named by a golden case at each of its
dtypes, DIV-ROPE-BF16-ANGLES keeps its 0.1.0 meaning and is superseded, and the diagnosis matches
mutants whose outputs overflow (same NaN / inf pattern)."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

from posenc import families
from posenc.adapters.reference_adapter import MutantAdapter
from posenc.harness import golden
from posenc.harness.diagnosis import diagnose
from posenc.harness.runner import compare_outputs, run_case
from posenc.reference import rope
from posenc.reference.rounding import bf16_round
from posenc.spec.models import RopeParams
from posenc import registry

SPEC = families.spec()

NEW = ["DIV-ROPE-DECODE-OFF-BY-ONE", "DIV-ROPE-POSITIONS-OFF-BY-ONE", "DIV-ROPE-ROW0-POSITIONS",
       "DIV-ROPE-DECODE-BATCH-ROW0-ONLY", "DIV-ROPE-K-NOT-ROTATED", "DIV-ROPE-Q-NOT-ROTATED",
       "DIV-ROPE-SIN-SIGN-FLIPPED", "DIV-ROPE-SIN-DROPPED", "DIV-ROPE-THETA-DEFAULT",
       "DIV-ROPE-PARTIAL-SPLIT-HEAD-DIM", "DIV-ROPE-F16-ANGLES", "DIV-ROPE-F16-INV-FREQ",
       "DIV-ROPE-F16-POSITIONS", "DIV-ROPE-F16-COS-SIN", "DIV-ROPE-BF16-ANGLE-ROUNDED",
       "DIV-ROPE-BF16-ANGLE-PRODUCT", "DIV-ROPE-POSITION-OFFSET-ROUNDED"]
PAIRS = [(d, dt) for d in NEW for dt in SPEC.divergences[d].dtypes]

P = RopeParams(head_dim=8, rope_theta=10000.0)
P_INTER = RopeParams(head_dim=8, rope_theta=10000.0, pairing="interleaved")
P_BIG = RopeParams(head_dim=16, rope_theta=500000.0)


def mut(div_id, op, params, x, dtype=None):
    return registry.run_mutant(SPEC.divergences[div_id].mutant, op, params, x, dtype)


def ref_apply(q, k, pid, p=P):
    return dict(zip(("q", "k"), rope.apply(q, k, np.asarray(pid), p)))


def ref_cos_sin(pid, p=P):
    return dict(zip(("cos", "sin"), rope.cos_sin(np.asarray(pid), p)))


def qk(B, T, D=8, Hq=2, Hk=1, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((B, Hq, T, D)), rng.standard_normal((B, Hk, T, D))


def assert_same(a: dict, b: dict):
    assert set(a) >= set(b)
    for n in b:
        np.testing.assert_allclose(a[n], b[n], rtol=0, atol=1e-12, err_msg=n)


def f16(a):
    with np.errstate(over="ignore"):
        return np.asarray(a, np.float64).astype(np.float16).astype(np.float64)


# ---- the mutants are the bugs they name (hand-derived) --------------------------------------------


def test_decode_off_by_one_shifts_single_token_calls_only():
    q, k = qk(2, 4)
    pid = np.array([[0, 1, 2, 3], [10, 11, 12, 13]])
    assert_same(mut("DIV-ROPE-DECODE-OFF-BY-ONE", "rope.apply", P, {"q": q, "k": k, "position_ids": pid}),
                ref_apply(q, k, pid))  # the prefill is right
    q1, k1 = q[:, :, :1], k[:, :, :1]
    step = np.array([[4], [14]])
    assert_same(mut("DIV-ROPE-DECODE-OFF-BY-ONE", "rope.apply", P, {"q": q1, "k": k1, "position_ids": step}),
                ref_apply(q1, k1, step + 1))  # a decode step rotates at position + 1
    x = {"position_ids.0": pid, "position_ids.1": step, "position_ids.2": step + 1}
    out = mut("DIV-ROPE-DECODE-OFF-BY-ONE", "rope.cos_sin_calls", P, x)
    for i, want in enumerate((pid, step + 1, step + 2)):
        r = ref_cos_sin(want)
        np.testing.assert_allclose(out[f"cos.{i}"], r["cos"], atol=1e-12)
        np.testing.assert_allclose(out[f"sin.{i}"], r["sin"], atol=1e-12)


def test_positions_off_by_one_is_one_based():
    q, k = qk(2, 3)
    pid = np.array([[0, 1, 2], [7, 0, 5]])
    assert_same(mut("DIV-ROPE-POSITIONS-OFF-BY-ONE", "rope.apply", P, {"q": q, "k": k, "position_ids": pid}),
                ref_apply(q, k, pid + 1))
    # position 0 is then rotated by inv_freq: cos(1), sin(1) at frequency 0
    cs = mut("DIV-ROPE-POSITIONS-OFF-BY-ONE", "rope.cos_sin", P, {"position_ids": np.array([[0]])})
    assert cs["cos"][0, 0, 0] == pytest.approx(np.cos(1.0)) and cs["sin"][0, 0, 0] == pytest.approx(np.sin(1.0))


def test_row0_positions_shared_by_the_batch():
    q, k = qk(3, 2)
    pid = np.array([[5, 6], [100, 101], [0, 9]])
    out = mut("DIV-ROPE-ROW0-POSITIONS", "rope.apply", P, {"q": q, "k": k, "position_ids": pid})
    assert_same(out, ref_apply(q, k, np.array([[5, 6]] * 3)))
    assert_same({n: v[:1] for n, v in out.items()}, {n: v[:1] for n, v in ref_apply(q, k, pid).items()})


def test_arange_positions_restart_at_zero_on_every_call():
    x = {"position_ids.0": np.array([[0, 1, 2]]), "position_ids.1": np.array([[3]])}
    out = mut("DIV-ROPE-ARANGE-POSITIONS", "rope.cos_sin_calls", P, x)
    np.testing.assert_allclose(out["cos.1"], ref_cos_sin([[0]])["cos"], atol=1e-12)
    np.testing.assert_allclose(out["cos.0"], ref_cos_sin([[0, 1, 2]])["cos"], atol=1e-12)


def test_decode_batch_row0_only_zeroes_the_other_rows():
    q, k = qk(3, 1)
    pid = np.array([[4], [9], [30]])
    out = mut("DIV-ROPE-DECODE-BATCH-ROW0-ONLY", "rope.apply", P, {"q": q, "k": k, "position_ids": pid})
    ref = ref_apply(q, k, pid)
    for n in ("q", "k"):
        np.testing.assert_allclose(out[n][0], ref[n][0], atol=1e-12)
        assert (out[n][1:] == 0).all()
    q2, k2 = qk(3, 2)
    assert mut("DIV-ROPE-DECODE-BATCH-ROW0-ONLY", "rope.apply", P,
               {"q": q2, "k": k2, "position_ids": np.array([[0, 1]] * 3)}) is None  # prefill: not this bug
    assert mut("DIV-ROPE-DECODE-BATCH-ROW0-ONLY", "rope.apply", P,
               {"q": q[:1], "k": k[:1], "position_ids": pid[:1]}) is None  # one row: not this bug


@pytest.mark.parametrize("div_id,rotated,kept", [("DIV-ROPE-K-NOT-ROTATED", "q", "k"),
                                                 ("DIV-ROPE-Q-NOT-ROTATED", "k", "q")])
def test_one_of_q_k_not_rotated(div_id, rotated, kept):
    q, k = qk(1, 2)
    pid = np.array([[3, 8]])
    out = mut(div_id, "rope.apply", P, {"q": q, "k": k, "position_ids": pid})
    np.testing.assert_allclose(out[rotated], ref_apply(q, k, pid)[rotated], atol=1e-12)
    np.testing.assert_array_equal(out[kept], {"q": q, "k": k}[kept])
    c, s = rope.cos_sin(pid, P)
    out = mut(div_id, "rope.apply_with_cos_sin", P, {"q": q, "k": k, "cos": c, "sin": s})
    np.testing.assert_array_equal(out[kept], {"q": q, "k": k}[kept])


def test_sin_sign_flipped_is_the_transposed_rotation():
    # head_dim 2, position 1, theta irrelevant (frequency 1): y0 = x0 cos 1 + x1 sin 1, y1 = x1 cos 1 - x0 sin 1
    p2 = RopeParams(head_dim=2, rope_theta=10000.0)
    x = np.array([[[[1.0, 2.0]]]])
    out = mut("DIV-ROPE-SIN-SIGN-FLIPPED", "rope.apply", p2, {"q": x, "k": x, "position_ids": np.array([[1]])})
    c, s = np.cos(1.0), np.sin(1.0)
    np.testing.assert_allclose(out["q"][0, 0, 0], [1 * c + 2 * s, 2 * c - 1 * s], atol=1e-15)
    # in general: the rotation at -position
    for p in (P, P_INTER):
        q, k = qk(2, 3)
        pid = np.array([[0, 5, 77], [2, 1, 4096]])
        out = mut("DIV-ROPE-SIN-SIGN-FLIPPED", "rope.apply", p, {"q": q, "k": k, "position_ids": pid})
        assert_same(out, ref_apply(q, k, -pid, p))
    cs = mut("DIV-ROPE-SIN-SIGN-FLIPPED", "rope.cos_sin", P, {"position_ids": np.array([[3]])})
    np.testing.assert_allclose(cs["sin"], -ref_cos_sin([[3]])["sin"], atol=1e-15)


def test_sin_sign_flipped_against_a_negative_rotation_is_the_positive_one():
    """Where ROPE-ROTATION-NEGATIVE specifies -phi, the flipped sign is the standard rotation (a
    NanoChat port that imports the common rotate_half)."""
    neg = P.model_copy(update={"rotation": "negative"})
    for p in (neg, P_INTER.model_copy(update={"rotation": "negative"})):
        q, k = qk(2, 3)
        pid = np.array([[0, 5, 77], [2, 1, 4096]])
        out = mut("DIV-ROPE-SIN-SIGN-FLIPPED", "rope.apply", p, {"q": q, "k": k, "position_ids": pid})
        assert_same(out, ref_apply(q, k, pid, p.model_copy(update={"rotation": "positive"})))
        assert not np.allclose(out["q"], ref_apply(q, k, pid, p)["q"])
        c, s = rope.cos_sin(pid, p)
        out = mut("DIV-ROPE-SIN-SIGN-FLIPPED", "rope.apply_with_cos_sin", p, {"q": q, "k": k, "cos": c, "sin": s})
        assert_same(out, dict(zip(("q", "k"), (rope.apply_with_cos_sin(t, c, s, 8, p.pairing, "positive") for t in (q, k)))))


def test_position_offset_rounded_is_torch_arange_plus_an_int():
    """The mutant is what torch computes for arange(T, dtype) + offset (rotary-embedding-torch's
    get_seq_pos), and not each position rounded once (DIV-ROPE-BF16-POSITIONS)."""
    import torch
    pid = np.array([[257, 258, 259], [2049, 2050, 2051]])
    for dtype, tdt, want in (("bfloat16", torch.bfloat16, [[256, 256, 258], [2048, 2048, 2048]]),
                             ("float16", torch.float16, [[257, 258, 259], [2048, 2048, 2050]])):
        built = [(torch.arange(3, dtype=tdt) + int(r[0])).double().numpy() for r in pid]
        np.testing.assert_array_equal(built, want)  # torch itself
        q, k = qk(2, 3)
        out = mut("DIV-ROPE-POSITION-OFFSET-ROUNDED", "rope.apply", P_INTER, {"q": q, "k": k, "position_ids": pid},
                  dtype)
        assert_same(out, ref_apply(q, k, np.asarray(want), P_INTER))
        once = mut("DIV-ROPE-BF16-POSITIONS", "rope.apply", P_INTER, {"q": q, "k": k, "position_ids": pid}, dtype)
        if dtype == "bfloat16":
            assert not np.allclose(out["q"], once["q"])  # 257, 258, 259 -> 256, 258, 260 there
    assert mut("DIV-ROPE-POSITION-OFFSET-ROUNDED", "rope.apply", P, {"q": q, "k": k, "position_ids": pid}, "float32") is None


def test_sin_dropped_scales_by_cos():
    pp = RopeParams(head_dim=8, rotary_dim=4, rope_theta=10000.0)
    q, k = qk(1, 2)
    pid = np.array([[3, 8]])
    out = mut("DIV-ROPE-SIN-DROPPED", "rope.apply", pp, {"q": q, "k": k, "position_ids": pid})
    c, _ = rope.cos_sin(pid, pp)
    cc = np.concatenate([c, c], -1)[:, None]  # half pairs: dims i and i + 2 share frequency i
    np.testing.assert_allclose(out["q"][..., :4], q[..., :4] * cc, atol=1e-15)
    np.testing.assert_array_equal(out["q"][..., 4:], q[..., 4:])  # the tail passes through


def test_theta_default_uses_10000():
    out = mut("DIV-ROPE-THETA-DEFAULT", "rope.inv_freq", P_BIG, {})
    np.testing.assert_allclose(out["inv_freq"], 10000.0 ** (-np.arange(0, 16, 2) / 16), rtol=1e-15)
    assert mut("DIV-ROPE-THETA-DEFAULT", "rope.inv_freq", P, {}) is None  # theta is already 10000


def test_partial_split_head_dim_pairs_across_the_head():
    pp = RopeParams(head_dim=8, rotary_dim=4, rope_theta=10000.0)
    x = np.arange(8.0).reshape(1, 1, 1, 8)
    out = mut("DIV-ROPE-PARTIAL-SPLIT-HEAD-DIM", "rope.apply", pp, {"q": x, "k": x, "position_ids": np.array([[3]])})
    w = 10000.0 ** (-np.array([0.0, 2.0]) / 8)  # exponent over head_dim
    c, s = np.cos(3 * w), np.sin(3 * w)
    want = x[0, 0, 0].copy()
    for i in (0, 1):  # pairs (i, i + 4)
        want[i] = x[0, 0, 0, i] * c[i] - x[0, 0, 0, i + 4] * s[i]
        want[i + 4] = x[0, 0, 0, i + 4] * c[i] + x[0, 0, 0, i] * s[i]
    np.testing.assert_allclose(out["q"][0, 0, 0], want, atol=1e-12)
    assert out["q"][0, 0, 0, 2] == 2 and out["q"][0, 0, 0, 7] == 7  # dims 2, 3, 6, 7 unchanged
    assert mut("DIV-ROPE-PARTIAL-SPLIT-HEAD-DIM", "rope.apply", P, {"q": x, "k": x, "position_ids": np.array([[3]])}) is None


def test_f16_mutants_apply_at_float16_only():
    x = {"position_ids": np.array([[3]])}
    for d in ("DIV-ROPE-F16-ANGLES", "DIV-ROPE-F16-INV-FREQ", "DIV-ROPE-F16-POSITIONS", "DIV-ROPE-F16-COS-SIN"):
        assert SPEC.divergences[d].dtypes == ["float16"]
        for dt in ("float64", "float32", "bfloat16", None):
            assert mut(d, "rope.cos_sin", P_BIG, x, dt) is None, (d, dt)


def test_f16_angles_is_float16_arithmetic():
    pid = np.array([[1857, 70000]])
    cs = mut("DIV-ROPE-F16-ANGLES", "rope.cos_sin", P_BIG, {"position_ids": pid}, "float16")
    w = rope.inv_freq(P_BIG)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        phi = np.float16(np.float16(1857.0) * w.astype(np.float16)).astype(np.float64)  # numpy float16 multiply
    np.testing.assert_allclose(cs["cos"][0, 0], np.cos(phi), atol=1e-15)
    assert np.isnan(cs["cos"][0, 1]).all()  # 70000 > 65504: inf position, NaN cos/sin


def test_f16_inv_freq_is_the_float16_buffer():
    out = mut("DIV-ROPE-F16-INV-FREQ", "rope.inv_freq", P_BIG, {}, "float16")
    np.testing.assert_array_equal(out["inv_freq"], rope.inv_freq(P_BIG)[0].astype(np.float16).astype(np.float64))
    cs = mut("DIV-ROPE-F16-INV-FREQ", "rope.cos_sin", P_BIG, {"position_ids": np.array([[70000]])}, "float16")
    assert np.isfinite(cs["cos"]).all()  # the positions stay exact: no overflow


def test_f16_positions_round_and_overflow():
    pid = np.array([[2049, 4095, 70000]])
    cs = mut("DIV-ROPE-F16-POSITIONS", "rope.cos_sin", P_BIG, {"position_ids": pid}, "float16")
    ref = ref_cos_sin([[2048, 4096]], P_BIG)  # float16 spacing 2 above 2048, ties to even
    np.testing.assert_allclose(cs["cos"][:, :2], ref["cos"], atol=1e-12)
    assert np.isnan(cs["cos"][0, 2]).all() and np.isnan(cs["sin"][0, 2]).all()
    q, k = qk(1, 3, D=16)
    out = mut("DIV-ROPE-F16-POSITIONS", "rope.apply", P_BIG, {"q": q, "k": k, "position_ids": pid}, "float16")
    assert np.isnan(out["q"][0, :, 2]).all() and np.isfinite(out["q"][0, :, :2]).all()


def test_f16_cos_sin_rounds_the_float32_angle():
    pid = np.array([[3000, 131071]])
    cs = mut("DIV-ROPE-F16-COS-SIN", "rope.cos_sin", P_BIG, {"position_ids": pid}, "float16")
    phi = pid[..., None] * rope.inv_freq(P_BIG)[0]
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(cs["cos"], np.cos(f16(phi)), atol=1e-15, equal_nan=True)
    assert np.isnan(cs["cos"][0, 1, 0]) and np.isfinite(cs["cos"][0, 1, -1])  # only angles > 65504 rad overflow
    assert np.isfinite(cs["cos"][0, 0]).all()


def test_bf16_angle_rounded_vs_product():
    pid = np.array([[300, 131071]])
    w = rope.inv_freq(P_BIG)[0]
    phi32 = (pid.astype(np.float32)[..., None] * w.astype(np.float32)).astype(np.float64)
    rounded = mut("DIV-ROPE-BF16-ANGLE-ROUNDED", "rope.cos_sin", P_BIG, {"position_ids": pid})
    want = np.cos(np.asarray(phi32.astype(ml_dtypes.bfloat16), np.float64))
    np.testing.assert_allclose(rounded["cos"], want, atol=2e-3)  # float32 vs float64 product: same bf16 but for ties
    assert rounded["cos"][0, 1, 0] == pytest.approx(np.cos(131072.0))  # bf16(131071) = 131072
    product = mut("DIV-ROPE-BF16-ANGLE-PRODUCT", "rope.cos_sin", P_BIG, {"position_ids": pid})
    phi = bf16_round(bf16_round(pid.astype(np.float64))[..., None] * bf16_round(w))
    np.testing.assert_allclose(product["cos"], np.cos(phi), atol=1e-15)
    inv = mut("DIV-ROPE-BF16-ANGLE-PRODUCT", "rope.inv_freq", P_BIG, {})
    np.testing.assert_array_equal(inv["inv_freq"], bf16_round(w))


# ---- DIV-ROPE-BF16-ANGLES: 0.1.0 meaning restored, superseded --------------------------------------


def test_bf16_angles_superseded():
    d = SPEC.divergences["DIV-ROPE-BF16-ANGLES"]
    assert d.since == "0.1.0"
    assert d.superseded_by == ["DIV-ROPE-BF16-INV-FREQ", "DIV-ROPE-BF16-ANGLE-PRODUCT"]
    assert "DIV-ROPE-BF16-ANGLES" not in SPEC.current_divergences
    assert SPEC.divergences["DIV-ROPE-BF16-ANGLE-PRODUCT"].since == "0.2.0"
    # its 0.1.0 mutant: inv_freq and the angle both in bf16 (what ANGLE-PRODUCT now names)
    pid = np.array([[131071]])
    a = mut("DIV-ROPE-BF16-ANGLES", "rope.cos_sin", P_BIG, {"position_ids": pid})
    b = mut("DIV-ROPE-BF16-ANGLE-PRODUCT", "rope.cos_sin", P_BIG, {"position_ids": pid})
    np.testing.assert_array_equal(a["cos"], b["cos"])


@functools.lru_cache(maxsize=None)
def _golden(case_id):
    return golden.load(next(c for c in families.all_cases() if c.id == case_id))


def test_superseded_id_is_never_diagnosed():
    g = _golden("rope-llama3-8b")
    out = run_case(MutantAdapter("DIV-ROPE-BF16-ANGLES"), g, "bfloat16", "cpu")
    names = [m.divergence for m in diagnose(SPEC, g, out, "bfloat16")]
    assert "DIV-ROPE-BF16-ANGLE-PRODUCT" in names and "DIV-ROPE-BF16-ANGLES" not in names


# ---- diagnosis of outputs with inf / NaN -------------------------------------------------------------


def test_diagnosis_matches_the_same_non_finite_pattern():
    g = _golden("rope-llama3-8b")
    out = run_case(MutantAdapter("DIV-ROPE-F16-POSITIONS"), g, "float16", "cpu")
    assert np.isnan(out["q"]).any() and np.isfinite(out["q"]).any()
    assert not all(c.ok for c in compare_outputs(g, out, "float16"))
    names = [m.divergence for m in diagnose(SPEC, g, out, "float16")]
    assert "DIV-ROPE-F16-POSITIONS" in names
    # a NaN where the mutant is finite: no match
    extra = {n: v.copy() for n, v in out.items()}
    extra["q"][0, 0, 0, 0] = np.nan
    assert "DIV-ROPE-F16-POSITIONS" not in [m.divergence for m in diagnose(SPEC, g, extra, "float16")]
    # a finite value where the mutant is NaN: no match
    fewer = {n: v.copy() for n, v in out.items()}
    fewer["k"][np.isnan(fewer["k"])] = 0.0
    assert "DIV-ROPE-F16-POSITIONS" not in [m.divergence for m in diagnose(SPEC, g, fewer, "float16")]
    # inf instead of NaN: another pattern
    inf = {n: np.where(np.isnan(v), np.inf, v) for n, v in out.items()}
    assert "DIV-ROPE-F16-POSITIONS" not in [m.divergence for m in diagnose(SPEC, g, inf, "float16")]
    # the finite elements are still compared: a wrong finite element breaks the match
    wrong = {n: v.copy() for n, v in out.items()}
    wrong["q"][0, 0, 3, :] += 1.0  # row 0 (positions 0 .. 4) is finite
    assert "DIV-ROPE-F16-POSITIONS" not in [m.divergence for m in diagnose(SPEC, g, wrong, "float16")]


def test_nan_patterns_separate_f16_positions_from_f16_cos_sin():
    g = _golden("rope-llama3-8b")
    out = run_case(MutantAdapter("DIV-ROPE-F16-COS-SIN"), g, "float16", "cpu")
    names = [m.divergence for m in diagnose(SPEC, g, out, "float16")]
    assert "DIV-ROPE-F16-COS-SIN" in names and "DIV-ROPE-F16-POSITIONS" not in names


# ---- catalogue: caught by a golden tagged with each violated clause, and named ----------------------


@pytest.mark.parametrize("div_id,dtype", PAIRS, ids=[f"{d}-{t}" for d, t in PAIRS])
def test_caught_by_a_tagged_golden(div_id, dtype):
    d = SPEC.divergences[div_id]
    ops = set(registry.mutants()[d.mutant])
    for clause in d.violates:
        tagged = [c for c in families.all_cases() if c.op in ops and clause in c.clauses]
        caught = False
        for c in tagged:
            g = _golden(c.id)
            out = registry.run_mutant(d.mutant, c.op, c.params, g.inputs, dtype)
            if out is None:
                continue
            if not all(x.ok for x in compare_outputs(g, {k: np.asarray(v) for k, v in out.items()}, dtype)):
                caught = True
                break
        assert caught, f"{div_id} not caught at {dtype} by a golden case tagged {clause}"


@pytest.mark.parametrize("div_id,dtype", PAIRS, ids=[f"{d}-{t}" for d, t in PAIRS])
def test_mutant_adapter_fails_and_is_named(div_id, dtype):
    d = SPEC.divergences[div_id]
    adapter = MutantAdapter(div_id)
    ops = set(registry.mutants()[d.mutant])
    caught = []
    for c in families.all_cases():
        if c.op not in ops:
            continue
        g = _golden(c.id)
        out = run_case(adapter, g, dtype, "cpu")
        if all(x.ok for x in compare_outputs(g, out, dtype)):
            continue
        caught.append(c.id)
        if div_id in [m.divergence for m in diagnose(SPEC, g, out, dtype)]:
            return
    pytest.fail(f"{div_id} at {dtype}: caught by {caught[:5]} but never named" if caught
                else f"{div_id}: no golden case catches MutantAdapter at {dtype}")

"""The NumPy float64 reference against values that do NOT come from itself.

Independent oracles used here:

* hand-derived figures (``/work/shared/research/encodings-facts.md``, "Golden 1", A.1, A.2,
  B.1-B.4, H) and values re-derived in the test with :mod:`math`;
* algebraic identities (the half/interleaved permutation; the complex formulation);
* real upstream code run in the test (HF transformers 5.24: Llama rotary, Marian, DistilBERT,
  GPT-J; torch's LayerNorm and bfloat16 rounding).

Float comparisons with hand figures use a few float64 ulp; comparisons with upstream code that
computes in float32 use a float32-level bound explained next to each test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.harness import golden
from posenc.registry import all_cases, cases_by_id as by_id
from posenc.harness.diagnosis import caught_outputs, seen_through
from posenc.harness.runner import compare_outputs
from posenc.reference import learned, position_ids, rope, sinusoidal
from posenc.spec import load_spec
from posenc.spec.errors import PositionOutOfRange
from posenc.spec.models import RopeParams, SinusoidalParams
from posenc import registry
from posenc.reference.rounding import bf16_round

CASES = all_cases()

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)
FEW_ULP = dict(rtol=1e-15, atol=1e-15)

X8 = np.arange(8, dtype=np.float64)


def _rope1(x, pos, **kw):
    """Reference RoPE of one head vector ``x [D]`` at one position (q only)."""
    p = RopeParams(head_dim=len(x), **kw)
    q = np.asarray(x, np.float64).reshape(1, 1, 1, -1)
    y, _ = rope.apply(q, q, np.array([[pos]]), p)
    return y.reshape(-1)


# =============================================================================================
# RoPE: hand-derived figures (encodings-facts "Golden 1": d = 8, theta = 1e4, p = 3, x = 0..7)
# =============================================================================================

GOLDEN1_HALF = [-0.5644800322394689, -0.522264544181092, 1.8191270662830012, 2.978986531510111,
                -3.9599699864017817, 5.072202652289369, 6.0572912028989165, 7.0089684865236315]
GOLDEN1_INTERLEAVED = [-0.1411200080598672, -0.9899924966004454, 1.0241123582671932,
                       3.4570498806994974, 3.8482226339834718, 5.1177321695549205,
                       5.978973031520236, 7.017968473023637]
GOLDEN1_PARTIAL_HALF = [-0.2822400161197344, 0.9095635331415006, -1.9799849932008908,
                        3.0286456014494583, 4, 5, 6, 7]
GOLDEN1_PARTIAL_INTERLEAVED = [-0.1411200080598672, -0.9899924966004454, 1.9091135668904882,
                               3.0586411016519537, 4, 5, 6, 7]


@pytest.mark.parametrize("pairing, rotary_dim, expected", [
    ("half", None, GOLDEN1_HALF),
    ("interleaved", None, GOLDEN1_INTERLEAVED),
    ("half", 4, GOLDEN1_PARTIAL_HALF),
    ("interleaved", 4, GOLDEN1_PARTIAL_INTERLEAVED),
])
def test_rope_golden1_figures(pairing, rotary_dim, expected):
    y = _rope1(X8, 3, rope_theta=10000.0, pairing=pairing, rotary_dim=rotary_dim)
    np.testing.assert_allclose(y, expected, **FEW_ULP)


def test_rope_golden1_derived_by_hand():
    """Where the figures come from: the rotation formulas written out with math.cos/math.sin."""
    x = list(map(float, range(8)))
    c3, s3 = math.cos(3.0), math.sin(3.0)
    w1 = 10000.0 ** (-2 / 8)  # 0.1
    phi1 = 3 * w1
    # half pairing: pairs (i, i + 4)
    y0 = x[0] * c3 - x[4] * s3
    y4 = x[4] * c3 + x[0] * s3
    y5 = x[5] * math.cos(phi1) + x[1] * math.sin(phi1)
    assert y0 == pytest.approx(-0.5644800322394689, rel=1e-15)
    assert y4 == pytest.approx(-3.9599699864017817, rel=1e-15)
    half = _rope1(X8, 3, pairing="half")
    np.testing.assert_allclose(half[[0, 4, 5]], [y0, y4, y5], **FEW_ULP)
    # interleaved pairing: pairs (2i, 2i + 1)
    i0 = x[0] * c3 - x[1] * s3  # = -sin 3
    i1 = x[1] * c3 + x[0] * s3  # = cos 3
    i2 = x[2] * math.cos(phi1) - x[3] * math.sin(phi1)
    assert i0 == pytest.approx(-0.1411200080598672, rel=1e-15)
    assert i1 == pytest.approx(-0.9899924966004454, rel=1e-15)
    inter = _rope1(X8, 3, pairing="interleaved")
    np.testing.assert_allclose(inter[[0, 1, 2]], [i0, i1, i2], **FEW_ULP)
    # partial rotary r = 4: inv_freq = [1, 10000^(-2/4)] = [1, 0.01], pairs (0, 2), (1, 3) in half
    w = 10000.0 ** (-2 / 4)
    p1 = x[1] * math.cos(3 * w) - x[3] * math.sin(3 * w)
    part = _rope1(X8, 3, pairing="half", rotary_dim=4)
    np.testing.assert_allclose(part[[0, 1]], [x[0] * c3 - x[2] * s3, p1], **FEW_ULP)
    assert part[4:].tolist() == x[4:]


def test_rope_inv_freq_figures():
    w, a = rope.inv_freq(RopeParams(head_dim=8, rope_theta=10000.0))
    np.testing.assert_allclose(w, [1.0, 0.1, 0.01, 0.001], rtol=2 * EPS64, atol=0)
    assert a == 1.0


def test_rope_inv_freq_partial_uses_rotary_dim():
    """ROPE-PARTIAL / ROPE-INV-FREQ: the exponent denominator is rotary_dim, not head_dim."""
    p = RopeParams(head_dim=96, rotary_dim=24, rope_theta=10000.0)  # GPT-NeoX-20B
    w, _ = rope.inv_freq(p)
    assert w.shape == (12,)
    expected = [math.pow(10000.0, -2 * i / 24) for i in range(12)]
    np.testing.assert_allclose(w, expected, rtol=4 * EPS64, atol=0)
    wrong = [math.pow(10000.0, -2 * i / 96) for i in range(12)]
    assert not np.allclose(w[1:], wrong[1:], rtol=1e-3)
    # r = 4 of d = 8: [1, 0.01] (encodings-facts Golden 1, partial rotary)
    w4, _ = rope.inv_freq(RopeParams(head_dim=8, rotary_dim=4))
    np.testing.assert_allclose(w4, [1.0, 0.01], rtol=2 * EPS64, atol=0)


def test_rope_attention_factor_scales_pairs_not_tail():
    x = np.arange(1.0, 9.0)
    y1 = _rope1(x, 5, rotary_dim=4)
    y2 = _rope1(x, 5, rotary_dim=4, attention_factor=1.25)
    np.testing.assert_allclose(y2[:4], 1.25 * y1[:4], **FEW_ULP)
    assert y2[4:].tolist() == x[4:].tolist()


# ------------------------------------------------------------------------------------------
# The permutation identity (encodings-facts C.3): rope_half(x[P]) == rope_interleaved(x)[P]
# ------------------------------------------------------------------------------------------


def _perm(d: int) -> np.ndarray:
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])


def test_permutation_identity_golden1_exact():
    P = _perm(8)
    assert P.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    half = _rope1(X8[P], 3, pairing="half")
    inter = _rope1(X8, 3, pairing="interleaved")
    np.testing.assert_array_equal(half, inter[P])
    # and the pairings really differ (the identity is not vacuous)
    assert not np.array_equal(_rope1(X8, 3, pairing="half"), inter)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("head_dim", [8, 64, 128, 256])
def test_permutation_identity_random_exact(seed, head_dim):
    rng = np.random.default_rng([seed, head_dim])
    B, H, T = 2, 3, 5
    q = rng.standard_normal((B, H, T, head_dim))
    k = rng.standard_normal((B, 1, T, head_dim))
    pos = rng.integers(0, 131072, size=(B, T))
    theta = float(rng.choice([10000.0, 500000.0, 1e6]))
    P = _perm(head_dim)
    ph = RopeParams(head_dim=head_dim, rope_theta=theta, pairing="half")
    pi = RopeParams(head_dim=head_dim, rope_theta=theta, pairing="interleaved")
    qh, kh = rope.apply(q[..., P], k[..., P], pos, ph)
    qi, ki = rope.apply(q, k, pos, pi)
    np.testing.assert_array_equal(qh, qi[..., P])
    np.testing.assert_array_equal(kh, ki[..., P])


# ------------------------------------------------------------------------------------------
# The independent complex formulation (Meta llama/model.py) vs the real rotation
# ------------------------------------------------------------------------------------------


@st.composite
def rope_problems(draw):
    half_r = draw(st.integers(1, 64))
    rotary_dim = 2 * half_r
    head_dim = rotary_dim + 2 * draw(st.integers(0, 8))
    params = RopeParams(
        head_dim=head_dim,
        rotary_dim=draw(st.sampled_from([None, rotary_dim])) if head_dim == rotary_dim else rotary_dim,
        rope_theta=draw(st.sampled_from([10000.0, 500000.0, 1e6, 123.5])),
        pairing=draw(st.sampled_from(["half", "interleaved", "deinterleave"])),
        rotation=draw(st.sampled_from(["positive", "negative"])),
        attention_factor=draw(st.sampled_from([1.0, 1.25, 0.7, 1.1902380714238083])),
    )
    B, H, T = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    pos = np.asarray(draw(st.lists(st.lists(st.integers(0, 131071), min_size=T, max_size=T),
                                   min_size=B, max_size=B)), dtype=np.int64)
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).uniform(-2, 2, size=(B, H, T, head_dim))
    return params, x, pos


@settings(max_examples=50, deadline=None)
@given(rope_problems())
def test_rope_apply_matches_complex_formulation(problem):
    params, x, pos = problem
    y, _ = rope.apply(x, x[:, :1], pos, params)
    yc = rope.apply_complex(x, pos, params)
    a, b = rope.pair_indices(params.rdim, params.pairing)
    oa, ob = rope.output_indices(params.rdim, params.pairing)
    pair_norm = np.zeros_like(x)
    norm = np.hypot(x[..., a], x[..., b]) * params.attention_factor
    pair_norm[..., oa] = norm
    pair_norm[..., ob] = norm
    # a few ulp of the rotated pair's norm (the exp(j phi) of NumPy may differ from cos/sin by an ulp)
    assert np.all(np.abs(y - yc) <= 4 * EPS64 * pair_norm), np.max(np.abs(y - yc))
    r = params.rdim
    np.testing.assert_array_equal(y[..., r:], x[..., r:])  # ROPE-PARTIAL: bit-identical tail
    # pair norms scale by exactly the attention factor (up to rounding)
    np.testing.assert_allclose(np.hypot(y[..., oa], y[..., ob]), norm, rtol=8 * EPS64, atol=1e-300)


@pytest.mark.parametrize("pairing", ["half", "interleaved", "deinterleave"])
def test_rotation_negative_by_hand(pairing):
    """ROPE-ROTATION-NEGATIVE's figure and its general form, written out here: with the pair (a, b)
    of frequency i written to (a', b'), y_a' = x_a cos + x_b sin, y_b' = x_b cos - x_a sin."""
    p = RopeParams(head_dim=4, rope_theta=10000.0, pairing=pairing, rotation="negative")
    e0 = np.zeros((1, 1, 1, 4))
    e0[..., 0] = 1.0
    y = rope.apply(e0, e0, np.array([[1]]), p)[0].ravel()
    c1, s1 = np.cos(1.0), np.sin(1.0)
    # e_0 is the first member of pair 0 in every layout; its second member sits at 2 (half, the
    # de-interleaved output) or 1 (interleaved)
    want = [c1, 0, -s1, 0] if pairing != "interleaved" else [c1, -s1, 0, 0]
    np.testing.assert_allclose(y, want, atol=1e-15)
    if pairing == "half":
        np.testing.assert_allclose(y, [0.540302, 0, -0.841471, 0], atol=5e-7)  # the clause's figure
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 1, 4)
    yx = rope.apply(x, x, np.array([[5]]), p)[0].ravel()
    w = np.array([1.0, 0.01])  # 10000 ** (-2i / 4)
    c, s = np.cos(5 * w), np.sin(5 * w)
    if pairing == "half":  # pairs (0, 2), (1, 3)
        want = [1 * c[0] + 3 * s[0], 2 * c[1] + 4 * s[1], 3 * c[0] - 1 * s[0], 4 * c[1] - 2 * s[1]]
    elif pairing == "interleaved":  # pairs (0, 1), (2, 3)
        want = [1 * c[0] + 2 * s[0], 2 * c[0] - 1 * s[0], 3 * c[1] + 4 * s[1], 4 * c[1] - 3 * s[1]]
    else:  # pairs (0, 1), (2, 3) in, written (0, 2), (1, 3)
        want = [1 * c[0] + 2 * s[0], 3 * c[1] + 4 * s[1], 2 * c[0] - 1 * s[0], 4 * c[1] - 3 * s[1]]
    np.testing.assert_allclose(yx, want, atol=1e-14)
    # the other direction is a different encoding, and the tables are the same for both
    assert not np.allclose(yx, rope.apply(x, x, np.array([[5]]), p.model_copy(update={"rotation": "positive"}))[0].ravel())
    for got, ref in zip(rope.cos_sin(np.array([[5]]), p), rope.cos_sin(np.array([[5]]), p.model_copy(update={"rotation": "positive"}))):
        np.testing.assert_array_equal(got, ref)


def test_rotation_rejects_an_unknown_direction():
    with pytest.raises(ValueError, match="ROPE-ROTATION-NEGATIVE: unknown rotation 'clockwise'"):
        rope.apply_with_cos_sin(np.zeros((1, 1, 1, 4)), np.ones((1, 1, 2)), np.zeros((1, 1, 2)), 4, "half", "clockwise")
    with pytest.raises(ValueError):
        RopeParams(head_dim=4, rotation="clockwise")


def test_complex_formulation_is_not_trivially_equal():
    """The cross-check would catch a pairing mix-up: the complex form with the other pairing differs."""
    p = RopeParams(head_dim=8, pairing="half")
    x = X8.reshape(1, 1, 1, 8)
    other = rope.apply_complex(x, np.array([[3]]), p.model_copy(update={"pairing": "interleaved"}))
    assert not np.allclose(rope.apply(x, x, np.array([[3]]), p)[0], other)


# =============================================================================================
# Sinusoidal
# =============================================================================================

SIN_POS = np.array([[0, 1, 2, 3, 7], [100, 101, 511, 1000, 2047]])


def _vaswani_angle(p: int, i: int, D: int) -> float:
    return p / 10000.0 ** (2 * i / D)


def test_sinusoidal_interleaved_d8_by_hand():
    pe = sinusoidal.table(SIN_POS, SinusoidalParams(dim=8, layout="interleaved"))
    assert pe.shape == (2, 5, 8)
    for b, t in np.ndindex(SIN_POS.shape):
        p = int(SIN_POS[b, t])
        for i in range(4):
            assert pe[b, t, 2 * i] == pytest.approx(math.sin(_vaswani_angle(p, i, 8)), rel=0, abs=1e-12)
            assert pe[b, t, 2 * i + 1] == pytest.approx(math.cos(_vaswani_angle(p, i, 8)), rel=0, abs=1e-12)
    # the last frequency at D = 8 is 1e-3 (not 1e-4): column 6 at p = 1000 is sin(1)
    assert pe[1, 3, 6] == pytest.approx(math.sin(1.0), abs=1e-13)


@pytest.mark.parametrize("D, n_sin", [(8, 4), (7, 4)])
def test_sinusoidal_concat_by_hand(D, n_sin):
    """SIN-VASWANI-CONCAT (encodings-facts A.2): sin block ceil(D/2) columns, then cos block."""
    pe = sinusoidal.table(SIN_POS, SinusoidalParams(dim=D, layout="concat"))
    assert pe.shape == (2, 5, D)
    n_cos = D - n_sin
    assert n_cos == D // 2
    for b, t in np.ndindex(SIN_POS.shape):
        p = int(SIN_POS[b, t])
        sins = [math.sin(_vaswani_angle(p, i, D)) for i in range(n_sin)]
        coss = [math.cos(_vaswani_angle(p, i, D)) for i in range(n_cos)]
        np.testing.assert_allclose(pe[b, t], sins + coss, rtol=0, atol=1e-12)


def test_sinusoidal_interleaved_odd_d7_by_hand():
    """Odd D = 7 interleaved: the last column (index 6) is a sin column with exponent 6/7."""
    pe = sinusoidal.table(SIN_POS, SinusoidalParams(dim=7, layout="interleaved"))
    assert pe.shape == (2, 5, 7)
    for b, t in np.ndindex(SIN_POS.shape):
        p = int(SIN_POS[b, t])
        expected = [(math.sin if j % 2 == 0 else math.cos)(p * 10000.0 ** (-2 * (j // 2) / 7))
                    for j in range(7)]
        np.testing.assert_allclose(pe[b, t], expected, rtol=0, atol=1e-12)
        assert pe[b, t, 6] == pytest.approx(math.sin(p * 10000.0 ** (-6 / 7)), abs=1e-12)


def test_sinusoidal_position_zero():
    for layout in ("interleaved", "concat"):
        for D in (7, 8):
            pe = sinusoidal.table(np.array([[0]]), SinusoidalParams(dim=D, layout=layout))[0, 0]
            is_sin = sinusoidal.is_sin_column(SinusoidalParams(dim=D, layout=layout))
            assert pe.tolist() == [0.0 if s else 1.0 for s in is_sin]


# =============================================================================================
# Learned absolute
# =============================================================================================


def test_opt_rows_figures():
    """encodings-facts B.4: mask [[0,0,1,1,1],[1,1,1,1,1]] -> rows [[1,1,2,3,4],[2,3,4,5,6]]."""
    m = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    pos = learned.opt_positions(m)
    np.testing.assert_array_equal(pos, [[-1, -1, 0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 2, -1, -1]])
    rows = learned.opt_rows(pos)
    np.testing.assert_array_equal(rows[:2], [[1, 1, 2, 3, 4], [2, 3, 4, 5, 6]])
    np.testing.assert_array_equal(rows[2], [2, 3, 4, 1, 1])  # right padding reads row 1


def test_opt_cache_keeps_last_column():
    m = np.array([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    full = learned.opt_rows(learned.opt_positions(m))
    last = learned.opt_rows(learned.opt_positions(m, cache_length=5))
    assert last.shape == (2, 1)
    np.testing.assert_array_equal(last, full[:, -1:])
    np.testing.assert_array_equal(last, [[6], [7]])


def test_opt_embeddings_read_offset_rows():
    table = np.arange(10 * 3, dtype=np.float64).reshape(10, 3)
    m = np.array([[0, 0, 1, 1, 1]])
    e = learned.opt_embeddings(table, m)
    np.testing.assert_array_equal(e[0], table[[1, 1, 2, 3, 4]])


def test_parameter_counts_of_golden_tables():
    """GPT-2 small wpe 1024 x 768 = 786,432; BERT-base position table 512 x 768 = 393,216."""
    cases = by_id()
    gpt2 = golden.case_inputs(cases["gpt2-small-prefill"])
    assert gpt2["wpe"].shape == (1024, 768)
    assert gpt2["wpe"].size == 786_432
    bert = golden.case_inputs(cases["bert-base-token-types"])
    assert bert["position_embeddings"].shape == (512, 768)
    assert bert["position_embeddings"].size == 393_216
    assert bert["token_type_embeddings"].shape[0] == 2
    opt = golden.case_inputs(cases["opt-125m-embeddings"])
    assert opt["table"].shape == (2048 + 2, 768)


@pytest.mark.parametrize("bad_row", [4, -1, 100, -5])
def test_lookup_out_of_range_raises(bad_row):
    table = np.arange(4 * 3, dtype=np.float64).reshape(4, 3)
    with pytest.raises(PositionOutOfRange, match="LEARNED-ROW-RANGE") as ei:
        learned.lookup(table, np.array([[0, bad_row, 1]]))
    assert isinstance(ei.value, IndexError)
    assert ei.value.num_rows == 4
    # the positive control: the last valid row works and returns that row
    np.testing.assert_array_equal(learned.lookup(table, np.array([3])), table[[3]])


def test_lookup_negative_row_is_not_wrapped_even_alone():
    table = np.eye(3)
    with pytest.raises(IndexError):
        learned.lookup(table, np.array(-1))


def test_gpt2_sum_tiny_tables():
    wte = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    wpe = np.array([[0.5, 0.25, 0.125], [-1.0, -2.0, -3.0], [4.0, 0.0, -4.0]])
    ids = np.array([[1, 0, 1]])
    # default positions: cache_length + arange(T); with cache 0 -> 0, 1, 2
    got = learned.gpt2_embeddings(wte, wpe, ids)
    expected = [[[wte[i][e] + wpe[t][e] for e in range(3)] for t, i in enumerate(ids[0])]]
    np.testing.assert_array_equal(got, expected)
    # after one cached token the single new token reads wpe row 1
    got1 = learned.gpt2_embeddings(wte, wpe, np.array([[0]]), cache_length=1)
    np.testing.assert_array_equal(got1, [[[0.0, 0.0, 0.0]]])
    # explicit position_ids win
    got2 = learned.gpt2_embeddings(wte, wpe, np.array([[0]]), position_ids=np.array([[2]]))
    np.testing.assert_array_equal(got2, [[[5.0, 2.0, -1.0]]])
    with pytest.raises(PositionOutOfRange):
        learned.gpt2_embeddings(wte, wpe, np.array([[0]]), cache_length=3)


def _layer_norm_by_hand(v, gamma, beta, eps):
    n = len(v)
    mean = sum(v) / n
    var = sum((a - mean) ** 2 for a in v) / n  # biased, as torch.nn.LayerNorm
    return [(a - mean) / math.sqrt(var + eps) * g + b for a, g, b in zip(v, gamma, beta)]


def test_bert_sum_tiny_tables():
    word = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -1.0, 3.0], [0.25, 0.0, 0.0, -0.5]])
    pos = np.array([[0.1, 0.2, 0.3, 0.4], [-0.4, 0.0, 0.4, 0.8], [1.0, -1.0, 1.0, -1.0]])
    tt = np.array([[0.0, 0.0, 0.0, 1.0], [2.0, 0.0, 0.0, 0.0]])
    gamma = np.array([1.0, 0.5, 2.0, 1.5])
    beta = np.array([0.0, 0.25, -0.25, 1.0])
    ids = np.array([[1, 2, 0]])
    types = np.array([[0, 1, 1]])
    eps = 1e-12
    got = learned.bert_embeddings(word, pos, tt, gamma, beta, ids, token_type_ids=types, layer_norm_eps=eps)
    expected = [[_layer_norm_by_hand([word[i][e] + tt[s][e] + pos[t][e] for e in range(4)],
                                     gamma, beta, eps)
                 for t, (i, s) in enumerate(zip(ids[0], types[0]))]]
    np.testing.assert_allclose(got, expected, rtol=0, atol=16 * EPS64 * 4)
    # torch's LayerNorm in float64 agrees too
    summed = torch.tensor(word[ids] + tt[types] + pos[np.arange(3)][None], dtype=torch.float64)
    ref = torch.nn.functional.layer_norm(summed, (4,), torch.from_numpy(gamma), torch.from_numpy(beta), eps)
    np.testing.assert_allclose(got, ref.numpy(), rtol=0, atol=16 * EPS64 * 4)
    # token_type_ids default to zeros (LEARNED-BERT-TOKEN-TYPE): row 0 of tt is added
    got0 = learned.bert_embeddings(word, pos, tt, gamma, beta, ids, layer_norm_eps=eps)
    exp0 = [[_layer_norm_by_hand([word[i][e] + tt[0][e] + pos[t][e] for e in range(4)], gamma, beta, eps)
             for t, i in enumerate(ids[0])]]
    np.testing.assert_allclose(got0, exp0, rtol=0, atol=16 * EPS64 * 4)
    assert not np.allclose(got0, got)


def test_bert_layer_norm_eps_matters():
    """A constant row has variance 0; the result is beta, with eps keeping it finite."""
    word = np.ones((1, 4))
    z = np.zeros((1, 4))
    y = learned.bert_embeddings(word, z, z, np.ones(4), np.full(4, 0.5), np.array([[0]]))
    np.testing.assert_array_equal(y, np.full((1, 1, 4), 0.5))


# =============================================================================================
# Position ids
# =============================================================================================


def test_position_ids_prefill_and_decode():
    np.testing.assert_array_equal(position_ids.prefill(2, 4), [[0, 1, 2, 3], [0, 1, 2, 3]])
    np.testing.assert_array_equal(position_ids.decode(3, 2, 7), [[7, 8]] * 3)
    assert position_ids.decode(1, 1, 0).dtype == np.int64
    # decoding one token at a time reproduces the prefill
    steps = np.concatenate([position_ids.decode(2, 1, t) for t in range(5)], axis=1)
    np.testing.assert_array_equal(steps, position_ids.prefill(2, 5))
    with pytest.raises(ValueError, match="POS-DECODE"):
        position_ids.decode(1, 1, -1)


def test_position_ids_left_pad():
    pos, cmp = position_ids.left_pad(np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]))
    np.testing.assert_array_equal(pos[0][cmp[0]], [0, 1, 2])
    np.testing.assert_array_equal(cmp[0], [False, False, True, True, True])
    np.testing.assert_array_equal(pos[1], [0, 1, 2, 3, 4])
    assert cmp[1].all()
    # with a cache: mask covers the past, the slice keeps the new tokens
    pos_c, cmp_c = position_ids.left_pad(np.array([[0, 0, 1, 1, 1, 1]]), cache_length=4)
    np.testing.assert_array_equal(pos_c, [[2, 3]])
    assert cmp_c.all()
    with pytest.raises(ValueError):
        position_ids.left_pad(np.array([[0, 2, 1]]))


def test_position_ids_packed():
    np.testing.assert_array_equal(position_ids.packed([0, 3, 5, 9]), [[0, 1, 2, 0, 1, 0, 1, 2, 3]])
    np.testing.assert_array_equal(position_ids.packed([0, 0, 2]), [[0, 1]])  # empty document


@pytest.mark.parametrize("cu", [[1, 3, 5], [0, 5, 3], [0], [], [[0, 3]]])
def test_position_ids_packed_invalid(cu):
    with pytest.raises(ValueError, match="POS-PACKED"):
        position_ids.packed(cu)


# =============================================================================================
# Malformed inputs must not give silently wrong results
# =============================================================================================


def test_rope_apply_rejects_position_ids_that_are_not_B_T():
    """ROPE-ANGLE: position_ids are [B, T]. A 1-D [T] array must be rejected: with H == T it
    would otherwise broadcast along the head axis and rotate head h by position h."""
    p = RopeParams(head_dim=8)
    q = np.random.default_rng(0).standard_normal((1, 3, 3, 8))
    with pytest.raises(ValueError):
        rope.apply(q, q, np.array([0, 1, 2]), p)


@pytest.mark.parametrize("fn", [lambda m: position_ids.left_pad(m, cache_length=-1),
                                lambda m: learned.opt_positions(m, cache_length=-1)],
                         ids=["left_pad", "opt_positions"])
def test_negative_cache_length_is_rejected(fn):
    """cache_length >= 0 (POS-DECODE's constraint; ``decode`` enforces it). A negative value
    must not silently slice from the end of the mask."""
    with pytest.raises(ValueError):
        fn(np.array([[0, 1, 1, 1]]))


# =============================================================================================
# Cross-checks against real upstream code (transformers 5.24, torch)
# =============================================================================================


def test_hf_llama_rotary_embedding_float32_angles():
    """HF LlamaRotaryEmbedding computes inv_freq and the angles in float32 whatever the dtype
    (``position_ids.float() * inv_freq.float()``), so even with float64 activations its cos/sin
    differ from float64 by the float32 angle error: inv_freq carries a few eps32 of relative
    error (its exponent is rounded and amplified by ln theta) and the product is rounded once
    more, so |err| <= K * eps32 * (1 + |phi|) with K = 16 (the spec's K_ANGLE); observed ~1."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=512, num_attention_heads=4, head_dim=128,
                      rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                      max_position_embeddings=131072)
    emb = LlamaRotaryEmbedding(cfg)
    pos = np.array([[0, 1, 2, 3, 4], [131067, 131068, 131069, 131070, 131071]])
    x = torch.zeros(2, 4, 5, 128, dtype=torch.float64)
    c, s = (t.numpy() for t in emb(x, torch.from_numpy(pos)))
    p = RopeParams(head_dim=128, rope_theta=500000.0)
    rc, rs = rope.cos_sin(pos, p)
    phi = rope.angles(pos, p)
    bound = 16 * EPS32 * (1 + phi)
    for got, ref in ((c, rc), (s, rs)):
        # HF duplicates the half-width table: cat(freqs, freqs)
        assert np.all(np.abs(got[..., :64] - ref) <= bound)
        assert np.all(np.abs(got[..., 64:] - ref) <= bound)
    np.testing.assert_allclose(emb.inv_freq.numpy(), rope.inv_freq(p)[0], rtol=16 * EPS32)


def test_hf_nanochat_apply_float64_matches_rotation_negative():
    """transformers' NanoChat ``apply_rotary_pos_emb`` (its own ``rotate_half``, ``cat(x2, -x1)``) in
    float64 on the reference's cos/sin: the reference with rotation negative, and not positive."""
    from transformers.models.nanochat.modeling_nanochat import apply_rotary_pos_emb

    rng = np.random.default_rng(11)
    p = RopeParams(head_dim=64, rope_theta=10000.0, rotation="negative")
    q, k = rng.uniform(-2, 2, (2, 3, 5, 64)), rng.uniform(-2, 2, (2, 1, 5, 64))
    pos = rng.integers(0, 4096, (2, 5))
    c, s = rope.cos_sin(pos, p)
    cf, sf = (torch.from_numpy(np.concatenate([t, t], -1)) for t in (c, s))
    hq, hk = (t.numpy() for t in apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(k), cf, sf))
    yq, yk = rope.apply(q, k, pos, p)
    np.testing.assert_allclose(yq, hq, rtol=0, atol=32 * EPS64)
    np.testing.assert_allclose(yk, hk, rtol=0, atol=32 * EPS64)
    assert not np.allclose(rope.apply(q, k, pos, p.model_copy(update={"rotation": "positive"}))[0], hq, atol=1e-3)


@pytest.mark.parametrize("rotary_dim", [None, 24])
def test_hf_apply_rotary_pos_emb_float64_matches_half(rotary_dim):
    """HF ``apply_rotary_pos_emb``/``rotate_half`` run in float64 on the reference's own cos/sin
    (duplicated to full width, as HF does): the rotation arithmetic agrees to a few ulp."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(7)
    D = 96
    p = RopeParams(head_dim=D, rotary_dim=rotary_dim, rope_theta=10000.0, pairing="half")
    q, k = rng.uniform(-2, 2, (2, 4, 6, D)), rng.uniform(-2, 2, (2, 2, 6, D))
    pos = rng.integers(0, 4096, (2, 6))
    c, s = rope.cos_sin(pos, p)
    r = p.rdim
    cf, sf = (torch.from_numpy(np.concatenate([t, t], -1)) for t in (c, s))
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    # HF's GPT-NeoX partial rotary: rotate the first r dims, concatenate the pass-through tail
    qr, kr = apply_rotary_pos_emb(qt[..., :r], kt[..., :r], cf, sf)
    hq = torch.cat([qr, qt[..., r:]], -1).numpy()
    hk = torch.cat([kr, kt[..., r:]], -1).numpy()
    yq, yk = rope.apply(q, k, pos, p)
    np.testing.assert_allclose(yq, hq, rtol=0, atol=8 * EPS64 * 4)
    np.testing.assert_allclose(yk, hk, rtol=0, atol=8 * EPS64 * 4)


def test_hf_gptj_interleaved():
    """GPT-J: ``create_sinusoidal_positions`` ([sin | cos], float32 inv_freq and angles) vs the
    reference cos/sin at the float32 angle bound, and ``apply_rotary_pos_emb``/``rotate_every_two``
    (layout [B, T, H, D]) in float64 on the reference's cos/sin vs interleaved pairing."""
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb, create_sinusoidal_positions

    r, D = 64, 256
    table = create_sinusoidal_positions(2048, r).numpy()  # [2048, r]: [sin | cos]
    p = RopeParams(head_dim=D, rotary_dim=r, rope_theta=10000.0, pairing="interleaved")
    allpos = np.arange(2048)[None]
    rc, rs = rope.cos_sin(allpos, p)
    phi = rope.angles(allpos, p)
    bound = 16 * EPS32 * (1 + phi[0])
    assert np.all(np.abs(table[:, : r // 2] - rs[0]) <= bound)
    assert np.all(np.abs(table[:, r // 2:] - rc[0]) <= bound)

    rng = np.random.default_rng(3)
    q = rng.uniform(-2, 2, (2, 3, 4, D))  # canonical [B, H, T, D]
    pos = np.array([[0, 1, 2, 3], [2044, 2045, 2046, 2047]])
    c, s = rope.cos_sin(pos, p)
    qt = torch.from_numpy(q.transpose(0, 2, 1, 3).copy())  # GPT-J layout [B, T, H, D]
    rot = apply_rotary_pos_emb(qt[..., :r], torch.from_numpy(s), torch.from_numpy(c))
    hq = torch.cat([rot, qt[..., r:]], -1).numpy().transpose(0, 2, 1, 3)
    yq, _ = rope.apply(q, q, pos, p)
    np.testing.assert_allclose(yq, hq, rtol=0, atol=8 * EPS64 * 4)


@pytest.mark.parametrize("D", [7, 8, 512])
def test_hf_marian_table_is_concat(D):
    """Marian builds [sin | cos] in float64 NumPy and stores float32: within half a float32 ulp
    of |value| <= 1 (2**-24), plus float64 noise."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    n = 64 if D == 512 else 300
    w = MarianSinusoidalPositionalEmbedding(n, D).create_weight().numpy()
    ref = sinusoidal.table(np.arange(n)[None], SinusoidalParams(dim=D, layout="concat"))[0]
    np.testing.assert_allclose(w, ref, rtol=0, atol=2.0**-24 + 1e-12)
    other = sinusoidal.table(np.arange(n)[None], SinusoidalParams(dim=D, layout="interleaved"))[0]
    assert not np.allclose(w, other, atol=1e-3)


@pytest.mark.parametrize("D", [7, 8, 512])
def test_hf_distilbert_table_is_interleaved(D):
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings

    n = 64 if D == 512 else 300
    out = _create_sinusoidal_embeddings(n, D, torch.empty(n, D)).numpy()
    ref = sinusoidal.table(np.arange(n)[None], SinusoidalParams(dim=D, layout="interleaved"))[0]
    np.testing.assert_allclose(out, ref, rtol=0, atol=2.0**-24 + 1e-12)


# =============================================================================================
# Mutants: every divergence is caught by at least one golden case
# =============================================================================================

SPEC = load_spec()
_GOLDENS = None


def _goldens():
    global _GOLDENS
    if _GOLDENS is None:
        m = golden.read_manifest()
        _GOLDENS = [golden.load(c, manifest=m) for c in CASES]
    return _GOLDENS


ONLY_OUT_OF_RANGE = {"lookup_clamped", "lookup_take_unchecked"}


def test_every_divergence_has_a_mutant_with_ops():
    for d in SPEC.divergences.values():
        if d.level == "model":  # a model-level rule, not an operation's mutant
            continue
        assert d.mutant in registry.mutants(), f"{d.id}: mutant {d.mutant!r} missing"
        assert set(registry.mutants()[d.mutant]) <= set(registry.spec().operations), d.mutant


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("div_id", sorted(d for d, v in SPEC.divergences.items() if v.level == "operation"))
def test_mutant_caught_by_a_golden_case(div_id, dtype):
    """For every divergence and every clause it violates, a golden case tagged with that clause
    (whose op the mutant supports) rejects the mutant's output under the suite's own tolerance
    rule at this dtype. ``lookup_clamped`` is only observable out of range (see below)."""
    d = SPEC.divergences[div_id]
    if dtype not in d.dtypes:
        pytest.skip(f"{div_id} is declared observable at {', '.join(d.dtypes)} only")
    if d.mutant in ONLY_OUT_OF_RANGE:
        pytest.skip(f"{d.mutant} is only observable on out-of-range rows; see test_lookup_clamped_*")
    supported = seen_through(_goldens(), registry.mutants()[d.mutant])
    assert supported, f"{div_id}: no golden case has an op the mutant {d.mutant} supports"
    missing = []
    for clause in d.violates:
        tagged = [g for g, clauses in supported if clause in clauses]
        if not any(caught_outputs(d, g, dtype) is not None for g in tagged):
            missing.append(clause)
    assert not missing, (f"{div_id} ({d.mutant}) is not caught at {dtype} by any golden case tagged "
                         f"with {missing}")


def test_lookup_clamped_equals_reference_in_range():
    """DIV-LEARNED-CLAMPED-LOOKUP is only observable on out-of-range rows, which goldens (whose
    rows are valid) cannot hold: on every golden case it supports, it equals the golden."""
    seen = 0
    for g in _goldens():
        out = registry.run_mutant("lookup_clamped", g.case.op, g.case.params, g.inputs)
        if out is None:
            continue
        seen += 1
        for k, v in out.items():
            np.testing.assert_array_equal(v, g.outputs[k])
    assert seen >= 3


def test_lookup_clamped_mutant_clamps_out_of_range():
    """The mutant should *be* the wrong behaviour it names: rows past the table read the last
    row instead of raising (so the diagnosis can name it on a row_range failure)."""
    table = np.arange(4 * 2, dtype=np.float64).reshape(4, 2)
    out = registry.run_mutant("lookup_clamped", "learned.lookup", None, {"table": table, "rows": np.array([[1, 4]])})
    np.testing.assert_array_equal(out["embeddings"], table[[[1, 3]]])


# =============================================================================================
# bf16_round vs torch's bfloat16 rounding
# =============================================================================================


def test_bf16_round_matches_torch_random():
    rng = np.random.default_rng(11)
    x = rng.standard_normal(100_000) * np.exp(rng.uniform(-80, 80, 100_000))
    got = bf16_round(x)
    exp64 = torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()
    np.testing.assert_array_equal(got, exp64)
    x32 = x.astype(np.float32)
    exp32 = torch.from_numpy(x32).to(torch.bfloat16).to(torch.float64).numpy()
    np.testing.assert_array_equal(bf16_round(x32.astype(np.float64)), exp32)


def test_bf16_round_specials():
    tie_even_down = 1 + 2.0**-8  # halfway between 1 and 1 + 2^-7: to even (1)
    tie_even_up = 1 + 3 * 2.0**-8  # halfway between 1 + 2^-7 and 1 + 2^-6: to even (1 + 2^-6)
    vals = np.array([0.0, -0.0, 1.0, tie_even_down, tie_even_up, -tie_even_up, 3.3895313892515355e38,
                     3.4e38, 1e-40, -1e-45, np.inf, -np.inf, 131071.0, 0.1])
    got = bf16_round(vals)
    exp = torch.from_numpy(vals).to(torch.bfloat16).to(torch.float64).numpy()
    np.testing.assert_array_equal(got, exp)
    assert got[3] == 1.0 and got[4] == 1 + 2.0**-6
    assert np.signbit(got[1])
    assert np.isnan(bf16_round(np.array([np.nan]))).all()
    assert got[12] == 131072.0  # 131071 is not representable in bf16


def test_deinterleave_hand_derived():
    """ROPE-PAIR-DEINTERLEAVE: at position 0 the output is x de-interleaved, [x0, x2, x4, x6, x1, x3, x5, x7]
    (HF DeepSeek-V3's view(..., d/2, 2).transpose); at position 3 it is the interleaved rotation so permuted."""
    p = RopeParams(head_dim=8, pairing="deinterleave")
    y0 = _rope1(X8, 0, pairing="deinterleave")
    np.testing.assert_array_equal(y0, X8[..., [0, 2, 4, 6, 1, 3, 5, 7]])
    inter = _rope1(X8, 3, pairing="interleaved")
    np.testing.assert_array_equal(_rope1(X8, 3, pairing="deinterleave"), inter[..., [0, 2, 4, 6, 1, 3, 5, 7]])
    # pair 0 by hand: theta^0 = 1, angle 3
    c, s = np.cos(3.0), np.sin(3.0)
    y = _rope1(X8, 3, pairing="deinterleave").reshape(-1)
    x = X8.reshape(-1)
    assert y[0] == pytest.approx(x[0] * c - x[1] * s, rel=1e-15)
    assert y[4] == pytest.approx(x[1] * c + x[0] * s, rel=1e-15)
    assert p.pairing == "deinterleave"

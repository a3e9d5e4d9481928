"""ALiBi reference (ALIBI-*) against published figures, the paper's code and the real transformers
code (BLOOM ``build_alibi_tensor``, MPT ``build_mpt_alibi_tensor``); its mutants; the HF wrapper.

Independent oracles: the figures of encodings-facts "Golden 2" and E.1, values written out with
``2.0 ** x``, the paper's ``get_slopes`` (re-typed below from ofirpress/attention_with_linear_biases),
and transformers 5.24 run in the test (float32: compared under the suite's own float32 bound).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers.models.bloom.modeling_bloom as hf_bloom
import transformers.models.mpt.modeling_mpt as hf_mpt

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.reference import alibi
from posenc.spec import load_spec
from posenc.spec.models import AlibiParams
from posenc.spec.tolerance import bound
from posenc import registry
from posenc.families.alibi import slope_amplification

FEW_ULP = dict(rtol=1e-15, atol=0)
SPEC = load_spec()


def _m(n, **kw):
    return alibi.slopes(AlibiParams(num_heads=n, **kw))


# ---- published figures ----------------------------------------------------------------------------


def test_slopes_figures():
    np.testing.assert_array_equal(_m(8), [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625])
    np.testing.assert_array_equal(_m(6), [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125])  # not monotone
    np.testing.assert_allclose(_m(12), [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
                                        0.7071067811865476, 0.35355339059327384, 0.17677669529663692,
                                        0.08838834764831849], **FEW_ULP)


def test_slopes_by_hand():
    assert _m(12).tolist() == [2.0 ** -k for k in range(1, 9)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5]
    assert _m(1).tolist() == [2.0 ** -8]
    assert _m(3).tolist() == [2.0 ** -4, 2.0 ** -8, 2.0 ** -2]
    # alibi_bias_max replaces the 8: 4 heads, B = 16 -> 2^-4, 2^-8, 2^-12, 2^-16
    assert _m(4, alibi_bias_max=16.0).tolist() == [2.0 ** -4, 2.0 ** -8, 2.0 ** -12, 2.0 ** -16]


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64, 128, 256])
def test_power_of_two_slopes_are_geometric(n):
    m = _m(n)
    assert m[0] == 2.0 ** (-8 / n)
    np.testing.assert_allclose(m[1:], m[:-1] * m[0], rtol=4e-16)


def _paper_get_slopes(n):
    """ofirpress/attention_with_linear_biases fairseq/models/transformer.py get_slopes, re-typed."""
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + _paper_get_slopes(2 * c)[0::2][: n - c]


@pytest.mark.parametrize("n", list(range(1, 70)) + [96, 112, 128, 200, 256])
def test_slopes_match_the_papers_code(n):
    # start * ratio^i in float64 carries a few ulp per power (encodings-facts E.1)
    np.testing.assert_allclose(_m(n), _paper_get_slopes(n), rtol=64 * np.finfo(np.float64).eps)


def _within_float32_bound(got, p, ref, scale_amp):
    b = bound("float32", np.abs(ref) * scale_amp, 0.0, True)
    return np.abs(np.asarray(got, np.float64) - ref) <= b


@pytest.mark.parametrize("n", list(range(1, 130)) + [200, 256])
def test_slopes_match_bloom_and_mpt(n):
    """HF 5.24 BLOOM (_get_alibi_slopes, float32 torch.pow) and MPT (float32 1/2^base) within the
    suite's float32 bound, whose amplification 1 + k/8 covers BLOOM's powered base."""
    p = AlibiParams(num_heads=n)
    ref, amp = alibi.slopes(p), slope_amplification(p)
    bloom = hf_bloom._get_alibi_slopes(n, "cpu").double().numpy()
    mpt = -hf_mpt.build_mpt_alibi_tensor(n, 2)[:, 0, 0].double().numpy()
    assert _within_float32_bound(bloom, p, ref, amp).all(), np.max(np.abs(bloom - ref) / ref)
    assert _within_float32_bound(mpt, p, ref, amp).all()


@pytest.mark.parametrize("bias_max", [4.0, 8.0, 16.0])
@pytest.mark.parametrize("n", [6, 12, 24, 32, 112])
def test_alibi_bias_max_matches_mpt(n, bias_max):
    p = AlibiParams(num_heads=n, alibi_bias_max=bias_max, form="mpt")
    got = hf_mpt.build_mpt_alibi_tensor(n, 9, bias_max).double().numpy()  # [H, 1, 9]
    ref, _ = alibi.bias(p, 1, 9)
    assert _within_float32_bound(got, p, ref, slope_amplification(p)[:, None, None]).all()


# ---- bias forms ---------------------------------------------------------------------------------


def test_causal_and_symmetric_by_hand():
    p = AlibiParams(num_heads=2)  # slopes 2^-4, 2^-8
    b, cmp = alibi.bias(p, 3, 3)
    m = 2.0 ** -4
    np.testing.assert_array_equal(b[0][cmp[0]], [0.0, -m, 0.0, -2 * m, -m, 0.0])
    assert cmp[0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    s, scmp = alibi.bias(p.model_copy(update={"form": "symmetric"}), 2, 4)  # queries at key positions 2, 3
    assert scmp.all()
    np.testing.assert_array_equal(s[0], -m * np.array([[2, 1, 0, 1], [3, 2, 1, 0]]))


def test_bloom_and_mpt_by_hand():
    p = AlibiParams(num_heads=1, form="bloom")  # m = 2^-8
    mask = np.array([[0, 1, 1, 0, 1]])
    b, cmp = alibi.bias(p, 2, attention_mask=mask)
    np.testing.assert_array_equal(b[0, 0, 0], 2.0 ** -8 * np.array([0, 0, 1, 0, 2]))
    assert cmp[0, 0].tolist() == [[False, False, False, False, False], [False, True, True, False, True]]
    q, _ = alibi.bias(AlibiParams(num_heads=1, form="mpt"), 2, 4)
    np.testing.assert_array_equal(q[0], 2.0 ** -8 * np.array([[-3, -2, -1, 0]] * 2))


def test_bias_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match="query_length <= key_length"):
        alibi.bias(AlibiParams(num_heads=2), 5, 4)


@pytest.mark.parametrize("mask", [[[1, 1, 1, 1, 1, 1]], [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]],
                                  [[1, 1, 0, 1, 1, 0], [0, 1, 1, 1, 0, 1]]])
@pytest.mark.parametrize("n", [8, 12, 112])
def test_bloom_bias_matches_build_alibi_tensor(n, mask):
    mask = np.asarray(mask, np.int64)
    p = AlibiParams(num_heads=n, form="bloom")
    got = hf_bloom.build_alibi_tensor(torch.from_numpy(mask), n, torch.float32).double().numpy()
    got = got.reshape(mask.shape[0], n, 1, mask.shape[1])
    ref, _ = alibi.bias(p, 1, attention_mask=mask)
    assert _within_float32_bound(got, p, ref, slope_amplification(p)[:, None, None]).all()


@pytest.mark.parametrize("n,tk", [(32, 8), (32, 300), (6, 20), (16, 2048)])
def test_mpt_bias_matches_build_mpt_alibi_tensor(n, tk):
    p = AlibiParams(num_heads=n, form="mpt")
    got = hf_mpt.build_mpt_alibi_tensor(n, tk).double().numpy()  # [H, 1, tk]
    ref, _ = alibi.bias(p, 1, tk)
    assert _within_float32_bound(got, p, ref, slope_amplification(p)[:, None, None]).all()


@pytest.mark.parametrize("form,kw", [
    ("causal", dict(query_length=5, key_length=9)),
    ("mpt", dict(query_length=5, key_length=9)),
    ("bloom", dict(query_length=4, attention_mask=np.array([[0, 0, 1, 1, 1, 1], [1, 1, 0, 1, 1, 1]]))),
])
def test_causal_forms_differ_by_a_row_constant(form, kw):
    p = AlibiParams(num_heads=12, form=form)
    b, valid = alibi.bias(p, **kw)
    ref, valid2 = alibi.causal_equivalent(p, **kw)
    assert (valid == valid2).all()
    diff = np.where(valid, b - ref, np.nan)
    rows = diff[valid.sum(-1) >= 1]  # [rows with a valid key, Tk]
    spread = np.nanmax(rows, -1) - np.nanmin(rows, -1)
    assert np.abs(spread).max() <= 1e-12
    scores = np.random.default_rng(0).normal(size=b.shape)
    np.testing.assert_allclose(alibi.masked_softmax(scores + b, valid),
                               alibi.masked_softmax(scores + ref, valid), rtol=1e-12, atol=1e-15)


def test_bloom_positions_skip_holes():
    """With a hole, BLOOM's token positions (not column indices) are what stays row-constant."""
    p = AlibiParams(num_heads=1, form="bloom")
    mask = np.array([[1, 1, 0, 1]])
    b, valid = alibi.bias(p, 1, attention_mask=mask)
    ref, _ = alibi.causal_equivalent(p, 1, attention_mask=mask)
    np.testing.assert_array_equal(ref[0, 0, 0][valid[0, 0, 0]], -2.0 ** -8 * np.array([2, 1, 0]))
    np.testing.assert_array_equal((b - ref)[valid], 2.0 ** -8 * 2)


# ---- mutants ------------------------------------------------------------------------------------

ALIBI_DIVS = sorted(d for d in SPEC.divergences if d.startswith("DIV-ALIBI-"))


def test_mutants_are_the_wrong_behaviour():
    p6 = AlibiParams(num_heads=6)
    naive = registry.run_mutant("alibi_slopes_naive", "alibi.slopes", p6, {})["slopes"]
    np.testing.assert_allclose(naive, [2.0 ** (-8 * k / 6) for k in range(1, 7)], **FEW_ULP)
    assert registry.run_mutant("alibi_slopes_naive", "alibi.slopes", AlibiParams(num_heads=8), {}) is None
    x = {"query_length": np.asarray(2), "key_length": np.asarray(3)}
    flipped = registry.run_mutant("alibi_sign_flipped", "alibi.bias", AlibiParams(num_heads=2), x)["bias"]
    assert flipped[0, 1, 0] == 2 * 2.0 ** -4  # +m (i' - j) for i' = 2, j = 0
    enc = registry.run_mutant("alibi_causal_in_encoder", "alibi.bias", AlibiParams(num_heads=2, form="symmetric"), x)
    assert enc["bias"][0, 0, 2] == 2.0 ** -4 and enc["bias.compared"].all()  # future key gets +m


# ---- the HF wrapper really runs transformers ------------------------------------------------------


def test_patched_build_alibi_tensor_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "alibi-bloom").ret == 0
    orig = hf_bloom.build_alibi_tensor
    monkeypatch.setattr(hf_bloom, "build_alibi_tensor", lambda mask, n, dt: -orig(mask, n, dt))
    r = run_suite("hf-transformers", "-k", "alibi-bloom")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-ALIBI-SIGN (violates" in out, out[-2000:]


def test_patched_build_mpt_alibi_tensor_fails_the_suite(run_suite, monkeypatch):
    orig = hf_mpt.build_mpt_alibi_tensor

    def naive(n, L, bias_max=8, device=None):  # 2^(-8k/n) for every n
        k = torch.arange(1, n + 1, dtype=torch.float32)
        return torch.arange(1 - L, 1, dtype=torch.float32).view(1, 1, L) * (2.0 ** (-bias_max * k / n)).view(n, 1, 1)

    assert orig(12, 3).shape == naive(12, 3).shape
    monkeypatch.setattr(hf_mpt, "build_mpt_alibi_tensor", naive)
    r = run_suite("hf-transformers", "-k", "alibi-mpt-bias-max or alibi-slopes-12")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-ALIBI-SLOPES-NON-POW2 (violates" in out, out[-2000:]

"""T5 relative position buckets and bias (T5-*) against published figures, a T5X-style oracle and
the real transformers code (``T5Attention._relative_position_bucket``, ``compute_bias``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers.models.t5.modeling_t5 as hf_t5
from transformers import T5Config

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.reference import t5
from posenc.spec import load_spec
from posenc.spec.models import T5Params
from posenc import registry

ENC, DEC = T5Params(), T5Params(bidirectional=False)
FIG_REL = np.array([-200, -10, -1, 0, 1, 10, 200])
SPEC = load_spec()


# ---- published figures (encodings-facts "Golden 3", F.5) --------------------------------------------


def test_bucket_figures():
    assert t5.buckets(FIG_REL, ENC).tolist() == [15, 8, 1, 0, 17, 24, 31]
    assert t5.buckets(FIG_REL, DEC).tolist() == [31, 10, 1, 0, 0, 0, 0]


def test_bucket_figures_by_hand():
    # bidirectional -200: 8 + floor(ln(200/8) / ln(128/8) * 8) = 8 + floor(9.29) = 17 -> clamped to 15
    assert 8 + int(math.log(25) / math.log(16) * 8) == 17
    # causal -10: n = 10 < 16 -> exact bucket 10; bidirectional +10: 16 + 8 + int(ln(10/8)/ln(16) * 8) = 24
    assert 16 + 8 + int(math.log(10 / 8) / math.log(16) * 8) == 24


def test_bidirectional_boundaries():
    n = np.arange(0, 300)
    got = t5.buckets(-n, ENC)  # the past side
    edges = {0: 0, 7: 7, 8: 8, 11: 8, 12: 9, 15: 9, 16: 10, 22: 10, 23: 11, 31: 11, 32: 12, 45: 12,
             46: 13, 63: 13, 64: 14, 90: 14, 91: 15, 299: 15}
    assert {k: int(got[k]) for k in edges} == edges
    np.testing.assert_array_equal(t5.buckets(n[1:], ENC), got[1:] + 16)  # the future side: +16


def test_causal_boundaries():
    n = np.arange(0, 300)
    got = t5.buckets(-n, DEC)
    np.testing.assert_array_equal(got[:16], np.arange(16))
    assert (got[113:] == 31).all() and got[112] == 30
    assert (np.diff(got) >= 0).all()
    np.testing.assert_array_equal(t5.buckets(n, DEC), 0)  # future keys: bucket 0


def test_never_evaluates_log_of_zero():
    with np.errstate(all="raise"):
        t5.buckets(np.arange(-5, 6), ENC)
        t5.buckets(np.arange(-5, 6), DEC)


def _t5x_buckets(rel, bidirectional, num_buckets=32, max_distance=128):
    """T5X style (t5x/examples/t5/layers.py): float32 NumPy with + eps inside the log, n = -rel."""
    ret = 0
    n = -np.asarray(rel)
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0).astype(np.int32) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val = max_exact + (np.log(n.astype(np.float32) / max_exact + np.finfo(np.float32).eps)
                       / np.log(max_distance / max_exact) * (num_buckets - max_exact)).astype(np.int32)
    val = np.minimum(val, num_buckets - 1)
    return ret + np.where(is_small, n, val)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_matches_a_t5x_style_oracle(bidirectional):
    rel = np.arange(-300, 301)
    with np.errstate(divide="ignore"):
        want = _t5x_buckets(rel, bidirectional)
    np.testing.assert_array_equal(t5.buckets(rel, T5Params(bidirectional=bidirectional)), want)


# ---- the real transformers code ------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("tq,tk,cache", [(6, 6, 0), (1, 150, 149), (3, 140, 70), (4, 200, 0)])
def test_bias_matches_transformers_compute_bias(bidirectional, tq, tk, cache):
    H = 12
    table = np.random.default_rng(1).normal(size=(32, H))
    cfg = T5Config(d_model=H, d_kv=1, num_heads=H, is_decoder=not bidirectional)
    attn = hf_t5.T5Attention(cfg, has_relative_attention_bias=True, layer_idx=0).double()
    with torch.no_grad():
        attn.relative_attention_bias.weight.copy_(torch.from_numpy(table))
        hf = attn.compute_bias(tq, tk, past_seen_tokens=cache)[0].numpy()
    np.testing.assert_array_equal(t5.bias(table, T5Params(bidirectional=bidirectional), tq, tk, cache), hf)


def test_bias_layout_by_hand():
    table = np.arange(32 * 2, dtype=np.float64).reshape(32, 2)  # table[b, h] = 2 b + h
    b = t5.bias(table, ENC, 2, 3, cache_length=1)  # queries at 1, 2; rel = j - i
    rel = np.array([[-1, 0, 1], [-2, -1, 0]])
    np.testing.assert_array_equal(b[1], 2 * t5.buckets(rel, ENC) + 1)
    with pytest.raises(ValueError, match="num_buckets=32"):
        t5.bias(table.T, ENC, 2, 3)


def test_params_validation():
    T5Params(num_buckets=31)  # odd and bidirectional: halved with a floor (15), as transformers does
    with pytest.raises(ValueError, match="must exceed the exact range"):
        T5Params(num_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="leaves no exact bucket"):
        T5Params(num_buckets=3)  # 3 // 2 = 1 bucket per side, 1 // 2 = 0 exact buckets
    T5Params(num_buckets=31, bidirectional=False)


# ---- odd num_buckets: transformers floors the halving -------------------------------------------
# models/t5/modeling_t5.py::T5Attention._relative_position_bucket: ``num_buckets //= 2`` under
# ``if bidirectional:`` (transformers 5.24), so 33 buckets give 16 per side and bucket 32 is never
# read; the causal rule uses all the (odd) buckets.


@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (64, 256), (16, 64), (8, 20), (128, 1024),
                                                      (33, 128), (31, 128), (17, 40), (65, 300), (5, 8)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_matches_transformers_relative_position_bucket(bidirectional, num_buckets, max_distance):
    """Even and odd bucket counts, |relative position| up to 400, against T5Attention itself."""
    rel = torch.arange(-400, 401)
    hf = hf_t5.T5Attention._relative_position_bucket(rel, bidirectional, num_buckets, max_distance).numpy()
    p = T5Params(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    got = t5.buckets(rel.numpy(), p)
    np.testing.assert_array_equal(got, hf)
    assert got.max() <= (2 * (num_buckets // 2) - 1 if bidirectional else num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_odd_num_buckets_bias_matches_transformers_compute_bias(bidirectional):
    H, nb = 5, 33
    table = np.random.default_rng(3).normal(size=(nb, H))
    cfg = T5Config(d_model=H, d_kv=1, num_heads=H, is_decoder=not bidirectional,
                   relative_attention_num_buckets=nb, relative_attention_max_distance=100)
    attn = hf_t5.T5Attention(cfg, has_relative_attention_bias=True, layer_idx=0).double()
    with torch.no_grad():
        attn.relative_attention_bias.weight.copy_(torch.from_numpy(table))
        hf = attn.compute_bias(4, 130, past_seen_tokens=60)[0].numpy()
    p = T5Params(num_buckets=nb, max_distance=100, bidirectional=bidirectional)
    np.testing.assert_array_equal(t5.bias(table, p, 4, 130, 60), hf)


def test_odd_num_buckets_goldens_match_transformers():
    """The odd-count golden cases hold transformers' own buckets."""
    from posenc.harness import golden
    from posenc.registry import cases_by_id as by_id

    cases = [c for c in by_id().values() if c.op == "t5.buckets" and c.params.num_buckets % 2]
    assert {c.params.bidirectional for c in cases} == {True, False}
    for c in cases:
        g = golden.load(c)
        rel = torch.from_numpy(np.asarray(g.inputs["relative_position"]))
        hf = hf_t5.T5Attention._relative_position_bucket(rel, c.params.bidirectional, c.params.num_buckets,
                                                         c.params.max_distance).numpy()
        np.testing.assert_array_equal(g.outputs["buckets"], hf)


# ---- mutants ------------------------------------------------------------------------------------


def test_mutants_are_the_wrong_behaviour():
    x = {"relative_position": FIG_REL}
    assert registry.run_mutant("t5_rel_sign_flipped", "t5.buckets", ENC, x)["buckets"].tolist() == [31, 24, 17, 0, 1, 8, 15]
    assert registry.run_mutant("t5_rel_sign_flipped", "t5.buckets", DEC, x)["buckets"].tolist() == [0, 0, 0, 0, 1, 10, 31]
    nh = registry.run_mutant("t5_no_halving", "t5.buckets", ENC, x)["buckets"]
    assert nh.max() >= 32 and nh[1] == 10  # positive offsets leave the 32-row table
    assert registry.run_mutant("t5_no_halving", "t5.buckets", DEC, x) is None


# ---- the HF wrapper really runs transformers ------------------------------------------------------


def test_patched_relative_position_bucket_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "t5-").ret == 0
    orig = hf_t5.T5Attention._relative_position_bucket
    monkeypatch.setattr(hf_t5.T5Attention, "_relative_position_bucket",
                        staticmethod(lambda rel, *a, **kw: orig(-rel, *a, **kw)))
    r = run_suite("hf-transformers", "-k", "t5-")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-T5-REL-SIGN (violates" in out, out[-2000:]


def test_patched_compute_bias_cache_fails_the_suite(run_suite, monkeypatch):
    orig = hf_t5.T5Attention.compute_bias
    monkeypatch.setattr(hf_t5.T5Attention, "compute_bias",
                        lambda self, q, k, device=None, past_seen_tokens=0: orig(self, q, k, device))
    r = run_suite("hf-transformers", "-k", "t5-base-bias-decoder")
    out = r.stdout.str()
    assert r.ret == 1 and "DIV-T5-CACHE-IGNORED" in out, out[-2000:]

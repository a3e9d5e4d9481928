"""Calibration of the tolerance rule (posenc.spec.tolerance) against real dtype policies.

Each policy below is a small torch emulation of where an implementation rounds; the rule must
accept HF's, Meta's and torchtune's at every dtype (the real HF code is also run by the suite
in tests/test_suite.py) and reject angles computed in bfloat16 -- at every dtype, long and
short positions alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posenc.registry import cases_by_id as by_id
from posenc.harness.golden import load
from posenc.harness.runner import compare_outputs
from posenc.spec.tolerance import EPS, K_ANGLE, K_DTYPE, bound, compare
from posenc import registry

TD = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _rotate_half(x, c, s):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)


def hf_policy(q, pid, theta, dt):
    """HF 5.24: float32 inv_freq and angles, cos/sin cast to the activation dtype, rotation in it."""
    d = q.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    phi = pid[..., None].float() * inv
    c, s = torch.cos(phi).to(dt)[:, None], torch.sin(phi).to(dt)[:, None]
    return _rotate_half(q.to(dt), c, s)


def meta_policy(q, pid, theta, dt):
    """Meta llama: float32 freqs, rotation of q.float() in float32, cast back once (type_as).

    Meta pairs interleaved; the emulation rotates half pairs, which rounds identically.
    """
    d = q.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32)[: d // 2] / d))
    phi = pid[..., None].float() * inv
    c, s = torch.cos(phi)[:, None], torch.sin(phi)[:, None]
    work = torch.float64 if dt == torch.float64 else torch.float32
    return _rotate_half(q.to(dt).to(work), c.to(work), s.to(work)).to(dt)


def torchtune_policy(q, pid, theta, dt):
    """torchtune: float32 [max_seq, d/2, 2] cos/sin cache indexed by input_pos, x.float(), type_as."""
    d = q.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    cache_pos = torch.arange(int(pid.max()) + 1, dtype=inv.dtype)
    cache = torch.stack([torch.cos(torch.outer(cache_pos, inv)), torch.sin(torch.outer(cache_pos, inv))], -1)
    cs = cache[pid]
    return _rotate_half(q.to(dt).float(), cs[..., 0][:, None], cs[..., 1][:, None]).to(dt)


def bf16_angle_policy(q, pid, theta, dt):
    """Wrong: inverse frequencies and angles in bfloat16 (a rotary module cast with .to(bf16))."""
    d = q.shape[-1]
    inv = (1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))).to(torch.bfloat16)
    phi = pid[..., None].to(torch.bfloat16) * inv
    work = torch.float64 if dt == torch.float64 else torch.float32
    c, s = torch.cos(phi).to(work)[:, None], torch.sin(phi).to(work)[:, None]
    return _rotate_half(q.to(dt).to(work), c, s).to(dt)


def _check(policy, case_id, dtype):
    g = load(by_id()[case_id])
    p = g.case.params
    assert p.pairing == "half" and p.rdim == p.head_dim
    pid = torch.from_numpy(g.inputs["position_ids"])
    out = {n: policy(torch.from_numpy(g.inputs[n]), pid, p.rope_theta, TD[dtype]) for n in ("q", "k")}
    assert all(o.dtype == TD[dtype] for o in out.values())
    return compare_outputs(g, {n: o.to(torch.float64).numpy() for n, o in out.items()}, dtype)


@pytest.mark.parametrize("dtype", list(TD))
@pytest.mark.parametrize("case_id", ["rope-llama3-8b", "rope-llama3-8b-scattered"])
@pytest.mark.parametrize("policy", [hf_policy, meta_policy, torchtune_policy], ids=lambda f: f.__name__)
def test_real_policies_pass(policy, case_id, dtype):
    res = _check(policy, case_id, dtype)
    assert all(c.ok for c in res), [c.message for c in res]
    # and not by a wide margin: the rule is meant to be tight (worst element within 1/20 of it)
    assert max(c.ratio for c in res) > 0.05 or dtype == "float64"


@pytest.mark.parametrize("dtype", list(TD))
@pytest.mark.parametrize("case_id", ["rope-llama3-8b", "rope-llama3-8b-scattered"])
def test_bf16_angles_fail(case_id, dtype):
    res = _check(bf16_angle_policy, case_id, dtype)
    assert not all(c.ok for c in res)
    assert max(c.ratio for c in res) > 10


def test_bf16_angles_fail_at_small_positions_too():
    """Even at positions <= 4 a bf16 angle is caught at float32 (it only needs one rounding of phi)."""
    g = load(by_id()["rope-llama3-8b"])
    q = torch.from_numpy(g.inputs["q"][:1])
    pid = torch.from_numpy(g.inputs["position_ids"][:1])
    y = bf16_angle_policy(q, pid, 500000.0, torch.float32).double().numpy()
    ref = g.outputs["q"][:1]
    c = compare("q", y, ref, dtype="float32", dtype_scale=g.dtype_scales["q"][:1],
                angle_scale=g.angle_scales["q"][:1], angle_based=True)
    assert not c.ok


def test_bound_formula_by_hand():
    # float32, rotation of a pair of norm 2 at angle 1000 rad: 4 * eps32 * 2 + 4 * eps32 * 1000 * 2
    e = EPS["float32"]
    assert K_DTYPE["float32"] == 4 and K_ANGLE == 4
    assert bound("float32", 2.0, 2000.0, True) == pytest.approx(4 * e * 2 + 4 * e * 2000)
    # float64 activations of an angle-based op still allow float32 cos/sin (eps never below f32)
    assert bound("float64", 1.0, 0.0, True) == pytest.approx(16 * e)
    assert bound("float64", 1.0, 0.0, False) == pytest.approx(16 * EPS["float64"])
    # bfloat16 eps is 2**-7 (8 significant bits)
    assert EPS["bfloat16"] == float(torch.finfo(torch.bfloat16).eps)
    assert EPS["float16"] == float(torch.finfo(torch.float16).eps)


def test_compare_reports_worst_element_and_exact_ints():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    got = ref.copy()
    got[1, 0] += 1e-3
    c = compare("y", got, ref, dtype="float32", dtype_scale=np.abs(ref))
    assert not c.ok and c.worst_index == (1, 0) and c.n_bad == 1
    assert compare("i", np.array([1, 2]), np.array([1, 2]), dtype="float32").ok
    assert not compare("i", np.array([1, 3]), np.array([1, 2]), dtype="float32").ok
    assert not compare("t", ref.T.copy()[None], ref, dtype="float32").ok  # shapes must match
    assert not compare("n", np.array([np.nan]), np.array([1.0]), dtype="float32", dtype_scale=1.0).ok
    assert compare("m", np.array([9, 2]), np.array([0, 2]), dtype="float32", compared=np.array([False, True])).ok


def test_uniform_relative_angle_error_fails():
    """A float32 implementation whose angles are all off by 1.5e-6 relative (12 eps) is caught."""
    g = load(by_id()["rope-llama3-8b"])
    p = g.case.params
    pid = torch.from_numpy(g.inputs["position_ids"])

    def off(q):
        d = q.shape[-1]
        inv = (1.0 / (p.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))) * (1 + 1.5e-6)
        phi = pid[..., None].double() * inv
        return _rotate_half(q, torch.cos(phi)[:, None], torch.sin(phi)[:, None]).float()
    out = {n: off(torch.from_numpy(g.inputs[n])).double().numpy() for n in ("q", "k")}
    assert not all(c.ok for c in compare_outputs(g, out, "float32"))


def test_angle_scale_amplification_by_hand():

    from posenc.spec.models import RopeParams
    p = RopeParams(head_dim=8, rope_theta=10000.0)
    x = np.zeros((1, 1, 1, 8))
    x[..., 1] = 1.0  # pair (1, 5) at frequency i = 1, exponent 2/8
    _, an = registry.reference_of("rope.apply").scales(p, {"q": x, "k": x, "position_ids": np.array([[3]])})["q"]
    phi = 3 * 10000 ** (-2 / 8)
    assert an[0, 0, 0, 1] == pytest.approx(phi * (1 + 0.25 * np.log(10000)), rel=1e-14)
    assert an[0, 0, 0, 0] == 0 and an[0, 0, 0, 2] == 0


# ---- the accumulation term: a LayerNorm's sums over the hidden size (issue 27, derived bounds) ----

def _layer_norm_in_order(x: dict, acc, work=np.float32) -> np.ndarray:
    """BERT's embeddings with a LayerNorm whose mean and variance are each summed one feature after
    another in ``acc`` (float32: a legal accumulator; float16: a half-precision one), the rest in
    ``work``."""
    ids = x["input_ids"]
    pos = np.arange(ids.shape[1]) + int(x["cache_length"])
    s = (x["word_embeddings"][ids].astype(work) + x["token_type_embeddings"][0].astype(work)
         + x["position_embeddings"][pos].astype(work)).astype(work)
    n = s.shape[-1]
    mu = (np.cumsum(s.astype(acc), -1, dtype=acc)[..., -1:] / n).astype(work)
    d = (s - mu).astype(work)
    var = (np.cumsum((d * d).astype(acc), -1, dtype=acc)[..., -1:] / n).astype(work)
    y = d / np.sqrt(var + work(1e-12)) * x["layer_norm_weight"].astype(work) + x["layer_norm_bias"].astype(work)
    return y.astype(np.float64)


def _bert_768(seed: int):
    """BERT-base width with a mean offset on the word rows (the summands share a sign: the worst
    of an in-order sum), inputs representable in float32."""
    from posenc.harness import golden
    from posenc.registry.cases import Case
    from posenc.spec.params_absolute import BertEmbeddingParams
    rng = np.random.default_rng(seed)
    H = 768
    p = BertEmbeddingParams(vocab_size=50, max_position_embeddings=64, type_vocab_size=2, hidden_size=H,
                            layer_norm_eps=1e-12)
    f = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    x = {"word_embeddings": f(rng.standard_normal((50, H)) + 6.0), "position_embeddings": f(rng.standard_normal((64, H))),
         "token_type_embeddings": f(rng.standard_normal((2, H))), "layer_norm_weight": f(rng.uniform(0.5, 1.0, H)),
         "layer_norm_bias": f(rng.uniform(-0.25, 0.25, H)), "input_ids": rng.integers(0, 50, (2, 5)),
         "cache_length": np.asarray(0, np.int64)}
    case = Case(id="layer-norm-768", op="learned.bert", clauses=("LEARNED-BERT-SUM",), params=p)
    return golden.computed(case, x), x


def test_a_float32_layer_norm_summing_in_order_passes_and_the_accumulation_term_is_what_lets_it():
    """A correct float32 LayerNorm summing its 768 features in order passes; without the
    accumulation term (the bound before spec 0.5.0) it fails -- the false failure."""
    from dataclasses import replace
    worst_without = 0.0
    for seed in range(4):
        g, x = _bert_768(seed)
        out = {"embeddings": _layer_norm_in_order(x, np.float32)}
        assert all(c.ok for c in compare_outputs(g, out, "float32"))
        no_acc = replace(g, accumulation_scales={})
        worst_without = max(worst_without, max(c.ratio for c in compare_outputs(no_acc, out, "float32")))
    assert worst_without > 1.0, worst_without


def test_a_layer_norm_accumulated_in_float16_fails_at_float32_and_a_float32_one_at_float64():
    """The term allows a float32 accumulator at float32, never a float16 one, and at float64 only
    float64's: a float64 run that takes its LayerNorm in float32 still fails."""
    g, x = _bert_768(0)
    assert not all(c.ok for c in compare_outputs(g, {"embeddings": _layer_norm_in_order(x, np.float16)}, "float32"))
    assert not all(c.ok for c in compare_outputs(g, {"embeddings": _layer_norm_in_order(x, np.float32)}, "float64"))
    assert all(c.ok for c in compare_outputs(g, {"embeddings": _layer_norm_in_order(x, np.float64, np.float64)},
                                             "float64"))


@pytest.mark.parametrize("case_id", [c.id for c in registry.all_cases() if c.op in ("learned.bert", "learned.roberta")])
def test_every_layer_norm_golden_states_the_accumulation_term(case_id):
    """Each BERT / RoBERTa golden stores the term, (n - 1)/2 times a positive magnitude."""
    g = load(by_id()[case_id])
    acc = g.accumulation_scales["embeddings"]
    assert acc.shape == g.outputs["embeddings"].shape and (acc >= 0).all() and acc.max() > 0


# ---- non-finite expected values (issue 28, finding 4) -----------------------------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("actual, expected, ok", [
    (1.0, NAN, False),    # passed before: |1 - NaN| / bound is NaN, and NaN > 1 is False
    (INF, NAN, False),
    (NAN, INF, False),    # passed before: |NaN - inf| is NaN
    (-INF, INF, False),
    (1.0, INF, False),
    (NAN, NAN, True),     # the same non-finite value: the diagnosis's rule (same_non_finite)
    (INF, INF, True),
    (-INF, -INF, True),
    (NAN, 1.0, False),
    (INF, 1.0, False),
])
def test_a_non_finite_expected_value_passes_only_the_same_value(actual, expected, ok):
    """The spec's rule for outputs that are not finite (the diagnosis matches a mutant's NaN / inf only where
    the output has exactly them): NaN expected is NaN-must-match, never "anything passes"."""
    for dt in ("float64", "float32", "bfloat16", "float16"):
        c = compare("y", np.array([0.5, actual]), np.array([0.5, expected]), dtype=dt, dtype_scale=1.0, angle_scale=1.0)
        assert c.ok is ok and (ok or (c.n_bad == 1 and c.worst_index == (1,) and c.ratio == INF)), (dt, c)
        masked = compare("y", np.array([0.5, actual]), np.array([0.5, expected]), dtype=dt, compared=[True, False])
        assert masked.ok  # a slot the clause does not specify is never judged


def test_a_golden_whose_expected_output_is_nan_fails_a_finite_output():
    """Reachable: a golden's outputs are the reference's (computed on the fly for a generated case, a mutant's or
    an inference model's in the diagnosis): one that gives NaN must not pass whatever the adapter returns."""
    from dataclasses import replace
    g = load(by_id()["rope-tiny-half"])
    nan_q = np.array(g.outputs["q"], copy=True)
    nan_q[..., 2] = np.nan
    bad = replace(g, outputs={**g.outputs, "q": nan_q})
    out = {n: np.asarray(v, np.float32) for n, v in g.outputs.items()}  # finite, the reference's own values
    cmps = {c.message.split(":")[0]: c for c in compare_outputs(bad, out, "float32")}
    assert not cmps["q"].ok and cmps["q"].n_bad == int(np.isnan(nan_q).sum()) and cmps["k"].ok
    assert all(c.ok for c in compare_outputs(bad, {**out, "q": nan_q.astype(np.float32)}, "float32"))


def test_an_exact_element_out_of_tolerance_says_so_not_a_ratio():
    """A pass-through element (both scales 0) that is wrong: "|err|/bound = 8.22e+44" said nothing a user could
    read (new-user trial); the message says the value is exact and what is allowed."""
    from posenc.spec.tolerance import compare
    c = compare("q", np.array([1.0, 2.5], np.float32), np.array([1.0, 2.0]), dtype="float32",
                dtype_scale=np.array([0.0, 0.0]), angle_scale=0.0)
    assert not c.ok and "worst at [1]: got 2.5, expected 2.0, where the value is exact" in c.message, c.message
    assert "|err|/bound" not in c.message
    c = compare("q", np.array([1.0, 2.5], np.float32), np.array([1.0, 2.0]), dtype="float32",
                dtype_scale=np.array([1.0, 1.0]), angle_scale=0.0)
    assert not c.ok and "|err|/bound = " in c.message and "exact" not in c.message, c.message

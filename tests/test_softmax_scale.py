"""SCALE-YARN-SOFTMAX-SCALE: the DeepSeek / HF YaRN softmax scale, checked through attention
probabilities over several keys, against hand figures and the real transformers DeepSeek-V3 code."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers.models.deepseek_v3.modeling_deepseek_v3 as hf_ds
from transformers import DeepseekV3Config

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.adapters.hf_transformers import HFTransformersAdapter
from posenc.adapters.base import Unsupported
from posenc.harness import golden
from posenc.harness.failure import load_golden
from posenc.registry import all_cases
from posenc.registry.cases import Case
from posenc.harness.runner import compare_outputs
from posenc.reference import attention
from posenc.spec import load_spec
from posenc.spec.models import RopeParams, SoftmaxScaleParams
from posenc import registry

CASES = all_cases()

DSV3_ROPE = RopeParams(head_dim=64, rope_theta=1e4, rope_type="yarn", factor=40.0,
                       original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=1.0)
DSV3 = SoftmaxScaleParams(rope=DSV3_ROPE, qk_head_dim=192)
SPEC = load_spec()
DIVS = ["DIV-SCALE-SOFTMAX-MSCALE-MISSING", "DIV-SCALE-SOFTMAX-MSCALE-NOT-SQUARED", "DIV-SCALE-SOFTMAX-ROPE-DIM"]


# ---- figures by hand ----------------------------------------------------------------------------


def test_deepseek_v3_figure_by_hand():
    m = 0.1 * 1.0 * math.log(40) + 1.0
    assert m == pytest.approx(1.3688879454113936, rel=1e-15)
    assert 192 ** -0.5 * m * m == pytest.approx(0.13523377886088009, rel=1e-15)
    assert attention.softmax_scale(DSV3) == pytest.approx(0.13523377886088009, rel=1e-15)
    # mscale = mscale_all_dim: cos/sin carry 1.0, the whole correction is in the softmax scale
    from posenc.reference import rope
    assert rope.inv_freq(DSV3_ROPE)[1] == 1.0


def test_mscale_ratio_reads_mscale_all_dim_only():
    p = SoftmaxScaleParams(rope=DSV3_ROPE.model_copy(update={"factor": 16.0, "mscale": 0.707}), qk_head_dim=192)
    assert attention.softmax_scale(p) == pytest.approx(192 ** -0.5 * (0.1 * math.log(16) + 1) ** 2, rel=1e-15)


def test_probs_by_hand_two_keys():
    """Two keys, one query: p = sigmoid((l0 - l1)); one key would give 1 whatever the scale."""
    p = SoftmaxScaleParams(rope=DSV3_ROPE.model_copy(update={"head_dim": 2}), qk_head_dim=4)
    q = np.array([1.0, 0.0, 0.5, 0.0]).reshape(1, 1, 1, 4)
    k = np.array([[1.0, 0, 0, 0], [0, 0, 1.0, 0]]).reshape(1, 1, 2, 4)
    c = 4 ** -0.5 * (0.1 * math.log(40) + 1) ** 2
    got = attention.probs(q, k, p).ravel()
    np.testing.assert_allclose(got, [1 / (1 + math.exp(-0.5 * c)), 1 / (1 + math.exp(0.5 * c))], rtol=1e-15)
    one = attention.probs(q, k[:, :, :1], p)
    assert one.ravel().tolist() == [1.0]


def test_params_validation():
    with pytest.raises(ValueError, match="needs mscale_all_dim"):
        SoftmaxScaleParams(rope=DSV3_ROPE.model_copy(update={"mscale_all_dim": None}), qk_head_dim=192)
    with pytest.raises(ValueError, match="smaller than the rope head_dim"):
        SoftmaxScaleParams(rope=DSV3_ROPE, qk_head_dim=32)
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        SoftmaxScaleParams(rope=RopeParams(head_dim=64), qk_head_dim=192)


# ---- the reference against transformers' DeepseekV3Attention.scaling ---------------------------


def _hf_scaling(p: SoftmaxScaleParams) -> float:
    r = p.rope
    rp = {"rope_type": "yarn", "rope_theta": r.rope_theta, "factor": r.factor,
          "original_max_position_embeddings": r.original_max_position_embeddings,
          "mscale_all_dim": r.mscale_all_dim}
    if r.mscale is not None:
        rp["mscale"] = r.mscale
    cfg = DeepseekV3Config(hidden_size=8, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None,
                           kv_lora_rank=4, qk_nope_head_dim=p.qk_head_dim - r.head_dim, qk_rope_head_dim=r.head_dim,
                           v_head_dim=1, vocab_size=1, intermediate_size=1, moe_intermediate_size=1,
                           num_hidden_layers=1, pad_token_id=None, bos_token_id=None, eos_token_id=None,
                           max_position_embeddings=int(r.original_max_position_embeddings * r.factor),
                           rope_parameters=rp)
    return hf_ds.DeepseekV3Attention(cfg, layer_idx=0).scaling


GRID = [(40.0, 1.0, 1.0, 192), (40.0, 0.707, 1.0, 192), (16.0, 1.0, 0.5, 128), (4.0, None, 1.0, 96),
        (1.0, 1.0, 1.0, 192), (0.5, 1.0, 1.0, 192), (32.0, 1.0, 0.707, 256), (2.5, 0.8, 1.3, 72)]


@pytest.mark.parametrize("factor,mscale,mscale_all_dim,qk", GRID)
def test_reference_matches_deepseek_v3_scaling(factor, mscale, mscale_all_dim, qk):
    rope = RopeParams(head_dim=64 if qk >= 64 else 32, rope_theta=1e4, rope_type="yarn", factor=factor,
                      original_max_position_embeddings=4096, mscale=mscale, mscale_all_dim=mscale_all_dim)
    p = SoftmaxScaleParams(rope=rope, qk_head_dim=qk)
    assert _hf_scaling(p) == pytest.approx(attention.softmax_scale(p), rel=1e-15)


def test_hf_adapter_derived_factor_is_unsupported():
    p = SoftmaxScaleParams(rope=DSV3_ROPE.model_copy(update={"factor": None, "max_position_embeddings": 163840}),
                           qk_head_dim=192)
    q = torch.zeros(1, 1, 1, 192)
    with pytest.raises(Unsupported, match="factor"):
        HFTransformersAdapter().attention_probs(q, torch.zeros(1, 1, 2, 192), p)


# ---- every mutant is caught -----------------------------------------------------------------------


def _goldens():
    m = golden.read_manifest()
    return [golden.load(c, manifest=m) for c in CASES if c.op == "attention.probs"]


@pytest.mark.parametrize("div_id", DIVS)
def test_mutant_caught_by_every_softmax_case_at_every_dtype(div_id):
    d = SPEC.divergences[div_id]
    assert d.violates == ["SCALE-YARN-SOFTMAX-SCALE"]
    gs = _goldens()
    assert len(gs) >= 3
    for g in gs:
        out = registry.run_mutant(d.mutant, g.case.op, g.case.params, g.inputs)
        for dt in ("float64", "float32", "bfloat16", "float16"):
            assert not all(c.ok for c in compare_outputs(g, out, dt)), (g.case.id, dt)


def test_softmax_cases_have_several_keys_and_distinct_shapes():
    for g in _goldens():
        q, k = g.inputs["q"], g.inputs["k"]
        assert k.shape[2] >= 4, g.case.id
        assert q.shape[-1] == g.case.params.qk_head_dim == 192
        assert len({q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3]}) == 5, g.case.id


def test_op_is_float32_floored_and_not_angle_based():
    op = registry.operation("attention.probs")
    assert op.float32_floor and not op.angle_based


# ---- the hf-transformers adapter runs DeepSeek-V3's own code --------------------------------------


def _apply_once(rope_parameters, scaling):
    rt = rope_parameters.get("rope_type", "default")
    if rt != "default" and rope_parameters.get("mscale_all_dim", 0):
        return scaling * hf_ds.yarn_get_mscale(rope_parameters["factor"], rope_parameters["mscale_all_dim"])
    return scaling


PATCHES = [
    ("yarn_apply_mscale", lambda rope_parameters, scaling: scaling, "DIV-SCALE-SOFTMAX-MSCALE-MISSING"),
    ("yarn_apply_mscale", _apply_once, "DIV-SCALE-SOFTMAX-MSCALE-NOT-SQUARED"),
    ("yarn_get_mscale", lambda scale=1, mscale=1: 1.0, "DIV-SCALE-SOFTMAX-MSCALE-MISSING"),
]


@pytest.mark.parametrize("attr,wrong,divergence", PATCHES, ids=[d for _, _, d in PATCHES[:2]] + ["get_mscale-1"])
def test_patched_deepseek_scaling_fails_the_suite(run_suite, monkeypatch, attr, wrong, divergence):
    assert run_suite("hf-transformers", "-k", "scale-softmax").ret == 0
    monkeypatch.setattr(hf_ds, attr, wrong)
    r = run_suite("hf-transformers", "-k", "scale-softmax")
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1, out[-2000:]
    assert f"    {divergence} (violates" in out, out[-3000:]


def test_patched_eager_attention_fails_the_suite(run_suite, monkeypatch):
    """The probabilities come from the module's eager_attention_forward, not from the adapter."""
    real = hf_ds.eager_attention_forward

    def sharper(module, query, key, value, attention_mask, scaling, **kw):
        return real(module, query, key, value, attention_mask, scaling=scaling * 1.5, **kw)

    monkeypatch.setattr(hf_ds, "eager_attention_forward", sharper)
    r = run_suite("hf-transformers", "-k", "scale-softmax")
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1


# ---- the dot product's length in the bound (issue 27: derived, not tuned) ------------------------

def _summed_in_order(q, k, scale: float, acc) -> np.ndarray:
    """probs of a kernel that scales q first (``(q * scale) @ k^T``, the order real models use) and
    sums each logit's n products one after another in ``acc`` (float32: a legal accumulator;
    float16: a half-precision accumulator), the softmax in float32."""
    qs = (q.astype(np.float32) * np.float32(scale)).astype(np.float32)
    kk = np.repeat(k.astype(np.float32), q.shape[1] // k.shape[1], axis=1)
    total = np.zeros(q.shape[:-1] + (kk.shape[-2],), acc)
    for d in range(q.shape[-1]):
        total = (total + (qs[..., d:d + 1] * kk[..., None, :, d]).astype(acc)).astype(acc)
    logits = total.astype(np.float32)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def _deepseek_inputs(qk: int, seed: int):
    """Positive q, k (every rounding of a sum pushes the same way: the worst of a float32 sum)."""
    rng = np.random.default_rng(seed)
    q = np.abs(rng.standard_normal((2, 4, 8, qk))).astype(np.float32).astype(np.float64)
    k = np.abs(rng.standard_normal((2, 2, 16, qk))).astype(np.float32).astype(np.float64)
    return q, k


@pytest.mark.parametrize("qk", [192, 576])
def test_a_float32_kernel_summing_in_order_passes_and_the_length_term_is_what_lets_it(qk):
    """A correct float32 kernel: q scaled first, each logit's products summed one after another in
    float32.  It passes the bound, whose float32 term carries the dot product's length (n - 1)/2;
    without that term (the bound before spec 0.5.0) it fails at n = 576 -- the false failure."""
    p = SoftmaxScaleParams(rope=DSV3_ROPE, qk_head_dim=qk)
    case = Case(id="dot-length", op="attention.probs", clauses=("SCALE-YARN-SOFTMAX-SCALE",), params=p)
    worst_without = 0.0
    for seed in range(4):
        q, k = _deepseek_inputs(qk, seed)
        g = golden.computed(case, {"q": q, "k": k})
        out = {"probs": _summed_in_order(q, k, attention.softmax_scale(p), np.float32)}
        assert all(c.ok for c in compare_outputs(g, out, "float32")), [c.message for c in compare_outputs(g, out, "float32")]
        no_length = golden.Golden(g.case, g.inputs, g.outputs, g.dtype_scales,
                                  {n: 0 * v for n, v in g.angle_scales.items()}, g.angle_based)
        worst_without = max(worst_without, max(c.ratio for c in compare_outputs(no_length, out, "float32")))
    if qk == 576:
        assert worst_without > 1.0, worst_without


@pytest.mark.parametrize("case_id", [c.id for c in CASES if c.op == "attention.probs"])
def test_a_dot_product_accumulated_in_float16_fails_at_float32(case_id):
    """The same kernel with a float16 accumulator (a real class of bug: a half-precision matmul
    accumulator) is out of tolerance at float32 on every attention.probs golden."""
    g = load_golden(case_id)
    scale = attention.softmax_scale(g.case.params)
    out = {"probs": _summed_in_order(g.inputs["q"], g.inputs["k"], scale, np.float16)}
    assert not all(c.ok for c in compare_outputs(g, out, "float32"))
    right = {"probs": _summed_in_order(g.inputs["q"], g.inputs["k"], scale, np.float32)}
    assert all(c.ok for c in compare_outputs(g, right, "float32"))

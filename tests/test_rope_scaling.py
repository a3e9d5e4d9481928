"""RoPE scaling reference (SCALE-*) against published figures and the real transformers code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from posenc.reference import rope, rope_scaling as rs
from posenc.families.rope import freq_provider, rope_outputs
from posenc.spec.models import RopeParams
from posenc.spec.registry import model_params
from posenc import registry

LLAMA31 = RopeParams(head_dim=128, rope_theta=500000.0, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                     high_freq_factor=4.0, original_max_position_embeddings=8192)
QWEN = RopeParams(head_dim=128, rope_theta=1e6, rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
DSV3 = RopeParams(head_dim=64, rope_theta=1e4, rope_type="yarn", factor=40.0, original_max_position_embeddings=4096,
                  mscale=1.0, mscale_all_dim=1.0)
GPT_OSS = RopeParams(head_dim=64, rope_theta=150000.0, rope_type="yarn", factor=32.0,
                     original_max_position_embeddings=4096, truncate=False)


# ---- published figures (issue 3; encodings-facts D) ---------------------------------------------


def test_linear_figure_and_exponent_mutant():
    p = RopeParams(head_dim=4, rope_type="linear", factor=2.0)
    x = np.ones((1, 1, 1, 4))
    y = rope.apply(x, x, np.array([[1]]), p)[0].ravel()
    np.testing.assert_allclose(y, [0.398157, 0.994988, 1.357008, 1.004987], atol=5e-7)
    # by hand: inv_freq = [1, 0.01] / 2 -> angles 0.5 and 0.005 at position 1
    assert y[0] == pytest.approx(math.cos(0.5) - math.sin(0.5), abs=1e-15)
    wrong = registry.mutants()["scale_linear_exponent"]["rope.apply"](p, {"q": x, "k": x, "position_ids": np.array([[1]])})
    np.testing.assert_allclose(wrong["q"].ravel(), [-0.301169, 0.895171, 1.381773, 1.094838], atol=5e-7)


def test_llama31_bands():
    w, a = rope.inv_freq(LLAMA31)
    w0 = 500000.0 ** (-np.arange(0, 128, 2) / 128)
    ratio = w0 / w
    assert a == 1.0
    np.testing.assert_array_equal(ratio[:29], 1.0)
    np.testing.assert_allclose(ratio[35:], 8.0, rtol=1e-15)
    assert (ratio[29:35] > 1).all() and (ratio[29:35] < 8).all() and (np.diff(ratio[29:35]) > 0).all()
    assert w[40] == pytest.approx(3.4281021959525912e-05, rel=1e-15)


def test_qwen25_yarn_figures():
    assert rs.yarn_correction_range(QWEN) == (23, 40)
    assert rope.inv_freq(QWEN)[1] == pytest.approx(1.138629436111989, rel=1e-15)
    assert 0.1 * math.log(4) + 1 == pytest.approx(1.138629436111989, rel=1e-15)


def test_deepseek_v3_yarn_figures():
    assert rs.yarn_correction_range(DSV3) == (10, 23)
    assert rope.inv_freq(DSV3)[1] == 1.0
    assert rs.yarn_softmax_scale(DSV3, 192) == pytest.approx(0.13523377886088009, rel=1e-15)
    # by hand: 192^-0.5 * (0.1 ln 40 + 1)^2
    assert 192 ** -0.5 * (0.1 * math.log(40) + 1) ** 2 == pytest.approx(0.13523377886088009, rel=1e-15)


def test_mscale_ignored_figure():
    p = DSV3.model_copy(update={"factor": 16.0})
    assert rope.inv_freq(p)[1] == 1.0
    assert rs.get_mscale(16.0) == pytest.approx(1.2772588722239781, rel=1e-15)  # the wrong value, 1.2773


def test_gpt_oss_yarn_figures():
    low, high = rs.yarn_correction_range(GPT_OSS)
    assert low == pytest.approx(8.0928, abs=5e-5) and high == pytest.approx(17.3980, abs=5e-5)
    assert rope.inv_freq(GPT_OSS)[1] == pytest.approx(1.3465735902799727, rel=1e-15)


def test_yarn_factor_default():
    p = RopeParams(head_dim=128, rope_theta=1e6, rope_type="yarn", max_position_embeddings=131072,
                   original_max_position_embeddings=32768)
    np.testing.assert_array_equal(rope.inv_freq(p)[0], rope.inv_freq(QWEN)[0])


def test_phi35_longrope_attention_factor():
    p = RopeParams(head_dim=96, rope_type="longrope", max_position_embeddings=131072,
                   original_max_position_embeddings=4096, short_factor=[1.0] * 48, long_factor=[2.0] * 48)
    assert rope.inv_freq(p)[1] == pytest.approx(1.1902380714238083, rel=1e-15)
    assert math.sqrt(17 / 12) == pytest.approx(1.1902380714238083, rel=1e-15)
    np.testing.assert_allclose(rope.inv_freq(p, 4096)[0] * 2, rope.inv_freq(p, 4097)[0] * 4, rtol=1e-15)


def test_phi35_registry_entry():
    """The published factor lists (48 = 96 / 2 each), their first/last values and s = 32."""
    p = model_params("phi-3.5-mini")
    assert len(p.long_factor) == len(p.short_factor) == 48
    assert (p.long_factor[0], p.long_factor[-1]) == (1.0800000429153442, 64.83999633789062)
    assert (p.short_factor[0], p.short_factor[-1]) == (1.0, 2.8399994373321533)
    assert rope.inv_freq(p)[1] == pytest.approx(1.1902380714238083, rel=1e-15)
    # an explicit factor wins (5.x; DIV-SCALE-LONGROPE-FORCED-FACTOR is 4.57's s = 32)
    assert rope.inv_freq(p.model_copy(update={"factor": 2.0}))[1] == pytest.approx(math.sqrt(13 / 12), rel=1e-15)


def test_gemma4_registry_entry():
    """Head 512, 128 rotated, denominator 512: pair i < 64 has theta^(-2i/512), pairs 64..255 frequency 0."""
    w, a = rope.inv_freq(model_params("gemma-4-full-attention"))
    assert w.shape == (256,) and a == 1.0
    np.testing.assert_allclose(w[:64], 1e6 ** (-np.arange(0, 128, 2) / 512), rtol=1e-15)
    assert (w[64:] == 0).all()


def test_dynamic_ntk_figure():
    p = RopeParams(head_dim=128, rope_type="dynamic", factor=2.0, max_position_embeddings=4096)
    assert rs.dynamic_theta(p, 8192) == pytest.approx(30527.7367488067, rel=1e-13)
    assert rs.dynamic_theta(p, 4096) == 10000.0 and rs.dynamic_theta(p, 100) == 10000.0


def test_dynamic_grow_policy_sequence():
    p = RopeParams(head_dim=128, rope_type="dynamic", factor=2.0, max_position_embeddings=4096,
                   dynamic_policy="grow_until_reset")
    st = rs.DynamicGrowState(p)
    th = {L: rs.dynamic_theta(p, L) for L in (8192, 6000)}
    st.inv_freq(8192)
    assert st.theta == th[8192]
    st.inv_freq(6000)
    assert st.theta == th[8192]  # still the grown theta'
    st.inv_freq(3000)
    assert st.theta == 10000.0  # reset below max_position_embeddings
    st.inv_freq(6000)
    assert st.theta == th[6000]


def test_proportional_rule():
    p = RopeParams(head_dim=8, rotary_dim=4, rope_type="proportional")
    w, _ = rope.inv_freq(p)
    np.testing.assert_allclose(w, [1.0, 10000 ** (-2 / 8), 0.0, 0.0], rtol=1e-15)
    x = np.arange(8.0).reshape(1, 1, 1, 8)
    y = rope.apply(x, x, np.array([[3]]), p)[0].ravel()
    # pairs (0,4) and (1,5) rotate; pairs (2,6) and (3,7) have frequency 0
    np.testing.assert_array_equal(y[[2, 3, 6, 7]], x.ravel()[[2, 3, 6, 7]])
    assert y[0] == pytest.approx(0 * math.cos(3) - 4 * math.sin(3), abs=1e-15)


def test_params_reject_fields_of_other_rope_types():
    with pytest.raises(ValueError, match="beta_fast does not apply to rope_type 'linear'"):
        RopeParams(head_dim=8, rope_type="linear", factor=2.0, beta_fast=32.0)
    with pytest.raises(ValueError, match="factor is required for rope_type 'llama3'"):
        RopeParams(head_dim=8, rope_type="llama3", low_freq_factor=1, high_freq_factor=4,
                   original_max_position_embeddings=8192)
    with pytest.raises(ValueError, match="short_factor must have rotary_dim/2 = 4 entries"):
        RopeParams(head_dim=8, rope_type="longrope", short_factor=[1.0], long_factor=[1.0] * 4,
                   original_max_position_embeddings=8)
    with pytest.raises(ValueError, match="greater than 0"):
        RopeParams(head_dim=8, rope_type="yarn", factor=2.0, original_max_position_embeddings=8, beta_fast=0)
    with pytest.raises(ValueError, match="long_factor entries must be > 0, got 0.0"):
        RopeParams(head_dim=8, rope_type="longrope", short_factor=[1.0] * 4, long_factor=[1.0, 0.0, 1.0, 1.0],
                   original_max_position_embeddings=8, factor=2.0)
    with pytest.raises(ValueError, match="dynamic rope needs rotary_dim > 2"):
        RopeParams(head_dim=8, rotary_dim=2, rope_type="dynamic", factor=2.0, max_position_embeddings=16)


# ---- the real transformers init functions --------------------------------------------------------


def _hf_inv_freq(p: RopeParams, seq_len=None):
    rp = {"rope_type": p.rope_type, "rope_theta": p.rope_theta}
    for k in ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
              "truncate", "low_freq_factor", "high_freq_factor", "attention_factor"):
        if getattr(p, k) is not None:
            rp[k] = getattr(p, k)
    for k in ("short_factor", "long_factor"):
        if getattr(p, k) is not None:
            rp[k] = list(getattr(p, k))
    if p.rdim != p.head_dim:
        rp["partial_rotary_factor"] = p.rdim / p.head_dim
    cfg = LlamaConfig(hidden_size=p.head_dim, head_dim=p.head_dim, num_attention_heads=1, num_key_value_heads=1,
                      max_position_embeddings=p.max_position_embeddings or 131072, rope_parameters=rp)
    w, a = ROPE_INIT_FUNCTIONS[p.rope_type](cfg, "cpu", seq_len=seq_len)
    return w.double().numpy(), a


HF_CASES = {
    "linear": RopeParams(head_dim=128, rope_type="linear", factor=4.0),
    "dynamic-8192": (RopeParams(head_dim=128, rope_type="dynamic", factor=2.0, max_position_embeddings=4096), 8192),
    "llama3.1": LLAMA31,
    "yarn-qwen2.5": QWEN,
    "yarn-deepseek-v3": DSV3,
    "yarn-explicit": QWEN.model_copy(update={"attention_factor": 1.5}),
    "longrope-long": (RopeParams(head_dim=96, rope_type="longrope", max_position_embeddings=131072,
                                 original_max_position_embeddings=4096, short_factor=[1 + i / 32 for i in range(48)],
                                 long_factor=[1 + 1.25 * i for i in range(48)]), 5000),
    "proportional": RopeParams(head_dim=128, rotary_dim=32, rope_theta=1e6, rope_type="proportional"),
    # named model entries (spec/registry/models.yaml), as the golden cases use them
    "phi-3.5-mini-short": (model_params("phi-3.5-mini"), 4096),
    "phi-3.5-mini-long": (model_params("phi-3.5-mini"), 4097),
    "phi-3.5-mini-explicit-factor": (model_params("phi-3.5-mini").model_copy(update={"factor": 2.0}), 10),
    "gemma-4-full-attention": model_params("gemma-4-full-attention"),
    "yarn-qwen2.5-registry": model_params("qwen2.5-7b-yarn"),
    "yarn-deepseek-v3-registry": model_params("deepseek-v3-rope"),
}


@pytest.mark.parametrize("name", list(HF_CASES))
def test_reference_matches_transformers_init_functions(name):
    """HF computes in float32: agreement within a few float32 ulp amplified by ln(theta)."""
    p, seq_len = HF_CASES[name] if isinstance(HF_CASES[name], tuple) else (HF_CASES[name], None)
    w_hf, a_hf = _hf_inv_freq(p, seq_len)
    w, a = rope.inv_freq(p, seq_len)
    assert float(a_hf) == pytest.approx(a, rel=1e-12)
    tol = 8 * np.finfo(np.float32).eps * (1 + math.log(p.rope_theta)) * np.abs(w) + 1e-30
    assert (np.abs(w_hf - w) <= tol).all(), np.max(np.abs(w_hf - w) / tol)


def test_gpt_oss_through_transformers_truncate_false():
    """truncate is read from the top-level rope_parameters in transformers 5.24."""
    w_hf, a_hf = _hf_inv_freq(GPT_OSS)
    w, a = rope.inv_freq(GPT_OSS)
    np.testing.assert_allclose(w_hf, w, rtol=2e-6)
    assert float(a_hf) == pytest.approx(a)


def test_cos_sin_calls_grow_matches_reference_state():
    p = RopeParams(head_dim=8, rope_type="dynamic", factor=2.0, max_position_embeddings=16,
                   dynamic_policy="grow_until_reset")
    x = {"position_ids.0": np.array([[30, 31]]), "position_ids.1": np.array([[20, 21]])}
    out = rope_outputs("rope.cos_sin_calls", p, x, freq_provider(p))
    w32 = rs.base_inv_freq(rs.dynamic_theta(p, 32), 8)
    np.testing.assert_allclose(out["cos.1"], np.cos(np.array([[20.0, 21.0]])[..., None] * w32), rtol=1e-15)


# ---- the suite catches scaling bugs and names them ----------------------------------------------
from pathlib import Path  # noqa: E402

BROKEN_SCALING = Path(__file__).resolve().parent / "broken_scaling_adapters.py"
SCALING_BUGS = [
    ("LinearExponent", "DIV-SCALE-LINEAR-EXPONENT"),
    ("YarnMscaleIgnored", "DIV-SCALE-YARN-MSCALE-IGNORED"),
    ("YarnTruncateFlipped", "DIV-SCALE-YARN-TRUNCATE-FLIPPED"),
    ("DynamicStale", "DIV-SCALE-DYNAMIC-STALE"),
    ("Llama3Ignored", "DIV-SCALE-LLAMA3-IGNORED"),
    ("LongropeAlwaysShort", "DIV-SCALE-LONGROPE-ALWAYS-SHORT"),
    ("ProportionalAsPartial", "DIV-SCALE-PROPORTIONAL-AS-PARTIAL"),
    ("SoftmaxMscaleNotSquared", "DIV-SCALE-SOFTMAX-MSCALE-NOT-SQUARED"),
]


@pytest.mark.parametrize("name,divergence", SCALING_BUGS, ids=[n for n, _ in SCALING_BUGS])
def test_suite_catches_and_names_scaling_bug(run_suite, name, divergence):
    r = run_suite(f"{BROKEN_SCALING}:{name}", "-k", "scale-")
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1, out[-2000:]
    assert f"    {divergence} (violates" in out, out[-3000:]


# ---- spec 0.4.0: LongRoPE selection policy, new golden parameter sets against transformers ------
PHI35 = model_params("phi-3.5-mini")


def test_longrope_policy_selection():
    at_init = PHI35.model_copy(update={"longrope_policy": "at_init"})
    long_w = rs.base_inv_freq(1e4, 96) / np.asarray(PHI35.long_factor)
    short_w = rs.base_inv_freq(1e4, 96) / np.asarray(PHI35.short_factor)
    # per call (default): by the call's seq_len; before any call: short
    np.testing.assert_array_equal(rs.longrope(PHI35, None), short_w)
    np.testing.assert_array_equal(rs.longrope(PHI35, 4096), short_w)
    np.testing.assert_array_equal(rs.longrope(PHI35, 4097), long_w)
    # at init: 131072 > 4096 -> long at every length; max_position_embeddings == original -> short
    for L in (None, 3, 4096, 100000):
        np.testing.assert_array_equal(rs.longrope(at_init, L), long_w)
    same = RopeParams(**{**at_init.model_dump(), "max_position_embeddings": 4096})
    np.testing.assert_array_equal(rs.longrope(same, 100000), short_w)
    # the attention factor does not depend on the policy
    assert rs.longrope_attention_factor(at_init) == rs.longrope_attention_factor(PHI35)


def test_longrope_policy_validation():
    with pytest.raises(ValueError, match="at_init selects the factors by max_position_embeddings"):
        RopeParams(head_dim=8, rope_type="longrope", short_factor=[1.0] * 4, long_factor=[2.0] * 4,
                   original_max_position_embeddings=8, factor=2.0, longrope_policy="at_init")
    with pytest.raises(ValueError, match="longrope_policy does not apply to rope_type 'yarn'"):
        RopeParams(head_dim=8, rope_type="yarn", factor=2.0, original_max_position_embeddings=8,
                   longrope_policy="per_call")


def test_hf_wrapper_reports_at_init_unsupported():
    from posenc.adapters import Unsupported
    from posenc.adapters.hf_port.rope_scaling import _check_scaling_expressible
    _check_scaling_expressible(PHI35)
    with pytest.raises(Unsupported, match="transformers 5.24 selects per call"):
        _check_scaling_expressible(PHI35.model_copy(update={"longrope_policy": "at_init"}))


NEW_HF_CASES = {
    "llama3.2-1b": RopeParams(head_dim=64, rope_theta=500000.0, rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                              high_freq_factor=4.0, original_max_position_embeddings=8192),
    "llama3-bands-2-8": RopeParams(head_dim=128, rope_theta=500000.0, rope_type="llama3", factor=8.0,
                                   low_freq_factor=2.0, high_freq_factor=8.0, original_max_position_embeddings=4096),
    "yarn-beta-fast-4": RopeParams(head_dim=128, rope_theta=1e6, rope_type="yarn", factor=64.0,
                                   original_max_position_embeddings=4096, beta_fast=4.0, beta_slow=1.0),
    "yarn-betas-16-2": RopeParams(head_dim=128, rope_theta=1e4, rope_type="yarn", factor=8.0,
                                  original_max_position_embeddings=8192, beta_fast=16.0, beta_slow=2.0, truncate=True),
    "yarn-low-clamped": RopeParams(head_dim=64, rope_theta=1e4, rope_type="yarn", factor=4.0,
                                   original_max_position_embeddings=256, beta_fast=64.0),
    "yarn-high-clamped": RopeParams(head_dim=16, rope_theta=100.0, rope_type="yarn", factor=4.0,
                                    original_max_position_embeddings=16384, beta_fast=64.0, beta_slow=0.25,
                                    truncate=False),
    "yarn-mscale-all-dim": RopeParams(head_dim=64, rope_theta=1e4, rope_type="yarn", factor=40.0,
                                      original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=0.707),
}


@pytest.mark.parametrize("name", list(NEW_HF_CASES))
def test_new_golden_params_match_transformers(name):
    p = NEW_HF_CASES[name]
    w_hf, a_hf = _hf_inv_freq(p)
    w, a = rope.inv_freq(p)
    assert float(a_hf) == pytest.approx(a, rel=1e-12)
    tol = 8 * np.finfo(np.float32).eps * (1 + math.log(p.rope_theta)) * np.abs(w) + 1e-30
    assert (np.abs(w_hf - w) <= tol).all(), np.max(np.abs(w_hf - w) / tol)


def test_yarn_clamp_branches():
    assert rs.yarn_correction_range(NEW_HF_CASES["yarn-low-clamped"]) == (0, 13)
    low, high = rs.yarn_correction_range(NEW_HF_CASES["yarn-high-clamped"])
    assert high == 15 and low == pytest.approx(6.440240387814938, rel=1e-12)

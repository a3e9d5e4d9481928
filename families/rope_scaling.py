"""RoPE scaling (SCALE-*): the mutants of the scaled frequency rules and their golden cases, and
the attention.probs operation of SCALE-YARN-SOFTMAX-SCALE.  The rules themselves are
:mod:`posenc.reference.rope_scaling`; the rope.* operations that reach them are the rope
family's (:mod:`posenc.families.rope`)."""

from __future__ import annotations

import numpy as np

from posenc.conformance.cases import Case, Gen, pos
from posenc.reference import attention, rope, rope_scaling
from posenc.spec.models import RopeParams, SoftmaxScaleParams
from posenc.spec.registry import model_params

from . import add_cases, mutant, reference
from ._common import run
from .rope import rope_outputs

def _attn_probs(p, x):
    return {"probs": attention.probs(x["q"], x["k"], p)}


def _attn_probs_scales(p, x):
    ds = attention.probs_error_scale(x["q"], x["k"], p)
    return {"probs": (ds, 0 * ds)}


reference("attention.probs", scales=_attn_probs_scales)(_attn_probs)


# ---- RoPE scaling (SCALE-*) -----------------------------------------------------------------
_ROPE_OPS = ("rope.apply", "rope.cos_sin", "rope.inv_freq", "rope.cos_sin_calls")


def _with_freq(op, p, x, freq):
    return rope_outputs(op, p, x, freq)


@mutant("scale_linear_exponent", *_ROPE_OPS)
def scale_linear_exponent(op, p, x, dtype=None):
    if p.rope_type != "linear":
        return None
    w = p.rope_theta ** (-np.arange(0, p.rdim, 2, dtype=np.float64) / (p.rdim * p.factor))
    return _with_freq(op, p, x, lambda L: (w, 1.0))


@mutant("scale_dynamic_fixed_length", *_ROPE_OPS)
def scale_dynamic_fixed_length(op, p, x, dtype=None):
    if p.rope_type != "dynamic":
        return None
    L = int(p.factor * p.max_position_embeddings)
    return _with_freq(op, p, x, lambda _: (rope_scaling.dynamic(p, L), 1.0))


@mutant("scale_dynamic_uniform_division", *_ROPE_OPS)
def scale_dynamic_uniform_division(op, p, x, dtype=None):
    if p.rope_type != "dynamic":
        return None
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / p.factor ** (p.rdim / (p.rdim - 2))
    return _with_freq(op, p, x, lambda _: (w, 1.0))


@mutant("scale_dynamic_factor_ignored", *_ROPE_OPS)
def scale_dynamic_factor_ignored(op, p, x, dtype=None):
    if p.rope_type != "dynamic":
        return None
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), 1.0))


@mutant("scale_dynamic_stale", "rope.cos_sin_calls")
def scale_dynamic_stale(op, p, x, dtype=None):
    if p.rope_type != "dynamic" or p.dynamic_policy == "grow_until_reset":
        return None
    return run(op, p.model_copy(update={"dynamic_policy": "grow_until_reset"}), x)


@mutant("scale_dynamic_no_reset", "rope.cos_sin_calls")
def scale_dynamic_no_reset(op, p, x, dtype=None):
    if p.rope_type != "dynamic" or p.dynamic_policy != "grow_until_reset":
        return None
    state = {"cached": p.max_position_embeddings, "theta": p.rope_theta}

    def freq(L):
        if L is not None and L > state["cached"]:
            state["theta"], state["cached"] = rope_scaling.dynamic_theta(p, L), L
        return rope_scaling.base_inv_freq(state["theta"], p.rdim), 1.0
    return _with_freq(op, p, x, freq)


def _yarn_af_mutant(op, p, x, af):
    w = rope_scaling.yarn(p)
    return _with_freq(op, p, x, lambda L: (w, af))


@mutant("scale_yarn_mscale_ignored", *_ROPE_OPS)
def scale_yarn_mscale_ignored(op, p, x, dtype=None):
    if p.rope_type != "yarn" or not (p.mscale and p.mscale_all_dim) or p.attention_factor is not None:
        return None
    return _yarn_af_mutant(op, p, x, rope_scaling.get_mscale(rope_scaling.yarn_factor(p)))


@mutant("scale_yarn_explicit_reapplied", *_ROPE_OPS)
def scale_yarn_explicit_reapplied(op, p, x, dtype=None):
    if p.rope_type != "yarn" or p.attention_factor is None:
        return None
    return _yarn_af_mutant(op, p, x, p.attention_factor * rope_scaling.get_mscale(rope_scaling.yarn_factor(p)))


@mutant("scale_yarn_truncate_flipped", *_ROPE_OPS)
def scale_yarn_truncate_flipped(op, p, x, dtype=None):
    if p.rope_type != "yarn":
        return None
    flipped = p.model_copy(update={"truncate": not (p.truncate is None or p.truncate)})
    return _with_freq(op, p, x, lambda L: rope.inv_freq(flipped, L))


@mutant("scale_llama3_ignored", *_ROPE_OPS)
def scale_llama3_ignored(op, p, x, dtype=None):
    if p.rope_type != "llama3":
        return None
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), 1.0))


@mutant("scale_longrope_always_short", *_ROPE_OPS)
def scale_longrope_always_short(op, p, x, dtype=None):
    if p.rope_type != "longrope":
        return None
    return _with_freq(op, p, x, lambda L: rope.inv_freq(p, None))


# ---- behaviours of older transformers releases (named so a port of them is diagnosed) ----------


def _with_factor(op, p, x, factor):
    if factor == p.factor:
        return None
    return run(op, p.model_copy(update={"factor": factor}), x)


@mutant("scale_yarn_factor_override", *_ROPE_OPS)
def scale_yarn_factor_override(op, p, x, dtype=None):
    """transformers 4.51.3-4.55.4: factor := max_position_embeddings / original when both are set."""
    if p.rope_type != "yarn" or not (p.max_position_embeddings and p.original_max_position_embeddings):
        return None
    return _with_factor(op, p, x, p.max_position_embeddings / p.original_max_position_embeddings)


@mutant("scale_yarn_range_max_position", *_ROPE_OPS)
def scale_yarn_range_max_position(op, p, x, dtype=None):
    """transformers <= 4.50.3: correction range computed with max_position_embeddings, not the original."""
    if (p.rope_type != "yarn" or not p.max_position_embeddings
            or p.max_position_embeddings == p.original_max_position_embeddings):
        return None
    q = p.model_copy(update={"original_max_position_embeddings": p.max_position_embeddings,
                             "factor": rope_scaling.yarn_factor(p)})
    return run(op, q, x)


@mutant("scale_longrope_forced_factor", *_ROPE_OPS)
def scale_longrope_forced_factor(op, p, x, dtype=None):
    """transformers 4.57.6: a top-level original_max_position_embeddings forces s = L_max / L_orig."""
    if p.rope_type != "longrope" or p.factor is None or not p.max_position_embeddings:
        return None
    return _with_factor(op, p, x, p.max_position_embeddings / p.original_max_position_embeddings)


@mutant("scale_proportional_as_partial", *_ROPE_OPS)
def scale_proportional_as_partial(op, p, x, dtype=None):
    if p.rope_type != "proportional":
        return None
    partial = p.model_copy(update={"rope_type": "default", "factor": None})
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / (p.factor or 1.0)
    return _with_freq(op, partial, x, lambda L: (w, 1.0))


# ---- YaRN softmax scale (SCALE-YARN-SOFTMAX-SCALE) ---------------------------------------------


def _probs_with_scale(p, x, scale):
    return {"probs": attention.probs(x["q"], x["k"], p, scale=scale)}


@mutant("scale_softmax_mscale_missing", "attention.probs")
def scale_softmax_mscale_missing(op, p, x, dtype=None):
    """The plain ``qk_head_dim ** -0.5``: the mscale correction dropped from the softmax scale."""
    return _probs_with_scale(p, x, p.qk_head_dim ** -0.5)


@mutant("scale_softmax_mscale_not_squared", "attention.probs")
def scale_softmax_mscale_not_squared(op, p, x, dtype=None):
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim)``: the correction applied once."""
    m = rope_scaling.get_mscale(rope_scaling.yarn_factor(p.rope), p.rope.mscale_all_dim)
    return _probs_with_scale(p, x, p.qk_head_dim ** -0.5 * m)


@mutant("scale_softmax_rope_dim", "attention.probs")
def scale_softmax_rope_dim(op, p, x, dtype=None):
    """The scale taken of the rope head dim (64) instead of qk_head_dim (192)."""
    return _probs_with_scale(p, x, rope_scaling.yarn_softmax_scale(p.rope, p.rope.head_dim))


# ---- golden cases ----------------------------------------------------------------------------
# ---- RoPE scaling (SCALE-*) ----------------------------------------------------------------
_ones4 = np.ones((1, 1, 1, 4))
_Q128 = {"q": Gen((2, 4, 3, 128)), "k": Gen((2, 2, 3, 128))}
_LLAMA31 = model_params("llama-3.1-8b")
_QWEN25_YARN = model_params("qwen2.5-7b-yarn")
_DSV3_YARN = model_params("deepseek-v3-rope")
_GPT_OSS_YARN = model_params("gpt-oss")
_LONGROPE = model_params("phi-3.5-mini")
_GEMMA4 = model_params("gemma-4-full-attention")
_DYN = dict(head_dim=128, rope_theta=10000.0, rope_type="dynamic", factor=2.0, max_position_embeddings=4096)
_CALLS = {"position_ids.0": pos([0, 1, 2]), "position_ids.1": pos([8189, 8190, 8191]),
          "position_ids.2": pos([5997, 5998, 5999]), "position_ids.3": pos([2001, 2002, 2003]),
          "position_ids.4": pos([5997, 5998, 5999])}
_LONG_POS = pos([0, 1, 4095], [131069, 131070, 131071])
add_cases(
    Case("scale-linear-tiny", "rope.apply", ("SCALE-LINEAR",),
         RopeParams(head_dim=4, rope_type="linear", factor=2.0), {"q": _ones4, "k": _ones4, "position_ids": pos([1])},
         "d 4, theta 1e4, factor 2, x = ones, position 1 -> [0.398157, 0.994988, 1.357008, 1.004987]"),
    Case("scale-linear-factor-4", "rope.apply", ("SCALE-LINEAR",),
         RopeParams(head_dim=128, rope_type="linear", factor=4.0),
         {**_Q128, "position_ids": pos([0, 7, 16383], [100, 4096, 12000])}, "16k context by linear factor 4"),
    Case("scale-dynamic-apply", "rope.apply", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL"), RopeParams(**_DYN),
         {**_Q128, "position_ids": pos([8189, 8190, 8191], [0, 1, 2])}, "seq_len 8192: theta' 30527.7367488067"),
    Case("scale-dynamic-per-call", "rope.cos_sin_calls", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL"),
         RopeParams(**_DYN, dynamic_policy="per_call"), dict(_CALLS),
         "calls at seq_len 3, 8192, 6000, 2004, 6000 on one object; theta' from each call alone"),
    Case("scale-dynamic-grow", "rope.cos_sin_calls", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-GROW"),
         RopeParams(**_DYN, dynamic_policy="grow_until_reset"), dict(_CALLS),
         "transformers' policy: 6000 after 8192 keeps theta'(8192); 2004 resets; 6000 then grows to theta'(6000)"),
    Case("scale-yarn-qwen2.5", "rope.apply", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR", "SCALE-YARN-FACTOR"),
         _QWEN25_YARN, {**_Q128, "position_ids": _LONG_POS},
         "Qwen2.5 YaRN: low 23, high 40, attention factor 1.138629436111989; factor 4 as configured although "
         "max_position_embeddings / original = 1"),
    Case("scale-yarn-qwen2.5-inv-freq", "rope.inv_freq", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), _QWEN25_YARN),
    Case("scale-yarn-factor-default", "rope.inv_freq", ("SCALE-YARN-FACTOR", "SCALE-YARN-ATTENTION-FACTOR"),
         RopeParams(head_dim=128, rope_theta=1000000.0, rope_type="yarn", max_position_embeddings=131072,
                    original_max_position_embeddings=32768), note="no factor: 131072 / 32768 = 4"),
    Case("scale-yarn-deepseek-v3", "rope.cos_sin", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), _DSV3_YARN,
         {"position_ids": pos([0, 1, 163839], [4096, 65536, 2])},
         "DeepSeek-V3 rope part: low 10, high 23, mscale = mscale_all_dim = 1 -> cos/sin factor 1.0"),
    Case("scale-yarn-gpt-oss", "rope.apply", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), _GPT_OSS_YARN,
         {"q": Gen((2, 3, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": pos([0, 1, 131071], [4095, 4096, 70000])},
         "gpt-oss: truncate false, low 8.0928, high 17.3980, attention factor 1.3465735902799727"),
    Case("scale-yarn-explicit-factor", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",),
         _QWEN25_YARN.model_copy(update={"attention_factor": 1.5}), {"position_ids": pos([0, 1, 100, 40000])},
         "an explicit attention_factor is used as is"),
    Case("scale-llama3.1-8b", "rope.apply", ("SCALE-LLAMA3",), _LLAMA31, {**_Q128, "position_ids": _LONG_POS},
         "Llama 3.1: pairs 0-28 unchanged, 35-63 / 8, 29-34 blended"),
    Case("scale-llama3.1-8b-inv-freq", "rope.inv_freq", ("SCALE-LLAMA3",), _LLAMA31,
         note="inv_freq'[40] = 3.4281021959525912e-05"),
    Case("scale-longrope-switch", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         _LONGROPE, {"position_ids.0": pos([0, 1, 4095]), "position_ids.1": pos([4094, 4095, 4096]),
                     "position_ids.2": pos([10, 11, 12])},
         "short factors up to seq_len 4096, long beyond, short again; attention factor sqrt(1 + ln 32 / ln 4096)"),
    Case("scale-longrope-apply", "rope.apply", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         _LONGROPE, {"q": Gen((2, 2, 3, 96)), "k": Gen((2, 1, 3, 96)), "position_ids": _LONG_POS},
         "Phi-3.5-mini: s = 131072 / 4096 = 32, attention factor 1.1902380714238083"),
    Case("scale-longrope-explicit-factor", "rope.cos_sin", ("SCALE-LONGROPE-ATTENTION-FACTOR",),
         _LONGROPE.model_copy(update={"factor": 2.0}), {"position_ids": pos([0, 1, 2, 3])},
         "an explicit factor 2 wins over 131072 / 4096: attention factor sqrt(1 + ln 2 / ln 4096) = sqrt(13 / 12)"),
    Case("scale-dynamic-partial", "rope.cos_sin_calls", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-GROW", "ROPE-PARTIAL"),
         RopeParams(**{**_DYN, "rotary_dim": 32}, dynamic_policy="grow_until_reset"),
         {"position_ids.0": pos([8189, 8190, 8191]), "position_ids.1": pos([10, 11, 12])},
         "d in theta' = theta (...)^(d/(d-2)) is rotary_dim (32), not head_dim (128)"),
    Case("scale-dynamic-partial-per-call", "rope.cos_sin", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL", "ROPE-PARTIAL"),
         RopeParams(**{**_DYN, "rotary_dim": 32}), {"position_ids": pos([8189, 8190, 8191], [0, 1, 2])},
         "the per-call policy with rotary_dim 32 of head_dim 128"),
    Case("scale-yarn-partial", "rope.apply", ("SCALE-YARN-RAMP", "ROPE-PARTIAL"),
         _QWEN25_YARN.model_copy(update={"rotary_dim": 64}),
         {**_Q128, "position_ids": _LONG_POS}, "correction dims and frequencies over rotary_dim 64 of head_dim 128"),
    Case("scale-longrope-partial", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS", "ROPE-PARTIAL"),
         RopeParams(head_dim=128, rotary_dim=96, rope_theta=10000.0, rope_type="longrope",
                    max_position_embeddings=131072, original_max_position_embeddings=4096,
                    short_factor=tuple(1.0 + i / 64 for i in range(48)),
                    long_factor=tuple(1.0 + i for i in range(48))),
         {"position_ids.0": pos([0, 1, 4095]), "position_ids.1": pos([5000, 5001, 70000])},
         "Phi-4-mini shape: partial rotary factor 0.75 (head 128, rotary 96), synthetic factors"),
    Case("scale-llama3-partial", "rope.inv_freq", ("SCALE-LLAMA3", "ROPE-PARTIAL"),
         _LLAMA31.model_copy(update={"rotary_dim": 64})),
    Case("scale-proportional-factor", "rope.cos_sin", ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional", factor=8.0),
         {"position_ids": pos([0, 5, 131071], [4096, 3, 2])}, "factor 8 divides every frequency"),
    Case("scale-proportional", "rope.apply", ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional"),
         {**_Q128, "position_ids": pos([0, 5, 131071], [4096, 3, 2])},
         "rotated share 32 of 128 with denominator 128; the other 48 pairs keep frequency 0"),
    Case("scale-proportional-gemma4", "rope.apply", ("SCALE-PROPORTIONAL",), _GEMMA4,
         {"q": Gen((1, 2, 3, 512)), "k": Gen((1, 1, 3, 512)), "position_ids": pos([0, 7, 131071])},
         "Gemma 4 full attention: head 512, 128 rotated with denominator 512, theta 1e6"),
)

# ---- YaRN softmax scale through attention probabilities (SCALE-YARN-SOFTMAX-SCALE) ---------
# DeepSeek-V3 MLA: qk_head_dim 192 = 128 nope + 64 rope; rope part theta 1e4, yarn factor 40,
# original 4096, mscale = mscale_all_dim = 1 (published config): softmax scale 0.13523377886088009.


def _aligned_qk(B, Hq, Hk, Tq, Tk, D, key_signs=(1.0, -1.0, 0.5, -0.5, 0.25, -0.25)):
    """q and k whose per-dim products share one sign per key, so |q . k_j| = sum |q_d k_jd|: the
    logits are as large as their rounding allows, and a wrong scale shows even in bf16.  Values
    are multiples of 1/32 in [1/32, 1/2] (exact in bf16 and f16)."""
    b, h, d = np.meshgrid(np.arange(B), np.arange(Hk), np.arange(D), indexing="ij")
    sgn = np.where((d * 7 + h * 3 + b * 5) % 5 < 2, -1.0, 1.0)  # [B, Hk, D]
    g = Hq // Hk
    q = np.empty((B, Hq, Tq, D))
    for hh in range(Hq):
        for t in range(Tq):
            q[:, hh, t] = sgn[:, hh // g] * (1 + (np.arange(D) + 3 * t + 5 * hh + 7 * np.arange(B)[:, None]) % 4) / 8
    k = np.empty((B, Hk, Tk, D))
    for hh in range(Hk):
        for j in range(Tk):
            m = key_signs[j % len(key_signs)]
            k[:, hh, j] = sgn[:, hh] * m * (1 + (2 * np.arange(D) + j + hh + np.arange(B)[:, None]) % 4) / 8
    return q, k


_DSV3_SOFTMAX = SoftmaxScaleParams(rope=_DSV3_YARN, qk_head_dim=192)
_MSCALE_RATIO = SoftmaxScaleParams(
    rope=RopeParams(head_dim=64, rope_theta=10000.0, rope_type="yarn", factor=16.0,
                    original_max_position_embeddings=4096, mscale=0.707, mscale_all_dim=1.0),
    qk_head_dim=192)
_q1, _k1 = _aligned_qk(2, 4, 4, 3, 5, 192)
_q2, _k2 = _aligned_qk(3, 4, 2, 2, 6, 192)
add_cases(
    Case("scale-softmax-deepseek-v3", "attention.probs", ("SCALE-YARN-SOFTMAX-SCALE",), _DSV3_SOFTMAX,
         {"q": Gen((2, 4, 3, 192), scale=0.5), "k": Gen((2, 4, 5, 192), scale=0.5)},
         "DeepSeek-V3 MLA shapes: qk_head_dim 192 (128 nope + 64 rope), Tq 3 over Tk 5 keys; "
         "scale 192^-0.5 * (0.1 ln 40 + 1)^2 = 0.13523377886088009"),
    Case("scale-softmax-deepseek-v3-aligned", "attention.probs", ("SCALE-YARN-SOFTMAX-SCALE",), _DSV3_SOFTMAX,
         {"q": _q1, "k": _k1}, "DeepSeek-V3 scale with sign-aligned q and k: logits up to +-2.5"),
    Case("scale-softmax-mscale-ratio", "attention.probs", ("SCALE-YARN-SOFTMAX-SCALE",), _MSCALE_RATIO,
         {"q": _q2, "k": _k2},
         "derivation case (hypothetical config): factor 16, mscale 0.707 != mscale_all_dim 1; the softmax "
         "scale reads mscale_all_dim only: 192^-0.5 * (0.1 ln 16 + 1)^2; GQA 4 q heads over 2 k heads"),
)

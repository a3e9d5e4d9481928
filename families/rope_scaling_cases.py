"""The rope_scaling family's golden cases (SCALE-*): imported by :mod:`posenc.families.rope_scaling`,
which registers the references and mutants (one family, two files: the module would exceed the
size rule).  Named model entries come from ``spec/registry/models.yaml``."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.spec.models import RopeParams, SoftmaxScaleParams
from posenc.spec.registry import model_params

from . import add_cases, rope_clauses  # noqa: F401 - rope_clauses registers the rope.* clause rule

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

# ---- spec 0.4.0: catalogue cases, LongRoPE policies, interleaved pairing, branch coverage -----
_LLAMA32_1B = RopeParams(head_dim=64, rope_theta=500000.0, rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                         high_freq_factor=4.0, original_max_position_embeddings=8192)
_LLAMA3_2_8 = RopeParams(head_dim=128, rope_theta=500000.0, rope_type="llama3", factor=8.0, low_freq_factor=2.0,
                         high_freq_factor=8.0, original_max_position_embeddings=4096)
_YARN_BETA4 = RopeParams(head_dim=128, rope_theta=1000000.0, rope_type="yarn", factor=64.0,
                         original_max_position_embeddings=4096, beta_fast=4.0, beta_slow=1.0)
_YARN_BETAS = RopeParams(head_dim=128, rope_theta=10000.0, rope_type="yarn", factor=8.0,
                         original_max_position_embeddings=8192, beta_fast=16.0, beta_slow=2.0, truncate=True)
_Q64 = {"q": Gen((2, 2, 3, 64)), "k": Gen((2, 1, 3, 64))}
_PHI4_SHAPE = RopeParams(head_dim=128, rotary_dim=96, rope_theta=10000.0, rope_type="longrope",
                         max_position_embeddings=131072, original_max_position_embeddings=4096,
                         short_factor=tuple(1.0 + i / 64 for i in range(48)),
                         long_factor=tuple(1.0 + i for i in range(48)))
_LONGROPE_AT_INIT = _LONGROPE.model_copy(update={"longrope_policy": "at_init"})
_LONGROPE_CALLS = {"position_ids.0": pos([0, 1, 4095]), "position_ids.1": pos([4094, 4095, 4096]),
                   "position_ids.2": pos([10, 11, 12])}
_SHORT_LONG = {"position_ids.0": pos([0, 1, 2]), "position_ids.1": pos([7997, 7998, 7999])}
add_cases(
    # -- factors and constants at values other than the library defaults
    Case("scale-llama3.2-1b", "rope.apply", ("SCALE-LLAMA3",), _LLAMA32_1B,
         {**_Q64, "position_ids": pos([0, 1, 131071], [8191, 8192, 70000])},
         "Llama 3.2 1B shape (head 64, theta 5e5, factor 32, low 1, high 4, original 8192): factor != 8"),
    Case("scale-llama3.2-1b-inv-freq", "rope.inv_freq", ("SCALE-LLAMA3",), _LLAMA32_1B,
         note="factor 32: the divided band is inv_freq / 32"),
    Case("scale-llama3-no-scaled-band", "rope.cos_sin", ("SCALE-LLAMA3",),
         RopeParams(head_dim=8, rope_theta=100.0, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                    high_freq_factor=4.0, original_max_position_embeddings=8192),
         {"position_ids": pos([0, 1, 4095, 70000])},
         "derivation case: every wavelength (at most 2 pi 100^(6/8) = 199) is below 8192 / 4: no pair is divided "
         "or blended, the plain frequencies"),
    Case("scale-llama3-bands-2-8", "rope.inv_freq", ("SCALE-LLAMA3",), _LLAMA3_2_8,
         note="derivation case: low 2, high 8, original 4096, factor 8; bands: pairs 0-21 unchanged, 22-28 "
              "blended, 29-63 divided (all three non-empty)"),
    Case("scale-llama3-bands-2-8-cos-sin", "rope.cos_sin", ("SCALE-LLAMA3",), _LLAMA3_2_8,
         {"position_ids": pos([0, 1, 4095, 131071])}, "the same bands through cos/sin at long positions"),
    Case("scale-yarn-beta-fast-4", "rope.apply", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), _YARN_BETA4,
         {**_Q128, "position_ids": pos([0, 1, 262143], [4095, 4096, 100000])},
         "Mistral-Medium-3.5 yarn keys (factor 64, original 4096, beta_fast 4); head 128 and theta 1e6 assumed"),
    Case("scale-yarn-betas-16-2", "rope.inv_freq", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), _YARN_BETAS,
         note="derivation case: beta_fast 16, beta_slow 2 (neither default), truncate true given explicitly"),
    Case("scale-yarn-mscale-ratio", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",), _MSCALE_RATIO.rope,
         {"position_ids": pos([0, 1, 4096, 65535])},
         "factor 16, mscale 0.707, mscale_all_dim 1: cos/sin factor get_mscale(16, 0.707) / get_mscale(16) = 0.9364"),
    Case("scale-yarn-mscale-all-dim", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",),
         RopeParams(head_dim=64, rope_theta=10000.0, rope_type="yarn", factor=40.0, original_max_position_embeddings=4096,
                    mscale=1.0, mscale_all_dim=0.707),
         {"position_ids": pos([0, 1, 4096, 163839])},
         "derivation case: mscale 1, mscale_all_dim 0.707: cos/sin factor get_mscale(40) / get_mscale(40, 0.707) = 1.0857"),
    Case("scale-yarn-mscale-all-dim-alone", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",),
         RopeParams(head_dim=64, rope_theta=10000.0, rope_type="yarn", factor=40.0, original_max_position_embeddings=4096,
                    mscale_all_dim=0.707),
         {"position_ids": pos([0, 1, 4096, 100003])},
         "derivation case: mscale_all_dim 0.707 alone (mscale unset): cos/sin factor get_mscale(40) = 1.3689 "
         "(the ratio only when both are set), not get_mscale(40, 0.707) = 1.2608 nor 1"),
    Case("scale-yarn-partial-attention-factor", "rope.apply", ("SCALE-YARN-ATTENTION-FACTOR", "ROPE-PARTIAL"),
         _QWEN25_YARN.model_copy(update={"rotary_dim": 64}), {**_Q128, "position_ids": pos([0, 1, 2], [5, 6, 7])},
         "the attention factor 1.1386 multiplies cos/sin of the 64 rotated dims; the 64 pass-through dims stay as given"),
    Case("scale-longrope-partial-apply", "rope.apply", ("SCALE-LONGROPE-ATTENTION-FACTOR", "ROPE-PARTIAL"),
         _PHI4_SHAPE, {**_Q128, "position_ids": pos([0, 1, 2], [5000, 5001, 70000])},
         "Phi-4-mini shape (rotary 96 of 128, s = 32): the attention factor leaves the 32 pass-through dims alone"),
    # -- LongRoPE factor selection policies (SCALE-LONGROPE-FACTORS)
    Case("scale-longrope-at-init", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         _LONGROPE_AT_INIT, dict(_LONGROPE_CALLS),
         "longrope_policy at_init, 131072 > 4096: the long factors at every call, short ones included"),
    Case("scale-longrope-at-init-inv-freq", "rope.inv_freq", ("SCALE-LONGROPE-FACTORS",), _LONGROPE_AT_INIT,
         note="at_init: the long factors before any call"),
    Case("scale-longrope-at-init-original-length", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS",),
         _LONGROPE_AT_INIT.model_copy(update={"max_position_embeddings": 4096}), dict(_SHORT_LONG),
         "at_init with max_position_embeddings = original (4096): the short factors even at seq_len 8000; s = 1"),
    Case("scale-longrope-max-position-at-original", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS",),
         _LONGROPE.model_copy(update={"max_position_embeddings": 4096}), dict(_SHORT_LONG),
         "per_call with max_position_embeddings = original (vLLM max_model_len 4096): short at seq_len 3, long at "
         "8000; separates the at-init choice (short, short) from always-long (long, long)"),
    Case("scale-longrope-long-prefill", "rope.cos_sin", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=16, rope_theta=10000.0, rope_type="longrope", max_position_embeddings=64,
                    original_max_position_embeddings=16, short_factor=tuple(1.0 + k / 8 for k in range(8)),
                    long_factor=tuple(1.0 + 3 * k for k in range(8))),
         {"position_ids": pos(list(range(20)))},
         "derivation case: one prefill of 20 tokens past original 16: the long factors, attention factor "
         "sqrt(1 + ln 4 / ln 16) = sqrt(1.5); with no cache the new tokens are max(position_ids) + 1, so it "
         "separates 'always short' (caught) from 'keyed on the new tokens' (right here)"),
    # -- interleaved pairing with every rope_type (rope.apply)
    Case("scale-interleaved-linear", "rope.apply", ("SCALE-LINEAR", "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=64, rope_type="linear", factor=4.0, pairing="interleaved"),
         {**_Q64, "position_ids": pos([16381, 16382, 16383], [0, 1, 2])},
         "interleaved pairs, linear factor 4; contiguous rows (offset + arange, what rotary-embedding-torch takes)"),
    Case("scale-interleaved-dynamic-per-call", "rope.apply",
         ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL", "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=64, rope_type="dynamic", factor=4.0, max_position_embeddings=2048, pairing="interleaved"),
         {**_Q64, "position_ids": pos([5997, 5998, 5999], [0, 1, 2])},
         "interleaved, dynamic factor 4 over L_max 2048 at seq_len 6000 (above L_max)"),
    Case("scale-interleaved-dynamic-grow", "rope.apply",
         ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-GROW", "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=64, rope_type="dynamic", factor=4.0, max_position_embeddings=2048, pairing="interleaved",
                    dynamic_policy="grow_until_reset"),
         {**_Q64, "position_ids": pos([5997, 5998, 5999], [0, 1, 2])},
         "interleaved, transformers' grow policy: the first call grows to theta'(6000)"),
    Case("scale-interleaved-dynamic-below", "rope.apply", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL",
                                                           "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=64, rope_type="dynamic", factor=4.0, max_position_embeddings=2048, pairing="interleaved"),
         {**_Q64, "position_ids": pos([0, 1, 2047], [3, 4, 5])}, "seq_len 2048 = L_max: theta' = theta"),
    Case("scale-interleaved-yarn", "rope.apply", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR",
                                                  "ROPE-PAIR-INTERLEAVED"),
         _QWEN25_YARN.model_copy(update={"pairing": "interleaved"}), {**_Q128, "position_ids": _LONG_POS},
         "Qwen2.5's YaRN with interleaved pairs"),
    Case("scale-interleaved-llama3.1", "rope.apply", ("SCALE-LLAMA3", "ROPE-PAIR-INTERLEAVED"),
         _LLAMA31.model_copy(update={"pairing": "interleaved"}), {**_Q128, "position_ids": _LONG_POS},
         "Meta's Llama 3.1 reference: interleaved pairs (complex multiply) with apply_scaling "
         "(meta-llama/llama-models models/llama3/model.py::apply_rotary_emb, apply_scaling)"),
    Case("scale-interleaved-longrope", "rope.apply", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR",
                                                      "ROPE-PAIR-INTERLEAVED"),
         _LONGROPE.model_copy(update={"pairing": "interleaved"}),
         {"q": Gen((2, 2, 3, 96)), "k": Gen((2, 1, 3, 96)), "position_ids": _LONG_POS},
         "Phi-3.5's LongRoPE with interleaved pairs, per call (seq_len 131072: long factors)"),
    Case("scale-interleaved-longrope-short", "rope.apply", ("SCALE-LONGROPE-FACTORS", "ROPE-PAIR-INTERLEAVED"),
         _LONGROPE.model_copy(update={"pairing": "interleaved"}),
         {"q": Gen((1, 2, 3, 96)), "k": Gen((1, 1, 3, 96)), "position_ids": pos([0, 1, 4095])},
         "interleaved, seq_len 4096 = original: short factors"),
    Case("scale-interleaved-proportional", "rope.apply", ("SCALE-PROPORTIONAL", "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional", factor=8.0,
                    pairing="interleaved"),
         {**_Q128, "position_ids": pos([0, 5, 131071], [4096, 3, 2])},
         "interleaved pairs over the whole head, 16 rotating pairs with denominator 128, factor 8"),
    # -- branch coverage of the yarn correction range
    Case("scale-yarn-low-clamped", "rope.inv_freq", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, rope_type="yarn", factor=4.0, original_max_position_embeddings=256,
                    beta_fast=64.0),
         note="derivation case: corr(64) = -1.57 -> floor -2 -> clamped to 0; high ceil(12.88) = 13"),
    Case("scale-yarn-high-clamped", "rope.inv_freq", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"),
         RopeParams(head_dim=16, rope_theta=100.0, rope_type="yarn", factor=4.0, original_max_position_embeddings=16384,
                    beta_fast=64.0, beta_slow=0.25, truncate=False),
         note="derivation case: low corr(64) = 6.44, high corr(0.25) = 16.07 clamped to d - 1 = 15 (truncate false)"),
)

# longrope_policy given explicitly as per_call (the default's value, spelled out: an implementation
# reading the field must not take any given value for at_init)
add_cases(
    Case("scale-longrope-per-call-explicit", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         _LONGROPE.model_copy(update={"longrope_policy": "per_call"}), dict(_LONGROPE_CALLS),
         "longrope_policy per_call given: short, long, then short factors by each call's length"),
)

# Long positions off the bfloat16 grid's edges: the long goldens above end at m * 2^j - 1 (131071, 65535,
# 163839), which bfloat16 rounds up by exactly 1, so there a +1 on long positions and positions held in
# bfloat16 (DIV-ROPE-BF16-POSITIONS) give the same output.  Each kind of case gets positions where the two
# part (bfloat16 moves 100003 by -163, 8193 by -1), so the run refutes the wrong one (a hostile review).
_OFF_GRID = pos([3, 8193, 100003])  # and a short one: a +1 on every position is refuted too
add_cases(
    Case("scale-proportional-off-grid", "rope.apply", ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional"),
         {"q": Gen((1, 2, 3, 128)), "k": Gen((1, 1, 3, 128)), "position_ids": _OFF_GRID},
         "long positions bfloat16 cannot hold, neither 2^k - 1: a +1 and bfloat16 positions differ here"),
    Case("scale-proportional-factor-off-grid", "rope.cos_sin", ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional", factor=8.0),
         {"position_ids": _OFF_GRID}, "factor 8 at long positions off bfloat16's grid"),
    Case("scale-proportional-gemma4-off-grid", "rope.apply", ("SCALE-PROPORTIONAL",), _GEMMA4,
         {"q": Gen((1, 1, 3, 512)), "k": Gen((1, 1, 3, 512)), "position_ids": _OFF_GRID},
         "Gemma 4 full attention at long positions off bfloat16's grid"),
    Case("scale-interleaved-proportional-off-grid", "rope.apply", ("SCALE-PROPORTIONAL", "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional", factor=8.0,
                    pairing="interleaved"),
         {"q": Gen((1, 2, 3, 128)), "k": Gen((1, 1, 3, 128)), "position_ids": _OFF_GRID},
         "interleaved proportional rope at long positions off bfloat16's grid"),
    Case("scale-yarn-mscale-ratio-off-grid", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",), _MSCALE_RATIO.rope,
         {"position_ids": _OFF_GRID}, "mscale 0.707 / mscale_all_dim 1 at long positions off bfloat16's grid"),
    Case("scale-yarn-mscale-all-dim-off-grid", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",),
         RopeParams(head_dim=64, rope_theta=10000.0, rope_type="yarn", factor=40.0, original_max_position_embeddings=4096,
                    mscale=1.0, mscale_all_dim=0.707),
         {"position_ids": _OFF_GRID}, "mscale 1 / mscale_all_dim 0.707 at long positions off bfloat16's grid"),
)

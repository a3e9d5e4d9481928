"""The named golden cases.  Each case: ``id``, operation, primary clause IDs, parameters and
inputs.  Inputs are either literal arrays or *generated* from the manifest seed by the
stream-stable rule in :mod:`posenc.conformance.golden` (for weight tables and big tensors).

Shapes are real model shapes where the issue names them (GPT-2 small wpe 1024 x 768, BERT-base
512 x 768 with 2 token types, OPT-125m 2050 x 768, Llama-3-8B heads, GPT-NeoX-20B, GPT-J-6B),
and B, H, T, D are distinct (q and k head counts differ, as in GQA) so that a transposed
layout cannot pass.  Vocabulary tables are small: only the position tables are under test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel

from posenc.reference import rope as _rope_ref
from posenc.spec.models import (
    AlibiParams, LookupParams, MRopeParams, NopeParams, RopeParams, SinusoidalParams, SoftmaxScaleParams,
)
from posenc.spec.registry import model_params


@dataclass(frozen=True)
class Gen:
    """A generated input: ``values`` are ``offset + scale * (byte - 128) / 64`` (exact in bf16
    and f16 for power-of-two ``scale``); ``ids`` are ``z mod high``."""

    shape: tuple[int, ...]
    kind: str = "values"
    scale: float = 1.0
    offset: float = 0.0
    high: int = 0

    def describe(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "shape": list(self.shape)}
        if self.kind == "values":
            d.update(scale=self.scale, offset=self.offset)
        else:
            d.update(high=self.high)
        return d


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    clauses: tuple[str, ...]
    params: BaseModel
    inputs: dict[str, Any] = field(default_factory=dict)  # name -> np.ndarray | Gen | int
    note: str = ""

    @property
    def test_id(self) -> str:
        return f"{self.id}@{'+'.join(self.clauses)}"


def _pos(*rows) -> np.ndarray:
    return np.asarray(rows, dtype=np.int64)


def _arange_x(shape) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)


CASES: list[Case] = []


def _add(*cases: Case) -> None:
    CASES.extend(cases)


# ---- RoPE ---------------------------------------------------------------------------------
_TINY = dict(head_dim=8, rope_theta=10000.0)
for pairing, cl in (("half", "ROPE-PAIR-HALF"), ("interleaved", "ROPE-PAIR-INTERLEAVED")):
    p = RopeParams(**_TINY, pairing=pairing)
    pp = RopeParams(**_TINY, pairing=pairing, rotary_dim=4)
    x = _arange_x((1, 1, 1, 8))
    _add(
        Case(f"rope-tiny-{pairing}", "rope.apply", (cl, "ROPE-ANGLE"), p,
             {"q": x, "k": x[..., ::-1].copy(), "position_ids": _pos([3])},
             "head_dim 8, theta 1e4, position 3, x = 0..7 (hand-checkable)"),
        Case(f"rope-tiny-partial-{pairing}", "rope.apply", (cl, "ROPE-PARTIAL"), pp,
             {"q": x, "k": x, "position_ids": _pos([3])}, "rotary_dim 4 of head_dim 8"),
    )

_LLAMA3 = model_params("llama-3-8b")
_LLAMA4 = RopeParams(head_dim=128, rope_theta=500000.0, pairing="interleaved")
_DSV3_ROPE = model_params("deepseek-v3-rope")
_NEOX = model_params("gpt-neox-20b")
_GPTJ = model_params("gpt-j-6b")
_LONG = _pos([0, 1, 2, 3, 4], [131067, 131068, 131069, 131070, 131071])
_add(
    Case("rope-llama3-8b", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE", "ROPE-PRECISION"), _LLAMA3,
         {"q": Gen((2, 4, 5, 128)), "k": Gen((2, 2, 5, 128)), "position_ids": _LONG},
         "Llama-3-8B heads (head_dim 128, theta 500000), GQA 4:2, positions up to 131071"),
    Case("rope-llama3-8b-scattered", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE"), _LLAMA3,
         {"q": Gen((2, 4, 3, 128)), "k": Gen((2, 2, 3, 128)),
          "position_ids": _pos([7, 0, 4095], [8191, 65536, 12])},
         "non-monotonic position_ids (never assume arange)"),
    Case("rope-llama4-interleaved", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE", "ROPE-PRECISION"),
         _LLAMA4, {"q": Gen((2, 4, 5, 128)), "k": Gen((2, 2, 5, 128)), "position_ids": _LONG},
         "Llama 4 style interleaved pairing at theta 500000"),
    Case("rope-neox-20b", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-PARTIAL"), _NEOX,
         {"q": Gen((3, 2, 7, 96)), "k": Gen((3, 2, 7, 96)),
          "position_ids": _pos(range(7), range(100, 107), range(2041, 2048))},
         "GPT-NeoX-20B: head 96, rotary_dim 24, half pairing"),
    Case("rope-gptj-6b", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-PARTIAL"), _GPTJ,
         {"q": Gen((2, 3, 4, 256)), "k": Gen((2, 3, 4, 256)),
          "position_ids": _pos([0, 1, 2, 3], [2044, 2045, 2046, 2047])},
         "GPT-J-6B: head 256, rotary_dim 64, interleaved pairing"),
    Case("rope-attention-factor", "rope.apply", ("ROPE-ATTENTION-FACTOR", "ROPE-PAIR-HALF"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25),
         {"q": Gen((2, 3, 5, 64)), "k": Gen((2, 1, 5, 64)), "position_ids": _pos(range(5), range(60, 65))},
         "attention_factor 1.25 multiplies cos and sin"),
    Case("rope-partial-factor", "rope.apply", ("ROPE-ATTENTION-FACTOR", "ROPE-PARTIAL"),
         RopeParams(head_dim=64, rotary_dim=32, rope_theta=10000.0, attention_factor=1.25),
         {"q": Gen((2, 3, 4, 64)), "k": Gen((2, 1, 4, 64)), "position_ids": _pos([9, 0, 3, 2047], [1, 1, 500, 2])},
         "attention_factor scales the rotated pairs only, never the pass-through tail"),
    Case("rope-interleaved-factor", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ATTENTION-FACTOR", "ROPE-ANGLE"),
         RopeParams(head_dim=64, rope_theta=500000.0, pairing="interleaved", attention_factor=0.75),
         {"q": Gen((3, 2, 3, 64)), "k": Gen((3, 1, 3, 64)), "position_ids": _pos([5, 2, 9], [70000, 0, 1], [3, 3, 3])},
         "interleaved pairs with non-monotonic positions and an attention factor"),
    Case("rope-deepseek-v3-deinterleave", "rope.apply", ("ROPE-PAIR-DEINTERLEAVE", "ROPE-ANGLE"), _DSV3_ROPE,
         {"q": Gen((2, 4, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": _pos([0, 1, 163839], [4096, 65536, 2])},
         "DeepSeek-V3 rope part as HF runs it (rope_interleave): pairs (2i, 2i+1) in, [firsts | seconds] out"),
    Case("rope-inv-freq-llama3", "rope.inv_freq", ("ROPE-INV-FREQ",), _LLAMA3),
    Case("rope-inv-freq-factor", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25)),
    Case("rope-cos-sin-neox-20b", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-PARTIAL"), _NEOX,
         {"position_ids": _pos([0, 1, 2047], [7, 300, 5])}, "rotary_dim/2 = 12 frequencies with denominator 24"),
    Case("rope-inv-freq-neox-20b", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-PARTIAL"), _NEOX),
    Case("rope-inv-freq-gptj-6b", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-PARTIAL"), _GPTJ),
    Case("rope-cos-sin-llama3", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-PRECISION"), _LLAMA3,
         {"position_ids": _LONG}),
    Case("rope-cos-sin-factor", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25),
         {"position_ids": _pos(range(6), range(1000, 1006), range(6, 0, -1))}),
)
# partial (NeoX, GPT-J) and full rotation (Llama 3, Llama 4 heads): the ONNX op's rotary_embedding_dim
# default (0 = head_size) and the flash-attn full-width path are exercised too
for name, p in (("half", _NEOX), ("interleaved", _GPTJ), ("half-full", _LLAMA3), ("interleaved-full", _LLAMA4),
                ("deinterleave", RopeParams(head_dim=64, pairing="deinterleave"))):
    B, T = 2, 3
    pid = _pos(range(3), range(2045, 2048))
    # given cos/sin inputs (magnitude 1.25, so an implementation may not renormalise them)
    c, s = _rope_ref.cos_sin(pid, p.model_copy(update={"attention_factor": 1.25}))
    pair = f"ROPE-PAIR-{p.pairing.upper()}"
    _add(Case(f"rope-apply-cos-sin-{name}", "rope.apply_with_cos_sin",
              (pair, "ROPE-PARTIAL") if p.rdim < p.head_dim else (pair,), p,
              {"q": Gen((B, 4, T, p.head_dim)), "k": Gen((B, 1, T, p.head_dim)), "cos": c, "sin": s},
              "cos/sin given (the ONNX / flash-attn level)"))

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
_CALLS = {"position_ids.0": _pos([0, 1, 2]), "position_ids.1": _pos([8189, 8190, 8191]),
          "position_ids.2": _pos([5997, 5998, 5999]), "position_ids.3": _pos([2001, 2002, 2003]),
          "position_ids.4": _pos([5997, 5998, 5999])}
_LONG_POS = _pos([0, 1, 4095], [131069, 131070, 131071])
_add(
    Case("scale-linear-tiny", "rope.apply", ("SCALE-LINEAR",),
         RopeParams(head_dim=4, rope_type="linear", factor=2.0), {"q": _ones4, "k": _ones4, "position_ids": _pos([1])},
         "d 4, theta 1e4, factor 2, x = ones, position 1 -> [0.398157, 0.994988, 1.357008, 1.004987]"),
    Case("scale-linear-factor-4", "rope.apply", ("SCALE-LINEAR",),
         RopeParams(head_dim=128, rope_type="linear", factor=4.0),
         {**_Q128, "position_ids": _pos([0, 7, 16383], [100, 4096, 12000])}, "16k context by linear factor 4"),
    Case("scale-dynamic-apply", "rope.apply", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL"), RopeParams(**_DYN),
         {**_Q128, "position_ids": _pos([8189, 8190, 8191], [0, 1, 2])}, "seq_len 8192: theta' 30527.7367488067"),
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
         {"position_ids": _pos([0, 1, 163839], [4096, 65536, 2])},
         "DeepSeek-V3 rope part: low 10, high 23, mscale = mscale_all_dim = 1 -> cos/sin factor 1.0"),
    Case("scale-yarn-gpt-oss", "rope.apply", ("SCALE-YARN-RAMP", "SCALE-YARN-ATTENTION-FACTOR"), _GPT_OSS_YARN,
         {"q": Gen((2, 3, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": _pos([0, 1, 131071], [4095, 4096, 70000])},
         "gpt-oss: truncate false, low 8.0928, high 17.3980, attention factor 1.3465735902799727"),
    Case("scale-yarn-explicit-factor", "rope.cos_sin", ("SCALE-YARN-ATTENTION-FACTOR",),
         _QWEN25_YARN.model_copy(update={"attention_factor": 1.5}), {"position_ids": _pos([0, 1, 100, 40000])},
         "an explicit attention_factor is used as is"),
    Case("scale-llama3.1-8b", "rope.apply", ("SCALE-LLAMA3",), _LLAMA31, {**_Q128, "position_ids": _LONG_POS},
         "Llama 3.1: pairs 0-28 unchanged, 35-63 / 8, 29-34 blended"),
    Case("scale-llama3.1-8b-inv-freq", "rope.inv_freq", ("SCALE-LLAMA3",), _LLAMA31,
         note="inv_freq'[40] = 3.4281021959525912e-05"),
    Case("scale-longrope-switch", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         _LONGROPE, {"position_ids.0": _pos([0, 1, 4095]), "position_ids.1": _pos([4094, 4095, 4096]),
                     "position_ids.2": _pos([10, 11, 12])},
         "short factors up to seq_len 4096, long beyond, short again; attention factor sqrt(1 + ln 32 / ln 4096)"),
    Case("scale-longrope-apply", "rope.apply", ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
         _LONGROPE, {"q": Gen((2, 2, 3, 96)), "k": Gen((2, 1, 3, 96)), "position_ids": _LONG_POS},
         "Phi-3.5-mini: s = 131072 / 4096 = 32, attention factor 1.1902380714238083"),
    Case("scale-longrope-explicit-factor", "rope.cos_sin", ("SCALE-LONGROPE-ATTENTION-FACTOR",),
         _LONGROPE.model_copy(update={"factor": 2.0}), {"position_ids": _pos([0, 1, 2, 3])},
         "an explicit factor 2 wins over 131072 / 4096: attention factor sqrt(1 + ln 2 / ln 4096) = sqrt(13 / 12)"),
    Case("scale-dynamic-partial", "rope.cos_sin_calls", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-GROW", "ROPE-PARTIAL"),
         RopeParams(**{**_DYN, "rotary_dim": 32}, dynamic_policy="grow_until_reset"),
         {"position_ids.0": _pos([8189, 8190, 8191]), "position_ids.1": _pos([10, 11, 12])},
         "d in theta' = theta (...)^(d/(d-2)) is rotary_dim (32), not head_dim (128)"),
    Case("scale-dynamic-partial-per-call", "rope.cos_sin", ("SCALE-DYNAMIC-NTK", "SCALE-DYNAMIC-PER-CALL", "ROPE-PARTIAL"),
         RopeParams(**{**_DYN, "rotary_dim": 32}), {"position_ids": _pos([8189, 8190, 8191], [0, 1, 2])},
         "the per-call policy with rotary_dim 32 of head_dim 128"),
    Case("scale-yarn-partial", "rope.apply", ("SCALE-YARN-RAMP", "ROPE-PARTIAL"),
         _QWEN25_YARN.model_copy(update={"rotary_dim": 64}),
         {**_Q128, "position_ids": _LONG_POS}, "correction dims and frequencies over rotary_dim 64 of head_dim 128"),
    Case("scale-longrope-partial", "rope.cos_sin_calls", ("SCALE-LONGROPE-FACTORS", "ROPE-PARTIAL"),
         RopeParams(head_dim=128, rotary_dim=96, rope_theta=10000.0, rope_type="longrope",
                    max_position_embeddings=131072, original_max_position_embeddings=4096,
                    short_factor=tuple(1.0 + i / 64 for i in range(48)),
                    long_factor=tuple(1.0 + i for i in range(48))),
         {"position_ids.0": _pos([0, 1, 4095]), "position_ids.1": _pos([5000, 5001, 70000])},
         "Phi-4-mini shape: partial rotary factor 0.75 (head 128, rotary 96), synthetic factors"),
    Case("scale-llama3-partial", "rope.inv_freq", ("SCALE-LLAMA3", "ROPE-PARTIAL"),
         _LLAMA31.model_copy(update={"rotary_dim": 64})),
    Case("scale-proportional-factor", "rope.cos_sin", ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional", factor=8.0),
         {"position_ids": _pos([0, 5, 131071], [4096, 3, 2])}, "factor 8 divides every frequency"),
    Case("scale-proportional", "rope.apply", ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=128, rotary_dim=32, rope_theta=1000000.0, rope_type="proportional"),
         {**_Q128, "position_ids": _pos([0, 5, 131071], [4096, 3, 2])},
         "rotated share 32 of 128 with denominator 128; the other 48 pairs keep frequency 0"),
    Case("scale-proportional-gemma4", "rope.apply", ("SCALE-PROPORTIONAL",), _GEMMA4,
         {"q": Gen((1, 2, 3, 512)), "k": Gen((1, 1, 3, 512)), "position_ids": _pos([0, 7, 131071])},
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
_add(
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

# ---- sinusoidal ---------------------------------------------------------------------------
for layout, cl in (("interleaved", "SIN-VASWANI-INTERLEAVED"), ("concat", "SIN-VASWANI-CONCAT")):
    for D in (8, 7):
        _add(Case(f"sin-{layout}-d{D}", "sinusoidal.table", (cl,), SinusoidalParams(dim=D, layout=layout),
                  {"position_ids": _pos(range(5), range(100, 105))},
                  "odd D" if D % 2 else "D 8: last frequency 1e-3"))
    _add(Case(f"sin-{layout}-d512", "sinusoidal.table", (cl, "SIN-PRECISION"),
              SinusoidalParams(dim=512, layout=layout),
              {"position_ids": _pos([0, 1, 2, 511], [1000, 2047, 7, 3])}, "Marian-size width 512"))

# ---- sinusoid variants: the h-1 divisor (SIN-T2T, SIN-FAIRSEQ-POSITIONS, SIN-WHISPER) ---------
# M2M100-418M: d_model 1024, pad_token_id 1 (facebook/m2m100_418M config.json); Whisper-tiny:
# d_model 384 over the encoder's 1500 frames (openai/whisper-tiny config.json).
_S = SinusoidalParams
_T2T = dict(layout="concat", variant="t2t")
_FS = dict(layout="concat", variant="fairseq", padding_idx=1)
_WH = dict(layout="concat", variant="whisper")
_RB_IDS = _pos([1, 1, 0, 9, 2], [0, 9, 9, 9, 2])  # encodings-facts B.3: pad 1 -> [[1,1,2,3,4],[2,3,4,5,6]]
for D, note in ((8, "D 8: lowest frequency 1e-4 (Vaswani 1e-3)"), (7, "odd D: zero column appended"),
                (2, "h = 1: tensor2tensor clamps the divisor to 1, w = [1]")):
    _add(Case(f"sin-t2t-d{D}", "sinusoidal.table", ("SIN-T2T",), _S(dim=D, **_T2T),
              {"position_ids": _pos(range(5), range(100, 105))}, note))
_add(
    Case("sin-t2t-d512", "sinusoidal.table", ("SIN-T2T", "SIN-PRECISION"), _S(dim=512, **_T2T),
         {"position_ids": _pos([0, 1, 2, 511], [1000, 2047, 7, 3])}, "width 512, frequencies 1 .. 1e-4"),
    Case("sin-fairseq-table-d8", "sinusoidal.table", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=8, **_FS),
         {"position_ids": _pos([0, 1, 2, 3, 4], [1, 5, 100, 1, 2])}, "row padding_idx 1 is zero"),
    Case("sin-fairseq-table-d7", "sinusoidal.table", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=7, **_FS),
         {"position_ids": _pos([1, 2, 3], [40, 1, 41])}, "odd D: zero column; pad row zero"),
    Case("sin-m2m100-positions", "sinusoidal.fairseq_positions", ("SIN-FAIRSEQ-POSITIONS",), model_params("m2m100-418m"),
         {"input_ids": _RB_IDS, "cache_length": 0}, "pad 1: [[1,1,2,3,4],[2,3,4,5,6]]"),
    Case("sin-m2m100-positions-cache", "sinusoidal.fairseq_positions", ("SIN-FAIRSEQ-POSITIONS",),
         model_params("m2m100-418m"), {"input_ids": _pos([1, 7], [5, 1]), "cache_length": 6},
         "after 6 cached slots: [[1, 8], [8, 1]]"),
    Case("sin-m2m100-418m", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS", "SIN-T2T"), model_params("m2m100-418m"),
         {"input_ids": _pos([1, 1, 0, 9, 2, 5], [0, 9, 9, 9, 2, 1]), "cache_length": 0},
         "M2M100-418M width 1024: left and right padding read the zero row 1"),
    Case("sin-m2m100-cache", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=16, **_FS),
         {"input_ids": _pos([1, 4, 4], [7, 8, 1]), "cache_length": 200}, "rows [[1, 202, 203], [202, 203, 1]]"),
    Case("sin-fairseq-d7", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=7, **_FS),
         {"input_ids": _RB_IDS, "cache_length": 0}, "odd D end to end"),
    Case("sin-whisper-d8", "sinusoidal.table", ("SIN-WHISPER",), _S(dim=8, **_WH),
         {"position_ids": _pos(range(5), range(100, 105))}),
    Case("sin-whisper-tiny", "sinusoidal.table", ("SIN-WHISPER", "SIN-PRECISION"), model_params("whisper-tiny"),
         {"position_ids": _pos([0, 1, 2, 1499], [750, 1498, 3, 10])}, "Whisper-tiny encoder: 1500 x 384"),
)

# ---- learned ------------------------------------------------------------------------------
_GPT2 = model_params("gpt2", vocab_size=97)  # token tables are data, not under test
_GPT2_W = {"wte": Gen((97, 768)), "wpe": Gen((1024, 768))}
_BERT = model_params("bert-base", vocab_size=89)
_BERT_W = {"word_embeddings": Gen((89, 768)), "position_embeddings": Gen((512, 768)),
           "token_type_embeddings": Gen((2, 768)), "layer_norm_weight": Gen((768,), scale=0.5, offset=1.0),
           "layer_norm_bias": Gen((768,), scale=0.25)}
_OPT = model_params("opt-125m")
_OPT_W = {"table": Gen((2050, 768))}
_add(
    Case("gpt2-small-prefill", "learned.gpt2", ("LEARNED-GPT2-SUM", "LEARNED-GPT2-POSITIONS"), _GPT2,
         {**_GPT2_W, "input_ids": Gen((2, 5), "ids", high=97), "cache_length": 0},
         "default position_ids = arange(T)"),
    Case("gpt2-small-cache", "learned.gpt2", ("LEARNED-GPT2-POSITIONS",), _GPT2,
         {**_GPT2_W, "input_ids": Gen((3, 4), "ids", high=97), "cache_length": 1020},
         "default position_ids after 1020 cached tokens reach the last row 1023"),
    Case("gpt2-small-explicit", "learned.gpt2", ("LEARNED-GPT2-SUM",), _GPT2,
         {**_GPT2_W, "input_ids": Gen((2, 3), "ids", high=97),
          "position_ids": _pos([5, 0, 1023], [1, 2, 3]), "cache_length": 0}),
    Case("bert-base-token-types", "learned.bert", ("LEARNED-BERT-SUM", "LEARNED-BERT-TOKEN-TYPE"), _BERT,
         {**_BERT_W, "input_ids": Gen((2, 6), "ids", high=89),
          "token_type_ids": _pos([0, 0, 0, 1, 1, 1], [0, 1, 0, 1, 1, 0]), "cache_length": 0}),
    Case("bert-base-default-token-types", "learned.bert", ("LEARNED-BERT-TOKEN-TYPE", "LEARNED-BERT-POSITIONS"),
         _BERT, {**_BERT_W, "input_ids": Gen((3, 4), "ids", high=89), "cache_length": 0},
         "token_type_ids omitted: zeros"),
    Case("bert-base-last-positions", "learned.bert", ("LEARNED-BERT-POSITIONS", "LEARNED-BERT-SUM"), _BERT,
         {**_BERT_W, "input_ids": Gen((2, 3), "ids", high=89),
          "token_type_ids": _pos([1, 1, 0], [0, 1, 1]), "position_ids": _pos([509, 510, 511], [0, 255, 3]),
          "cache_length": 0}),
    Case("gpt2-small-last-row", "learned.gpt2", ("LEARNED-GPT2-SUM", "LEARNED-ROW-RANGE"), _GPT2,
         {**_GPT2_W, "input_ids": Gen((1, 2), "ids", high=97), "position_ids": _pos([1023, 0]), "cache_length": 0},
         "the last valid row 1023; 1024 must raise"),
    Case("bert-base-cache", "learned.bert", ("LEARNED-BERT-POSITIONS",), _BERT,
         {**_BERT_W, "input_ids": Gen((2, 3), "ids", high=89), "cache_length": 509},
         "default positions after 509 cached tokens: 509, 510, 511"),
    Case("opt-125m-positions", "learned.opt_positions", ("LEARNED-OPT-POSITIONS",), _OPT,
         {"attention_mask": _pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]), "cache_length": 0},
         "left-padded, full and right-padded rows"),
    Case("opt-125m-positions-cache", "learned.opt_positions", ("LEARNED-OPT-POSITIONS",), _OPT,
         {"attention_mask": _pos([0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]), "cache_length": 5},
         "only the last column survives the slice"),
    Case("opt-125m-rows", "learned.opt_rows", ("LEARNED-OPT-OFFSET",), _OPT,
         {"positions": _pos([-1, -1, 0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 2, -1, -1], [2044, 2045, 2046, 2047, -1])}),
    Case("opt-125m-embeddings", "learned.opt_embeddings", ("LEARNED-OPT-POSITIONS", "LEARNED-OPT-OFFSET"), _OPT,
         {**_OPT_W, "attention_mask": _pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]), "cache_length": 0},
         "rows [[1,1,2,3,4],[2,3,4,5,6],[2,3,4,1,1]]"),
    Case("opt-125m-embeddings-end", "learned.opt_embeddings", ("LEARNED-OPT-OFFSET", "LEARNED-ROW-RANGE"), _OPT,
         {**_OPT_W, "attention_mask": np.ones((1, 2048), np.int64), "cache_length": 2044},
         "2048 real tokens: the last row 2049 is valid"),
    Case("lookup-gpt2-wpe", "learned.lookup", ("LEARNED-ROW-RANGE",), LookupParams(num_rows=1024, dim=768),
         {"table": Gen((1024, 768)), "rows": _pos([0, 1023, 5], [1022, 0, 1023])},
         "first and last valid rows"),
)

# ---- RoBERTa and BART (LEARNED-ROBERTA-POSITIONS, LEARNED-BART-POSITIONS) ----------------------
# roberta-base: 514 x 768 positions, type_vocab_size 1, layer_norm_eps 1e-5, pad 1; bart-base:
# max_position_embeddings 1024 (+ 2 = 1026 rows) x 768 (published config.json files).
_RB = model_params("roberta-base", vocab_size=89)
_RB_W = {"word_embeddings": Gen((89, 768)), "position_embeddings": Gen((514, 768)),
         "token_type_embeddings": Gen((1, 768)), "layer_norm_weight": Gen((768,), scale=0.5, offset=1.0),
         "layer_norm_bias": Gen((768,), scale=0.25)}
_BART = model_params("bart-base")
_BART_W = {"table": Gen((1026, 768))}
_add(
    Case("roberta-base-positions", "learned.roberta_positions", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {"input_ids": _RB_IDS, "cache_length": 0}, "pad 1: [[1,1,2,3,4],[2,3,4,5,6]]"),
    Case("roberta-base-positions-cache", "learned.roberta_positions", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {"input_ids": _pos([1, 1, 7], [7, 8, 1]), "cache_length": 5}, "[[1, 1, 7], [7, 8, 1]]"),
    Case("roberta-base-embeddings", "learned.roberta", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {**_RB_W, "input_ids": _pos([1, 1, 0, 9, 2, 5], [0, 9, 9, 9, 2, 1]), "cache_length": 0},
         "rows [[1,1,2,3,4,5],[2,3,4,5,6,1]]"),
    Case("roberta-base-embeddings-cache", "learned.roberta", ("LEARNED-ROBERTA-POSITIONS", "LEARNED-ROW-RANGE"), _RB,
         {**_RB_W, "input_ids": _pos([0, 5, 7], [1, 1, 4]), "cache_length": 509},
         "rows [[511, 512, 513], [1, 1, 511]]: the last row 513 is valid"),
    Case("bart-base-embeddings", "learned.bart_embeddings", ("LEARNED-BART-POSITIONS",), _BART,
         {**_BART_W, "input_ids": Gen((2, 5), "ids", high=50),
          "attention_mask": _pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1]), "cache_length": 0},
         "rows [[2..6], [2..6]]: the left padding is ignored"),
    Case("bart-base-embeddings-cache", "learned.bart_embeddings", ("LEARNED-BART-POSITIONS", "LEARNED-ROW-RANGE"),
         _BART, {**_BART_W, "input_ids": Gen((2, 4), "ids", high=50),
                 "attention_mask": np.asarray([[0] * 3 + [1] * 1021, [1] * 1024], np.int64), "cache_length": 1020},
         "after 1020 cached slots (one row left-padded) rows 1022 .. 1025 reach the last row"),
)

# ---- position ids -------------------------------------------------------------------------
_NOP = LookupParams(num_rows=1, dim=1)  # position-id rules take no parameters
_add(
    Case("pos-prefill", "position_ids.prefill", ("POS-PREFILL",), _NOP, {"batch": 2, "seq_len": 5}),
    Case("pos-decode", "position_ids.decode", ("POS-DECODE",), _NOP, {"batch": 3, "seq_len": 2, "cache_length": 7}),
    Case("pos-left-pad", "position_ids.left_pad", ("POS-LEFT-PAD",), _NOP,
         {"attention_mask": _pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1]), "cache_length": 0},
         "padded slots are not compared"),
    Case("pos-left-pad-cache", "position_ids.left_pad", ("POS-LEFT-PAD", "POS-DECODE"), _NOP,
         {"attention_mask": _pos([0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]), "cache_length": 4}),
    Case("pos-decode-long", "position_ids.decode", ("POS-DECODE",), _NOP,
         {"batch": 2, "seq_len": 2, "cache_length": 131070}),
    Case("pos-mask-holes", "position_ids.left_pad", ("POS-LEFT-PAD",), _NOP,
         {"attention_mask": _pos([1, 0, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]), "cache_length": 0},
         "cumsum(mask) - 1 at real tokens, also across holes and right padding"),
    Case("pos-packed", "position_ids.packed", ("POS-PACKED",), _NOP, {"cu_seqlens": np.asarray([0, 3, 5, 9], np.int64)},
         "cu_seqlens [0,3,5,9] -> [0,1,2,0,1,0,1,2,3]"),
)

# ---- ALiBi (ALIBI-*) --------------------------------------------------------------------------
# Head counts: BLOOM-176B n_head 112 (published config.json; encodings-facts marks it [2ND]),
# BloomConfig default n_head 8, MPT-7B n_heads 32 with alibi_bias_max 8 (mosaicml/mpt-7b
# config.json; MptConfig defaults are 16 heads, alibi_bias_max 8, max_seq_len 2048), and the
# 6- and 12-head figures of encodings-facts "Golden 2".
_A = AlibiParams
_ROW = "ALIBI-ROW-CONSTANT"
_add(
    Case("alibi-slopes-8", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=8), note="2^-1 .. 2^-8"),
    Case("alibi-slopes-6", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=6),
         note="[0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]: not monotone"),
    Case("alibi-slopes-12", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=12),
         note="2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5"),
    Case("alibi-slopes-bloom-176b", "alibi.slopes", ("ALIBI-SLOPES",), model_params("bloom-176b"),
         note="BLOOM-176B: 112 heads = 64 + every other slope of 128"),
    Case("alibi-slopes-mpt-7b", "alibi.slopes", ("ALIBI-SLOPES",), model_params("mpt-7b"),
         note="MPT-7B: 32 heads, alibi_bias_max 8"),
    Case("alibi-slopes-bias-max-16", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=24, alibi_bias_max=16.0, form="mpt"),
         note="alibi_bias_max 16 replaces the 8; 24 heads = 16 + 8"),
    Case("alibi-causal-12", "alibi.bias", ("ALIBI-CAUSAL", _ROW), _A(num_heads=12),
         {"query_length": 7, "key_length": 7}, "prefill; future keys not compared"),
    Case("alibi-causal-cache", "alibi.bias", ("ALIBI-CAUSAL",), _A(num_heads=6),
         {"query_length": 3, "key_length": 11}, "3 queries after 8 cached tokens (bottom-right aligned)"),
    Case("alibi-symmetric-12", "alibi.bias", ("ALIBI-SYMMETRIC",), _A(num_heads=12, form="symmetric"),
         {"query_length": 6, "key_length": 6}, "encoder: -m|i - j|, every slot compared"),
    Case("alibi-symmetric-rect", "alibi.bias", ("ALIBI-SYMMETRIC",), _A(num_heads=8, form="symmetric"),
         {"query_length": 3, "key_length": 9}, "q_len != k_len: i offset by k_len - q_len (flash-attn)"),
    Case("alibi-bloom-mask", "alibi.bias", ("ALIBI-BLOOM", _ROW), _A(num_heads=8, form="bloom"),
         {"attention_mask": _pos([0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 0, 0]),
          "query_length": 7},
         "BloomConfig default 8 heads; left padding, full row, a hole and right padding"),
    Case("alibi-bloom-176b-cache", "alibi.bias", ("ALIBI-BLOOM", _ROW), model_params("bloom-176b"),
         {"attention_mask": _pos([0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]), "query_length": 2},
         "BLOOM-176B 112 heads; 2 new tokens after 4 cached, one row left-padded"),
    Case("alibi-mpt-7b", "alibi.bias", ("ALIBI-MPT", _ROW), model_params("mpt-7b"),
         {"query_length": 8, "key_length": 8}, "MPT-7B: 32 heads, alibi_bias_max 8"),
    Case("alibi-mpt-7b-cache", "alibi.bias", ("ALIBI-MPT", _ROW), model_params("mpt-7b"),
         {"query_length": 2, "key_length": 130}, "2 new tokens after 128 cached: m (j - 129)"),
    Case("alibi-mpt-bias-max", "alibi.bias", ("ALIBI-MPT", "ALIBI-SLOPES"), _A(num_heads=12, alibi_bias_max=16.0, form="mpt"),
         {"query_length": 5, "key_length": 5}, "alibi_bias_max 16 with 12 heads"),
)

# ---- T5 (T5-*) --------------------------------------------------------------------------------
_T5_FIG = _pos([-200, -10, -1, 0, 1, 10, 200])
_T5_ENC = model_params("t5-base")  # t5-base: T5Config defaults, 12 heads
_T5_DEC = model_params("t5-base", bidirectional=False)
_T5_RANGE = np.arange(-200, 201, dtype=np.int64).reshape(1, 401)
_add(
    Case("t5-buckets-figures-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_FIG}, "rel -200, -10, -1, 0, 1, 10, 200 -> 15, 8, 1, 0, 17, 24, 31"),
    Case("t5-buckets-figures-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_FIG}, "rel -200, -10, -1, 0, 1, 10, 200 -> 31, 10, 1, 0, 0, 0, 0"),
    Case("t5-base-buckets-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_RANGE}, "every rel in [-200, 200]"),
    Case("t5-base-buckets-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_RANGE}, "every rel in [-200, 200]"),
    Case("t5-base-bias-encoder", "t5.bias", ("T5-BIAS", "T5-BUCKET-BIDIRECTIONAL"), _T5_ENC,
         {"table": Gen((32, 12)), "query_length": 6, "key_length": 6, "cache_length": 0},
         "t5-base encoder: table [32 buckets, 12 heads]"),
    Case("t5-base-bias-encoder-long", "t5.bias", ("T5-BIAS", "T5-BUCKET-BIDIRECTIONAL"), _T5_ENC,
         {"table": Gen((32, 12)), "query_length": 3, "key_length": 150, "cache_length": 70},
         "rel -72 .. 79 (queries offset by cache_length 70)"),
    Case("t5-base-bias-decoder", "t5.bias", ("T5-BIAS", "T5-BUCKET-CAUSAL"), _T5_DEC,
         {"table": Gen((32, 12)), "query_length": 5, "key_length": 140, "cache_length": 135},
         "t5-base decoder: 5 queries after 135 cached tokens; rel -139 .. 4"),
    Case("t5-base-bias-decoder-prefill", "t5.bias", ("T5-BIAS", "T5-BUCKET-CAUSAL"), _T5_DEC,
         {"table": Gen((32, 12)), "query_length": 7, "key_length": 7, "cache_length": 0},
         "decoder prefill: future keys read bucket 0"),
)


# ---- M-RoPE (MROPE-*) ----------------------------------------------------------------------------
# Qwen2-VL: head_dim 128 (Qwen2VLTextConfig default hidden 8192 / 64 heads), rope_theta 1e6
# (Qwen2VLTextConfig.default_theta), mrope_section [16, 24, 24] (Qwen2VLRotaryEmbedding's default
# when rope_parameters has none): library defaults of transformers 5.24; Qwen2-VL-7B's published
# config.json carries the same section (encodings-facts G.1 marks that [UNVERIFIED]).  Qwen3-VL:
# Qwen3VLTextConfig head_dim 128, default_theta 5e5, Qwen3VLTextRotaryEmbedding's default section
# [24, 20, 20] (library defaults).  Head counts 4 : 1 (GQA) keep B, H, T, D distinct.


def _thw(*rows) -> np.ndarray:
    """position_ids [3, B, T] from per-row lists of (t, h, w) triples."""
    return np.asarray([[[tok[a] for tok in row] for row in rows] for a in range(3)], dtype=np.int64)


def _text(*rows) -> np.ndarray:
    """Text tokens: t = h = w = p."""
    return _thw(*[[(p, p, p) for p in row] for row in rows])


_QWEN2VL = model_params("qwen2-vl")
_QWEN3VL = model_params("qwen3-vl")
_FIG2 = MRopeParams(head_dim=16, rope_theta=10000.0, mrope_section=(2, 3, 3), layout="contiguous")
_FIG3 = MRopeParams(head_dim=16, rope_theta=10000.0, mrope_section=(4, 2, 2), layout="interleaved")
# Row 0 (get_rope_index): text 0, 1, a 1 x 2 x 2 image grid starting at 2, text again at 2 + 2 = 4.
# Row 1: a video deep in a long context: two frames (temporal interval 50), 1 x 2 grids, then text.
_VISION = _thw([(0, 0, 0), (1, 1, 1), (2, 2, 2), (2, 2, 3), (2, 3, 2), (2, 3, 3), (4, 4, 4)],
               [(70000, 70000, 70000), (70001, 70001, 70001), (70002, 70002, 70002), (70002, 70002, 70003),
                (70052, 70002, 70002), (70052, 70002, 70003), (70054, 70054, 70054)])
_GRID = _thw([(0, 0, 0), (0, 0, 1), (0, 5, 0), (0, 5, 13), (7, 0, 0), (7, 13, 5)],
             [(3, 100, 2000), (131071, 0, 5), (9, 9, 9), (4095, 4096, 4097), (1, 2, 3), (0, 131071, 0)])
_TEXT_POS = _text([0, 1, 2, 3, 4, 5, 6], [131065, 131066, 131067, 131068, 131069, 131070, 131071])
_FIG_X = _arange_x((1, 1, 1, 16))
_add(
    Case("mrope-qwen2-vl-figure-d16", "mrope.cos_sin", ("MROPE-SECTIONS",), _FIG2,
         {"position_ids": _thw([(4, 1, 2)])},
         "d 16, section [2, 3, 3], (t, h, w) = (4, 1, 2): position multipliers [4, 4, 1, 1, 1, 2, 2, 2]"),
    Case("mrope-qwen3-vl-figure-d16", "mrope.cos_sin", ("MROPE-INTERLEAVED",), _FIG3,
         {"position_ids": _thw([(4, 1, 2)])},
         "d 16, section [4, 2, 2], (t, h, w) = (4, 1, 2): position multipliers [4, 1, 2, 4, 1, 2, 4, 4]"),
    Case("mrope-qwen2-vl-figure-apply", "mrope.apply", ("MROPE-SECTIONS",), _FIG2,
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _thw([(4, 1, 2)])},
         "the figure end to end, x = 0..15"),
    Case("mrope-qwen3-vl-figure-apply", "mrope.apply", ("MROPE-INTERLEAVED",), _FIG3,
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _thw([(4, 1, 2)])},
         "the figure end to end, x = 0..15"),
    Case("mrope-qwen2-vl-vision", "mrope.apply", ("MROPE-SECTIONS",), _QWEN2VL,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "Qwen2-VL: text, a 2 x 2 image grid, text; a two-frame video at position 70000"),
    Case("mrope-qwen2-vl-grid-cos-sin", "mrope.cos_sin", ("MROPE-SECTIONS",), _QWEN2VL,
         {"position_ids": _GRID}, "t, h, w all different, up to 131071 on each axis"),
    Case("mrope-qwen2-vl-text", "mrope.apply", ("MROPE-TEXT-REDUCES", "MROPE-SECTIONS"), _QWEN2VL,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _TEXT_POS},
         "text tokens t = h = w up to 131071: 1-D RoPE with theta 1e6"),
    Case("mrope-qwen3-vl-vision", "mrope.apply", ("MROPE-INTERLEAVED",), _QWEN3VL,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "Qwen3-VL interleaved sections [24, 20, 20] on the same grids"),
    Case("mrope-qwen3-vl-grid-cos-sin", "mrope.cos_sin", ("MROPE-INTERLEAVED",), _QWEN3VL,
         {"position_ids": _GRID}, "t, h, w all different, up to 131071 on each axis"),
    Case("mrope-interleaved-uneven", "mrope.cos_sin", ("MROPE-INTERLEAVED",),
         MRopeParams(head_dim=128, rope_theta=500000.0, mrope_section=(26, 20, 18), layout="interleaved"),
         {"position_ids": _GRID}, "height and width sections differ (20 vs 18): their conditions cannot swap"),
    Case("mrope-qwen3-vl-text", "mrope.apply", ("MROPE-TEXT-REDUCES", "MROPE-INTERLEAVED"), _QWEN3VL,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _TEXT_POS},
         "text tokens t = h = w up to 131071: 1-D RoPE with theta 5e5"),
)

# ---- NoPE (NOPE-*) --------------------------------------------------------------------------------
# SmolLM3-3B: SmolLM3Config defaults num_hidden_layers 36, no_rope_layer_interval 4 (layers 3, 7,
# ..., 35 NoPE), 16 heads, 4 KV heads, head_dim 128 (hidden 2048 / 16) -- library defaults.
_SMOL = model_params("smollm3-3b")
_EXPLICIT = NopeParams(num_hidden_layers=8, no_rope_layers=(1, 1, 0, 1, 0, 0, 1, 1))
_add(
    Case("nope-flags-smollm3", "nope.layer_flags", ("NOPE-LAYER-FLAGS",), _SMOL,
         note="36 layers, interval 4: layers 3, 7, ..., 35 are NoPE (flag 0)"),
    Case("nope-flags-interval-3", "nope.layer_flags", ("NOPE-LAYER-FLAGS",),
         NopeParams(num_hidden_layers=10, no_rope_layer_interval=3), note="layers 2, 5, 8 are NoPE"),
    Case("nope-flags-explicit", "nope.layer_flags", ("NOPE-LAYER-FLAGS",), _EXPLICIT,
         note="an explicit no_rope_layers list (1 = uses RoPE) is taken as is"),
    Case("nope-apply-smollm3", "nope.apply", ("NOPE-IDENTITY", "NOPE-LAYER-FLAGS"), _SMOL,
         {"q": Gen((2, 16, 5, 128)), "k": Gen((2, 4, 5, 128)),
          "position_ids": _pos([0, 1, 2, 3, 4], [65532, 65533, 65534, 65535, 65536]), "layer_idx": 3},
         "SmolLM3-3B layer 3 (NoPE): 16 q heads, 4 kv heads, head_dim 128; q and k bit-identical"),
    Case("nope-apply-explicit", "nope.apply", ("NOPE-IDENTITY", "NOPE-LAYER-FLAGS"), _EXPLICIT,
         {"q": Gen((3, 2, 4, 64)), "k": Gen((3, 1, 4, 64)), "position_ids": _pos([5, 6, 7, 8], [0, 1, 2, 3], [9, 9, 9, 9]),
          "layer_idx": 5}, "layer 5 of an explicit list (flag 0)"),
)


def by_id() -> dict[str, Case]:
    out: dict[str, Case] = {}
    for c in CASES:
        if c.id in out:
            raise ValueError(f"duplicate case id {c.id}")
        out[c.id] = c
    return out

"""The RoPE family (ROPE-*): the references and error scales of the rope.* operations, the
mutants of its divergences and its golden cases.  The math is :mod:`posenc.reference.rope`; the
scaled frequency rules (SCALE-*) are :mod:`posenc.reference.rope_scaling`, reached through
``rope.inv_freq`` by ``rope_type``."""

from __future__ import annotations

from typing import Callable

import numpy as np

from posenc.conformance.cases import Case, Gen, arange_x, pos
from posenc.reference import position_ids, rope, rope_scaling
from posenc.reference.rounding import bf16_round
from posenc.spec.models import RopeParams
from posenc.spec.registry import model_params
from posenc.spec.shapes import call_suffixes

from . import mutant, reference, add_cases
from ._common import Outputs, run

def freq_provider(p) -> Callable:
    """``seq_len -> (inv_freq, attention_factor)`` for one prepared operation.

    Stateless (per call) except for ``dynamic`` with ``dynamic_policy='grow_until_reset'``,
    whose provider keeps transformers' state across calls (SCALE-DYNAMIC-GROW).
    """
    if p.rope_type == "dynamic" and p.dynamic_policy == "grow_until_reset":
        state = rope_scaling.DynamicGrowState(p)
        af = 1.0 if p.attention_factor is None else p.attention_factor
        return lambda seq_len: (state.inv_freq(seq_len), af)
    return lambda seq_len: rope.inv_freq(p, seq_len)


def call_keys(x, prefix: str = "position_ids.") -> list[str]:
    """Input names of a call sequence, in call order: ``position_ids.0``, ``position_ids.1``, ..."""
    return [prefix + k for k in call_suffixes(x, prefix.rstrip("."))]


def _per_call(fn, p, x, freq) -> dict:
    """``rope.cos_sin_calls``: ``fn('rope.cos_sin', ...)`` for each call in order, one ``freq``
    (so a stateful provider sees the sequence), keyed ``cos.<k>`` / ``sin.<k>``."""
    out = {}
    for key in call_keys(x):
        k = key.rsplit(".", 1)[1]
        r = fn("rope.cos_sin", p, {"position_ids": x[key]}, freq)
        out[f"cos.{k}"], out[f"sin.{k}"] = r["cos"], r["sin"]
    return out


def rope_outputs(op, p, x, freq) -> Outputs:
    """Outputs of a RoPE operation given a frequency provider (the reference's or a mutant's)."""
    if op == "rope.inv_freq":
        w, a = freq(None)
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    if op == "rope.cos_sin_calls":
        return _per_call(rope_outputs, p, x, freq)
    pid = np.asarray(x["position_ids"])
    w, a = freq(rope.seq_len_of(pid))
    phi = pid.astype(np.float64)[..., None] * w
    c, s = a * np.cos(phi), a * np.sin(phi)
    if op == "rope.cos_sin":
        return {"cos": c, "sin": s}
    return {n: rope.apply_with_cos_sin(x[n], c, s, p.pair_dim, p.pairing) for n in ("q", "k")}


def rope_scales(op, p, x, freq) -> dict:
    if op == "rope.inv_freq":
        w, a = freq(None)
        # A float32 implementation rounds the exponent 2i/r too; the error is amplified by ln(theta).
        return {"inv_freq": (np.abs(w) * (1.0 + np.log(p.rope_theta)), 0 * w),
                "attention_factor": (np.float64(a), np.float64(0))}
    if op == "rope.cos_sin_calls":
        return _per_call(rope_scales, p, x, freq)
    pid = np.asarray(x["position_ids"])
    w, a = freq(rope.seq_len_of(pid))
    phi = np.abs(pid.astype(np.float64)[..., None] * w) * exponent_amplification(w, p.rope_theta, p.pair_dim)
    if op == "rope.cos_sin":
        sc = (np.full_like(phi, a), a * phi)
        return {"cos": sc, "sin": sc}
    return {n: _pair_scales(x[n], a, phi[:, None], p.pair_dim, p.pairing) for n in ("q", "k")}


def exponent_amplification(w, theta: float, dim: int) -> np.ndarray:
    """``1 + e_i ln(theta)`` with ``e_i = 2i/dim``: a float32 ``theta ** -e_i`` also rounds its
    exponent, a relative error that ln(theta) amplifies (largest for the lowest frequencies).
    For scaled rules, theta is the base whose power gives ``w`` (dynamic: theta')."""
    n = np.shape(w)[-1]
    if n > 1 and w[1] > 0:
        theta = max(theta, float(w[1]) ** (-dim / 2))  # theta' of dynamic NTK
    return 1.0 + (2.0 * np.arange(n) / dim) * np.log(max(theta, np.e))


def _pair_scales(x, cos_mag, phi_abs, rotary_dim, pairing):
    """Per-element (dtype, angle) scales for a rotation of ``x [B, H, T, D]``; tail dims 0."""
    x = np.asarray(x, np.float64)
    a, b = rope.pair_indices(rotary_dim, pairing)
    norm = np.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
    ds, an = np.zeros_like(x), np.zeros_like(x)
    for idx in rope.output_indices(rotary_dim, pairing):
        ds[..., idx] = norm * cos_mag
        an[..., idx] = norm * cos_mag * phi_abs
    return ds, an


def _rope_apply_cs(p, x):
    r = p.pair_dim
    return {n: rope.apply_with_cos_sin(x[n], x["cos"], x["sin"], r, p.pairing) for n in ("q", "k")}


def _rope_apply_cs_scales(p, x):
    mag = np.sqrt(np.asarray(x["cos"]) ** 2 + np.asarray(x["sin"]) ** 2)[:, None]
    return {n: _pair_scales(x[n], mag, 0.0, p.pair_dim, p.pairing) for n in ("q", "k")}


# ---- registration: the reference of every rope.* operation ---------------------------------


def _reference(op):
    def fn(p, x, freq=None):
        return rope_outputs(op, p, x, freq or freq_provider(p))

    def sc(p, x):
        return rope_scales(op, p, x, freq_provider(p))
    fn.__name__ = fn.__qualname__ = f"rope_outputs[{op}]"
    return reference(op, scales=sc, state=freq_provider)(fn)


for _op in ("rope.inv_freq", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply"):
    _reference(_op)
reference("rope.apply_with_cos_sin", scales=_rope_apply_cs_scales)(_rope_apply_cs)


# ---- mutants (DIV-ROPE-*) ----------------------------------------------------------------------

def _rope_outputs(op, p, x, cos, sin, rotary_dim=None, pairing=None):
    r = rotary_dim or p.pair_dim
    pr = pairing or p.pairing
    if op == "rope.cos_sin":
        return {"cos": cos, "sin": sin}
    return {n: rope.apply_with_cos_sin(x[n], cos, sin, r, pr) for n in ("q", "k")}


@mutant("rope_pairing_swapped", "rope.apply", "rope.apply_with_cos_sin")
def rope_pairing_swapped(op, p, x, dtype=None):
    other = "interleaved" if p.pairing == "half" else "half"
    q = p.model_copy(update={"pairing": other})
    return run(op, q, x)


@mutant("rope_deinterleave_layout_kept", "rope.apply", "rope.apply_with_cos_sin")
def rope_deinterleave_layout_kept(op, p, x, dtype=None):
    if p.pairing != "deinterleave":
        return None
    return run(op, p.model_copy(update={"pairing": "interleaved"}), x)


def _bf16_rope(op, p, x, round_angle: bool):
    seq_len = rope.seq_len_of(x["position_ids"]) if "position_ids" in x else None
    w, a = rope.inv_freq(p, seq_len)
    w = bf16_round(w)
    if op == "rope.inv_freq":
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    pos = np.asarray(x["position_ids"], np.float64)
    phi = bf16_round(bf16_round(pos)[..., None] * w) if round_angle else pos[..., None] * w
    return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


@mutant("rope_bf16_angles", "rope.apply", "rope.cos_sin", "rope.inv_freq")
def rope_bf16_angles(op, p, x, dtype=None):
    return _bf16_rope(op, p, x, round_angle=True)


@mutant("rope_bf16_inv_freq", "rope.apply", "rope.cos_sin", "rope.inv_freq")
def rope_bf16_inv_freq(op, p, x, dtype=None):
    return _bf16_rope(op, p, x, round_angle=False)


@mutant("rope_bf16_positions", "rope.apply", "rope.cos_sin")
def rope_bf16_positions(op, p, x, dtype=None):
    """Positions built in bfloat16 (e.g. ``arange(T, dtype=t.dtype) + offset``); angles and
    cos/sin then exact: every position p >= 256 becomes a multiple of its bf16 spacing."""
    seq_len = rope.seq_len_of(x["position_ids"])
    w, a = rope.inv_freq(p, seq_len)
    phi = bf16_round(np.asarray(x["position_ids"], np.float64))[..., None] * w
    return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


@mutant("rope_tail_rotated", "rope.apply")
def rope_tail_rotated(op, p, x, dtype=None):
    full = p.model_copy(update={"rotary_dim": None})
    return run(op, full, x)


@mutant("rope_exponent_head_dim", "rope.apply", "rope.inv_freq", "rope.cos_sin")
def rope_exponent_head_dim(op, p, x, dtype=None):
    if p.rope_type != "default":
        return None
    r = p.rdim
    w = p.rope_theta ** (-np.arange(0, r, 2, dtype=np.float64) / p.head_dim)
    a = rope.inv_freq(p)[1]
    if op == "rope.inv_freq":
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    phi = np.asarray(x["position_ids"], np.float64)[..., None] * w
    return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


@mutant("rope_arange_positions", "rope.apply", "rope.cos_sin")
def rope_arange_positions(op, p, x, dtype=None):
    pid = np.asarray(x["position_ids"])
    return run(op, p, {**x, "position_ids": position_ids.prefill(*pid.shape)})


@mutant("rope_factor_ignored", "rope.apply", "rope.cos_sin", "rope.inv_freq")
def rope_factor_ignored(op, p, x, dtype=None):
    return run(op, p.model_copy(update={"attention_factor": 1.0}), x)


# ---- golden cases ----------------------------------------------------------------------------
_TINY = dict(head_dim=8, rope_theta=10000.0)
for pairing, cl in (("half", "ROPE-PAIR-HALF"), ("interleaved", "ROPE-PAIR-INTERLEAVED")):
    p = RopeParams(**_TINY, pairing=pairing)
    pp = RopeParams(**_TINY, pairing=pairing, rotary_dim=4)
    x = arange_x((1, 1, 1, 8))
    add_cases(
        Case(f"rope-tiny-{pairing}", "rope.apply", (cl, "ROPE-ANGLE"), p,
             {"q": x, "k": x[..., ::-1].copy(), "position_ids": pos([3])},
             "head_dim 8, theta 1e4, position 3, x = 0..7 (hand-checkable)"),
        Case(f"rope-tiny-partial-{pairing}", "rope.apply", (cl, "ROPE-PARTIAL"), pp,
             {"q": x, "k": x, "position_ids": pos([3])}, "rotary_dim 4 of head_dim 8"),
    )

_LLAMA3 = model_params("llama-3-8b")
_LLAMA4 = RopeParams(head_dim=128, rope_theta=500000.0, pairing="interleaved")
_DSV3_ROPE = model_params("deepseek-v3-rope")
_NEOX = model_params("gpt-neox-20b")
_GPTJ = model_params("gpt-j-6b")
_LONG = pos([0, 1, 2, 3, 4], [131067, 131068, 131069, 131070, 131071])
add_cases(
    Case("rope-llama3-8b", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE", "ROPE-PRECISION"), _LLAMA3,
         {"q": Gen((2, 4, 5, 128)), "k": Gen((2, 2, 5, 128)), "position_ids": _LONG},
         "Llama-3-8B heads (head_dim 128, theta 500000), GQA 4:2, positions up to 131071"),
    Case("rope-llama3-8b-scattered", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE"), _LLAMA3,
         {"q": Gen((2, 4, 3, 128)), "k": Gen((2, 2, 3, 128)),
          "position_ids": pos([7, 0, 4095], [8191, 65536, 12])},
         "non-monotonic position_ids (never assume arange)"),
    Case("rope-llama4-interleaved", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE", "ROPE-PRECISION"),
         _LLAMA4, {"q": Gen((2, 4, 5, 128)), "k": Gen((2, 2, 5, 128)), "position_ids": _LONG},
         "Llama 4 style interleaved pairing at theta 500000"),
    Case("rope-neox-20b", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-PARTIAL"), _NEOX,
         {"q": Gen((3, 2, 7, 96)), "k": Gen((3, 2, 7, 96)),
          "position_ids": pos(range(7), range(100, 107), range(2041, 2048))},
         "GPT-NeoX-20B: head 96, rotary_dim 24, half pairing"),
    Case("rope-gptj-6b", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-PARTIAL"), _GPTJ,
         {"q": Gen((2, 3, 4, 256)), "k": Gen((2, 3, 4, 256)),
          "position_ids": pos([0, 1, 2, 3], [2044, 2045, 2046, 2047])},
         "GPT-J-6B: head 256, rotary_dim 64, interleaved pairing"),
    Case("rope-attention-factor", "rope.apply", ("ROPE-ATTENTION-FACTOR", "ROPE-PAIR-HALF"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25),
         {"q": Gen((2, 3, 5, 64)), "k": Gen((2, 1, 5, 64)), "position_ids": pos(range(5), range(60, 65))},
         "attention_factor 1.25 multiplies cos and sin"),
    Case("rope-partial-factor", "rope.apply", ("ROPE-ATTENTION-FACTOR", "ROPE-PARTIAL"),
         RopeParams(head_dim=64, rotary_dim=32, rope_theta=10000.0, attention_factor=1.25),
         {"q": Gen((2, 3, 4, 64)), "k": Gen((2, 1, 4, 64)), "position_ids": pos([9, 0, 3, 2047], [1, 1, 500, 2])},
         "attention_factor scales the rotated pairs only, never the pass-through tail"),
    Case("rope-interleaved-factor", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ATTENTION-FACTOR", "ROPE-ANGLE"),
         RopeParams(head_dim=64, rope_theta=500000.0, pairing="interleaved", attention_factor=0.75),
         {"q": Gen((3, 2, 3, 64)), "k": Gen((3, 1, 3, 64)), "position_ids": pos([5, 2, 9], [70000, 0, 1], [3, 3, 3])},
         "interleaved pairs with non-monotonic positions and an attention factor"),
    Case("rope-deepseek-v3-deinterleave", "rope.apply", ("ROPE-PAIR-DEINTERLEAVE", "ROPE-ANGLE"), _DSV3_ROPE,
         {"q": Gen((2, 4, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": pos([0, 1, 163839], [4096, 65536, 2])},
         "DeepSeek-V3 rope part as HF runs it (rope_interleave): pairs (2i, 2i+1) in, [firsts | seconds] out"),
    Case("rope-inv-freq-llama3", "rope.inv_freq", ("ROPE-INV-FREQ",), _LLAMA3),
    Case("rope-inv-freq-factor", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25)),
    Case("rope-cos-sin-neox-20b", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-PARTIAL"), _NEOX,
         {"position_ids": pos([0, 1, 2047], [7, 300, 5])}, "rotary_dim/2 = 12 frequencies with denominator 24"),
    Case("rope-inv-freq-neox-20b", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-PARTIAL"), _NEOX),
    Case("rope-inv-freq-gptj-6b", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-PARTIAL"), _GPTJ),
    Case("rope-cos-sin-llama3", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-PRECISION"), _LLAMA3,
         {"position_ids": _LONG}),
    Case("rope-cos-sin-factor", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25),
         {"position_ids": pos(range(6), range(1000, 1006), range(6, 0, -1))}),
)
# partial (NeoX, GPT-J) and full rotation (Llama 3, Llama 4 heads): the ONNX op's rotary_embedding_dim
# default (0 = head_size) and the flash-attn full-width path are exercised too
for name, p in (("half", _NEOX), ("interleaved", _GPTJ), ("half-full", _LLAMA3), ("interleaved-full", _LLAMA4),
                ("deinterleave", RopeParams(head_dim=64, pairing="deinterleave"))):
    B, T = 2, 3
    pid = pos(range(3), range(2045, 2048))
    # given cos/sin inputs (magnitude 1.25, so an implementation may not renormalise them)
    c, s = rope.cos_sin(pid, p.model_copy(update={"attention_factor": 1.25}))
    pair = f"ROPE-PAIR-{p.pairing.upper()}"
    add_cases(Case(f"rope-apply-cos-sin-{name}", "rope.apply_with_cos_sin",
              (pair, "ROPE-PARTIAL") if p.rdim < p.head_dim else (pair,), p,
              {"q": Gen((B, 4, T, p.head_dim)), "k": Gen((B, 1, T, p.head_dim)), "cos": c, "sin": s},
              "cos/sin given (the ONNX / flash-attn level)"))

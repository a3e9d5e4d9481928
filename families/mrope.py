"""The M-RoPE family (MROPE-*): references and error scales of mrope.cos_sin and mrope.apply,
the mutants of its divergences and its golden cases; the math is :mod:`posenc.reference.mrope`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, arange_x
from posenc.reference import mrope, rope
from posenc.spec.models import MROPE_SCALING_FIELDS, MRopeParams, mrope_axes
from posenc.spec.registry import model_params

from . import add_cases, case_clauses, mutant, reference
from ._common import Outputs
from .rope import _pair_scales, exponent_amplification
from .rope_calls import layout_forms


@case_clauses("mrope")
def mrope_clauses(p, op: str) -> list[str]:
    """The clauses an M-RoPE case exercises beyond its own: the sections, which every layout splits by."""
    return ["MROPE-SECTIONS"]



def mrope_outputs(op, p, x, axis_positions=None, freq=None, rotary_dim=None) -> Outputs:
    """Outputs of an M-RoPE op.  Mutants substitute: ``axis_positions`` (``[B, T, n]``, the
    per-frequency positions), ``freq`` (``(inv_freq [n], attention_factor)``), ``rotary_dim``
    (the rotated width; n = rotary_dim/2)."""
    pid = x["position_ids"]
    ap = mrope.axis_positions(pid, p) if axis_positions is None else axis_positions
    w, a = mrope.inv_freq_and_factor(p, mrope.seq_len_of(pid)) if freq is None else freq
    phi = np.asarray(ap, np.float64) * w
    c, s = a * np.cos(phi), a * np.sin(phi)
    if op == "mrope.cos_sin":
        return {"cos": c, "sin": s}
    r = p.rdim if rotary_dim is None else rotary_dim
    return {n: rope.apply_with_cos_sin(x[n], c, s, r, p.pairing) for n in ("q", "k")}


def _mrope_scales_for(op):
    def f(p, x):
        pid = x["position_ids"]
        w, a = mrope.inv_freq_and_factor(p, mrope.seq_len_of(pid))
        phi = np.abs(mrope.axis_positions(pid, p).astype(np.float64) * w) * exponent_amplification(
            w, p.rope_theta, p.rdim, p.rope_type == "dynamic")
        if op == "mrope.cos_sin":
            sc = (np.full_like(phi, a), a * phi)
            return {"cos": sc, "sin": sc}
        return {n: _pair_scales(x[n], a, phi[:, None], p.rdim, p.pairing) for n in ("q", "k")}
    return f


def _mrope_reference(op):
    def fn(p, x):
        return mrope_outputs(op, p, x)
    fn.__name__ = fn.__qualname__ = f"mrope_outputs[{op}]"
    return fn


for _op in ("mrope.cos_sin", "mrope.apply"):
    reference(_op, scales=_mrope_scales_for(_op))(_mrope_reference(_op))


# ---- mutants (DIV-MROPE-*) -------------------------------------------------------------------
_MROPE_OPS = ("mrope.cos_sin", "mrope.apply")


def _mrope_with_axes(op, p, x, axes):
    pos = np.asarray(x["position_ids"])
    ap = np.moveaxis(pos[np.asarray(axes)], 0, -1)
    return mrope_outputs(op, p, x, ap)


@mutant("mrope_section_order", *_MROPE_OPS)
def mrope_section_order(op, p, x, dtype=None):
    """Sections applied to the axes in reverse order (W, H, T): the T section takes the width."""
    return _mrope_with_axes(op, p, x, [2 - a for a in p.axes])


@mutant("mrope_interleaved_as_contiguous", *_MROPE_OPS)
def mrope_interleaved_as_contiguous(op, p, x, dtype=None):
    """Qwen3-VL's sections laid out contiguously (Qwen2-VL's rule) where interleaving is specified."""
    if p.layout != "interleaved":
        return None
    return mrope_outputs(op, p.model_copy(update={"layout": "contiguous"}), x)


@mutant("mrope_temporal_only", *_MROPE_OPS)
def mrope_temporal_only(op, p, x, dtype=None):
    """Only the temporal axis used for every frequency (plain 1-D RoPE at the t position)."""
    return _mrope_with_axes(op, p, x, [0] * (p.rdim // 2))


@mutant("mrope_attention_scaling_dropped", *_MROPE_OPS)
def mrope_attention_scaling_dropped(op, p, x, dtype=None):
    """The rope_type's frequencies, but cos and sin not multiplied by the attention factor."""
    w, a = mrope.inv_freq_and_factor(p, mrope.seq_len_of(x["position_ids"]))
    if a == 1.0:
        return None
    return mrope_outputs(op, p, x, freq=(w, 1.0))


@mutant("mrope_rope_type_ignored", *_MROPE_OPS)
def mrope_rope_type_ignored(op, p, x, dtype=None):
    """The default frequencies ``theta ** (-2k / rotary_dim)`` whatever the rope_type (the scaling
    fields dropped, an explicit attention_factor kept): the 1-D scaled path not reached."""
    if p.rope_type == "default":
        return None
    q = p.model_copy(update={"rope_type": "default", **{n: None for n in MROPE_SCALING_FIELDS if n != "attention_factor"}})
    q = MRopeParams.model_validate(q.model_dump())
    return mrope_outputs(op, q, x)


@mutant("mrope_partial_whole_head", "mrope.apply")
def mrope_partial_whole_head(op, p, x, dtype=None):
    """Partial rotary ignored: the whole head rotates, ``head_dim/2`` frequencies with the exponent
    over head_dim; the sections keep their frequencies and the extra ones read the temporal axis
    (the interleaved rule's default), pairs (i, i + head_dim/2)."""
    if p.rdim == p.head_dim:
        return None
    D = p.head_dim
    axes = mrope_axes(D // 2, p.mrope_section, p.layout)
    axes = axes + [0] * (D // 2 - len(axes))  # contiguous: the sections end at rotary_dim/2
    full = p.rope.with_width()
    w, a = rope.inv_freq(full, mrope.seq_len_of(x["position_ids"]))
    pos = np.asarray(x["position_ids"])
    ap = np.moveaxis(pos[np.asarray(axes)], 0, -1)
    return mrope_outputs(op, p, x, axis_positions=ap, freq=(w, a), rotary_dim=D)


@mutant("mrope_pairing_mixed", "mrope.apply")
def mrope_pairing_mixed(op, p, x, dtype=None):
    """The per-dim cos/sin laid out for the configured pairing (``cat(a, a)`` for half,
    ``repeat_interleave(a, 2)`` for interleaved) applied with the other rotation (a pairwise one,
    or rotate_half): GLM-4V's interleaved layout run through Qwen2-VL's apply, or the reverse."""
    pid = x["position_ids"]
    w, a = mrope.inv_freq_and_factor(p, mrope.seq_len_of(pid))
    phi = mrope.axis_positions(pid, p).astype(np.float64) * w
    c, s = a * np.cos(phi), a * np.sin(phi)
    r = p.rdim

    def wide(v):
        return np.repeat(v, 2, axis=-1) if p.pairing == "interleaved" else np.concatenate([v, v], -1)

    out = {}
    for n in ("q", "k"):
        v = np.asarray(x[n], np.float64)
        xr = v[..., :r]
        if p.pairing == "interleaved":
            other = np.concatenate([-xr[..., r // 2:], xr[..., :r // 2]], -1)
        else:
            other = np.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
        out[n] = np.concatenate([xr * wide(c)[:, None] + other * wide(s)[:, None], v[..., r:]], -1)
    return out


# ---- golden cases ----------------------------------------------------------------------------
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
_FIG_X = arange_x((1, 1, 1, 16))
#: 2 rows of 20 tokens: text 0 .. 3 then a 4 x 4 image at 4; a two-frame 3 x 3 video at t 5000 (interval 50), then text
_MANY = _thw([(p, p, p) for p in range(4)] + [(4, 4 + h, 4 + w) for h in range(4) for w in range(4)],
             [(5000 + 50 * f, 5000 + h, 5000 + w) for f in range(2) for h in range(3) for w in range(3)]
             + [(5101, 5101, 5101), (5102, 5102, 5102)])
#: long positions (issue 30): a video past 2**20 frames' worth of positions, one axis at 2**24
_LONG = _thw([(2**20, 2**20, 2**20), (2**20 + 1, 2**20, 2**20 + 1), (2**20 + 1, 2**20 + 1, 2**20), (2**24, 5, 7)],
             [(2**24 - 1, 2**24 - 1, 2**24 - 1), (2**24, 2**24, 2**24), (2**24 + 1, 2**24 + 1, 2**24 + 1), (3, 2**20, 9)])
add_cases(
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
    Case("mrope-40-tokens", "mrope.apply", ("MROPE-SECTIONS",), _FIG2,
         {"q": Gen((2, 1, 20, 16)), "k": Gen((2, 1, 20, 16)), "position_ids": _MANY},
         "40 tokens (the tokens form's N past a kernel's blocks of 16 and 32): text, a 4 x 4 image; a two-frame "
         "3 x 3 video at 5000, text"),
    Case("mrope-qwen2-vl-vision", "mrope.apply", ("MROPE-SECTIONS",), _QWEN2VL,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "Qwen2-VL: text, a 2 x 2 image grid, text; a two-frame video at position 70000"),
    Case("mrope-qwen2-vl-long", "mrope.apply", ("MROPE-SECTIONS",), _QWEN2VL,
         {"q": Gen((2, 2, 4, 128)), "k": Gen((2, 1, 4, 128)), "position_ids": _LONG},
         "Qwen2-VL at positions 2**20 and 2**24 - 1 .. 2**24 + 1 on every axis (and one axis alone at 2**24): the "
         "highest frequencies not checkable there, the others are"),
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

# ---- rope_type, attention scaling and partial rotary on M-RoPE (MROPE-ROPE-TYPE,
# MROPE-ATTENTION-SCALING, MROPE-PARTIAL; spec 0.4.0) -------------------------------------------
# yarn on Qwen3-VL: factor 3, original 256000 (the config of vLLM PR 25384, "MRoPE + YaRN");
# yarn factor 4 / original 32768 on Qwen2-VL (Qwen2.5's published yarn block; positions up to
# 70054 > 32768); Qwen3.5: head_dim 256, partial_rotary_factor 0.25 (rotary_dim 64), interleaved
# section [11, 11, 10], theta 10000 (Qwen3_5TextConfig / Qwen3_5TextRotaryEmbedding defaults).
_Q2_YARN = _QWEN2VL.model_copy(update={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
_Q3_YARN = _QWEN3VL.model_copy(update={"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 256000})
_Q3_YARN_AF = _QWEN3VL.model_copy(update={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                                          "attention_factor": 0.75})
_Q2_LINEAR = _QWEN2VL.model_copy(update={"rope_type": "linear", "factor": 4.0})
_Q3_DYNAMIC = _QWEN3VL.model_copy(update={"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 32768})
_Q2_LLAMA3 = _QWEN2VL.model_copy(update={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
_Q35 = MRopeParams(head_dim=256, rotary_dim=64, rope_theta=10000.0, mrope_section=(11, 11, 10), layout="interleaved")
_Q35_YARN = _Q35.model_copy(update={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
_PARTIAL_CONTIG = MRopeParams(head_dim=128, rotary_dim=96, rope_theta=1000000.0, mrope_section=(12, 18, 18),
                              rope_type="linear", factor=2.0)
# longrope: made-up per-frequency divisors (64 of them, rising with k); original 32768, so _VISION
# (max 70054) takes the long factors and the small grid the short ones
_Q3_LONGROPE = MRopeParams(head_dim=128, rope_theta=500000.0, mrope_section=(24, 20, 20), layout="interleaved",
                           rope_type="longrope", factor=4.0, original_max_position_embeddings=32768,
                           short_factor=tuple(round(1.0 + 0.5 * k / 63, 6) for k in range(64)),
                           long_factor=tuple(round(1.0 + 7.0 * (k / 63) ** 2, 6) for k in range(64)))
# yarn with every optional field away from its default: beta 16 / 2, mscale ratio, no truncation
_Q2_YARN_FIELDS = MRopeParams(head_dim=128, rope_theta=1000000.0, mrope_section=(16, 24, 24), rope_type="yarn",
                              factor=8.0, original_max_position_embeddings=4096, beta_fast=16.0, beta_slow=2.0,
                              mscale=1.0, mscale_all_dim=0.5, truncate=False)
_FIG_LINEAR = _FIG2.model_copy(update={"rope_type": "linear", "factor": 4.0})
# model_copy does not validate: re-validate every parameter set built by update
(_Q2_YARN, _Q3_YARN, _Q3_YARN_AF, _Q2_LINEAR, _Q3_DYNAMIC, _Q2_LLAMA3, _Q35_YARN, _FIG_LINEAR) = (
    MRopeParams.model_validate(v.model_dump()) for v in
    (_Q2_YARN, _Q3_YARN, _Q3_YARN_AF, _Q2_LINEAR, _Q3_DYNAMIC, _Q2_LLAMA3, _Q35_YARN, _FIG_LINEAR))
_SCALED = ("MROPE-ROPE-TYPE", "MROPE-ATTENTION-SCALING")
add_cases(
    Case("mrope-linear-figure-d16", "mrope.cos_sin", ("MROPE-ROPE-TYPE", "MROPE-SECTIONS"), _FIG_LINEAR,
         {"position_ids": _thw([(4, 1, 2)])},
         "the figure with linear factor 4: angles [4, 4, 1, 1, 1, 2, 2, 2] * theta^(-2k/16) / 4"),
    Case("mrope-qwen2-vl-yarn-vision", "mrope.apply", _SCALED + ("MROPE-SECTIONS",), _Q2_YARN,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "Qwen2-VL with yarn factor 4 / original 32768: attention factor 0.1 ln 4 + 1; image and video rows"),
    Case("mrope-qwen2-vl-yarn-grid-cos-sin", "mrope.cos_sin", _SCALED + ("MROPE-SECTIONS",), _Q2_YARN,
         {"position_ids": _GRID}, "yarn cos/sin (scaled by the attention factor), t, h, w up to 131071"),
    Case("mrope-qwen3-vl-yarn-vision", "mrope.apply", _SCALED + ("MROPE-INTERLEAVED",), _Q3_YARN,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "Qwen3-VL interleaved with yarn factor 3 / original 256000 (vLLM PR 25384's config)"),
    Case("mrope-qwen3-vl-yarn-grid-cos-sin", "mrope.cos_sin", _SCALED + ("MROPE-INTERLEAVED",), _Q3_YARN,
         {"position_ids": _GRID}, "Qwen3-VL yarn cos/sin, t, h, w up to 131071"),
    Case("mrope-qwen3-vl-yarn-attention-factor-text", "mrope.apply",
         _SCALED + ("MROPE-TEXT-REDUCES", "MROPE-INTERLEAVED"), _Q3_YARN_AF,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _TEXT_POS},
         "yarn with an explicit attention_factor 0.75 (replaces 0.1 ln 4 + 1); text tokens: 1-D yarn RoPE"),
    Case("mrope-qwen2-vl-linear-vision", "mrope.apply", ("MROPE-ROPE-TYPE", "MROPE-SECTIONS"), _Q2_LINEAR,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "Qwen2-VL with linear factor 4 (attention factor 1)"),
    Case("mrope-qwen2-vl-linear-grid-cos-sin", "mrope.cos_sin", ("MROPE-ROPE-TYPE", "MROPE-SECTIONS"), _Q2_LINEAR,
         {"position_ids": _GRID}, "linear factor 4 cos/sin, t, h, w up to 131071"),
    Case("mrope-qwen3-vl-dynamic-vision", "mrope.apply", ("MROPE-ROPE-TYPE", "MROPE-INTERLEAVED"), _Q3_DYNAMIC,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "dynamic NTK factor 2, max_position_embeddings 32768: seq_len = max over the three axes + 1 = 70055"),
    Case("mrope-qwen2-vl-llama3-grid-cos-sin", "mrope.cos_sin", ("MROPE-ROPE-TYPE", "MROPE-SECTIONS"), _Q2_LLAMA3,
         {"position_ids": _GRID}, "llama3 factor 8 (1, 4, 8192) on Qwen2-VL's sections"),
    Case("mrope-qwen3.5-partial-vision", "mrope.apply", ("MROPE-PARTIAL", "MROPE-INTERLEAVED"), _Q35,
         {"q": Gen((2, 4, 7, 256)), "k": Gen((2, 1, 7, 256)), "position_ids": _VISION},
         "Qwen3.5: 64 of 256 dims rotate (section [11, 11, 10] over 32 frequencies), the tail passes through"),
    Case("mrope-qwen3.5-partial-cos-sin", "mrope.cos_sin", ("MROPE-PARTIAL", "MROPE-INTERLEAVED"), _Q35,
         {"position_ids": _GRID}, "Qwen3.5 cos/sin: 32 frequencies theta^(-2k/64)"),
    Case("mrope-qwen3.5-partial-yarn-text", "mrope.apply",
         ("MROPE-PARTIAL", "MROPE-TEXT-REDUCES", "MROPE-INTERLEAVED") + _SCALED, _Q35_YARN,
         {"q": Gen((2, 4, 7, 256)), "k": Gen((2, 1, 7, 256)), "position_ids": _TEXT_POS},
         "Qwen3.5 with yarn factor 4 over rotary_dim 64; text tokens up to 131071"),
    Case("mrope-partial-contiguous-linear-vision", "mrope.apply", ("MROPE-PARTIAL", "MROPE-ROPE-TYPE", "MROPE-SECTIONS"),
         _PARTIAL_CONTIG, {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "contiguous sections [12, 18, 18] over rotary_dim 96 of 128, linear factor 2 (the MROPE-PARTIAL rule on "
         "Qwen2-VL's layout; transformers' Qwen2-VL apply has no pass-through)"),
    Case("mrope-qwen3-vl-longrope-vision", "mrope.apply", _SCALED + ("MROPE-INTERLEAVED",), _Q3_LONGROPE,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "longrope factor 4: max over the three axes 70054 > 32768 takes the long factors; "
         "attention factor sqrt(1 + ln 4 / ln 32768)"),
    Case("mrope-qwen3-vl-longrope-short-cos-sin", "mrope.cos_sin", _SCALED + ("MROPE-INTERLEAVED",), _Q3_LONGROPE,
         {"position_ids": _thw([(0, 0, 0), (0, 5, 13), (7, 13, 5), (4095, 4096, 4097)])},
         "longrope below the original context (max 4097 < 32768): the short factors"),
    Case("mrope-qwen2-vl-yarn-fields-grid-cos-sin", "mrope.cos_sin", _SCALED + ("MROPE-SECTIONS",), _Q2_YARN_FIELDS,
         {"position_ids": _GRID}, "yarn factor 8 / original 4096, beta_fast 16, beta_slow 2, truncate false, "
         "attention factor get_mscale(8, 1) / get_mscale(8, 0.5)"),
)

# ---- interleaved pairing and ERNIE's hw_alternating layout (MROPE-PAIR-INTERLEAVED,
# MROPE-HW-ALTERNATING; spec 0.4.0) -----------------------------------------------------------------
# GLM-4.1V (published config: head_dim 128 = 4096 / 32, partial_rotary_factor 0.5, mrope_section
# [8, 12, 12], theta 10000; Glm4vTextRotaryEmbedding's default section); HunYuan-V4-VL (HYV4VLTextConfig:
# head_dim 64, theta 10000, interleaved sections [12, 10, 10]); ERNIE 4.5-VL (Ernie4_5_VLMoeTextConfig:
# 2560 / 20 = 128, theta 500000, sections [h, w, t] = [22, 22, 20], i.e. (t, h, w) = (20, 22, 22)).
_GLM4V = MRopeParams(head_dim=128, rotary_dim=64, rope_theta=10000.0, mrope_section=(8, 12, 12), layout="contiguous",
                     pairing="interleaved")
_HYV4 = MRopeParams(head_dim=64, rope_theta=10000.0, mrope_section=(12, 10, 10), layout="interleaved",
                    pairing="interleaved")
_ERNIE = MRopeParams(head_dim=128, rope_theta=500000.0, mrope_section=(20, 22, 22), layout="hw_alternating",
                     pairing="interleaved")
_FIG_HW = MRopeParams(head_dim=16, rope_theta=10000.0, mrope_section=(2, 3, 3), layout="hw_alternating")
_FIG_PAIR = _FIG2.model_copy(update={"pairing": "interleaved"})
add_cases(
    Case("mrope-ernie-figure-d16", "mrope.cos_sin", ("MROPE-HW-ALTERNATING",), _FIG_HW,
         {"position_ids": _thw([(4, 1, 2)])},
         "d 16, section (t, h, w) = (2, 3, 3), (t, h, w) = (4, 1, 2): position multipliers [1, 2, 1, 2, 1, 2, 4, 4]"),
    Case("mrope-interleaved-pairs-figure-apply", "mrope.apply", ("MROPE-PAIR-INTERLEAVED", "MROPE-SECTIONS"), _FIG_PAIR,
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _thw([(4, 1, 2)])},
         "the Qwen2-VL figure on adjacent pairs (0, 1), ..., (14, 15), x = 0..15"),
    Case("mrope-glm4v-vision", "mrope.apply", ("MROPE-PAIR-INTERLEAVED", "MROPE-SECTIONS", "MROPE-PARTIAL"), _GLM4V,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "GLM-4.1V: 64 of 128 dims rotate in adjacent pairs, contiguous sections [8, 12, 12]; image and video rows"),
    Case("mrope-glm4v-text", "mrope.apply", ("MROPE-TEXT-REDUCES", "MROPE-PAIR-INTERLEAVED", "MROPE-SECTIONS",
                                             "MROPE-PARTIAL"), _GLM4V,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _TEXT_POS},
         "GLM-4.1V text tokens up to 131071: 1-D interleaved RoPE over 64 dims"),
    Case("mrope-hunyuan-v4-vl-vision", "mrope.apply", ("MROPE-PAIR-INTERLEAVED", "MROPE-INTERLEAVED"), _HYV4,
         {"q": Gen((2, 4, 7, 64)), "k": Gen((2, 1, 7, 64)), "position_ids": _VISION},
         "HunYuan-V4-VL: interleaved sections [12, 10, 10] on adjacent pairs"),
    Case("mrope-ernie-4.5-vl-vision", "mrope.apply", ("MROPE-HW-ALTERNATING", "MROPE-PAIR-INTERLEAVED"), _ERNIE,
         {"q": Gen((2, 4, 7, 128)), "k": Gen((2, 1, 7, 128)), "position_ids": _VISION},
         "ERNIE 4.5-VL: height and width in turn over 44 frequencies, then 20 temporal; adjacent pairs"),
    Case("mrope-ernie-4.5-vl-grid-cos-sin", "mrope.cos_sin", ("MROPE-HW-ALTERNATING",), _ERNIE,
         {"position_ids": _GRID}, "ERNIE 4.5-VL's recomposed angles, t, h, w up to 131071"),
)

# The yarn fields at a second set of values (the coverage rule: two values, one not a default).
_Q3_YARN_FIELDS = MRopeParams(head_dim=64, rope_theta=5000000.0, mrope_section=(12, 10, 10), layout="interleaved",
                              rope_type="yarn", factor=4.0, original_max_position_embeddings=8192, beta_fast=24.0,
                              beta_slow=0.5, mscale=0.8, mscale_all_dim=1.2, truncate=True)
add_cases(
    Case("mrope-qwen3-vl-yarn-fields-grid-cos-sin", "mrope.cos_sin", _SCALED + ("MROPE-INTERLEAVED",), _Q3_YARN_FIELDS,
         {"position_ids": _GRID}, "yarn factor 4 / original 8192, beta_fast 24, beta_slow 0.5, truncate true, "
         "attention factor get_mscale(4, 0.8) / get_mscale(4, 1.2)"),
)


# the call forms of mrope.apply that keep each token's positions (ROPE-CALL-FORM): tokens, token-major, int32, in place,
# strided
layout_forms("mrope.apply")

"""The M-RoPE family (MROPE-*): references and error scales of mrope.cos_sin and mrope.apply,
the mutants of its divergences and its golden cases; the math is :mod:`posenc.reference.mrope`."""

from __future__ import annotations

import numpy as np

from posenc.conformance.cases import Case, Gen, arange_x
from posenc.reference import mrope, rope
from posenc.spec.models import MRopeParams
from posenc.spec.registry import model_params

from . import add_cases, mutant, reference
from ._common import Outputs
from .rope import _pair_scales, exponent_amplification

def mrope_outputs(op, p, x, axis_positions=None) -> Outputs:
    """Outputs of an M-RoPE op; ``axis_positions`` (``[B, T, D/2]``) replaces the recomposed
    per-frequency positions (mutants)."""
    ap = mrope.axis_positions(x["position_ids"], p) if axis_positions is None else axis_positions
    phi = np.asarray(ap, np.float64) * mrope.inv_freq(p)
    c, s = np.cos(phi), np.sin(phi)
    if op == "mrope.cos_sin":
        return {"cos": c, "sin": s}
    return {n: rope.apply_with_cos_sin(x[n], c, s, p.head_dim, "half") for n in ("q", "k")}


def _mrope_scales_for(op):
    def f(p, x):
        w = mrope.inv_freq(p)
        phi = np.abs(mrope.angles(x["position_ids"], p)) * exponent_amplification(w, p.rope_theta, p.head_dim)
        if op == "mrope.cos_sin":
            sc = (np.ones_like(phi), phi)
            return {"cos": sc, "sin": sc}
        return {n: _pair_scales(x[n], 1.0, phi[:, None], p.head_dim, "half") for n in ("q", "k")}
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
    return _mrope_with_axes(op, p, x, [0] * (p.head_dim // 2))


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

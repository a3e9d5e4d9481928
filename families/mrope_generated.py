"""Generated-case strategies of the M-RoPE family: head and rotary widths, sections split any
way the layout allows (contiguous Qwen2-VL, interleaved Qwen3-VL, ERNIE's hw_alternating), both
pairings (GLM-4V's interleaved), every rope_type M-RoPE
accepts with its scaling fields, an optional attention factor, and three independent position
axes anywhere up to 2^17."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import MRopeParams, mrope_axes

from . import generator, spec
from .rope_scaling_generated import scaling_fields

M = "MRopeParams"
SCALED = {"linear", "dynamic", "yarn", "llama3", "longrope"}


def _sections(draw, half: int, layout: str) -> tuple[int, int, int]:
    if layout == "hw_alternating":  # equal height and width sections (MROPE-HW-ALTERNATING)
        s = draw(st.integers(0, half // 2))
        return (half - 2 * s, s, s)
    for _ in range(20):
        s1 = draw(st.integers(0, (half + 1) // 3 if layout == "interleaved" else half))
        s2 = draw(st.integers(0, min(half // 3 if layout == "interleaved" else half, half - s1)))
        sec = (half - s1 - s2, s1, s2)
        axes = mrope_axes(half, sec, layout)
        if tuple(axes.count(a) for a in range(3)) == sec:
            return sec
    return (half, 0, 0)


def mrope_params(draw) -> MRopeParams:
    head = g.size(draw, M, "head_dim", hi=128)
    rotary = None if draw(st.booleans()) else g.size(draw, M, "rotary_dim", hi=head)
    r = rotary or head
    layout = g.field(draw, M, "layout")
    rt = draw(st.sampled_from(g.domain(spec(), M, "rope_type").values))
    if rt == "dynamic" and r <= 2:
        rt = "default"
    fields = {k: v for k, v in scaling_fields(draw, rt, r // 2).items() if k in MRopeParams.model_fields}
    af = None if draw(st.integers(0, 2)) else g.field(draw, M, "attention_factor")
    return MRopeParams(head_dim=head, rotary_dim=rotary, rope_theta=g.field(draw, M, "rope_theta"),
                       mrope_section=_sections(draw, r // 2, layout), layout=layout,
                       pairing=g.field(draw, M, "pairing"), rope_type=rt,
                       **{**fields, "attention_factor": af})


def clauses(p: MRopeParams) -> list[str]:
    cl = [{"interleaved": "MROPE-INTERLEAVED", "hw_alternating": "MROPE-HW-ALTERNATING"}.get(p.layout, "MROPE-SECTIONS")]
    if p.pairing == "interleaved":
        cl.append("MROPE-PAIR-INTERLEAVED")
    if p.rotary_dim is not None and p.rotary_dim < p.head_dim:
        cl.append("MROPE-PARTIAL")
    if p.rope_type in SCALED:
        cl.append("MROPE-ROPE-TYPE")
    if p.attention_factor is not None or p.rope_type in ("yarn", "longrope"):
        cl.append("MROPE-ATTENTION-SCALING")
    return cl


def _positions(draw, b: int, t: int) -> np.ndarray:
    if draw(st.booleans()):  # text tokens: t = h = w
        row = g.positions(draw, b, t, g.MAX_POSITION, far=g.LONG_POSITION)
        return np.stack([row, row, row])
    return np.stack([g.positions(draw, b, t, g.MAX_POSITION, far=g.LONG_POSITION) for _ in range(3)])


@generator("mrope.cos_sin")
def gen_cos_sin(draw):
    p = mrope_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    return g.case("mrope.cos_sin", p, {"position_ids": _positions(draw, b, t)},
                  [c for c in clauses(p) if c != "MROPE-PAIR-INTERLEAVED"])  # cos/sin do not depend on the pairing


@generator("mrope.apply")
def gen_apply(draw):
    p = mrope_params(draw)
    b, hq, hk, t = g.shape(draw, (1, 2), (1, 2, 4), (1, 2), (1, 3, 5))
    x = {"q": g.values((b, hq, t, p.head_dim)), "k": g.values((b, hk, t, p.head_dim)), "position_ids": _positions(draw, b, t)}
    return g.case("mrope.apply", p, x, clauses(p))

"""Generated-case strategies of the axial RoPE family: two or three axes, every layout and
frequency rule, either axis order, the default or a narrower axis width (a pass-through tail),
and independent coordinates on each axis anywhere up to 2^17."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.conformance import generated as g
from posenc.spec.models import AxialRopeParams

from . import generator

M = "AxialRopeParams"


def axial_params(draw) -> AxialRopeParams:
    A = g.field(draw, M, "num_axes")
    head = g.size(draw, M, "head_dim", lo=4 * A, hi=128)
    default = 2 * (head // (2 * A))
    ad = None if draw(st.booleans()) else draw(st.sampled_from(sorted({2, max(2, default - 2), default})))
    order = tuple(draw(st.permutations(range(A)))) if draw(st.booleans()) else None
    return AxialRopeParams(head_dim=head, rope_theta=g.field(draw, M, "rope_theta"), num_axes=A, axis_dim=ad,
                           frequencies=g.field(draw, M, "frequencies"), layout=g.field(draw, M, "layout"),
                           axis_order=order)


def clauses(p: AxialRopeParams, op: str) -> list[str]:
    cl = ["AXIAL-FREQUENCIES-ALTERNATING" if p.frequencies == "alternating" else "AXIAL-FREQUENCIES"]
    layout = {"split": "AXIAL-SPLIT", "blocks": "AXIAL-BLOCKS", "interleaved": "AXIAL-INTERLEAVED",
              "alternate": "AXIAL-ALTERNATE"}[p.layout]
    if op == "axial.apply" or p.layout != "blocks":
        cl.append(layout)
    else:
        cl.append("AXIAL-SPLIT")  # blocks' per-pair angles are the split layout's
    if p.order != tuple(range(p.num_axes)):
        cl.append("AXIAL-AXIS-ORDER")
    if op == "axial.apply" and p.rdim < p.head_dim:
        cl.append("AXIAL-PARTIAL")
    return cl


def _positions(draw, A: int, b: int, t: int) -> np.ndarray:
    return np.stack([g.positions(draw, b, t, g.MAX_POSITION) for _ in range(A)])


@generator("axial.cos_sin")
def gen_cos_sin(draw):
    p = axial_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    return g.case("axial.cos_sin", p, {"position_ids": _positions(draw, p.num_axes, b, t)}, clauses(p, "axial.cos_sin"))


@generator("axial.apply")
def gen_apply(draw):
    p = axial_params(draw)
    b, hq, hk, t = g.shape(draw, (1, 2), (1, 2, 4), (1, 2), (1, 3, 5))
    x = {"q": g.values((b, hq, t, p.head_dim)), "k": g.values((b, hk, t, p.head_dim)),
         "position_ids": _positions(draw, p.num_axes, b, t)}
    return g.case("axial.apply", p, x, clauses(p, "axial.apply"))

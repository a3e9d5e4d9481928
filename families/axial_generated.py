"""Generated-case strategies of the axial RoPE family: two or three axes, every layout and
frequency rule, either axis order, the default or a narrower axis width (a pass-through tail),
index coordinates (independent on each axis, anywhere up to 2^17) or centred ones (patch indices
of a drawn grid: its first patches row by row, scattered, or on its edges)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import AxialRopeParams

from . import generator
from .axial import axial_clauses

M = "AxialRopeParams"


def axial_params(draw) -> AxialRopeParams:
    A = g.field(draw, M, "num_axes")
    head = g.size(draw, M, "head_dim", lo=4 * A, hi=128)
    default = 2 * (head // (2 * A))
    ad = None if draw(st.booleans()) else draw(st.sampled_from(sorted({2, max(2, default - 2), default})))
    order = tuple(draw(st.permutations(range(A)))) if draw(st.booleans()) else None
    coords = g.field(draw, M, "coordinates")
    grid = tuple(g.size(draw, M, "grid_size") for _ in range(A)) if coords == "centred" else None
    return AxialRopeParams(head_dim=head, rope_theta=g.field(draw, M, "rope_theta"), num_axes=A, axis_dim=ad,
                           frequencies=g.field(draw, M, "frequencies"), layout=g.field(draw, M, "layout"),
                           axis_order=order, coordinates=coords, grid_size=grid)


def clauses(p: AxialRopeParams, op: str) -> list[str]:
    cl = ["AXIAL-FREQUENCIES-ALTERNATING" if p.frequencies == "alternating" else "AXIAL-FREQUENCIES"]
    layout = {"split": "AXIAL-SPLIT", "blocks": "AXIAL-BLOCKS", "interleaved": "AXIAL-INTERLEAVED",
              "alternate": "AXIAL-ALTERNATE"}[p.layout]
    if op == "axial.apply" or p.layout != "blocks":
        cl.append(layout)
    else:
        cl.append("AXIAL-SPLIT")  # blocks' per-pair angles are the split layout's
    cl += axial_clauses(p, op)
    if op == "axial.apply" and p.rdim < p.head_dim:
        cl.append("AXIAL-PARTIAL")
    if p.coordinates == "centred":
        cl.append("AXIAL-COORDINATES-CENTRED")
    return cl


def _grid_positions(draw, grid: tuple[int, ...], b: int, t: int) -> np.ndarray:
    """``[A, b, t]`` patch indices of ``grid``, per row: its first t patches row by row (wrapping),
    scattered, or on the grid's edges (0 or the last index of each axis)."""
    rows = []
    for _ in range(b):
        kind = draw(st.sampled_from(["grid", "scattered", "edges"]))
        if kind == "grid":
            flat = np.arange(t) % int(np.prod(grid))
            row = np.stack(np.unravel_index(flat, grid))
        elif kind == "scattered":
            row = np.asarray([[draw(st.integers(0, n - 1)) for _ in range(t)] for n in grid])
        else:
            row = np.asarray([[(n - 1) * draw(st.integers(0, 1)) for _ in range(t)] for n in grid])
        rows.append(row)
    return np.stack(rows, axis=1).astype(np.int64)


def _positions(draw, p: AxialRopeParams, b: int, t: int) -> np.ndarray:
    if p.coordinates == "centred":
        return _grid_positions(draw, p.grid_size, b, t)
    return np.stack([g.positions(draw, b, t, g.MAX_POSITION) for _ in range(p.num_axes)])


@generator("axial.cos_sin")
def gen_cos_sin(draw):
    p = axial_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    return g.case("axial.cos_sin", p, {"position_ids": _positions(draw, p, b, t)}, clauses(p, "axial.cos_sin"))


@generator("axial.apply")
def gen_apply(draw):
    p = axial_params(draw)
    b, hq, hk, t = g.shape(draw, (1, 2), (1, 2, 4), (1, 2), (1, 3, 5))
    x = {"q": g.values((b, hq, t, p.head_dim)), "k": g.values((b, hk, t, p.head_dim)),
         "position_ids": _positions(draw, p, b, t)}
    return g.case("axial.apply", p, x, clauses(p, "axial.apply"))

"""Inference models of the axial family (``axial.*``): the coordinates off by a constant on every
axis, or on one axis only (a grid's rows counted from 1, the columns right)."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext

#: The axial family's operations (spec/axial.yaml).
AXIAL_OPS = ("axial.cos_sin", "axial.apply")


def _shifted(position_ids, axis, k: int) -> np.ndarray:
    """``[A, B, T]`` coordinates shifted by ``k`` on ``axis`` (None: every axis)."""
    out = np.array(position_ids, copy=True)
    if axis is None:
        out += k
    else:
        out[axis] += k
    return out


@families.inference(*AXIAL_OPS)
def axial_models(ctx: InferenceContext) -> list[Candidate]:
    """AXIAL-*: the coordinates the implementation used, shifted on every axis or on one."""
    pid = np.asarray(ctx.x["position_ids"])
    cands: list[Candidate] = []
    for k in SHIFTS:
        cands.append((f"coordinates are the specified ones {k:+d} on every axis",
                      lambda k=k: ctx.ref(inputs={**ctx.x, "position_ids": _shifted(pid, None, k)})))
    for k in SHIFTS:
        for a in range(pid.shape[0]) if pid.shape[0] > 1 else ():
            cands.append((f"axis {a}'s coordinates are the specified ones {k:+d} (the other axes right)",
                          lambda a=a, k=k: ctx.ref(inputs={**ctx.x, "position_ids": _shifted(pid, a, k)})))
    return cands

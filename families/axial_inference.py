"""Inference models of the axial family (``axial.*``): the coordinates off by a constant on every
axis, or on one axis only (a grid's rows counted from 1, the columns right)."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.families.rope_inference import axis_shift_models
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext

#: The axial family's operations (spec/axial.yaml).
AXIAL_OPS = ("axial.cos_sin", "axial.apply")


@families.inference(*AXIAL_OPS)
def axial_models(ctx: InferenceContext) -> list[Candidate]:
    """AXIAL-*: the coordinates the implementation used, shifted on every axis or on one."""
    pid = np.asarray(ctx.x["position_ids"])
    cands: list[Candidate] = [(f"coordinates are the specified ones {k:+d} on every axis",
                               lambda k=k: ctx.ref(inputs={**ctx.x, "position_ids": pid + k})) for k in SHIFTS]
    if pid.shape[0] > 1:
        cands += axis_shift_models(ctx, lambda a, k: f"axis {a}'s coordinates are the specified ones {k:+d} "
                                   "(the other axes right)")
    return cands

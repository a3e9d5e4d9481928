"""Inference models of the position-id family (``position_ids.*``): positions off by a constant."""

from __future__ import annotations

from posenc import families
from posenc.harness.checks import Candidate, InferenceContext, int_models


@families.inference("position_ids.prefill", "position_ids.decode", "position_ids.left_pad", "position_ids.packed")
def position_models(ctx: InferenceContext) -> list[Candidate]:
    """POS-*: integer positions off by a constant."""
    return int_models(ctx)

"""Inference models of the sinusoidal family (``sinusoidal.*``): the table rows of other positions,
integer positions off by a constant."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext, int_models, shift_sentence

#: The sinusoidal family's operations (spec/sinusoidal.yaml).
SINUSOIDAL_OPS = ("sinusoidal.table", "sinusoidal.fairseq_positions", "sinusoidal.fairseq")


@families.inference(*SINUSOIDAL_OPS)
def sinusoidal_models(ctx: InferenceContext) -> list[Candidate]:
    """SIN-*: integer outputs off by a constant; the table rows of other positions."""
    cands = int_models(ctx)
    key = next((k for k in ("position_ids", "cache_length") if k in ctx.x), None)
    if key is not None and ctx.op != "sinusoidal.fairseq_positions":
        for k in SHIFTS:
            cands.append((shift_sentence(k, "the sinusoid table is"),
                          lambda k=k: ctx.ref(inputs={**ctx.x, key: np.asarray(ctx.x[key]) + k})))
    return cands

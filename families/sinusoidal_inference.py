"""Inference models of the sinusoidal family (``sinusoidal.*``): the table rows of other positions,
integer positions off by a constant, the angles computed in a half dtype from a float32 frequency
buffer cast once."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext, int_models, shift_sentence
from posenc.reference import sinusoidal
from posenc.reference.rounding import round_to_dtype

from ._common import LOWER_HALF_DTYPES
from .sinusoidal import _column_inv_freq, _pe_from_angles

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
    if ctx.op == "sinusoidal.table":
        cands += _buffer_cast_once(ctx)
    return cands


def _buffer_cast_once(ctx: InferenceContext) -> list[Candidate]:
    """SIN-PRECISION: the frequencies computed in float32 (or better), held in a buffer a ``.to(dtype)``
    cast, the positions and the angle product in that half dtype (x-transformers'
    ScaledSinusoidalEmbedding: ``einsum(pos, inv_freq)`` after ``.to(bf16)``); reproduced exactly,
    where the catalogue's DIV-SIN-COMPUTE-DTYPE rounds the exponent and the base too."""
    def table(h: str):
        with np.errstate(over="ignore", invalid="ignore"):
            pos = round_to_dtype(np.asarray(ctx.x["position_ids"], np.float64), h)
            phi = round_to_dtype(pos[..., None] * round_to_dtype(_column_inv_freq(ctx.p), h), h)
        return {"pe": _pe_from_angles(ctx.p, phi, ctx.x["position_ids"], "float64")}
    sinusoidal.check_width(ctx.p)
    return [(f"the angles computed in {h} from frequencies held in {h}: round(round(p) * round(inv_freq)), "
             f"inv_freq computed in float32 and cast once (the spec requires float32 angles at every dtype)",
             lambda h=h: table(h)) for h in LOWER_HALF_DTYPES.get(ctx.dtype, ())]

"""Inference models of the learned-table family (``learned.*``): rows, positions and offsets off by a
constant (OPT's offset 2 applied twice or not at all), the position table read rows later or earlier."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext, int_models, shift_sentence

#: The learned family's operations (spec/learned.yaml).
LEARNED_OPS = ("learned.lookup", "learned.gpt2", "learned.bert", "learned.roberta_positions", "learned.roberta",
               "learned.bart_embeddings", "learned.opt_positions", "learned.opt_rows", "learned.opt_embeddings")
#: The inputs that are a position table.
_TABLES = ("wpe", "position_embeddings", "table")


def _opt_offset(d: int) -> str:
    return {2: " (OPT's offset 2 applied twice?)", -2: " (OPT's offset 2 not applied?)"}.get(d, "")


def _opt_twice(ctx: InferenceContext, k: int) -> str:
    return " (OPT offset applied twice?)" if "opt" in ctx.op and k == 2 else ""


@families.inference(*LEARNED_OPS)
def learned_models(ctx: InferenceContext) -> list[Candidate]:
    """LEARNED-*: integer outputs off by a constant; the rows of the position table read ``k`` too
    late or too early."""
    cands = int_models(ctx, _opt_offset if ctx.op == "learned.opt_rows" else None)
    for n in [n for n in _TABLES if n in ctx.x and np.ndim(ctx.x[n]) == 2][:1]:
        t = np.asarray(ctx.x[n], float)
        for k in SHIFTS:
            cands.append((shift_sentence(k, f"the position table {n!r} is", _opt_twice(ctx, k)),
                          lambda k=k: ctx.ref(inputs={**ctx.x, n: np.roll(t, -k, axis=0)})))
    return cands

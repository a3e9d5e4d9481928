"""Generated-case strategies of the sinusoidal family: every variant and layout, widths odd and
even (the degenerate widths raise their named error in the reference and are not drawn), bases
from the declared domain, positions anywhere in a long table, fairseq ids with pads and a cache."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import SinusoidalParams

from . import branch, generator

M = "SinusoidalParams"
CLAUSE = {("vaswani", "interleaved"): "SIN-VASWANI-INTERLEAVED", ("vaswani", "concat"): "SIN-VASWANI-CONCAT",
          ("t2t", "concat"): "SIN-T2T", ("fairseq", "concat"): "SIN-FAIRSEQ-POSITIONS",
          ("whisper", "concat"): "SIN-WHISPER"}


def sin_params(draw, variant=None) -> SinusoidalParams:
    v = variant or g.field(draw, M, "variant")
    layout = g.field(draw, M, "layout") if v == "vaswani" else "concat"
    dim = g.size(draw, M, "dim", lo=1 if v in ("vaswani", "t2t") else 4, hi=256)
    if v == "whisper" and dim % 2:
        dim += 1
    pad = g.field(draw, M, "padding_idx") if v == "fairseq" else None
    return SinusoidalParams(dim=dim, layout=layout, base=g.field(draw, M, "base"), variant=v, padding_idx=pad)


def clauses(p: SinusoidalParams) -> list[str]:
    return [CLAUSE[(p.variant, p.layout)], "SIN-PRECISION"]


@generator("sinusoidal.table")
def gen_table(draw):
    p = sin_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    return g.case("sinusoidal.table", p, {"position_ids": g.positions(draw, b, t, 8192)}, clauses(p))


def _fairseq_inputs(draw, p: SinusoidalParams) -> dict:
    b, t = g.shape(draw, (1, 2, 3), (1, 4, 6))
    m = g.mask(draw, b, t)
    ids = np.where(m == 1, np.asarray([[draw(st.integers(0, 50)) for _ in range(t)] for _ in range(b)]), p.padding_idx)
    ids = np.where((ids == p.padding_idx) & (m == 1), p.padding_idx + 1, ids)
    return {"input_ids": ids.astype(np.int64), "cache_length": draw(st.sampled_from([0, 0, 3, 200]))}


@generator("sinusoidal.fairseq_positions")
def gen_fairseq_positions(draw):
    p = sin_params(draw, "fairseq")
    return g.case("sinusoidal.fairseq_positions", p, _fairseq_inputs(draw, p), ["SIN-FAIRSEQ-POSITIONS"])


@generator("sinusoidal.fairseq")
def gen_fairseq(draw):
    p = sin_params(draw, "fairseq")
    return g.case("sinusoidal.fairseq", p, _fairseq_inputs(draw, p), ["SIN-FAIRSEQ-POSITIONS", "SIN-T2T"])


@branch("SIN-T2T", "odd-width")
def _odd(p, x):
    return p.dim % 2 == 1

"""Generated-case strategies of the sinusoidal family: every variant and layout, widths odd and
even (the degenerate widths raise their named error in the reference and are not drawn), bases
from the declared domain, both orders, both angle units and scales from the declared domain (spec
0.5.0), positions anywhere in a long table, fairseq ids with pads and a cache."""

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


def with_options(draw, p: SinusoidalParams) -> SinusoidalParams:
    """``p`` with the options of spec 0.5.0, each at every declared value: ``order`` (both, for a
    [sin | cos] layout; interleaved is sin first), ``units`` (both), ``scale`` (1, or log-uniform in its
    domain); a non-default value in about a third to a half of the draws, so a wrapper that serves only
    the defaults still gets examples.  Drawn last, after the case's inputs."""
    order = g.field(draw, M, "order") if p.layout == "concat" else "sin_first"
    units = g.field(draw, M, "units") if draw(st.integers(0, 2)) == 0 else "radians"
    scale = g.field(draw, M, "scale") if draw(st.integers(0, 2)) == 0 else 1.0
    return SinusoidalParams(**{**p.model_dump(), "order": order, "units": units, "scale": scale})


def clauses(p: SinusoidalParams) -> list[str]:
    return [CLAUSE[(p.variant, p.layout)], "SIN-PRECISION"]  # g.case adds the options' clauses (exercised)


@generator("sinusoidal.table")
def gen_table(draw):
    p = sin_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    x = {"position_ids": g.positions(draw, b, t, 8192)}
    p = with_options(draw, p)
    return g.case("sinusoidal.table", p, x, clauses(p))


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
    x = _fairseq_inputs(draw, p)
    p = with_options(draw, p)  # the options leave the rows alone: sinusoidal.fairseq_positions draws none
    return g.case("sinusoidal.fairseq", p, x, ["SIN-FAIRSEQ-POSITIONS", "SIN-T2T"])


@branch("SIN-T2T", "odd-width")
def _odd(p, x):
    return p.dim % 2 == 1


@branch("SIN-ORDER-COS-FIRST", "odd-width")
def _odd_cos_first(p, x):
    return p.dim % 2 == 1

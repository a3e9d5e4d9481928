"""Generated-case strategies of the T5 family: bucket counts odd and even, distances from the
declared domain, both directions, relative positions across the exact / log / clamp ranges,
biases after a cache."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import T5Params

from . import branch, generator

M = "T5Params"


def t5_params(draw) -> T5Params:
    bidi = g.field(draw, M, "bidirectional")
    nb = g.field(draw, M, "num_buckets", lo=4 if bidi else 2, hi=128)
    exact = (nb // 2 if bidi else nb) // 2
    md = g.field(draw, M, "max_distance", lo=exact + 1)
    return T5Params(num_buckets=nb, max_distance=md, bidirectional=bidi)


def _clause(p: T5Params) -> str:
    return "T5-BUCKET-BIDIRECTIONAL" if p.bidirectional else "T5-BUCKET-CAUSAL"


@generator("t5.buckets")
def gen_buckets(draw):
    p = t5_params(draw)
    span = 2 * p.max_distance + 8
    row = [draw(st.integers(-span, span)) for _ in range(draw(st.sampled_from([3, 7])))]
    if draw(st.integers(0, 3)) == 0:  # one case in four also a long distance (2**20 .. int32's largest), either side
        row.append(draw(st.sampled_from([1, -1])) * draw(st.sampled_from([2**20, 2**20 + 1, 2**24, 2**31 - 1])))
    rel = np.asarray([row], np.int64)
    return g.case("t5.buckets", p, {"relative_position": rel}, [_clause(p)])


@generator("t5.bias")
def gen_bias(draw):
    p = t5_params(draw)
    heads = draw(st.sampled_from([1, 3, 8]))
    tq = draw(st.sampled_from([1, 2, 5]))
    cache = draw(st.sampled_from([0, 0, 4, 300]))
    x = {"table": g.values((p.num_buckets, heads)), "query_length": tq, "key_length": cache + tq, "cache_length": cache}
    return g.case("t5.bias", p, x, ["T5-BIAS", _clause(p)])


def _relative(p, x):
    if "relative_position" in x:
        return np.asarray(x["relative_position"])
    from posenc.reference.t5 import relative_positions
    return relative_positions(int(x["query_length"]), int(x["key_length"]), int(x["cache_length"]))


def _distance(p, x):
    rel = _relative(p, x)
    n = np.abs(rel) if p.bidirectional else np.maximum(-rel, 0)
    nb = p.num_buckets // 2 if p.bidirectional else p.num_buckets
    return n, nb // 2


def _branches(clause: str, bidirectional: bool) -> None:
    @branch(clause, "log-range")
    def _log_range(p, x):
        if p.bidirectional != bidirectional:
            return None
        n, exact = _distance(p, x)
        return bool((n >= exact).any())

    @branch(clause, "clamped")
    def _clamped(p, x):
        if p.bidirectional != bidirectional:
            return None
        n, _ = _distance(p, x)
        return bool((n >= p.max_distance).any())


_branches("T5-BUCKET-BIDIRECTIONAL", True)
_branches("T5-BUCKET-CAUSAL", False)

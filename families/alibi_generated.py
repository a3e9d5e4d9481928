"""Generated-case strategies of the ALiBi family: head counts that are and are not powers of two
(1 .. 128), alibi_bias_max from its domain, every form, queries after a cache, padded masks."""

from __future__ import annotations

from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import AlibiParams

from . import branch, generator

M = "AlibiParams"
CLAUSE = {"causal": "ALIBI-CAUSAL", "symmetric": "ALIBI-SYMMETRIC", "bloom": "ALIBI-BLOOM", "mpt": "ALIBI-MPT"}


def alibi_params(draw) -> AlibiParams:
    heads = draw(st.one_of(st.sampled_from([1, 2, 8, 16, 32, 64, 128]), st.integers(1, 128)))
    form = g.field(draw, M, "form")
    bias_max = g.field(draw, M, "alibi_bias_max") if draw(st.booleans()) else 8.0
    return AlibiParams(num_heads=heads, alibi_bias_max=bias_max, form=form)


@generator("alibi.slopes")
def gen_slopes(draw):
    return g.case("alibi.slopes", alibi_params(draw), {}, ["ALIBI-SLOPES"])


@generator("alibi.bias")
def gen_bias(draw):
    p = alibi_params(draw)
    tq = draw(st.sampled_from([1, 3, 5]))
    cache = draw(st.sampled_from([0, 0, 2, 9]))
    if p.form == "bloom":
        x = {"attention_mask": g.mask(draw, draw(st.sampled_from([1, 2])), cache + tq), "query_length": tq}
    else:
        x = {"query_length": tq, "key_length": cache + tq}
    return g.case("alibi.bias", p, x, [CLAUSE[p.form], "ALIBI-SLOPES", "ALIBI-ROW-CONSTANT"])


@branch("ALIBI-SLOPES", "power-of-two-heads")
def _pow2(p, x):
    return p.num_heads & (p.num_heads - 1) == 0

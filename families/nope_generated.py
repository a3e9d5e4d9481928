"""Generated-case strategies of the NoPE family: layer counts, per-layer flags or the interval
rule, layer indices on both sides of a NoPE layer, q / k of random shapes."""

from __future__ import annotations

from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import NopeParams

from . import generator

M = "NopeParams"


def nope_params(draw) -> NopeParams:
    n = g.field(draw, M, "num_hidden_layers", hi=48)
    if draw(st.booleans()):
        return NopeParams(num_hidden_layers=n, no_rope_layers=tuple(draw(st.integers(0, 1)) for _ in range(n)))
    return NopeParams(num_hidden_layers=n, no_rope_layer_interval=g.field(draw, M, "no_rope_layer_interval"))


@generator("nope.layer_flags")
def gen_flags(draw):
    return g.case("nope.layer_flags", nope_params(draw), {}, ["NOPE-LAYER-FLAGS"])


@generator("nope.apply")
def gen_apply(draw):
    p = nope_params(draw)
    from posenc.reference.nope import layer_flags
    nope_layers = [i for i, f in enumerate(layer_flags(p)) if f == 0]
    if not nope_layers:  # the operation is defined on NoPE layers only: make one
        flags = [1] * p.num_hidden_layers
        flags[draw(st.integers(0, p.num_hidden_layers - 1))] = 0
        p = NopeParams(num_hidden_layers=p.num_hidden_layers, no_rope_layers=tuple(flags))
        nope_layers = [flags.index(0)]
    b, h, t, d = g.shape(draw, (1, 2), (1, 2), (1, 3), (8, 16))
    x = {"q": g.values((b, h, t, d)), "k": g.values((b, 1, t, d)), "position_ids": g.positions(draw, b, t, 4096),
         "layer_idx": draw(st.sampled_from(nope_layers))}
    return g.case("nope.apply", p, x, ["NOPE-IDENTITY", "NOPE-LAYER-FLAGS"])

"""Generated-case strategies of the per-layer-type RoPE family: layer patterns of any length and
mix, both thetas and the full-attention factor anywhere in their domains, one type without RoPE,
both pairings, any layer of the pattern."""

from __future__ import annotations

from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import LayerRopeParams

from . import generator

M = "LayerRopeParams"
_TYPES = ("full_attention", "sliding_attention")


@generator("layers.apply")
def gen_apply(draw):
    n = draw(st.integers(1, 12))
    types = tuple(draw(st.sampled_from(_TYPES)) for _ in range(n))
    nope = draw(st.sampled_from((None, None, "full_attention", "sliding_attention")))
    full = None if nope == "full_attention" else g.field(draw, M, "full_rope_theta")
    sliding = None if nope == "sliding_attention" else g.field(draw, M, "sliding_rope_theta")
    factor = 1.0 if full is None or draw(st.booleans()) else g.field(draw, M, "full_factor")
    d = g.size(draw, M, "head_dim", hi=64)
    d += d % 2
    p = LayerRopeParams(head_dim=d, layer_types=types, full_rope_theta=full, full_factor=factor,
                        sliding_rope_theta=sliding, pairing=g.field(draw, M, "pairing"))
    layer = draw(st.integers(0, n - 1))
    b, h, t = g.shape(draw, (1, 2), (1, 2), (1, 3, 5))
    x = {"q": g.values((b, h, t, d)), "k": g.values((b, 1, t, d)), "position_ids": g.positions(draw, b, t, 2 ** 17),
         "layer_idx": layer}
    clause = "LAYERS-NO-ROPE" if p.set_for(layer) is None else "LAYERS-SETS"
    return g.case("layers.apply", p, x, [clause])

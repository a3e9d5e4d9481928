"""Generated-case strategies of the query-scaling family: both forms, beta and the scale length
anywhere in their domains, rows at independent positions up to 2^20."""

from __future__ import annotations

from posenc.harness import generators as g
from posenc.spec.models import QueryScaleParams

from . import generator

M = "QueryScaleParams"


@generator("query_scale.apply")
def gen_apply(draw):
    p = QueryScaleParams(form=g.field(draw, M, "form"), beta=g.field(draw, M, "beta"),
                         scale_length=g.field(draw, M, "scale_length"))
    b, h, t = g.shape(draw, (1, 2, 3), (1, 2), (1, 3, 5))
    d = g.size(draw, "RopeParams", "head_dim", hi=64)
    x = {"q": g.values((b, h, t, d)), "position_ids": g.positions(draw, b, t, 2 ** 20)}
    cl = ["QSCALE-LLAMA4" if p.form == "llama4" else "QSCALE-MISTRAL", ]
    return g.case("query_scale.apply", p, x, cl)

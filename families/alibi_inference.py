"""Inference models of the ALiBi family (``alibi.*``): the per-head slopes fitted from the bias, as a
ratio of the specified ones, the slopes of another head count, or another ``alibi_bias_max``."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import Candidate, InferenceContext, sig
from posenc.reference import alibi
from posenc.spec.models import AlibiParams


@families.inference("alibi.slopes", "alibi.bias")
def alibi_models(ctx: InferenceContext) -> list[Candidate]:
    """ALIBI-SLOPES: per-head slopes (fitted from the bias), as a ratio, another head count or bias max."""
    p = ctx.p
    m_ref = alibi.slopes(p)
    if ctx.op == "alibi.slopes":
        m, ref_bias = ctx.out["slopes"].astype(float), None
    else:
        ref_bias = ctx.g.outputs["bias"]
        shape = [1] * ref_bias.ndim
        shape[-3] = p.num_heads
        D = ref_bias / m_ref.reshape(shape)
        cm = np.broadcast_to(np.asarray(ctx.g.outputs.get("bias.compared", True), bool), D.shape)
        axes = tuple(i for i in range(D.ndim) if i != D.ndim - 3)
        y = ctx.out["bias"].astype(float)
        m = (np.where(cm, y * D, 0).sum(axes)) / np.where(cm, D * D, 0).sum(axes)

    def implied(slopes):
        return {"slopes": np.asarray(slopes, float)} if ref_bias is None else \
            {"bias": ref_bias / m_ref.reshape(shape) * np.asarray(slopes).reshape(shape)}
    cands: list[Candidate] = []
    r = m / m_ref
    if np.ptp(r) < 1e-3 * abs(r).max():
        cands.append((f"slopes are the specified ones × {sig(float(np.median(r)))}",
                      lambda: implied(m_ref * float(np.median(r)))))
    for n in (n for n in range(1, max(4 * p.num_heads, 64) + 1) if n != p.num_heads):
        mn = alibi.slopes(AlibiParams(num_heads=n, alibi_bias_max=p.alibi_bias_max))
        if np.allclose(mn[:p.num_heads], m[:n], rtol=1e-3):  # fewer heads: the rest as specified
            full = np.concatenate([mn, m_ref[n:]])[:p.num_heads]
            cands.append((f"slopes of {n} heads used for {p.num_heads}", lambda full=full: implied(full)))
    e, er = -np.log2(m), -np.log2(m_ref)
    if (m > 0).all() and np.ptp(e / er) < 1e-3:
        bmax = p.alibi_bias_max * float(np.median(e / er))
        cands.append((f"alibi_bias_max {sig(bmax)} where {sig(p.alibi_bias_max)} is specified",
                      lambda: implied(np.exp2(-er * bmax / p.alibi_bias_max))))
    return cands

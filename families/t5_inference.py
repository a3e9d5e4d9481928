"""Inference models of the T5 family (``t5.*``): the bucket each slot used against the specified ones
(offset, direction flipped, causal for bidirectional, relative positions off by a constant)."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext
from posenc.reference import t5


@families.inference("t5.buckets", "t5.bias")
def t5_models(ctx: InferenceContext) -> list[Candidate]:
    """T5-BUCKET-* / T5-BIAS: the bucket each slot used, against the specified buckets."""
    p, x = ctx.p, ctx.x
    if ctx.op == "t5.buckets":
        rel, used, table = np.asarray(x["relative_position"]), ctx.out["buckets"].astype(np.int64), None
    else:
        q, k, cl = (int(x[n]) for n in ("query_length", "key_length", "cache_length"))
        rel = t5.relative_positions(q, k, cl)
        table = np.asarray(x["table"], float)  # [NB, H]
        y = ctx.out["bias"].astype(float)  # [H, Tq, Tk]
        yf = y.reshape(y.shape[0], -1)  # nearest table row per slot, |t|^2 - 2 t.y: [NB, Tq*Tk] in memory
        used = np.argmin((table ** 2).sum(1)[:, None] - 2 * table @ yf, axis=0).reshape(y.shape[1:])
    spec = t5.buckets(rel, p)

    def implied(b):
        if table is None:
            return {"buckets": b}
        if b.min() < 0 or b.max() >= table.shape[0]:
            return None
        return {"bias": np.transpose(table[b], (2, 0, 1))}
    cands: list[Candidate] = []
    d = (used - spec)[used != spec]
    if d.size:
        c = int(np.median(d))
        capped = np.clip(spec + c, 0, p.num_buckets - 1)
        cands.append((f"buckets are the specified ones {int(c):+d} everywhere", lambda: implied(spec + c)))
        cands.append((f"buckets are the specified ones {int(c):+d} (kept within 0..{p.num_buckets - 1})",
                       lambda: implied(capped)))
    cands.append(("the relative position's direction is flipped (query - key instead of key - query)",
                  lambda: implied(t5.buckets(-rel, p))))
    other = "causal" if p.bidirectional else "bidirectional"
    cands.append((f"{other} buckets where {'bidirectional' if p.bidirectional else 'causal'} are specified",
                  lambda: implied(t5.buckets(rel, p.model_copy(update={"bidirectional": not p.bidirectional})))))
    for k in SHIFTS:
        cands.append((f"relative positions off by {int(k):+d} (key - query {int(k):+d}: a cache length "
                      f"off by {int(-k):+d}?)", lambda k=k: implied(t5.buckets(rel + k, p))))
    return cands

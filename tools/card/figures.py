"""A card's figures, computed by the float64 reference: RoPE's wavelengths, turns and end angles at
the contexts (scaled and unscaled), learned tables' sizes and rows, T5's bucket ranges.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from posenc.tools.card.model import (
    BucketRange,
    EndAngle,
    LearnedTable,
    Llama3Band,
    PairRow,
    RopeFigures,
    TurnCount,
    YarnRamp,
)

_FAMILY = {"RopeParams": "rope", "MRopeParams": "mrope", "AxialRopeParams": "axial", "AlibiParams": "alibi",
           "T5Params": "t5", "SinusoidalParams": "sinusoidal", "NopeParams": "nope", "QueryScaleParams": "query_scale",
           "GPT2EmbeddingParams": "learned", "BertEmbeddingParams": "learned", "OPTEmbeddingParams": "learned",
           "RobertaEmbeddingParams": "learned", "BartEmbeddingParams": "learned", "LookupParams": "learned"}


def _unscaled(p):
    """The same RoPE without its scaling (proportional keeps its pair layout, factor 1)."""
    from posenc.spec.models import RopeParams
    keep = {"head_dim": p.head_dim, "rotary_dim": p.rotary_dim, "partial_rotary_factor": p.partial_rotary_factor,
            "rope_theta": p.rope_theta, "pairing": p.pairing,
            "rotation": p.rotation}
    if p.rope_type == "proportional":
        keep["rope_type"] = "proportional"
    return RopeParams(**keep)


def _wavelengths(inv: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(inv > 0, 2 * math.pi / np.where(inv > 0, inv, 1.0), np.inf)


def _extended(p, context: Optional[int], original: Optional[int]) -> tuple[Optional[int], str]:
    """The context a scaled RoPE reaches: ``max(factor x original, context)`` for yarn, llama3
    and longrope (the config's max_position_embeddings where it is the larger), factor x
    max_position_embeddings for dynamic; ``(None, why)`` where neither is known (linear: no
    original context in its parameters)."""
    f = getattr(p, "factor", None)
    mpe = getattr(p, "max_position_embeddings", None)
    def times(x, n):  # an int, or the float itself where it is beyond any bound (no overflow)
        y = float(x) * float(n)
        return int(round(y)) if math.isfinite(y) and y < 1e30 else y

    if p.rope_type == "dynamic" and f and mpe:
        return times(f, mpe), f"factor {f:g} x max_position_embeddings {mpe:,}"
    if p.rope_type in ("yarn", "llama3", "longrope") and original:
        cands = []
        if f:
            cands.append((times(f, original), f"factor {f:g} x original {original:,}"))
        for n, src in ((context, "the context"), (mpe, "max_position_embeddings")):
            if n:
                cands.append((n, src))
        n, src = max(cands, key=lambda c: c[0]) if cands else (None, "")
        return n, src
    if p.rope_type == "linear":
        return None, "linear scaling states no original context: the extended context is not derived"
    return None, ""


def _rope_figures(p, context: Optional[int], context_source: str) -> RopeFigures:
    from posenc.reference import rope as rref
    from posenc.reference import rope_scaling as rs
    base = _unscaled(p)
    scaled = p.rope_type not in ("default",) and not (p.rope_type == "proportional" and not p.factor)
    original = getattr(p, "original_max_position_embeddings", None)
    extended, ext_src = _extended(p, context, original) if scaled else (None, "")
    seq_len = None
    if p.rope_type == "dynamic":  # the frequencies at the longest length the card considers
        seq_len = max(context or 0, extended or 0)
    elif p.rope_type == "longrope":
        seq_len = context or p.max_position_embeddings or p.original_max_position_embeddings
    inv0, _ = rref.inv_freq(base, seq_len)
    inv1, af = rref.inv_freq(p, seq_len)
    wl0, wl1 = _wavelengths(inv0), _wavelengths(inv1)
    pairs = [PairRow(i, float(inv0[i]), float(wl0[i]), float(inv1[i]), float(wl1[i])) for i in range(len(inv0))]
    lengths = []
    if context:
        lengths.append(("context (= original)" if context == original else "context", context))
    if original and original != context:
        lengths.append(("original context", original))
    if extended and extended not in (context, original):
        lengths.append(("extended context", extended))
    turns = [TurnCount(label, n, int(np.sum(wl0 > n)), int(np.sum(wl1 > n)),
                       tuple(int(i) for i in np.nonzero(wl0 > n)[0]), tuple(int(i) for i in np.nonzero(wl1 > n)[0]))
             for label, n in lengths]
    rotating = [i for i in range(len(inv0)) if inv0[i] > 0] or [0]
    slow = rotating[-1]
    ends = []
    for label, n in lengths:
        pos = np.asarray([[n - 1]], dtype=np.int64)
        a0 = rref.angles(pos, base)[0, 0]  # ROPE-ANGLE: position x inv_freq
        if p.rope_type == "dynamic":  # at the card's seq_len (the call's longest position), not at n
            pos = np.asarray([[n - 1, seq_len - 1]], dtype=np.int64)
        a1 = rref.angles(pos, p)[0, 0]
        ends.append(EndAngle(label, n - 1, float(a0[0]), float(a0[slow]), float(a1[0]), float(a1[slow])))
    fig = RopeFigures(p.rope_type, p.rdim, pairs, scaled, seq_len, float(af), context, context_source, original,
                      turns, ends, extended_context=extended, extended_source=ext_src)
    if p.rope_type == "yarn":
        low, high = rs.yarn_correction_range(p)
        raw_low, raw_high = rs.yarn_correction_range(p.model_copy(update={"truncate": False}))
        idx = np.arange(len(inv0))
        hi = high + 0.001 if low == high else high  # the reference's own guard (rope_scaling.yarn)
        kept = tuple(int(i) for i in idx[idx <= low])
        divided = tuple(int(i) for i in idx[idx >= hi])
        blended = tuple(int(i) for i in idx if low < i < hi)
        fig.yarn = YarnRamp(p.beta_fast or 32.0, p.beta_slow or 1.0, p.truncate is None or p.truncate, low, high,
                            raw_low, raw_high, kept, blended, divided, rs.yarn_factor(p))
    if p.rope_type == "llama3":
        L = p.original_max_position_embeddings
        low_wl, high_wl = L / p.low_freq_factor, L / p.high_freq_factor  # SCALE-LLAMA3's bounds
        kept = tuple(int(i) for i in np.nonzero(wl0 < high_wl)[0])
        divided = tuple(int(i) for i in np.nonzero(wl0 > low_wl)[0])
        band = tuple(int(i) for i in np.nonzero((wl0 >= high_wl) & (wl0 <= low_wl))[0])
        fig.llama3 = Llama3Band(low_wl, high_wl, kept, band, divided, p.factor)
    return fig


def _learned_tables(p) -> list[LearnedTable]:
    from posenc.reference import learned
    from posenc.reference import position_ids as posref
    name = type(p).__name__

    def covered(rows_of, n):  # positions 0..n-1 whose row (the reference's rule) lies in the table
        return int(np.sum(np.asarray(rows_of(n)).reshape(-1) < n))

    if name == "GPT2EmbeddingParams":
        n, d = p.n_positions, p.n_embd
        return [LearnedTable("wpe", n, d, n * d, covered(lambda k: posref.decode(1, k, 0), n),
                             "row = position (LEARNED-GPT2-POSITIONS)")]
    if name == "BertEmbeddingParams":
        n, d = p.max_position_embeddings, p.hidden_size
        return [LearnedTable("position_embeddings", n, d, n * d, covered(lambda k: posref.decode(1, k, 0), n),
                             "row = position"),
                LearnedTable("token_type_embeddings", p.type_vocab_size, d, p.type_vocab_size * d, None,
                             "not positional; summed with it (LEARNED-BERT-SUM)")]
    if name == "RobertaEmbeddingParams":
        n, d = p.max_position_embeddings, p.hidden_size
        ids = lambda k: learned.roberta_positions(np.full((1, k), p.padding_idx + 1), p.padding_idx)  # noqa: E731
        return [LearnedTable("position_embeddings", n, d, n * d, covered(ids, n),
                             f"rows start at padding_idx + 1 = {p.padding_idx + 1}; row {p.padding_idx} is the pad's"),
                LearnedTable("token_type_embeddings", p.type_vocab_size, d, p.type_vocab_size * d, None, "not positional")]
    if name == "OPTEmbeddingParams":
        n, d = p.num_rows, p.hidden_size
        return [LearnedTable("embed_positions", n, d, n * d,
                             covered(lambda k: learned.opt_rows(np.arange(k)), n),
                             f"max_position_embeddings {p.max_position_embeddings} + an offset of "
                             f"{learned.OPT_OFFSET} rows (row = position + {learned.OPT_OFFSET}, LEARNED-OPT-OFFSET)")]
    if name == "BartEmbeddingParams":
        n, d = p.num_rows, p.hidden_size
        return [LearnedTable("embed_positions", n, d, n * d, covered(lambda k: learned.bart_rows(1, k), n),
                             f"max_position_embeddings {p.max_position_embeddings} + an offset of "
                             f"{learned.BART_OFFSET} rows (LEARNED-BART-POSITIONS)")]
    if name == "LookupParams":
        return [LearnedTable("table", p.num_rows, p.dim, p.num_rows * p.dim, p.num_rows, "row = position")]
    return []


def _t5_buckets(p) -> list[BucketRange]:
    from posenc.reference import t5
    R = 4 * p.max_distance
    rel = np.arange(-R, R + 1)
    b = t5.buckets(rel, p)
    nb = p.num_buckets // 2 if p.bidirectional else p.num_buckets
    exact = nb // 2
    order = np.argsort(b, kind="stable")  # one pass: each bucket's smallest and largest relative position
    bs, rs_ = b[order], rel[order]
    ks, starts = np.unique(bs, return_index=True)
    spans = dict(zip(ks.tolist(), zip(np.minimum.reduceat(rs_, starts).tolist(),
                                      np.maximum.reduceat(rs_, starts).tolist())))
    out = []
    for k in range(p.num_buckets):
        if k not in spans:
            out.append(BucketRange(k, None, None, False, "unused"))
            continue
        lo, hi = int(spans[k][0]), int(spans[k][1])
        kind = "exact" if (k % nb if p.bidirectional else k) < exact else "log"
        out.append(BucketRange(k, None if lo == -R else lo, None if hi == R else hi, True, kind))
    return out

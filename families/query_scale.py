"""The query-scaling family (QSCALE-*): the reference and error scales of query_scale.apply, the
mutants of its divergences and its golden cases; the math is :mod:`posenc.reference.query_scale`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.reference import query_scale
from posenc.spec.models import QueryScaleParams

from . import add_cases, case_clauses, mutant, reference


@case_clauses("query_scale")
def qscale_clauses(p, op: str) -> list[str]:
    """The clauses a query-scale case exercises beyond its own: the positions it is taken at."""
    return ["QSCALE-POSITIONS"]



def _scale_of(p, pid) -> np.ndarray:
    return query_scale.scale(pid, p)


def _apply(p, x, s=None):
    s = _scale_of(p, x["position_ids"]) if s is None else s
    return {"q": np.asarray(x["q"], np.float64) * s[:, None, :, None]}


def _scales(p, x):
    """|q s| (the product rounded once in the activation dtype; the factor computed at that dtype
    is within a few of its eps of s, counted by the dtype term's K).  A float32 factor at float64
    is not: that is DIV-QSCALE-F32-FACTOR (``qscale_f32_factor``), caught there."""
    y = np.abs(_apply(p, x)["q"])
    return {"q": (y, np.zeros_like(y))}


reference("query_scale.apply", scales=_scales)(lambda p, x: _apply(p, x))


@mutant("qscale_missing", "query_scale.apply")
def qscale_missing(op, p, x, dtype=None):
    """No scaling: q returned as is."""
    return {"q": np.asarray(x["q"], np.float64).copy()}


@mutant("qscale_row0_positions", "query_scale.apply")
def qscale_row0_positions(op, p, x, dtype=None):
    """Every row scaled with row 0's positions."""
    pid = np.asarray(x["position_ids"])
    if pid.shape[0] < 2:
        return None
    return _apply(p, x, _scale_of(p, np.broadcast_to(pid[:1], pid.shape).copy()))


@mutant("qscale_token_index", "query_scale.apply")
def qscale_token_index(op, p, x, dtype=None):
    """Every row scaled at its token indices arange(T) instead of its position ids."""
    pid = np.asarray(x["position_ids"])
    idx = np.broadcast_to(np.arange(pid.shape[1], dtype=np.int64), pid.shape).copy()
    if np.array_equal(idx, pid):
        return None
    return _apply(p, x, _scale_of(p, idx))


@mutant("qscale_no_floor", "query_scale.apply")
def qscale_no_floor(op, p, x, dtype=None):
    """``1 + beta ln(1 + p' / L)`` without the floor (p' = p, or p + 1 for Llama 4)."""
    pp = np.asarray(x["position_ids"], np.float64) + (1 if p.form == "llama4" else 0)
    return _apply(p, x, 1.0 + p.beta * np.log1p(pp / p.scale_length))


@mutant("qscale_rules_mixed", "query_scale.apply")
def qscale_rules_mixed(op, p, x, dtype=None):
    """The other form's rule (the + 1 added, or dropped)."""
    other = p.model_copy(update={"form": "llama4" if p.form == "mistral" else "mistral"})
    return _apply(p, x, _scale_of(other, x["position_ids"]))


@mutant("qscale_f32_factor", "query_scale.apply")
def qscale_f32_factor(op, p, x, dtype=None):
    """The factor computed in float32 (float32 division of the positions by L, floor and log), as
    transformers' get_llama_4_attn_scale does at any activation dtype."""
    pp = (np.asarray(x["position_ids"]) + (1 if p.form == "llama4" else 0)).astype(np.float32)
    s = np.float32(1) + np.float32(p.beta) * np.log1p(np.floor(pp / np.float32(p.scale_length)))
    return _apply(p, x, s.astype(np.float32).astype(np.float64))


# ---- golden cases ----------------------------------------------------------------------------
# Ministral 3 (Ministral3Config: llama_4_scaling_beta 0.1, original_max_position_embeddings 16384),
# Mistral 4 (Mistral4Config: 0.1, 8192), Llama 4 (Llama4TextConfig: attn_scale 0.1, floor_scale 8192):
# transformers 5.24 library defaults.  Rows at different positions (QSCALE-POSITIONS); positions on
# both sides of every step L - 1, L, 2L - 1, 2L, 3L.
_MINISTRAL = QueryScaleParams(form="mistral", beta=0.1, scale_length=16384)
_MISTRAL4 = QueryScaleParams(form="mistral", beta=0.1, scale_length=8192)
_LLAMA4 = QueryScaleParams(form="llama4", beta=0.1, scale_length=8192)
_STEPS = lambda L: pos([0, L // 2, L - 1, L, 2 * L - 1, 2 * L], [3 * L, 3 * L + 1, 7 * L - 1, 7 * L, 100 * L, 255 * L])  # noqa: E731
add_cases(
    Case("qscale-figure-mistral", "query_scale.apply", ("QSCALE-MISTRAL",), _MINISTRAL,
         {"q": np.ones((1, 1, 3, 2)), "position_ids": pos([16383, 16384, 49152])},
         "beta 0.1, L 16384: s = 1, 1 + 0.1 ln 2, 1 + 0.1 ln 4 on q = 1"),
    Case("qscale-figure-llama4", "query_scale.apply", ("QSCALE-LLAMA4",), _LLAMA4,
         {"q": np.ones((1, 1, 2, 2)), "position_ids": pos([8190, 8191])},
         "attn_scale 0.1, floor_scale 8192: s(8190) = 1, s(8191) = 1 + 0.1 ln 2"),
    Case("qscale-ministral3", "query_scale.apply", ("QSCALE-MISTRAL", "QSCALE-POSITIONS"), _MINISTRAL,
         {"q": Gen((2, 4, 6, 128)), "position_ids": _STEPS(16384)},
         "Ministral 3: both sides of each step, a second row deep in a 4M context"),
    Case("qscale-mistral4", "query_scale.apply", ("QSCALE-MISTRAL", "QSCALE-POSITIONS"), _MISTRAL4,
         {"q": Gen((2, 4, 6, 64)), "position_ids": _STEPS(8192)}, "Mistral 4: L 8192"),
    Case("qscale-llama4", "query_scale.apply", ("QSCALE-LLAMA4", "QSCALE-POSITIONS"), _LLAMA4,
         {"q": Gen((2, 4, 6, 128)), "position_ids": _STEPS(8192)}, "Llama 4 temperature tuning: the + 1 shifts each step"),
    # an L that is not a power of two, ratios beyond 255 (a uint8 or a cap of the ratio) and
    # positions beyond 2^22 (a clamped table)
    Case("qscale-mistral-far", "query_scale.apply", ("QSCALE-MISTRAL",), QueryScaleParams(beta=0.2, scale_length=3000),
         {"q": Gen((1, 2, 8, 16)), "position_ids": pos([2999, 3000, 767999, 768000, 900000, 5999999, 8388613, 11111111])},
         "beta 0.2, L 3000: floor(p / L) from 0 to 3703"),
    Case("qscale-llama4-other", "query_scale.apply", ("QSCALE-LLAMA4",), QueryScaleParams(form="llama4", beta=0.25,
                                                                                          scale_length=1000),
         {"q": Gen((1, 2, 6, 16)), "position_ids": pos([998, 999, 1998, 255999, 300000, 4999999])},
         "attn_scale 0.25, floor_scale 1000 (not Llama 4's defaults): floor((p + 1) / 1000)"),
    Case("qscale-mistral-decode", "query_scale.apply", ("QSCALE-MISTRAL", "QSCALE-POSITIONS"), _MINISTRAL,
         {"q": Gen((3, 4, 1, 64)), "position_ids": pos([16384], [49151], [16383])},
         "one-token decode steps (T = 1) at three rows' own positions"),
    Case("qscale-mistral-index-not-position", "query_scale.apply", ("QSCALE-POSITIONS", "QSCALE-MISTRAL"),
         QueryScaleParams(beta=0.5, scale_length=4),
         {"q": Gen((2, 2, 10, 8)), "position_ids": pos([0, 0, 0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 0, 1, 2, 3, 4, 5])},
         "L 4: a row left-padded by three and two packed documents; the token index is not the position"),
    Case("qscale-mistral-left-padded", "query_scale.apply", ("QSCALE-POSITIONS", "QSCALE-MISTRAL"),
         QueryScaleParams(form="mistral", beta=0.3, scale_length=16),
         {"q": Gen((3, 2, 5, 16)), "position_ids": pos([30, 31, 32, 33, 34], [1, 1, 1, 2, 3], [14, 15, 16, 17, 18])},
         "rows at their own positions (row 0 past two steps, a left-padded row, a row across a step): beta 0.3, "
         "L 16"),
)

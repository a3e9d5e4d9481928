"""The T5 family (T5-*): references and error scales of t5.buckets and t5.bias, the mutants of
its divergences and its golden cases; the math is :mod:`posenc.reference.t5`."""

from __future__ import annotations

import numpy as np

from posenc.conformance.cases import Case, Gen, pos
from posenc.reference import t5
from posenc.spec.registry import model_params

from . import add_cases, mutant, reference
from ._common import exact_scales, run, scalar

def _t5_buckets(p, x):
    return {"buckets": t5.buckets(x["relative_position"], p)}


def _t5_bias(p, x):
    return {"bias": t5.bias(x["table"], p, scalar(x, "query_length"), scalar(x, "key_length"), scalar(x, "cache_length"))}


def _t5_bias_scales(p, x):
    b = np.abs(_t5_bias(p, x)["bias"])  # a gather: only the table's rounding to the dtype
    return {"bias": (b, 0 * b)}


reference("t5.buckets", scales=exact_scales([]))(_t5_buckets)
reference("t5.bias", scales=_t5_bias_scales)(_t5_bias)


# ---- T5 (T5-*) --------------------------------------------------------------------------------


def _t5_with_buckets(op, p, x, bucket_fn):
    if op == "t5.buckets":
        return {"buckets": bucket_fn(np.asarray(x["relative_position"]))}
    rel = t5.relative_positions(int(x["query_length"]), int(x["key_length"]), int(x["cache_length"]))
    b = bucket_fn(rel)
    table = np.asarray(x["table"], np.float64)
    if b.min() < 0 or b.max() >= table.shape[0]:
        return None  # the wrong buckets index past the table: an implementation raises there
    return {"bias": np.transpose(table[b], (2, 0, 1))}


@mutant("t5_rel_sign_flipped", "t5.buckets", "t5.bias")
def t5_rel_sign_flipped(op, p, x, dtype=None):
    return _t5_with_buckets(op, p, x, lambda rel: t5.buckets(-rel, p))


@mutant("t5_no_halving", "t5.buckets", "t5.bias")
def t5_no_halving(op, p, x, dtype=None):
    """Bidirectional buckets with the full num_buckets: sign offset num_buckets, ranges unhalved."""
    if not p.bidirectional:
        return None

    def buckets(rel):
        rel = rel.astype(np.int64)
        nb = p.num_buckets
        n = np.abs(rel)
        e = nb // 2
        safe = np.maximum(n, e).astype(np.float64)
        large = np.minimum(e + np.trunc(np.log(safe / e) / np.log(p.max_distance / e) * (nb - e)).astype(np.int64),
                           nb - 1)
        return (rel > 0).astype(np.int64) * nb + np.where(n < e, n, large)
    return _t5_with_buckets(op, p, x, buckets)


@mutant("t5_cache_ignored", "t5.bias")
def t5_cache_ignored(op, p, x, dtype=None):
    return run(op, p, {**x, "cache_length": np.asarray(0)})


# ---- golden cases ----------------------------------------------------------------------------
# ---- T5 (T5-*) --------------------------------------------------------------------------------
_T5_FIG = pos([-200, -10, -1, 0, 1, 10, 200])
_T5_ENC = model_params("t5-base")  # t5-base: T5Config defaults, 12 heads
_T5_DEC = model_params("t5-base", bidirectional=False)
_T5_RANGE = np.arange(-200, 201, dtype=np.int64).reshape(1, 401)
add_cases(
    Case("t5-buckets-figures-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_FIG}, "rel -200, -10, -1, 0, 1, 10, 200 -> 15, 8, 1, 0, 17, 24, 31"),
    Case("t5-buckets-figures-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_FIG}, "rel -200, -10, -1, 0, 1, 10, 200 -> 31, 10, 1, 0, 0, 0, 0"),
    Case("t5-base-buckets-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_RANGE}, "every rel in [-200, 200]"),
    Case("t5-base-buckets-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_RANGE}, "every rel in [-200, 200]"),
    Case("t5-base-bias-encoder", "t5.bias", ("T5-BIAS", "T5-BUCKET-BIDIRECTIONAL"), _T5_ENC,
         {"table": Gen((32, 12)), "query_length": 6, "key_length": 6, "cache_length": 0},
         "t5-base encoder: table [32 buckets, 12 heads]"),
    Case("t5-base-bias-encoder-long", "t5.bias", ("T5-BIAS", "T5-BUCKET-BIDIRECTIONAL"), _T5_ENC,
         {"table": Gen((32, 12)), "query_length": 3, "key_length": 150, "cache_length": 70},
         "rel -72 .. 79 (queries offset by cache_length 70)"),
    Case("t5-base-bias-decoder", "t5.bias", ("T5-BIAS", "T5-BUCKET-CAUSAL"), _T5_DEC,
         {"table": Gen((32, 12)), "query_length": 5, "key_length": 140, "cache_length": 135},
         "t5-base decoder: 5 queries after 135 cached tokens; rel -139 .. 4"),
    Case("t5-base-bias-decoder-prefill", "t5.bias", ("T5-BIAS", "T5-BUCKET-CAUSAL"), _T5_DEC,
         {"table": Gen((32, 12)), "query_length": 7, "key_length": 7, "cache_length": 0},
         "decoder prefill: future keys read bucket 0"),
)

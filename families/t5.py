"""The T5 family (T5-*): references and error scales of t5.buckets and t5.bias, the mutants of
its divergences and its golden cases; the math is :mod:`posenc.reference.t5`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.reference import t5
from posenc.spec.models import T5Params
from posenc.spec.registry import model_params

from . import add_cases, mutant, reference
from ._common import exact_scales, run, scalar


def _t5_buckets(p, x):
    return {"buckets": t5.buckets(x["relative_position"], p)}


def _t5_bias(p, x):
    return {"bias": t5.bias(x["table"], p, scalar(x, "query_length"), scalar(x, "key_length"), scalar(x, "cache_length"))}


reference("t5.buckets", scales=exact_scales([]))(_t5_buckets)
reference("t5.bias", scales=exact_scales(["bias"]))(_t5_bias)  # a gather of the table: exact, as learned's


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


def _round_to(x, dtype):
    """``x`` (float32 arithmetic) rounded to the activation dtype, as float32."""
    from posenc.reference.rounding import bf16_round

    x = np.asarray(x, np.float32)
    if dtype == "bfloat16":
        return bf16_round(x).astype(np.float32)
    return x.astype(np.float16).astype(np.float32)


def buckets_in_dtype(rel, p, dtype):
    """The bucket rule with the log branch computed in ``dtype`` (``n.to(dtype) / E``, ``log``,
    ``/ ln(M / E)``, ``* (nb - E)``, each rounded to bfloat16 / float16, then truncated), as torch
    does when the relative positions are cast to the activation dtype instead of float32."""
    out, n, nb = t5.direction_split(rel, p)
    e = nb // 2
    x = _round_to(_round_to(n, dtype) / np.float32(e), dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = _round_to(np.log(x), dtype)
    x = _round_to(x / np.float32(np.log(p.max_distance / e)), dtype)
    x = _round_to(x * np.float32(nb - e), dtype)
    large = np.minimum(e + np.trunc(np.where(np.isfinite(x), x, 0.0)).astype(np.int64), nb - 1)
    return out + np.where(n < e, n, large)


@mutant("t5_log_in_dtype", "t5.bias")
def t5_log_in_dtype(op, p, x, dtype=None):
    """T5-BIAS with the buckets' log term computed in the activation dtype (bfloat16 / float16)."""
    if dtype not in ("bfloat16", "float16"):
        return None
    return _t5_with_buckets(op, p, x, lambda rel: buckets_in_dtype(rel, p, dtype))


@mutant("t5_cache_ignored", "t5.bias")
def t5_cache_ignored(op, p, x, dtype=None):
    return run(op, p, {**x, "cache_length": np.asarray(0)})


# ---- golden cases ----------------------------------------------------------------------------
# ---- T5 (T5-*) --------------------------------------------------------------------------------
_T5_FIG = pos([-200, -10, -1, 0, 1, 10, 200])
_T5_ENC = model_params("t5-base")  # t5-base: T5Config defaults, 12 heads
_T5_DEC = model_params("t5-base", bidirectional=False)
_T5_RANGE = np.arange(-200, 201, dtype=np.int64).reshape(1, 401)
_T5_LONG = pos([-(2**31 - 1), -2**24, -2**20 - 1, -2**20, 2**20, 2**20 + 1, 2**24, 2**31 - 1])
add_cases(
    Case("t5-buckets-figures-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_FIG}, "rel -200, -10, -1, 0, 1, 10, 200 -> 15, 8, 1, 0, 17, 24, 31"),
    Case("t5-buckets-figures-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_FIG}, "rel -200, -10, -1, 0, 1, 10, 200 -> 31, 10, 1, 0, 0, 0, 0"),
    Case("t5-base-buckets-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_RANGE}, "every rel in [-200, 200]"),
    Case("t5-base-buckets-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_RANGE}, "every rel in [-200, 200]"),
    Case("t5-buckets-long-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ENC,
         {"relative_position": _T5_LONG}, "distances +-2**20, +-2**24 and +-(2**31 - 1): the last bucket of each side, "
                                          "never a wrapped or NaN log"),
    Case("t5-buckets-long-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_DEC,
         {"relative_position": _T5_LONG}, "distances +-2**20, +-2**24 and +-(2**31 - 1): the last bucket for the "
                                          "past, 0 for the future"),
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

# ---- odd num_buckets (transformers floors the halving: num_buckets //= 2) ------------------------
# T5Attention._relative_position_bucket halves with a floor: 33 buckets give 16 per side (bucket
# 32 is never read); the causal rule uses all 31. max_distance 64 and 100 are not T5Config's 128.
_T5_ODD_ENC = T5Params(num_buckets=33, max_distance=128)
_T5_ODD_DEC = T5Params(num_buckets=31, max_distance=64, bidirectional=False)
add_cases(
    Case("t5-buckets-odd-33-bidirectional", "t5.buckets", ("T5-BUCKET-BIDIRECTIONAL",), _T5_ODD_ENC,
         {"relative_position": _T5_RANGE}, "33 buckets: 16 per side (floor), buckets 0 .. 31, 32 never read"),
    Case("t5-buckets-odd-31-causal", "t5.buckets", ("T5-BUCKET-CAUSAL",), _T5_ODD_DEC,
         {"relative_position": _T5_RANGE}, "31 causal buckets, max_distance 64: E = 15, buckets 0 .. 30"),
    Case("t5-bias-odd-33-encoder", "t5.bias", ("T5-BIAS", "T5-BUCKET-BIDIRECTIONAL"),
         T5Params(num_buckets=33, max_distance=100),
         {"table": Gen((33, 4)), "query_length": 3, "key_length": 120, "cache_length": 50},
         "table [33, 4] (row 32 unused), max_distance 100; rel -52 .. 69"),
    Case("t5-bias-odd-31-decoder", "t5.bias", ("T5-BIAS", "T5-BUCKET-CAUSAL"), _T5_ODD_DEC,
         {"table": Gen((31, 4)), "query_length": 2, "key_length": 90, "cache_length": 88},
         "31 causal buckets after 88 cached tokens; rel -89 .. 1"),
)

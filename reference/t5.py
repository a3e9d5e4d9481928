"""T5 relative position buckets and bias, NumPy reference (clauses T5-*).

Shapes and dtypes: ``relative_position`` int ``[...]`` (key position minus query position) ->
buckets int64 ``[...]``; bias float64 ``[H, Tq, Tk]`` from a table ``[num_buckets, H]``
(HF's ``nn.Embedding(num_buckets, n_heads)`` layout; T5X stores ``[H, num_buckets]``).

Primary sources: Raffel et al., "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer" (JMLR 2020) section 2.1; HF transformers 5.24
``models/t5/modeling_t5.py::T5Attention._relative_position_bucket, compute_bias``;
tensorflow/mesh ``mesh_tensorflow/transformer/transformer_layers.py::_relative_position_bucket``
(which takes ``n = -rel``); t5x ``t5x/examples/t5/layers.py::RelativePositionBiases``.
"""

from __future__ import annotations

import math

import numpy as np


def direction_split(relative_position, p):
    """``(offset, n, nb)`` of the bucket rule: bidirectional halves ``num_buckets`` with a floor,
    adds the half for ``rel > 0`` and takes ``n = |rel|``; causal keeps ``num_buckets`` and takes
    ``n = max(-rel, 0)``.  ``offset`` and ``n`` are int64 arrays of ``rel``'s shape."""
    rel = np.asarray(relative_position).astype(np.int64)
    nb = p.num_buckets
    if p.bidirectional:
        nb //= 2
        return (rel > 0).astype(np.int64) * nb, np.abs(rel), nb
    return np.zeros_like(rel), np.maximum(-rel, 0), nb


def buckets(relative_position, p) -> np.ndarray:
    """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL: int64 buckets of ``rel = key - query``.

    Bidirectional: ``num_buckets`` is halved with a floor (transformers 5.24
    ``models/t5/modeling_t5.py::T5Attention._relative_position_bucket``: ``num_buckets //= 2``
    under ``if bidirectional:``; 33 buckets give 16 per side and bucket 32 is never read) and
    ``rel > 0`` adds the half; ``n = |rel|``.
    Causal: ``n = max(-rel, 0)`` (future keys land in bucket 0).  Then with ``E = nb // 2``:
    ``n`` if ``n < E``, else ``min(E + trunc(ln(n / E) / ln(M / E) * (nb - E)), nb - 1)``.
    ``log(0)`` is never evaluated: the log branch sees ``max(n, E)``.  (32 buckets, 128 max
    distance, rel -200, -10, -1, 0, 1, 10, 200: bidirectional 15, 8, 1, 0, 17, 24, 31; causal
    31, 10, 1, 0, 0, 0, 0.)
    """
    out, n, nb = direction_split(relative_position, p)
    max_exact = nb // 2
    safe = np.maximum(n, max_exact).astype(np.float64)  # never log(0)
    large = max_exact + np.trunc(
        np.log(safe / max_exact) / math.log(p.max_distance / max_exact) * (nb - max_exact)).astype(np.int64)
    large = np.minimum(large, nb - 1)
    return out + np.where(n < max_exact, n, large)


def relative_positions(query_length: int, key_length: int, cache_length: int = 0) -> np.ndarray:
    """int64 ``[Tq, Tk]``: ``j - (i + cache_length)`` (queries offset by the cache, T5-BIAS)."""
    if query_length < 0 or key_length < 0 or cache_length < 0:
        raise ValueError(f"T5-BIAS: lengths must be >= 0, got {query_length}, {key_length}, {cache_length}")
    ctx = np.arange(query_length, dtype=np.int64)[:, None] + int(cache_length)
    mem = np.arange(key_length, dtype=np.int64)[None, :]
    return mem - ctx


def bias(table, p, query_length: int, key_length: int, cache_length: int = 0) -> np.ndarray:
    """T5-BIAS: ``bias[h, i, j] = table[bucket(j - (i + cache_length)), h]``, float64 ``[H, Tq, Tk]``.

    ``table`` ``[num_buckets, H]``; raises ``ValueError`` if its first axis is not num_buckets.
    """
    t = np.asarray(table, np.float64)
    if t.ndim != 2 or t.shape[0] != p.num_buckets:
        raise ValueError(f"T5-BIAS: table must be [num_buckets={p.num_buckets}, H], got {list(t.shape)}")
    b = buckets(relative_positions(query_length, key_length, cache_length), p)
    return np.transpose(t[b], (2, 0, 1))

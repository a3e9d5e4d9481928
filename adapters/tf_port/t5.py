"""T5 relative attention bias (T5-*): buckets and the bias read from the bucket table."""

from __future__ import annotations

import math

from ._common import F64, I64, KernelRunner, _gather, exact_div, tf


def _t5_buckets(relative_position, p):
    """T5-BUCKET-BIDIRECTIONAL / -CAUSAL: float64 log, never of 0, truncated toward zero."""
    rel = tf.cast(relative_position, I64)
    nb = p.num_buckets
    out = tf.zeros_like(rel)
    if p.bidirectional:
        nb //= 2
        out = out + tf.cast(rel > 0, I64) * nb
        n = tf.abs(rel)
    else:
        n = tf.maximum(-rel, 0)
    e = nb // 2
    safe = tf.cast(tf.maximum(n, e), F64)
    large = e + tf.cast(exact_div(tf.math.log(exact_div(safe, e)), math.log(p.max_distance / e)) * (nb - e), I64)
    large = tf.minimum(large, nb - 1)
    return out + tf.where(n < e, n, large)


def k_t5_buckets(relative_position, *, p):
    """T5-BUCKET-*: int64 buckets, the shape of ``relative_position`` (key minus query position)."""
    return _t5_buckets(relative_position, p)


def k_t5_bias_buckets(query_length, key_length, cache_length, *, p):
    """Buckets of ``key - (query + cache_length)``, ``[Tq, Tk]``."""
    ctx = tf.range(query_length, dtype=I64)[:, None] + cache_length
    mem = tf.range(key_length, dtype=I64)[None, :]
    return _t5_buckets(mem - ctx, p)


def k_t5_bias(table, buckets):
    """T5-BIAS: ``table[buckets]`` as ``[H, Tq, Tk]``."""
    return tf.transpose(_gather(table, buckets), [2, 0, 1])


class Ops(KernelRunner):
    """Adapter methods of the t5 family."""

    def t5_buckets(self, relative_position, params):
        return self.run(k_t5_buckets, relative_position, p=params)

    def t5_bias(self, params, weights, *, dtype, device):
        table = weights["table"]
        if table.shape.rank != 2 or table.shape[0] != params.num_buckets:
            raise ValueError(f"T5-BIAS: table must be [num_buckets={params.num_buckets}, H], "
                             f"got {table.shape.as_list()}")

        def call(query_length, key_length, cache_length=0):
            b = self.run(k_t5_bias_buckets, query_length, key_length, cache_length, device=device, p=params)
            return self._gather_checked(k_t5_bias, [(table, b)], table, b)
        return call

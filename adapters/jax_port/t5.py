"""T5 relative buckets and bias (T5-*): float64 logs with an exact division, host-checked buckets."""

from __future__ import annotations

import math

import jax.numpy as jnp

from ._common import check_rows, exact_div, jax_device, kernel, on_device


@kernel("params")
def t5_buckets(relative_position, params):
    """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL: float64 log, never of 0, truncated; always in
    ``[0, num_buckets)``."""
    rel = relative_position.astype(jnp.int64)
    nb = params.num_buckets
    out = jnp.zeros_like(rel)
    if params.bidirectional:
        nb //= 2
        out = out + (rel > 0).astype(jnp.int64) * nb
        n = jnp.abs(rel)
    else:
        n = jnp.maximum(-rel, 0)
    e = nb // 2
    safe = jnp.maximum(n, e).astype(jnp.float64)
    ratio = exact_div(jnp.log(exact_div(safe, e)), math.log(params.max_distance / e))
    large = e + jnp.trunc(ratio * (nb - e)).astype(jnp.int64)
    large = jnp.minimum(large, nb - 1)
    return out + jnp.where(n < e, n, large)


@kernel("params", "query_length", "key_length")
def t5_relative_buckets(cache_length, params, query_length, key_length):
    """T5-BIAS buckets of ``key position - query position``, queries at ``cache_length + arange(Tq)``."""
    ctx = jnp.arange(query_length, dtype=jnp.int64)[:, None] + cache_length
    mem = jnp.arange(key_length, dtype=jnp.int64)[None, :]
    return t5_buckets(mem - ctx, params)


@kernel()
def t5_gather(table, buckets):
    """T5-BIAS: ``table[bucket]`` as ``[H, Tq, Tk]`` (host-checked buckets)."""
    return jnp.transpose(jnp.take(table, buckets, axis=0), (2, 0, 1))


class Ops:
    """T5 operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def t5_buckets(self, relative_position, params):
        """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL."""
        return self.run(t5_buckets, relative_position, params=params)

    def t5_bias(self, params, weights, *, dtype, device):
        """T5-BIAS: ``table[bucket(j - i - cache_length)]`` ``[H, Tq, Tk]``; buckets range-checked on
        the host before the gather; ``cache_length`` is traced."""
        table = weights["table"]
        if table.ndim != 2 or table.shape[0] != params.num_buckets:
            raise ValueError(f"T5-BIAS: table must be [num_buckets={params.num_buckets}, H], got {list(table.shape)}")
        dev = jax_device(device)

        def call(query_length, key_length, cache_length=0):
            with on_device(dev):
                b = self.run(t5_relative_buckets, cache_length, params=params, query_length=query_length,
                             key_length=key_length)
            check_rows(b, table.shape[0])
            return self.run(t5_gather, table, b)
        return call

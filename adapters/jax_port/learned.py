"""Learned absolute embeddings (LEARNED-*): table lookups with host-checked rows (JAX gathers
clamp silently), GPT-2, BERT, RoBERTa, BART and OPT embeddings and positions."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..base import roberta_from_bert
from ._common import (
    _last_columns, arange_positions, check_rows, compute_dtype, kernel, on_device, padding_aware_positions)


@kernel()
def take(table, rows):
    """``table[rows]`` -- only ever called with host-checked rows."""
    return jnp.take(table, rows, axis=0)


@kernel()
def gpt2_sum(wte, wpe, input_ids, position_ids):
    """LEARNED-GPT2-*: ``wte[input_ids] + wpe[position_ids]`` in the table dtype (host-checked rows)."""
    return jnp.take(wte, input_ids, axis=0) + jnp.take(wpe, position_ids, axis=0)


@kernel("eps")
def bert_sum_norm(word, token_type, position, weight, bias, input_ids, token_type_ids, position_ids, eps):
    """LEARNED-BERT-*: word + token_type + position rows, LayerNorm over the last axis; summed and
    normalised in the compute dtype, rounded once (host-checked rows; token_type_ids None reads row 0)."""
    dt = word.dtype
    cd = compute_dtype(dt)
    if token_type_ids is None:
        token_type_ids = jnp.zeros_like(input_ids)
    x = (jnp.take(word, input_ids, axis=0).astype(cd) + jnp.take(token_type, token_type_ids, axis=0).astype(cd)
         + jnp.take(position, position_ids, axis=0).astype(cd))
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    y = (x - mu) * lax.rsqrt(var + jnp.asarray(eps, cd)) * weight.astype(cd) + bias.astype(cd)
    return y.astype(dt)


@kernel("seq_len")
def opt_positions(attention_mask, cache_length, seq_len):
    """LEARNED-OPT-POSITIONS: ``cumsum(mask) * mask - 1``, the last ``seq_len`` columns."""
    m = attention_mask.astype(jnp.int64)
    return lax.dynamic_slice_in_dim(jnp.cumsum(m, axis=-1) * m - 1, cache_length, seq_len, axis=1)


@kernel()
def opt_rows(positions):
    """LEARNED-OPT-OFFSET: table row = position + 2."""
    return positions + 2


class Ops:
    """Learned-embedding operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def lookup(self, table, rows):
        """LEARNED-ROW-RANGE: rows checked on the host, then ``table[rows]``."""
        check_rows(rows, table.shape[0])
        return self.run(take, table, rows)

    def _positions(self, input_ids, cache_length):
        B, T = input_ids.shape
        with on_device(next(iter(input_ids.devices()))):
            return self.run(arange_positions, cache_length, batch=B, seq_len=T)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-GPT2-*: ``wte[input_ids] + wpe[cache_length + arange(T)]`` (or given position_ids)."""
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                position_ids = self._positions(input_ids, cache_length)
            check_rows(input_ids, wte.shape[0])
            check_rows(position_ids, wpe.shape[0])
            return self.run(gpt2_sum, wte, wpe, input_ids, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            if position_ids is None:
                position_ids = self._positions(input_ids, cache_length)
            for rows, name in ((input_ids, "word_embeddings"), (token_type_ids, "token_type_embeddings"),
                               (position_ids, "position_embeddings")):
                if rows is not None:
                    check_rows(rows, w[name].shape[0])
            return self.run(bert_sum_norm, w["word_embeddings"], w["token_type_embeddings"],
                            w["position_embeddings"], w["layer_norm_weight"], w["layer_norm_bias"],
                            input_ids, token_type_ids, position_ids, eps=float(params.layer_norm_eps))
        return call

    def roberta_positions(self, input_ids, params, cache_length):
        """LEARNED-ROBERTA-POSITIONS: rows from padding_idx + 1; pads read padding_idx."""
        return self.run(padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        return roberta_from_bert(self, params, weights, dtype=dtype, device=device)

    def bart_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-BART-POSITIONS: rows ``cache_length + arange(T) + 2``; the mask is not read."""
        table = weights["table"]

        def call(input_ids, attention_mask=None, cache_length=0):
            return self.lookup(table, self.run(opt_rows, self._positions(input_ids, cache_length)))
        return call

    def opt_positions(self, attention_mask, cache_length):
        T = _last_columns(attention_mask, cache_length)
        return self.run(opt_positions, attention_mask, cache_length, seq_len=T)

    def opt_rows(self, positions):
        return self.run(opt_rows, positions)

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

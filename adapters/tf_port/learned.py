"""Learned position embeddings (LEARNED-*): range-checked lookup, GPT-2, BERT, RoBERTa, BART and
OPT embeddings and positions."""

from __future__ import annotations

from posenc.adapters.base import roberta_from_bert

from ._common import I64, KernelRunner, _gather, compute_dtype, k_arange_positions, k_padding_aware_positions, tf


def k_default_positions(input_ids, cache_length):
    """Learned embeddings' default positions ``cache_length + arange(T)``, ``[B, T]``."""
    s = tf.shape(input_ids, out_type=I64)
    return k_arange_positions(s[0], s[1], cache_length)


def k_zeros_like(x):
    """BERT's default token_type_ids: zeros shaped like ``input_ids``."""
    return tf.zeros_like(x)


def k_bart_rows(input_ids, cache_length):
    """LEARNED-BART-POSITIONS: rows ``cache_length + arange(T) + 2``; the mask is not read."""
    return k_default_positions(input_ids, cache_length) + 2


def k_opt_positions(attention_mask, cache_length):
    """LEARNED-OPT-POSITIONS: ``(cumsum(mask) * mask - 1)[:, cache_length:]``."""
    m = tf.cast(attention_mask, I64)
    return (tf.cumsum(m, axis=-1) * m - 1)[:, cache_length:]


def k_opt_rows(positions):
    """LEARNED-OPT-OFFSET: rows = positions + 2."""
    return tf.cast(positions, I64) + 2


def k_lookup(table, rows):
    """LEARNED-ROW-RANGE: ``table [N, E]`` rows ``[...]`` -> ``[..., E]`` in the table's dtype."""
    return _gather(table, rows)


def k_gpt2(wte, wpe, input_ids, position_ids):
    """LEARNED-GPT2-*: ``wte[input_ids] + wpe[position_ids]`` in the activation dtype."""
    return _gather(wte, input_ids) + _gather(wpe, position_ids)


def k_bert(word, pos_table, tt_table, ln_w, ln_b, input_ids, token_type_ids, position_ids, *, eps):
    """LEARNED-BERT-*: word + token_type + position (activation dtype), then LayerNorm computed in
    the compute dtype and rounded once."""
    x = _gather(word, input_ids) + _gather(tt_table, token_type_ids)
    x = x + _gather(pos_table, position_ids)
    cd = compute_dtype(x.dtype)
    xc = tf.cast(x, cd)
    mean, var = tf.nn.moments(xc, axes=[-1], keepdims=True)
    y = (xc - mean) * tf.math.rsqrt(var + tf.constant(eps, cd)) * tf.cast(ln_w, cd) + tf.cast(ln_b, cd)
    return tf.cast(y, x.dtype)


class Ops(KernelRunner):
    """Adapter methods of the learned family."""

    def lookup(self, table, rows):
        return self._gather_checked(k_lookup, [(table, rows)], table, rows)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                position_ids = self.run(k_default_positions, input_ids, cache_length)
            return self._gather_checked(k_gpt2, [(wte, input_ids), (wpe, position_ids)],
                                        wte, wpe, input_ids, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            if token_type_ids is None:
                token_type_ids = self.run(k_zeros_like, input_ids)
            if position_ids is None:
                position_ids = self.run(k_default_positions, input_ids, cache_length)
            tabs = (w["word_embeddings"], w["position_embeddings"], w["token_type_embeddings"])
            return self._gather_checked(
                k_bert, [(tabs[0], input_ids), (tabs[2], token_type_ids), (tabs[1], position_ids)],
                *tabs, w["layer_norm_weight"], w["layer_norm_bias"], input_ids, token_type_ids, position_ids,
                eps=float(params.layer_norm_eps))
        return call

    def roberta_positions(self, input_ids, params, cache_length):
        return self.run(k_padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        return roberta_from_bert(self, params, weights, dtype=dtype, device=device)

    def bart_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda input_ids, attention_mask=None, cache_length=0: self.lookup(
            table, self.run(k_bart_rows, input_ids, cache_length))

    def opt_positions(self, attention_mask, cache_length):
        return self.run(k_opt_positions, attention_mask, cache_length)

    def opt_rows(self, positions):
        return self.run(k_opt_rows, positions)

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

"""Learned absolute positions (LEARNED-*): the range-checked lookup and the GPT-2, BERT,
RoBERTa, BART and OPT embeddings and positions."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..base import roberta_from_bert

from ._common import check_rows, padding_aware_positions


class Ops:
    """Learned-embedding operations of the torch port."""

    # ---- learned -------------------------------------------------------------------------
    def roberta_positions(self, input_ids, params, cache_length):
        """LEARNED-ROBERTA-POSITIONS: rows from padding_idx + 1; pads read padding_idx."""
        return padding_aware_positions(input_ids, params.padding_idx, cache_length)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        return roberta_from_bert(self, params, weights, dtype=dtype, device=device)

    def bart_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-BART-POSITIONS: rows ``cache_length + arange(T) + 2``; the mask is not read."""
        table = weights["table"]

        def call(input_ids, attention_mask=None, cache_length=0):
            B, T = input_ids.shape
            rows = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T) + 2
            return self.lookup(table, rows)
        return call

    def lookup(self, table, rows):
        check_rows(rows, table.shape[0])
        return F.embedding(rows, table)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                B, T = input_ids.shape
                position_ids = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)
            return self.lookup(wte, input_ids) + self.lookup(wpe, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            B, T = input_ids.shape
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            if position_ids is None:
                position_ids = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)
            x = self.lookup(w["word_embeddings"], input_ids) + self.lookup(w["token_type_embeddings"], token_type_ids)
            x = x + self.lookup(w["position_embeddings"], position_ids)
            return F.layer_norm(x, (x.shape[-1],), w["layer_norm_weight"], w["layer_norm_bias"], params.layer_norm_eps)
        return call

    def opt_positions(self, attention_mask, cache_length):
        m = attention_mask.to(torch.int64)
        return (torch.cumsum(m, dim=-1) * m - 1)[:, cache_length:]

    def opt_rows(self, positions):
        return positions + 2

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

"""T5 relative position buckets and bias (T5-*) through ``T5Attention``."""

from __future__ import annotations

import torch
from transformers.models.t5 import modeling_t5 as hf_t5
from transformers.models.t5.configuration_t5 import T5Config

from ..torch_adapter import DTYPES


class Ops:
    """The T5 operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    @torch.no_grad()
    def t5_buckets(self, relative_position, params):
        """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL: ``T5Attention._relative_position_bucket``."""
        return hf_t5.T5Attention._relative_position_bucket(
            relative_position, bidirectional=params.bidirectional, num_buckets=params.num_buckets,
            max_distance=params.max_distance)

    def t5_bias(self, params, weights, *, dtype, device):
        """T5-BIAS: ``T5Attention.compute_bias`` of a layer-0 attention (``has_relative_attention_bias``)
        whose ``relative_attention_bias`` (``nn.Embedding(num_buckets, H)``) holds the table."""
        table = weights["table"]
        H = table.shape[1]
        cfg = T5Config(vocab_size=2, d_model=H, d_kv=1, d_ff=1, num_layers=1, num_heads=H,
                       relative_attention_num_buckets=params.num_buckets,
                       relative_attention_max_distance=params.max_distance, dropout_rate=0.0,
                       is_decoder=not params.bidirectional)
        attn = hf_t5.T5Attention(cfg, has_relative_attention_bias=True, layer_idx=0)
        attn = attn.to(device=device, dtype=DTYPES[dtype]).eval()
        with torch.no_grad():
            attn.relative_attention_bias.weight.copy_(table)

        @torch.no_grad()
        def call(query_length, key_length, cache_length=0):
            return attn.compute_bias(query_length, key_length, device=table.device, past_seen_tokens=cache_length)[0]
        return call

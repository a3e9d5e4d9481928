"""Learned position embeddings (LEARNED-*): GPT-2, BERT, RoBERTa, BART and OPT modules."""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, GPT2Config, GPT2Model, OPTConfig
from transformers.models.bart import modeling_bart as hf_bart
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.opt.modeling_opt import OPTDecoder, OPTLearnedPositionalEmbedding
from transformers.models.roberta import modeling_roberta as hf_roberta
from transformers.models.roberta.configuration_roberta import RobertaConfig

from posenc.spec.errors import AdapterError

from ..torch_adapter import DTYPES
from ._common import _filled_cache


def _bert_style_call(emb: nn.Module, weights: dict):
    """Copy the case's weights into a BERT-style embeddings module (``BertEmbeddings``,
    ``RobertaEmbeddings``) and return the adapter callable that runs its own forward."""
    with torch.no_grad():
        emb.word_embeddings.weight.copy_(weights["word_embeddings"])
        emb.position_embeddings.weight.copy_(weights["position_embeddings"])
        emb.token_type_embeddings.weight.copy_(weights["token_type_embeddings"])
        emb.LayerNorm.weight.copy_(weights["layer_norm_weight"])
        emb.LayerNorm.bias.copy_(weights["layer_norm_bias"])

    @torch.no_grad()
    def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
        return emb(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids,
                   cache_length=cache_length)
    return call


class Ops:
    """The learned-embedding operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    @torch.no_grad()
    def roberta_positions(self, input_ids, params, cache_length):
        """LEARNED-ROBERTA-POSITIONS: ``RobertaEmbeddings.create_position_ids_from_input_ids``."""
        return hf_roberta.RobertaEmbeddings.create_position_ids_from_input_ids(
            input_ids, params.padding_idx, cache_length)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-ROBERTA-POSITIONS (+ BERT's sum): ``RobertaEmbeddings`` (eval, dropout 0) with
        ``pad_token_id = padding_idx``; its forward derives the rows itself."""
        cfg = RobertaConfig(vocab_size=params.vocab_size, hidden_size=params.hidden_size,
                            max_position_embeddings=params.max_position_embeddings,
                            type_vocab_size=params.type_vocab_size, layer_norm_eps=params.layer_norm_eps,
                            pad_token_id=params.padding_idx, hidden_dropout_prob=0.0, num_hidden_layers=1,
                            num_attention_heads=1, bos_token_id=None, eos_token_id=None)
        emb = hf_roberta.RobertaEmbeddings(cfg).to(device=device, dtype=DTYPES[dtype]).eval()
        return _bert_style_call(emb, weights)

    def bart_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-BART-POSITIONS: ``BartLearnedPositionalEmbedding`` forward (offset 2); BART
        passes it no mask, so the attention_mask is not handed on."""
        emb = hf_bart.BartLearnedPositionalEmbedding(params.max_position_embeddings, params.hidden_size)
        emb = emb.to(device=device, dtype=DTYPES[dtype])
        with torch.no_grad():
            emb.weight.copy_(weights["table"])

        @torch.no_grad()
        def call(input_ids, attention_mask=None, cache_length=0):
            return emb(input_ids, cache_length=cache_length)
        return call

    @torch.no_grad()
    def lookup(self, table, rows):
        """LEARNED-ROW-RANGE: ``nn.Embedding``; out-of-range rows raise torch's IndexError."""
        return nn.Embedding.from_pretrained(table, freeze=True)(rows)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-GPT2-SUM, LEARNED-GPT2-POSITIONS through a one-layer ``GPT2Model``.

        The result is ``hidden_states[0]``, the input of the first block: ``wte[ids] +
        wpe[position_ids]`` after ``drop`` (p = 0, eval mode), no LayerNorm.  Default positions
        are the model's own; ``cache_length > 0`` passes a ``DynamicCache`` pre-filled with
        that many dummy entries so the model offsets them by ``cache.get_seq_length()``.
        """
        cfg = GPT2Config(vocab_size=params.vocab_size, n_positions=params.n_positions, n_embd=params.n_embd,
                         n_layer=1, n_head=1, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0,
                         bos_token_id=None, eos_token_id=None)
        model = GPT2Model(cfg).to(device=device, dtype=DTYPES[dtype]).eval()
        with torch.no_grad():
            model.wte.weight.copy_(weights["wte"])
            model.wpe.weight.copy_(weights["wpe"])

        @torch.no_grad()
        def call(input_ids, position_ids=None, cache_length=0):
            cache = _filled_cache(cfg, input_ids.shape[0], cache_length, cfg.n_head,
                                  cfg.n_embd // cfg.n_head, model.dtype, input_ids.device)
            out = model(input_ids=input_ids, position_ids=position_ids, cache=cache,
                        use_cache=cache is not None, output_hidden_states=True)
            return out.hidden_states[0]
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-BERT-SUM, -TOKEN-TYPE, -POSITIONS: ``BertEmbeddings`` (eval, dropout 0).

        ``token_type_ids`` / ``position_ids`` left ``None`` exercise BERT's own buffers;
        ``cache_length`` is BertEmbeddings.forward's own argument.
        """
        cfg = BertConfig(vocab_size=params.vocab_size, hidden_size=params.hidden_size,
                         max_position_embeddings=params.max_position_embeddings,
                         type_vocab_size=params.type_vocab_size, layer_norm_eps=params.layer_norm_eps,
                         hidden_dropout_prob=0.0, num_hidden_layers=1, num_attention_heads=1)
        emb = BertEmbeddings(cfg).to(device=device, dtype=DTYPES[dtype]).eval()
        return _bert_style_call(emb, weights)

    @torch.no_grad()
    def opt_positions(self, attention_mask, cache_length):
        """LEARNED-OPT-POSITIONS: the position ids ``OPTDecoder.forward`` computes itself.

        In 5.24 the decoder derives ``cumsum(mask) * mask - 1`` sliced after the cache length
        and hands them to ``embed_positions(..., position_ids=...)``; a forward pre-hook reads
        them there.  A one-layer decoder runs on dummy tokens with a ``DynamicCache``
        pre-filled with ``cache_length`` entries.
        """
        B, L = attention_mask.shape
        T = L - cache_length
        cfg = OPTConfig(vocab_size=2, hidden_size=4, ffn_dim=4, num_hidden_layers=1, num_attention_heads=1,
                        max_position_embeddings=max(L, 1), word_embed_proj_dim=4, dropout=0.0,
                        pad_token_id=None, bos_token_id=None, eos_token_id=None)
        dec = OPTDecoder(cfg).to(attention_mask.device).eval()
        seen = []
        hook = dec.embed_positions.register_forward_pre_hook(
            lambda mod, args, kwargs: seen.append(kwargs.get("position_ids")), with_kwargs=True)
        try:
            heads = cfg.num_attention_heads
            cache = _filled_cache(cfg, B, cache_length, heads, cfg.hidden_size // heads, dec.dtype,
                                  attention_mask.device)
            ids = torch.zeros(B, T, dtype=torch.long, device=attention_mask.device)
            dec(input_ids=ids, attention_mask=attention_mask, cache=cache, use_cache=cache is not None)
        finally:
            hook.remove()
        if len(seen) != 1 or seen[0] is None:
            raise AdapterError("hf-transformers: OPTDecoder did not pass position_ids to embed_positions")
        return seen[0]

    @torch.no_grad()
    def opt_rows(self, positions):
        """LEARNED-OPT-OFFSET: ``OPTLearnedPositionalEmbedding`` adds its own ``offset`` (2).

        The module is given a one-column float64 table whose row r holds r (exact), so its
        output *is* the row index HF looks up.  Rows below 0 raise torch's IndexError.
        """
        n = int(positions.max()) + 1 if positions.numel() else 1
        emb = OPTLearnedPositionalEmbedding(max(n, 1), 1).to(device=positions.device, dtype=torch.float64)
        emb.weight.copy_(torch.arange(emb.num_embeddings, dtype=torch.float64, device=positions.device)[:, None])
        return emb(None, position_ids=positions)[..., 0].to(torch.int64)

    def opt_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-OPT-POSITIONS + LEARNED-OPT-OFFSET: ``OPTLearnedPositionalEmbedding`` forward
        with its own default positions (``cumsum`` of the full mask, sliced after the cache)."""
        emb = OPTLearnedPositionalEmbedding(params.max_position_embeddings, params.hidden_size)
        emb = emb.to(device=device, dtype=DTYPES[dtype])
        with torch.no_grad():
            emb.weight.copy_(weights["table"])

        @torch.no_grad()
        def call(attention_mask, cache_length=0):
            return emb(attention_mask, cache_length)
        return call

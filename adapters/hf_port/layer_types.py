"""Per-layer-type RoPE (LAYERS-*) through transformers' own modules: Gemma 3 (both types with
RoPE, half pairing: ``Gemma3RotaryEmbedding(x, position_ids, layer_type)`` with the layer type
``Gemma3Attention`` reads from ``config.layer_types[layer_idx]``) and Cohere 2 (RoPE on the
sliding layers only, adjacent pairs: ``Cohere2Attention``'s ``sliding_window`` says whether the
layer rotates, ``Cohere2RotaryEmbedding`` and its ``apply_rotary_pos_emb``)."""

from __future__ import annotations

import torch
from transformers import Cohere2Config, Gemma3TextConfig
from transformers.models.cohere2 import modeling_cohere2 as hf_cohere2
from transformers.models.gemma3 import modeling_gemma3 as hf_gemma3

from ..base import Unsupported


def _common(p):
    return dict(head_dim=p.head_dim, hidden_size=8, num_attention_heads=1, num_key_value_heads=1,
                num_hidden_layers=len(p.layer_types), layer_types=list(p.layer_types),
                intermediate_size=8)


class _Gemma3:
    def __init__(self, p, dtype, device):
        full = {"rope_type": "default", "rope_theta": p.full_rope_theta}
        if p.full_factor != 1.0:
            full = {"rope_type": "linear", "factor": p.full_factor, "rope_theta": p.full_rope_theta}
        self.config = Gemma3TextConfig(**_common(p), rope_parameters={
            "full_attention": full, "sliding_attention": {"rope_type": "default", "rope_theta": p.sliding_rope_theta}})
        self.rotary = hf_gemma3.Gemma3RotaryEmbedding(self.config).to(device)
        self.types = {}

    def _type(self, i):
        if i not in self.types:  # the attention module's own reading of layer_types
            self.types[i] = hf_gemma3.Gemma3Attention(self.config, i).layer_type
        return self.types[i]

    @torch.no_grad()
    def apply(self, q, k, position_ids, layer_idx):
        cos, sin = self.rotary(q, position_ids, self._type(layer_idx))
        return hf_gemma3.apply_rotary_pos_emb(q, k, cos, sin)


class _Cohere2:
    def __init__(self, p, dtype, device):
        self.config = Cohere2Config(**_common(p), rope_parameters={"rope_type": "default",
                                                                    "rope_theta": p.sliding_rope_theta})
        self.rotary = hf_cohere2.Cohere2RotaryEmbedding(self.config).to(device)
        self.rotates = {}

    @torch.no_grad()
    def apply(self, q, k, position_ids, layer_idx):
        if layer_idx not in self.rotates:
            self.rotates[layer_idx] = hf_cohere2.Cohere2Attention(self.config, layer_idx).sliding_window is not None
        if not self.rotates[layer_idx]:
            return q, k
        cos, sin = self.rotary(q, position_ids)
        return hf_cohere2.apply_rotary_pos_emb(q, k, cos, sin)


class _Checked:
    def __init__(self, impl, p):
        self.impl, self.p = impl, p

    def apply(self, q, k, position_ids, layer_idx):
        self.p.layer_type(layer_idx)  # the range check; the model's own modules map the index to its type
        return self.impl.apply(q, k, position_ids, layer_idx)


class Ops:
    """The per-layer-type RoPE operation of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def layer_rope(self, params, *, dtype, device):
        from ..torch_adapter import DTYPES
        p = params
        if p.full_rope_theta is not None and p.sliding_rope_theta is not None and p.pairing == "half":
            return _Checked(_Gemma3(p, DTYPES[dtype], device), p)
        if p.full_rope_theta is None and p.pairing == "interleaved":
            return _Checked(_Cohere2(p, DTYPES[dtype], device), p)
        raise Unsupported("transformers' per-layer-type models here are Gemma 3 (both types with RoPE, half "
                          "pairing) and Cohere 2 (RoPE on sliding layers only, adjacent pairs); "
                          f"full_rope_theta {p.full_rope_theta}, sliding_rope_theta {p.sliding_rope_theta}, "
                          f"pairing {p.pairing} is neither")

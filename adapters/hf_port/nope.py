"""NoPE (NOPE-*) through SmolLM3's config and attention layer."""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.models.smollm3 import configuration_smollm3 as hf_smollm3_config
from transformers.models.smollm3 import modeling_smollm3 as hf_smollm3

from ..base import Unsupported


_CAPTURED: dict = {}


def _capture_attention(module, query, key, value, attention_mask, **kwargs):
    """An attention function that records the q and k a layer hands to it (NOPE-IDENTITY)."""
    _CAPTURED["q"], _CAPTURED["k"] = query, key
    return torch.zeros_like(query).transpose(1, 2), None


AttentionInterface.register("posenc_capture", _capture_attention)


def _smollm3_config(params, **extra):
    """``SmolLM3Config`` with the spec's layer count and NoPE flags (the config derives the defaults)."""
    kw = dict(num_hidden_layers=params.num_hidden_layers, no_rope_layer_interval=params.no_rope_layer_interval,
              vocab_size=1, intermediate_size=1, pad_token_id=None, bos_token_id=None, eos_token_id=None)
    if params.no_rope_layers is not None:
        kw["no_rope_layers"] = list(params.no_rope_layers)
    kw.update(extra)
    return hf_smollm3_config.SmolLM3Config(**kw)


class Ops:
    """The NoPE operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def nope_layer_flags(self, params, *, device):
        """NOPE-LAYER-FLAGS: ``SmolLM3Config.no_rope_layers`` (1 = the layer uses RoPE)."""
        cfg = _smollm3_config(params)
        return torch.tensor(list(cfg.no_rope_layers)[:params.num_hidden_layers], dtype=torch.int64, device=device)

    @torch.no_grad()
    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: q and k as ``SmolLM3Attention`` (layer ``layer_idx``) hands them to attention."""
        B, Hq, T, D = q.shape
        Hk = k.shape[1]
        if Hq % Hk:
            raise Unsupported(f"SmolLM3Attention needs q heads ({Hq}) divisible by kv heads ({Hk})")
        cfg = _smollm3_config(params, hidden_size=(Hq + Hk) * D, head_dim=D, num_attention_heads=Hq,
                              num_key_value_heads=Hk)
        cfg._attn_implementation = "posenc_capture"
        attn = hf_smollm3.SmolLM3Attention(cfg, layer_idx).to(device=q.device, dtype=q.dtype).eval()
        eye = torch.eye((Hq + Hk) * D, dtype=q.dtype, device=q.device)
        attn.q_proj.weight.copy_(eye[:Hq * D])
        attn.k_proj.weight.copy_(eye[Hq * D:])
        hidden = torch.cat((q.transpose(1, 2).reshape(B, T, Hq * D), k.transpose(1, 2).reshape(B, T, Hk * D)), -1)
        rotary = hf_smollm3.SmolLM3RotaryEmbedding(cfg).to(q.device)
        pe = rotary(hidden, position_ids)
        _CAPTURED.clear()
        attn(hidden, pe, None)
        return _CAPTURED.pop("q"), _CAPTURED.pop("k")

"""M-RoPE (MROPE-*) through the Qwen2-VL and Qwen3-VL text rotary modules."""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.qwen2_vl import modeling_qwen2_vl as hf_qwen2_vl
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
from transformers.models.qwen3_vl import modeling_qwen3_vl as hf_qwen3_vl
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig

from posenc.spec.errors import AdapterError

from ..torch_adapter import DTYPES
from ._common import _dedup_half, _probe


class _MRope:
    """M-RoPE (MROPE-SECTIONS / MROPE-INTERLEAVED) through a HF Qwen-VL text rotary module.

    The module's forward takes ``position_ids [3, B, T]`` and returns the recomposed full-width
    ``cat(a, a)`` cos/sin ``[B, T, head_dim]`` cast to ``x.dtype``; the model's own
    ``apply_rotary_pos_emb`` (rotate_half, ``[B, H, T, D]``) rotates q and k.
    """

    def __init__(self, rotary: nn.Module, apply_fn, dtype: torch.dtype):
        self.rotary, self.apply_fn, self.dtype = rotary, apply_fn, dtype

    @torch.no_grad()
    def cos_sin(self, position_ids):
        cos, sin = self.rotary(_probe(self.dtype, position_ids.device), position_ids)
        return _dedup_half(cos, "M-RoPE cos"), _dedup_half(sin, "M-RoPE sin")

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        cos, sin = self.rotary(q, position_ids)
        return self.apply_fn(q, k, cos, sin)


class Ops:
    """The M-RoPE operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def mrope(self, params, *, dtype, device):
        """MROPE-SECTIONS (Qwen2-VL) / MROPE-INTERLEAVED (Qwen3-VL) from the model's own module."""
        D = params.head_dim
        rp = {"rope_type": "default", "rope_theta": float(params.rope_theta),
              "mrope_section": [int(v) for v in params.mrope_section]}
        common = dict(hidden_size=D, num_attention_heads=1, num_key_value_heads=1, num_hidden_layers=1,
                      intermediate_size=1, vocab_size=1, pad_token_id=None, rope_parameters=rp)
        if params.layout == "contiguous":
            cfg = Qwen2VLTextConfig(bos_token_id=None, eos_token_id=None, **common)
            rotary, fn = hf_qwen2_vl.Qwen2VLRotaryEmbedding(cfg), hf_qwen2_vl.apply_rotary_pos_emb
        else:
            cfg = Qwen3VLTextConfig(head_dim=D, **{**common, "rope_parameters": {**rp, "mrope_interleaved": True}})
            rotary, fn = hf_qwen3_vl.Qwen3VLTextRotaryEmbedding(cfg), hf_qwen3_vl.apply_rotary_pos_emb
        if rotary.inv_freq.shape[-1] * 2 != D or list(rotary.mrope_section) != list(params.mrope_section):
            raise AdapterError(f"hf-transformers: HF built {rotary.inv_freq.shape[-1]} frequencies with "
                               f"mrope_section {rotary.mrope_section}, expected {D // 2} and {list(params.mrope_section)}")
        return _MRope(rotary.to(device), fn, DTYPES[dtype])

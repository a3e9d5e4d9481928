"""M-RoPE (MROPE-*) through the Qwen2-VL, Qwen3-VL and Qwen3.5 text rotary modules, with the
configured rope_type (MROPE-ROPE-TYPE), its attention scaling (MROPE-ATTENTION-SCALING) and
partial rotary (MROPE-PARTIAL)."""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.qwen2_vl import modeling_qwen2_vl as hf_qwen2_vl
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
from transformers.models.qwen3_5 import modeling_qwen3_5 as hf_qwen3_5
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_vl import modeling_qwen3_vl as hf_qwen3_vl
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig

from posenc.spec.errors import AdapterError

from ..base import Unsupported
from ..torch_adapter import DTYPES
from ._common import _dedup_half, _probe
from .rope import _partial_rotary_extra
from .rope_scaling import _check_scaling_expressible, _config_extra, _rope_parameters, _set_attention_factor


class _MRope:
    """M-RoPE (MROPE-*) through a HF Qwen-VL / Qwen3.5 text rotary module.

    The module's forward takes ``position_ids [3, B, T]`` and returns the recomposed full-width
    ``cat(a, a)`` cos/sin ``[B, T, rotary_dim]`` (times its ``attention_scaling``) cast to
    ``x.dtype``; the model's own ``apply_rotary_pos_emb`` (rotate_half, ``[B, H, T, D]``; Qwen3.5's
    passes the dims ``>= rotary_dim`` through) rotates q and k.  ``make`` builds the module: for
    ``dynamic`` a fresh one per call, so that HF's grow-until-reset state (``dynamic_rope_update``)
    starts from the configuration at every call, which is the spec's per-call rule.
    """

    def __init__(self, make, apply_fn, dtype: torch.dtype, per_call: bool):
        self.make, self.apply_fn, self.dtype, self.per_call = make, apply_fn, dtype, per_call
        self.rotary = make()

    def _module(self) -> nn.Module:
        return self.make() if self.per_call else self.rotary

    @torch.no_grad()
    def cos_sin(self, position_ids):
        cos, sin = self._module()(_probe(self.dtype, position_ids.device), position_ids)
        return _dedup_half(cos, "M-RoPE cos"), _dedup_half(sin, "M-RoPE sin")

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        cos, sin = self._module()(q, position_ids)
        return self.apply_fn(q, k, cos, sin)

    @torch.no_grad()
    def apply_token_major(self, q, k, position_ids):
        """mrope.apply_token_major: q, k ``[B, T, H, D]`` through the model's ``apply_rotary_pos_emb(...,
        unsqueeze_dim=2)``."""
        cos, sin = self._module()(q, position_ids)
        return self.apply_fn(q, k, cos, sin, unsqueeze_dim=2)


_CONTIGUOUS_PARTIAL = ("transformers' contiguous M-RoPE (Qwen2-VL / Qwen2.5-VL apply_rotary_pos_emb) rotates the whole "
                       "head: a rotary_dim-wide cos/sin does not broadcast over head_dim and there is no pass-through "
                       "tail (its default rope also ignores partial_rotary_factor); HF's partial M-RoPE (Qwen3.5) is "
                       "interleaved")


class Ops:
    """The M-RoPE operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def mrope(self, params, *, dtype, device):
        """MROPE-SECTIONS (Qwen2-VL), MROPE-INTERLEAVED (Qwen3-VL; Qwen3.5 with partial rotary),
        MROPE-ROPE-TYPE / MROPE-ATTENTION-SCALING from the model's own module.

        The rope_type and its keys (and ``mrope_section``, ``partial_rotary_factor``) go into the
        config's ``rope_parameters``, so the module's ``ROPE_INIT_FUNCTIONS[rope_type]`` computes
        ``inv_freq`` and ``attention_scaling`` as in a real checkpoint; what HF has no key for
        (an explicit attention_factor on default RoPE) is set on ``attention_scaling`` as for 1-D
        RoPE, and what it cannot express raises :class:`Unsupported`.
        """
        rp, D, r = params.rope, params.head_dim, params.rdim
        check = rp.model_copy(update={"dynamic_policy": "grow_until_reset"}) if rp.rope_type == "dynamic" else rp
        _check_scaling_expressible(check)
        if params.pairing != "half" or params.layout == "hw_alternating":
            raise Unsupported("the wrapper drives the Qwen-VL / Qwen3.5 text rotary modules (half pairing, contiguous "
                              "or interleaved sections); GLM-4V's, HunYuan-V4-VL's and ERNIE 4.5-VL's are not wrapped")
        if r != D and params.layout == "contiguous":
            raise Unsupported(_CONTIGUOUS_PARTIAL)
        extra = {"mrope_section": [int(v) for v in params.mrope_section]}
        if params.layout == "interleaved":
            extra["mrope_interleaved"] = True
        if r != D:
            extra.update(_partial_rotary_extra(rp))
        rope_parameters = _rope_parameters(rp, **extra)
        common = dict(hidden_size=D, num_attention_heads=1, num_key_value_heads=1, num_hidden_layers=1,
                      intermediate_size=1, vocab_size=1, pad_token_id=None, rope_parameters=rope_parameters,
                      **_config_extra(rp))
        if params.layout == "contiguous":
            cfg = Qwen2VLTextConfig(bos_token_id=None, eos_token_id=None, **common)
            cls, fn = hf_qwen2_vl.Qwen2VLRotaryEmbedding, hf_qwen2_vl.apply_rotary_pos_emb
        elif r == D:
            cfg = Qwen3VLTextConfig(head_dim=D, **common)
            cls, fn = hf_qwen3_vl.Qwen3VLTextRotaryEmbedding, hf_qwen3_vl.apply_rotary_pos_emb
        else:
            cfg = Qwen3_5TextConfig(head_dim=D, layer_types=["full_attention"], **common)
            cls, fn = hf_qwen3_5.Qwen3_5TextRotaryEmbedding, hf_qwen3_5.apply_rotary_pos_emb

        def make():
            rotary = cls(cfg)
            self._check_built_mrope(rotary, params)
            _set_attention_factor(rotary, rp)
            return rotary.to(device)
        return _MRope(make, fn, DTYPES[dtype], per_call=rp.rope_type == "dynamic")

    @staticmethod
    def _check_built_mrope(rotary: nn.Module, params) -> None:
        """HF must have built what the parameters ask for: rotary_dim/2 frequencies of the
        rope_type, split by mrope_section."""
        n = rotary.inv_freq.shape[-1]
        if (n * 2 != params.rdim or list(rotary.mrope_section) != list(params.mrope_section)
                or rotary.rope_type != params.rope_type):
            raise AdapterError(f"hf-transformers: HF built {n} frequencies of rope_type {rotary.rope_type!r} with "
                               f"mrope_section {rotary.mrope_section}, expected {params.rdim // 2} of "
                               f"{params.rope_type!r} and {list(params.mrope_section)}")

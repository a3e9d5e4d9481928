"""RoPE core (ROPE-*) through HF's rotary modules: Llama, GPT-NeoX, Llama 4, GPT-J, DeepSeek-V3, and
NanoChat's rotation by -phi (ROPE-ROTATION-NEGATIVE)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import GPTJConfig, GPTNeoXConfig, LlamaConfig
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_dsv3
from transformers.models.gpt_neox import modeling_gpt_neox as hf_neox
from transformers.models.gptj import modeling_gptj as hf_gptj
from transformers.models.llama import modeling_llama as hf_llama
from transformers.models.llama4 import modeling_llama4 as hf_llama4
from transformers.models.llama4.configuration_llama4 import Llama4TextConfig
from transformers.models.nanochat import modeling_nanochat as hf_nanochat

from posenc.spec.errors import AdapterError

from ..base import Unsupported, for_rotation, forms_unsupported
from ..torch_adapter import DTYPES
from ._common import HF_FIXED_BASE, _dedup_half, _probe
from .rope_scaling import _check_scaling_expressible, _config_extra, _rope_parameters, _set_attention_factor


_NEGATIVE = ("transformers' one rotation by -phi is NanoChat's apply_rotary_pos_emb (its rotate_half is "
             "cat(x2, -x1)), full-width half pairing only")
_DEINTERLEAVE_FULL = ("HF's de-interleaved RoPE is DeepSeek-V3's apply_rotary_pos_emb_interleave, which rotates "
                      "the whole rope head (qk_rope_head_dim): no partial rotary")
#: GPT-J's default context (``GPTJConfig.n_positions``); tables grow past it when needed.
GPTJ_MIN_POSITIONS = 2048


# --------------------------------------------------------------------------------------------
# RoPE: one prepared object per HF implementation
# --------------------------------------------------------------------------------------------


class _HalfRope:
    """Half pairing (ROPE-PAIR-HALF) through a HF ``*RotaryEmbedding`` + ``apply_rotary_pos_emb``.

    ``rotary`` is ``LlamaRotaryEmbedding`` (rotary_dim == head_dim) or
    ``GPTNeoXRotaryEmbedding`` (ROPE-PARTIAL); both return full-width ``cat(c, c)`` cos/sin
    ``[B, T, r]`` already multiplied by ``rotary.attention_scaling`` and cast to ``x.dtype``.
    Both ``apply_rotary_pos_emb`` take ``[B, H, T, D]`` (``unsqueeze_dim=1``), the canonical
    layout, so no transpose is needed.
    """

    def __init__(self, rotary: nn.Module, apply_fn, dtype: torch.dtype, device):
        self.rotary, self.apply_fn, self.dtype, self.device = rotary, apply_fn, dtype, device

    def inv_freq(self):
        """ROPE-INV-FREQ, ROPE-ATTENTION-FACTOR: HF's float32 ``inv_freq`` buffer and scaling."""
        return self.rotary.inv_freq, float(self.rotary.attention_scaling)

    @torch.no_grad()
    def cos_sin(self, position_ids):
        """ROPE-ANGLE, ROPE-ATTENTION-FACTOR: HF's forward, de-duplicated to ``[B, T, r/2]``."""
        cos, sin = self.rotary(_probe(self.dtype, position_ids.device), position_ids)
        return _dedup_half(cos, "cos"), _dedup_half(sin, "sin")

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        """ROPE-PAIR-HALF, ROPE-PARTIAL: HF cos/sin (cast to q.dtype) and HF's rotation."""
        cos, sin = self.rotary(q, position_ids)
        return self.apply_fn(q, k, cos, sin)

    @torch.no_grad()
    def apply_token_major(self, q, k, position_ids):
        """rope.apply_token_major: q, k ``[B, T, H, D]`` through HF's ``apply_rotary_pos_emb(...,
        unsqueeze_dim=2)`` (the layout its docstring names for that argument)."""
        cos, sin = self.rotary(q, position_ids)
        return self.apply_fn(q, k, cos, sin, unsqueeze_dim=2)


class _Llama4Rope:
    """Interleaved pairing, rotary_dim == head_dim (ROPE-PAIR-INTERLEAVED), HF Llama 4.

    ``Llama4TextRotaryEmbedding`` returns complex64 ``freqs_cis = attention_scaling *
    e^{j phi}`` ``[B, T, D/2]``; ``apply_rotary_emb`` views adjacent pairs as complex numbers
    (upcasting them to float32 itself), multiplies and casts back with ``type_as``.  It expects
    ``[B, T, H, D]`` (``freqs_cis[:, :, None, :]``): the wrapper transposes in and out.
    """

    def __init__(self, rotary: nn.Module, dtype: torch.dtype, device):
        self.rotary, self.dtype, self.device = rotary, dtype, device

    def inv_freq(self):
        return self.rotary.inv_freq, float(self.rotary.attention_scaling)

    @torch.no_grad()
    def cos_sin(self, position_ids):
        """ROPE-ANGLE: real and imaginary parts of HF's ``freqs_cis``, cast to the dtype."""
        f = self.rotary(_probe(self.dtype, position_ids.device), position_ids)
        return f.real.to(self.dtype), f.imag.to(self.dtype)

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        """ROPE-PAIR-INTERLEAVED: HF's complex rotation on the ``[B, T, H, D]`` view."""
        qt, kt = q.transpose(1, 2), k.transpose(1, 2)
        f = self.rotary(qt, position_ids)
        qo, ko = hf_llama4.apply_rotary_emb(qt, kt, f)
        return qo.transpose(1, 2), ko.transpose(1, 2)

    @torch.no_grad()
    def apply_token_major(self, q, k, position_ids):
        """rope.apply_token_major: HF Llama 4's ``apply_rotary_emb`` on q, k ``[B, T, H, D]``, its own layout."""
        return hf_llama4.apply_rotary_emb(q, k, self.rotary(q, position_ids))


def _gptj_rotate(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """``x [B, H, T, D]`` through GPT-J's ``apply_rotary_pos_emb`` on the first ``rotary_dim``.

    GPT-J works on ``[B, T, H, D]`` with half-width ``sin``/``cos`` ``[B, T, r/2]`` (it
    repeat-interleaves them itself).  The slice / concatenation of the pass-through tail is
    the one ``GPTJAttention.forward`` performs inline (there is no library function for it).
    """
    xt = x.transpose(1, 2)
    rot = hf_gptj.apply_rotary_pos_emb(xt[..., :rotary_dim], sin, cos)
    if rotary_dim < xt.shape[-1]:
        rot = torch.cat([rot, xt[..., rotary_dim:]], dim=-1)
    return rot.transpose(1, 2)


class _GptjRope:
    """Interleaved pairing with partial rotary (ROPE-PAIR-INTERLEAVED, ROPE-PARTIAL), HF GPT-J.

    ``GPTJRotaryEmbedding`` precomputes ``create_sinusoidal_positions(n_positions, rotary_dim)``
    (float32, theta fixed at 10000) and gathers ``[sin | cos]`` rows cast to ``x.dtype``.  The
    table is (re)built with at least ``max(position_ids) + 1`` rows.
    """

    def __init__(self, params, dtype: torch.dtype, device):
        self.p, self.dtype, self.device = params, dtype, device
        self._rotary, self._rows = None, 0

    def _module(self, position_ids) -> nn.Module:
        need = max(GPTJ_MIN_POSITIONS, int(position_ids.max()) + 1 if position_ids.numel() else 1)
        if self._rotary is None or need > self._rows:
            cfg = GPTJConfig(n_embd=self.p.head_dim, n_head=1, n_layer=1, vocab_size=1,
                             rotary_dim=self.p.rdim, n_positions=need, bos_token_id=None, eos_token_id=None)
            self._rotary = hf_gptj.GPTJRotaryEmbedding(cfg).to(position_ids.device)
            self._rows = need
        return self._rotary

    def inv_freq(self):
        raise Unsupported("HF GPT-J exposes no inverse frequencies: create_sinusoidal_positions keeps "
                          "inv_freq local and returns only the sin/cos table")

    @torch.no_grad()
    def cos_sin(self, position_ids):
        """ROPE-ANGLE: GPT-J's gathered ``sin, cos`` rows are already half width."""
        sin, cos = self._module(position_ids)(_probe(self.dtype, position_ids.device), position_ids)
        return cos, sin

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        sin, cos = self._module(position_ids)(q, position_ids)
        r = self.p.rdim
        return _gptj_rotate(q, sin, cos, r), _gptj_rotate(k, sin, cos, r)

    @torch.no_grad()
    def apply_token_major(self, q, k, position_ids):
        """rope.apply_token_major: GPT-J's ``apply_rotary_pos_emb`` on q, k ``[B, T, H, D]``, its own layout."""
        sin, cos = self._module(position_ids)(q, position_ids)
        r = self.p.rdim

        def rotate(x):
            rot = hf_gptj.apply_rotary_pos_emb(x[..., :r], sin, cos)
            return torch.cat([rot, x[..., r:]], dim=-1) if r < x.shape[-1] else rot
        return rotate(q), rotate(k)


def _partial_rotary_extra(params) -> dict:
    """The ``partial_rotary_factor`` (``rotary_dim / head_dim``) HF needs for partial rotary or
    proportional RoPE, as extra ``rope_parameters`` (``{}`` otherwise); raises
    :class:`Unsupported` where HF's sizing of the rotated part cannot give rotary_dim."""
    D, r = params.head_dim, params.rdim
    if params.partial_rotary_factor is not None:  # transformers sizes the width itself (ROPE-ROTARY-FRACTION)
        return {"partial_rotary_factor": params.partial_rotary_factor}
    extra = {}
    if r != D or params.rope_type == "proportional":
        factor = r / D
        sized = int(D * factor) if params.rope_type != "proportional" else 2 * int(factor * D // 2)
        if sized != r:
            who = ("GPT-NeoX sizes the rotary part as int(head_dim * partial_rotary_factor)"
                   if params.rope_type != "proportional" else
                   "proportional RoPE sizes the rotated share as int(partial_rotary_factor * head_dim // 2)")
            raise Unsupported(f"{who}; rotary_dim {r} of head_dim {D} is not expressible")
        extra["partial_rotary_factor"] = factor
    return extra


def _check_forms(params) -> None:
    """The parameter forms (spec 0.5.0): a fraction goes to transformers as partial_rotary_factor, which it
    sizes itself -- except GPT-J's interleaved partial module, which takes rotary_dim, a width; condensed
    positions have no transformers form (its linear rule divides the frequencies, not the positions)."""
    gptj = params.pairing == "interleaved" and params.rdim != params.head_dim and params.rope_type != "proportional"
    forms_unsupported(params, "transformers' GPT-J (rotary_dim, a width)" if gptj else "transformers", fraction=not gptj)


class Ops:
    """The RoPE operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def rope(self, params, *, dtype, device):
        """ROPE-*, SCALE-*: dispatch to the HF model whose RoPE matches the pairing and rotary_dim.

        The rope_type and its keys go into the config's ``rope_parameters`` so that the
        module's own ``ROPE_INIT_FUNCTIONS[rope_type]`` computes ``inv_freq`` and
        ``attention_scaling`` (SCALE-LINEAR, SCALE-YARN-*, SCALE-LLAMA3,
        SCALE-LONGROPE-ATTENTION-FACTOR, SCALE-PROPORTIONAL) and its forward's
        ``dynamic_rope_update`` does the per-call updates (SCALE-DYNAMIC-NTK with
        SCALE-DYNAMIC-GROW; SCALE-LONGROPE-FACTORS).  The prepared object keeps the one module,
        so that state carries over between calls as in a HF model.  proportional
        (SCALE-PROPORTIONAL) pairs over the whole head: it always uses the full-width module
        (Llama for half pairing, Llama 4 for interleaved) with ``partial_rotary_factor =
        rotary_dim / head_dim`` inside ``rope_parameters``, as Gemma 4 configures it.
        """
        _check_forms(params)
        _check_scaling_expressible(params)
        dt, D, r = DTYPES[dtype], params.head_dim, params.rdim
        full = r == D or params.rope_type == "proportional"
        if params.rotation == "negative" and not (params.pairing == "half" and r == D):
            # the tables are the same either way; only the rotation has no HF form
            return for_rotation(self.rope(params.model_copy(update={"rotation": "positive"}), dtype=dtype,
                                          device=device), params,
                                "transformers outside NanoChat's full-width half pairing")
        if params.pairing == "deinterleave" and r != D:
            raise Unsupported(_DEINTERLEAVE_FULL)
        if params.pairing == "interleaved" and not full:
            if params.rope_theta != HF_FIXED_BASE:
                raise Unsupported(f"interleaved partial RoPE is GPT-J's, whose create_sinusoidal_positions "
                                  f"hard-codes theta 10000 (got {params.rope_theta:g})")
            if params.attention_factor not in (None, 1.0):
                raise Unsupported("GPT-J's rotary table has no attention factor (no attention_scaling)")
            return _GptjRope(params, dt, device)
        rope_parameters = _rope_parameters(params, **_partial_rotary_extra(params))
        common = dict(num_attention_heads=1, num_hidden_layers=1, intermediate_size=1, vocab_size=1,
                      bos_token_id=None, eos_token_id=None, rope_parameters=rope_parameters, **_config_extra(params))
        if params.pairing == "deinterleave":  # DeepSeek-V3's rotary is Llama's; its rotation de-interleaves
            cfg = LlamaConfig(hidden_size=D, head_dim=D, num_key_value_heads=1, pad_token_id=None, **common)
            rotary, apply_fn = hf_llama.LlamaRotaryEmbedding(cfg), hf_dsv3.apply_rotary_pos_emb_interleave
            self._check_built(rotary, params)
            _set_attention_factor(rotary, params)
            return _HalfRope(rotary.to(device), apply_fn, dt, device)
        if params.pairing == "half":
            if full:
                cfg = LlamaConfig(hidden_size=D, head_dim=D, num_key_value_heads=1, pad_token_id=None, **common)
                # NanoChat's rotary module is Llama's (the same tables); its apply turns by -phi
                apply_fn = hf_nanochat.apply_rotary_pos_emb if params.rotation == "negative" else hf_llama.apply_rotary_pos_emb
                rotary = hf_llama.LlamaRotaryEmbedding(cfg)
            else:
                cfg = GPTNeoXConfig(hidden_size=D, **common)
                rotary, apply_fn = hf_neox.GPTNeoXRotaryEmbedding(cfg), hf_neox.apply_rotary_pos_emb
            self._check_built(rotary, params)
            _set_attention_factor(rotary, params)
            return _HalfRope(rotary.to(device), apply_fn, dt, device)
        # interleaved, full width (partial went to GPT-J above)
        cfg = Llama4TextConfig(hidden_size=D, head_dim=D, num_key_value_heads=1, intermediate_size_mlp=1,
                               pad_token_id=None, **common)
        rotary = hf_llama4.Llama4TextRotaryEmbedding(cfg)
        self._check_built(rotary, params)
        _set_attention_factor(rotary, params)
        return _Llama4Rope(rotary.to(device), dt, device)

    @staticmethod
    def _check_built(rotary: nn.Module, params) -> None:
        """HF must have built what the parameters ask for: pair_dim/2 frequencies of the rope_type."""
        if rotary.rope_type != params.rope_type:
            raise AdapterError(f"hf-transformers: HF built rope_type {rotary.rope_type!r}, "
                               f"expected {params.rope_type!r}")
        # a fraction's width is transformers' own sizing: what is checked, never the wrapper's error
        if params.partial_rotary_factor is None and rotary.inv_freq.shape[-1] * 2 != params.pair_dim:
            raise AdapterError(f"hf-transformers: HF built {rotary.inv_freq.shape[-1]} frequencies, "
                               f"expected {params.pair_dim // 2} (pair_dim / 2)")

    @torch.no_grad()
    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        """ROPE-PAIR-HALF / ROPE-PAIR-INTERLEAVED / ROPE-PARTIAL with given half-width cos/sin.

        half: HF's ``apply_rotary_pos_emb`` (Llama for rotary_dim == head_dim, GPT-NeoX for
        partial) with the duplicated layout ``cat(c, c)`` it expects; interleaved: GPT-J's
        ``apply_rotary_pos_emb``, which takes half-width ``sin``/``cos`` itself; deinterleave
        (ROPE-PAIR-DEINTERLEAVE): DeepSeek-V3's ``apply_rotary_pos_emb_interleave`` with ``cat(c, c)``.
        """
        r = params.rdim
        if cos.shape[-1] * 2 != r:
            raise ValueError(f"cos has width {cos.shape[-1]}, expected rotary_dim/2 = {r // 2}")
        if params.rotation == "negative":  # ROPE-ROTATION-NEGATIVE: NanoChat's apply, cat(c, c) as it expects
            if params.pairing != "half" or r != params.head_dim:
                raise Unsupported(_NEGATIVE)
            return hf_nanochat.apply_rotary_pos_emb(q, k, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))
        if params.pairing == "deinterleave":
            if r != params.head_dim:
                raise Unsupported(_DEINTERLEAVE_FULL)
            return hf_dsv3.apply_rotary_pos_emb_interleave(q, k, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))
        if params.pairing == "half":
            c2, s2 = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
            fn = hf_llama.apply_rotary_pos_emb if r == params.head_dim else hf_neox.apply_rotary_pos_emb
            return fn(q, k, c2, s2)
        return _gptj_rotate(q, sin, cos, r), _gptj_rotate(k, sin, cos, r)

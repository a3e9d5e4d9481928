"""Real transformers models with a plumbing bug patched in: model adapters the model-level suite
must fail, naming the scenario and the cause (tests/test_model_suite.py).

Each class is an ``hf:<model_type>`` adapter (:class:`posenc.adapters.hf_model.HFModelAdapter`)
whose model runs every call inside ``bug()``: a ``unittest.mock.patch`` of transformers' own code
(the modeling module, ``generation/utils.py``, ``masking_utils.py``, ``cache_utils.py``), entered
before the probes, so the suite sees exactly what the patched library computes.  Usable as
``pytest conformance --model tests/model_bugs.py:DecodeOffByOneLlama``.
"""

from __future__ import annotations

from unittest import mock

import torch

from posenc.adapters.hf_model import HFModel, HFModelAdapter


class _BuggedModel(HFModel):
    def __init__(self, model, arch, device, bug):
        super().__init__(model, arch, device)
        self.bug = bug

    def forward(self, *args, **kwargs):
        with self.bug():
            return super().forward(*args, **kwargs)

    def generate(self, *args, **kwargs):
        with self.bug():
            return super().generate(*args, **kwargs)


class _Bugged(HFModelAdapter):
    model_type = "llama"
    #: the divergence the suite must name, and a scenario clause that must catch it
    expect = ("", "")

    def __init__(self):
        super().__init__(self.model_type)
        self.name = f"hf:{self.model_type}+{type(self).__name__}"

    def bug(self):
        raise NotImplementedError

    def build(self, **kw):
        m = super().build(**kw)
        return _BuggedModel(m.model, m.arch, m.device, self.bug)


def _wrap(target, name, make):
    """``mock.patch.object(target, name, make(original))``."""
    return mock.patch.object(target, name, make(getattr(target, name)))


class RestartAfterCacheGPT2(_Bugged):
    """GPT-2's learned table reached through inputs_embeds counts its positions from 0 in every
    forward pass (the past length dropped: transformers#15736's kind)."""

    model_type = "gpt2"
    expect = ("DIV-MODEL-POSITIONS-RESTART-AFTER-CACHE", "MODEL-INPUTS-EMBEDS-DECODE")

    def bug(self):
        from transformers.models.gpt2 import modeling_gpt2 as m

        def make(forward):
            def patched(self, input_ids=None, *args, inputs_embeds=None, position_ids=None, **kw):
                if inputs_embeds is not None and position_ids is None:
                    position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)[None]
                return forward(self, input_ids, *args, inputs_embeds=inputs_embeds, position_ids=position_ids, **kw)
            return patched
        return _wrap(m.GPT2Model, "forward", make)


class DecodeNoPositionGPT2(_Bugged):
    """GPT-2 adds no position embedding on one-token steps."""

    model_type = "gpt2"
    expect = ("DIV-MODEL-DECODE-NO-POSITION", "MODEL-DECODE")

    def bug(self):
        from torch import nn

        def make(forward):
            def patched(self, x):
                out = forward(self, x)
                is_wpe = self.num_embeddings == 128 and self.embedding_dim == 64 and x.shape[-1] == 1
                return torch.zeros_like(out) if is_wpe else out
            return patched
        return _wrap(nn.Embedding, "forward", make)


class DecodeNoRotationLlama(_Bugged):
    """Llama rotates nothing on one-token steps (a seq_len > 1 guard around the rotation)."""

    expect = ("DIV-MODEL-DECODE-NO-POSITION", "MODEL-DECODE")

    def bug(self):
        from transformers.models.llama import modeling_llama as m

        def make(apply):
            def patched(q, k, cos, sin, *a, **kw):
                return (q, k) if q.shape[2] == 1 else apply(q, k, cos, sin, *a, **kw)
            return patched
        return _wrap(m, "apply_rotary_pos_emb", make)


class DecodeOffByOneLlama(_Bugged):
    """Llama's positions after a cache start one too far (past_seen_tokens + 1)."""

    expect = ("DIV-POS-CACHE-OFF-BY-ONE", "MODEL-DECODE")

    def bug(self):
        from transformers.models.llama import modeling_llama as m

        def make(forward):
            def patched(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, inputs_embeds=None,
                        **kw):
                past = cache.get_seq_length() if cache is not None else 0
                if position_ids is None and past:
                    n = (input_ids if input_ids is not None else inputs_embeds).shape[1]
                    position_ids = torch.arange(n)[None] + past + 1
                return forward(self, input_ids, attention_mask, position_ids, cache, inputs_embeds, **kw)
            return patched
        return _wrap(m.LlamaModel, "forward", make)


class GenerateArangeLlama(_Bugged):
    """generate builds the prompt's positions with arange, ignoring the left padding."""

    expect = ("DIV-POS-LEFT-PAD-IGNORED", "MODEL-GENERATE")

    def bug(self):
        from transformers.generation.utils import GenerationMixin

        def make(prepare):
            def patched(self, inputs_tensor, model_kwargs):
                pos = prepare(self, inputs_tensor, model_kwargs)
                return torch.arange(pos.shape[-1], device=pos.device).expand_as(pos).clone()
            return patched
        return _wrap(GenerationMixin, "_prepare_position_ids_for_generation", make)


class SharedCachePositionLlama(_Bugged):
    """After a left-padded prefill with the rows' own positions, generate's decode steps take the
    padded width as every row's position (one shared cache_position: unsloth#3699's kind)."""

    expect = ("DIV-MODEL-DECODE-PADDED-WIDTH", "MODEL-GENERATE")

    def bug(self):
        from transformers.generation.utils import GenerationMixin

        def make(update):
            def patched(self, outputs, model_kwargs, *a, **kw):
                out = update(self, outputs, model_kwargs, *a, **kw)
                pos = out.get("position_ids")
                if pos is not None:
                    out["position_ids"] = torch.arange(pos.shape[-1], device=pos.device).expand_as(pos).clone()
                return out
            return patched
        return _wrap(GenerationMixin, "_update_model_kwargs_for_generation", make)


class PackedCrossDocumentLlama(_Bugged):
    """Packing read from position_ids is lost: the mask is causal over the whole row."""

    expect = ("DIV-MODEL-PACKED-CROSS-DOCUMENT", "MODEL-PACKED")

    def bug(self):
        from transformers import masking_utils
        return mock.patch.object(masking_utils, "find_packed_sequence_indices", lambda position_ids: None)


class PackedCrossDocumentQwen2VL(PackedCrossDocumentLlama):
    """The same, in a packed row of image documents."""

    model_type = "qwen2_vl"
    expect = ("DIV-MODEL-PACKED-CROSS-DOCUMENT", "MODEL-MROPE-PACKED")


class PadsAttendedLlama(_Bugged):
    """The attention mask's padding is dropped: real tokens attend to the pads (left pads: with right
    padding a causal mask hides them anyway)."""

    expect = ("DIV-MODEL-PADS-ATTENDED", "MODEL-LEFT-PAD")

    def bug(self):
        from transformers.models.llama import modeling_llama as m

        def make(create):
            def patched(*a, **kw):
                kw["attention_mask"] = None
                return create(*a, **kw)
            return patched
        return _wrap(m, "create_causal_mask", make)


class StaticCacheCapacityLlama(_Bugged):
    """A static cache reports its allocated length as the number of cached tokens."""

    expect = ("DIV-MODEL-STATIC-CACHE-ALLOCATED-LENGTH", "MODEL-STATIC-CACHE")

    def bug(self):
        from transformers import cache_utils

        def make(get):
            def patched(self):
                return self.max_cache_len if self.is_initialized else get(self)
            return patched
        return _wrap(cache_utils.StaticLayer, "get_seq_length", make)


class LongropeStaleCachePhi3(_Bugged):
    """Phi-3 keeps its cache at LongRoPE's switch (the re-prefill of prepare_inputs_for_generation removed)."""

    model_type = "phi3"
    expect = ("DIV-MODEL-LONGROPE-STALE-CACHE", "MODEL-LONGROPE-SWITCH")

    def bug(self):
        from transformers.generation.utils import GenerationMixin
        from transformers.models.phi3 import modeling_phi3 as m
        return mock.patch.object(m.Phi3ForCausalLM, "prepare_inputs_for_generation",
                                 GenerationMixin.prepare_inputs_for_generation)


class EmbedsRestartM2M100(_Bugged):
    """M2M100's sinusoids reached through decoder inputs_embeds ignore the cache length (transformers#15736 and
    the fix #15751: create_position_ids_from_inputs_embeds without past_key_values_length)."""

    model_type = "m2m_100"
    expect = ("DIV-MODEL-POSITIONS-RESTART-AFTER-CACHE", "MODEL-INPUTS-EMBEDS-DECODE")

    def bug(self):
        from transformers.models.m2m_100 import modeling_m2m_100 as m

        def make(create):
            def patched(inputs_embeds, cache_length, padding_idx):
                return create(inputs_embeds, 0, padding_idx)
            return staticmethod(patched)
        return _wrap(m.M2M100SinusoidalPositionalEmbedding, "create_position_ids_from_inputs_embeds",
                     lambda fn: make(fn))


class T5DecodeBiasFromZeroT5(_Bugged):
    """T5's decoder computes its relative bias as if the queries of a decode step were at position 0
    (the operation-level DIV-T5-CACHE-IGNORED, seen in a whole model)."""

    model_type = "t5"
    expect = ("DIV-T5-CACHE-IGNORED", "MODEL-DECODE")

    def bug(self):
        from transformers.models.t5 import modeling_t5 as m

        def make(compute):
            def patched(self, query_length, key_length, device=None, past_seen_tokens=0):
                return compute(self, query_length, key_length, device, 0)
            return patched
        return _wrap(m.T5Attention, "compute_bias", make)


class SoftmaxMscaleMissingDeepseekV3(_Bugged):
    """DeepSeek-V3's attention scales q.k by qk_head_dim^-0.5 alone (YaRN's mscale^2 dropped)."""

    model_type = "deepseek_v3"
    expect = ("DIV-SCALE-SOFTMAX-MSCALE-MISSING", "MODEL-PREFILL")

    def bug(self):
        from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m

        def make(forward):
            def patched(self, *a, **kw):
                self.scaling = self.qk_head_dim ** -0.5
                return forward(self, *a, **kw)
            return patched
        return _wrap(m.DeepseekV3Attention, "forward", make)


class MropeTextPositionsQwen2VL(_Bugged):
    """Qwen2-VL's image tokens get 1-D text positions (the running index on all three axes):
    get_rope_index ignores the image grid."""

    model_type = "qwen2_vl"
    expect = ("DIV-MODEL-MROPE-TEXT-POSITIONS", "MODEL-MROPE-POSITIONS")

    def bug(self):
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m

        def patched(self, input_ids, mm_token_type_ids=None, image_grid_thw=None, video_grid_thw=None,
                    attention_mask=None, **kw):
            b, t = input_ids.shape
            pos = torch.arange(t, device=input_ids.device).expand(3, b, t).clone()
            return pos, torch.zeros(b, 1, dtype=torch.long, device=input_ids.device)
        return mock.patch.object(m.Qwen2VLModel, "get_rope_index", patched)


class _PackedMropeQwen2VL(_Bugged):
    """A packing collator's M-RoPE positions for a packed row of image documents: Qwen2VLModel.forward
    given Qwen-VL's [4, 1, T] positions (the text row restarting per document) replaces the t, h, w
    rows by ``positions(model, kw, text, documents)``: ``text`` that row, ``documents`` the packing mask
    1, 1, 2, 2, ..."""

    model_type = "qwen2_vl"

    def positions(self, model, kw, text, documents):
        raise NotImplementedError

    def bug(self):
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m
        bugged = self

        def make(forward):
            def patched(self, *a, position_ids=None, **kw):
                if position_ids is not None and position_ids.ndim == 3 and position_ids.shape[0] == 4 and \
                        kw.get("pixel_values") is not None:
                    documents = (position_ids[0] == 0).long().cumsum(-1)
                    position_ids = torch.cat([position_ids[:1], bugged.positions(self, kw, position_ids[0], documents)])
                return forward(self, *a, position_ids=position_ids, **kw)
            return patched
        return _wrap(m.Qwen2VLModel, "forward", make)


class PackedFillerQwen2VL(_PackedMropeQwen2VL):
    """The collator runs get_rope_index over the packed row with the packing mask as the attention
    mask, as transformers 4.x did it: positions written only where the mask is 1 (the first
    document), the initial 1 left everywhere else (LlamaFactory#7754)."""

    expect = ("DIV-MODEL-MROPE-PACKED-FILLER", "MODEL-MROPE-PACKED")

    def positions(self, model, kw, text, documents):
        first = (documents == 1).long()
        p3, _ = model.get_rope_index(kw["input_ids"], kw["mm_token_type_ids"], kw["image_grid_thw"][:1],
                                     attention_mask=first)
        return torch.where(first.bool()[None], p3, torch.ones_like(p3))


class PackedRowRopeIndexQwen2VL(_PackedMropeQwen2VL):
    """The collator runs transformers 5.24's get_rope_index over the packed row with the packing mask
    (read as bool: one sequence), so every later document counts on from the one before (miles#1272)."""

    expect = ("DIV-POS-PACKED-NO-RESTART", "MODEL-MROPE-PACKED")

    def positions(self, model, kw, text, documents):
        p3, _ = model.get_rope_index(kw["input_ids"], kw["mm_token_type_ids"], kw["image_grid_thw"],
                                     attention_mask=documents)
        return p3


class PackedTextPositionsQwen2VL(_PackedMropeQwen2VL):
    """The collator packs 1-D ranges per document on all three axes (NeMo Automodel#2172)."""

    expect = ("DIV-MODEL-MROPE-TEXT-POSITIONS", "MODEL-MROPE-PACKED")

    def positions(self, model, kw, text, documents):
        return text[None].expand(3, -1, -1)


class DynamicNTKLlama(HFModelAdapter):
    """Not a plant: transformers' own dynamic NTK on a Llama config with ``rope_scaling: {rope_type:
    dynamic, factor: 2}`` and a 4096 context, shrunk as ``posenc model-check`` shrinks it (growth
    beyond 16 tokens).  Each pass rotates as SCALE-DYNAMIC-GROW gives; the cache keeps the keys of
    shorter passes' frequencies, and a row's frequencies are its pass's."""

    model_type = "llama"
    expect = ("DIV-MODEL-DYNAMIC-STALE-CACHE", "MODEL-GENERATE")
    CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
              "num_hidden_layers": 32, "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 4096,
              "rope_theta": 10000.0, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}

    def __init__(self):
        from posenc.adapters.hf_model.architectures import tiny_from_config
        cfg = tiny_from_config(self.CONFIG)
        assert cfg.pop("_posenc_context_shrink") == ("dynamic", 256, 16)
        super().__init__("llama", cfg, name="hf:llama+DynamicNTKLlama")


class DynamicNTKPassLengthLlama(DynamicNTKLlama):
    expect = ("DIV-MODEL-DYNAMIC-PASS-LENGTH", "MODEL-RIGHT-PAD")


#: transformers' own behaviour on configurations the model matrix does not build (no patch)
OWN = [DynamicNTKLlama, DynamicNTKPassLengthLlama]


BUGS = [RestartAfterCacheGPT2, DecodeNoPositionGPT2, DecodeNoRotationLlama, DecodeOffByOneLlama, GenerateArangeLlama,
        SharedCachePositionLlama, PackedCrossDocumentLlama, PadsAttendedLlama, StaticCacheCapacityLlama,
        LongropeStaleCachePhi3, EmbedsRestartM2M100, T5DecodeBiasFromZeroT5, SoftmaxMscaleMissingDeepseekV3,
        MropeTextPositionsQwen2VL, PackedFillerQwen2VL, PackedRowRopeIndexQwen2VL, PackedTextPositionsQwen2VL,
        PackedCrossDocumentQwen2VL]

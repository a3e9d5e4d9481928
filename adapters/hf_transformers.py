"""The ``hf-transformers`` adapter: a thin wrapper around the real HF transformers code.

Every number this adapter returns is computed by transformers (pinned to 5.24.0 by the
``hf`` extra) on torch.  The wrapper only builds the library's modules from the spec's
parameter models, copies given weights in, transposes between the canonical ``[B, H, T, D]``
layout and the layout a library function expects, and converts outputs to the canonical
form (half-width cos/sin, ``[B, T]`` position ids).  It never imports ``posenc.reference``
and never re-implements what the library computes; what the library cannot express raises
:class:`~posenc.adapters.base.Unsupported` with the reason.

Which HF code backs each operation (all paths under ``transformers/models/``):

======================================  =====================================================
``rope`` half, rotary_dim == head_dim   ``llama/modeling_llama.py``: ``LlamaRotaryEmbedding``
(and proportional, any rotary_dim)      (from a ``LlamaConfig``) + ``apply_rotary_pos_emb``
``rope`` half, partial rotary           ``gpt_neox/modeling_gpt_neox.py``:
                                        ``GPTNeoXRotaryEmbedding`` (``partial_rotary_factor``)
                                        + ``apply_rotary_pos_emb`` (rotates the first dims)
``rope`` interleaved, full              ``llama4/modeling_llama4.py``:
(and proportional, any rotary_dim)      ``Llama4TextRotaryEmbedding`` + ``apply_rotary_emb``
                                        (complex ``freqs_cis``; layout ``[B, T, H, D]``)
``rope`` interleaved, partial           ``gptj/modeling_gptj.py``: ``GPTJRotaryEmbedding``
(rope_type default only)                (``create_sinusoidal_positions``) +
                                        ``apply_rotary_pos_emb`` / ``rotate_every_two``
``rope_apply_with_cos_sin``             half: the Llama (full) or GPT-NeoX (partial)
                                        ``apply_rotary_pos_emb`` with ``cat(c, c)``;
                                        interleaved: GPT-J ``apply_rotary_pos_emb`` (half-width)
``sinusoidal`` concat                   ``marian``: ``MarianSinusoidalPositionalEmbedding``
``sinusoidal`` interleaved              ``distilbert``: ``create_sinusoidal_embeddings``,
                                        gathered with ``nn.Embedding``
``sinusoidal`` variant t2t              ``m2m_100``: ``M2M100SinusoidalPositionalEmbedding.
                                        get_embedding(n, D, padding_idx=None)`` (its docstring:
                                        "matches the implementation in tensor2tensor"), gathered
                                        with ``nn.Embedding``; no HF code has t2t's clamp at
                                        D // 2 == 1 (unsupported there)
``sinusoidal`` variant fairseq          ``m2m_100``: ``M2M100SinusoidalPositionalEmbedding``'s
                                        ``weights`` (pad row zeroed), ``index_select`` as its
                                        forward does
``sinusoidal`` variant whisper          ``whisper``: ``sinusoids(n, D)`` in an ``nn.Embedding``
                                        (what ``WhisperEncoder.embed_positions`` is initialised to)
``fairseq_positions``                   ``m2m_100``: ``M2M100SinusoidalPositionalEmbedding.
                                        create_position_ids_from_input_ids``
``fairseq_sinusoidal``                  ``m2m_100``: ``M2M100SinusoidalPositionalEmbedding`` forward
                                        (``input_ids``, ``cache_length``; the table grows itself)
``lookup``                              ``torch.nn.Embedding`` (as every HF model uses it)
``gpt2_embeddings``                     ``gpt2``: ``GPT2Model`` forward, ``hidden_states[0]``
``bert_embeddings``                     ``bert``: ``BertEmbeddings`` forward
``roberta_positions``                   ``roberta``: ``RobertaEmbeddings.create_position_ids_from_input_ids``
``roberta_embeddings``                  ``roberta``: ``RobertaEmbeddings`` forward (its own default rows)
``bart_embeddings``                     ``bart``: ``BartLearnedPositionalEmbedding`` forward
                                        (``input_ids``, ``cache_length``; it reads no mask)
``opt_positions``                       ``opt``: ``OPTDecoder.forward``'s own position ids,
                                        read where it hands them to ``embed_positions``
``opt_rows``                            ``opt``: ``OPTLearnedPositionalEmbedding`` (offset 2)
                                        over a table whose row r holds r
``opt_embeddings``                      ``opt``: ``OPTLearnedPositionalEmbedding`` forward
``position_ids`` prefill / decode       ``llama``: ``LlamaModel.forward``'s default
                                        position ids (arange + ``cache.get_seq_length()``)
``position_ids`` left_pad               ``generation/utils.py``:
                                        ``GenerationMixin._prepare_position_ids_for_generation``
                                        + ``prepare_inputs_for_generation`` (cache slice)
``position_ids`` packed                 ``data/data_collator.py``: ``DataCollatorWithFlattening``
======================================  =====================================================

RoPE scaling (``RopeParams.rope_type``, clauses SCALE-*): the wrapper writes the rope_type and
its keys, named as HF names them, into the config's ``rope_parameters`` (``None`` fields left
out, so HF's defaults apply: beta_fast 32, beta_slow 1, truncate true) and
``max_position_embeddings`` onto the config; the rotary module above then calls
``modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]`` for ``inv_freq`` and
``attention_scaling``, and its forward's ``@dynamic_rope_update`` recomputes them per call.
One module lives in each prepared object, so state carries over between calls as in a model.

=================  ==============================================================================
rope_type          HF 5.24 code (``transformers/modeling_rope_utils.py``)
=================  ==============================================================================
``default``        the module's own ``compute_default_rope_parameters``; an explicit
                   ``attention_factor`` is set as ``attention_scaling`` (ROPE-ATTENTION-FACTOR)
``linear``         ``_compute_linear_scaling_rope_parameters`` (SCALE-LINEAR)
``dynamic``        ``_compute_dynamic_ntk_parameters`` + ``dynamic_rope_update``'s
                   ``dynamic_frequency_update`` (SCALE-DYNAMIC-NTK, SCALE-DYNAMIC-GROW); only
                   ``dynamic_policy='grow_until_reset'``: HF has no per-call policy
                   (SCALE-DYNAMIC-PER-CALL is unsupported)
``yarn``           ``_compute_yarn_parameters`` (SCALE-YARN-RAMP, SCALE-YARN-FACTOR,
                   SCALE-YARN-ATTENTION-FACTOR); a missing ``factor`` is passed as ``None``, the
                   key HF requires and derives from ``max_position_embeddings`` itself
``llama3``         ``_compute_llama3_parameters`` (SCALE-LLAMA3)
``longrope``       ``_compute_longrope_parameters`` + ``dynamic_rope_update``'s
                   ``longrope_frequency_update`` (SCALE-LONGROPE-FACTORS,
                   SCALE-LONGROPE-ATTENTION-FACTOR)
``proportional``   ``_compute_proportional_rope_parameters`` (SCALE-PROPORTIONAL, as Gemma 4's
                   full-attention layers use it) with ``partial_rotary_factor = rotary_dim /
                   head_dim``: always the full-width module (``LlamaRotaryEmbedding`` + Llama's
                   ``apply_rotary_pos_emb`` for half pairing, ``Llama4TextRotaryEmbedding`` for
                   interleaved), since its head_dim/2 frequencies end in zeros and the whole head
                   is rotated; cos/sin come back ``[B, T, head_dim/2]`` (``pair_dim/2``)
=================  ==============================================================================

Scaled cases HF cannot express raise :class:`Unsupported`: ``dynamic`` with
``dynamic_policy`` per_call / None (transformers implements grow-until-reset only); an explicit
``attention_factor`` with linear, dynamic, llama3 or proportional (their init functions return
1.0, read no such key, and a dynamic update would reset ``attention_scaling`` from it); any
scaling with interleaved partial RoPE (GPT-J's table has none); longrope with neither
``factor`` nor ``max_position_embeddings`` (HF would take the model class's default length).

Dtype policy (clauses ROPE-PRECISION, SIN-PRECISION): inputs reach the library in the
requested dtype -- the wrapper never upcasts before a library call -- so the library's own
policy is what is measured: HF RoPE computes inverse frequencies and angles in float32
(also for float64 activations), casts cos/sin to the activation dtype and rotates in it
(Llama, GPT-NeoX, GPT-J); Llama 4 rotates in float32 complex and casts back.  The sinusoidal
tables are built by HF in float64 NumPy, stored as float32 and cast to the requested dtype as
``model.to(dtype)`` would.  Every float output has exactly the requested dtype (the Llama 4
cos/sin, complex64 in HF, are split into real/imaginary parts and cast).

Learned tables are indexed by ``torch.nn.Embedding`` exactly as HF does, with no range check
of the wrapper's own: an out-of-range row raises torch's ``IndexError`` on CPU (clause
LEARNED-ROW-RANGE accepts it); on CUDA torch reports a device-side assertion instead.

ALiBi and T5 (clauses ALIBI-*, T5-*):

======================================  =====================================================
``alibi_slopes`` (form bloom)           ``bloom``: ``build_alibi_tensor`` on a 2-token mask;
                                        the slopes are its values at position 1 (float32)
``alibi_slopes`` (other forms)          ``mpt``: ``build_mpt_alibi_tensor`` (``alibi_bias_max``)
                                        of length 2, negated at key 0 (float32)
``alibi_bias`` bloom                    ``bloom``: ``build_alibi_tensor(mask, H, dtype)``
                                        ``[B*H, 1, Tk]``, viewed ``[B, H, 1, Tk]``, broadcast
                                        over the Tq query rows
``alibi_bias`` mpt                      ``mpt``: ``build_mpt_alibi_tensor`` over
                                        ``max(MptConfig.max_seq_len, Tk)`` keys, sliced to the
                                        last Tk as ``MptAttention.forward`` does, broadcast over
                                        the query rows and cast to the dtype (HF returns float32)
``alibi_bias`` causal, symmetric        unsupported: transformers builds only BLOOM's and MPT's
                                        row-constant tables
``t5_buckets``                          ``t5``: ``T5Attention._relative_position_bucket``
``t5_bias``                             ``t5``: ``T5Attention.compute_bias`` (``past_seen_tokens``)
                                        with the given table in ``relative_attention_bias``;
                                        ``is_decoder = not bidirectional``
======================================  =====================================================

M-RoPE and NoPE (clauses MROPE-*, NOPE-*):

======================================  =====================================================
``mrope`` layout contiguous             ``qwen2_vl``: ``Qwen2VLRotaryEmbedding`` (from a
                                        ``Qwen2VLTextConfig`` whose ``rope_parameters`` carry
                                        ``mrope_section``; its ``recomposition_frequencies``)
                                        + ``apply_rotary_pos_emb``
``mrope`` layout interleaved            ``qwen3_vl``: ``Qwen3VLTextRotaryEmbedding``
                                        (``Qwen3VLTextConfig``, interleaved recomposition) +
                                        ``apply_rotary_pos_emb``
``nope_layer_flags``                    ``smollm3``: ``SmolLM3Config.no_rope_layers`` as the
                                        config derives it (``no_rope_layer_interval``) or takes it
``nope_apply``                          ``smollm3``: ``SmolLM3Attention.forward`` of layer
                                        ``layer_idx`` (``use_rope`` from the config's flags) with
                                        0/1 selection projections (``hidden = [q | k]``) and real
                                        ``SmolLM3RotaryEmbedding`` cos/sin; q and k are read where
                                        the layer hands them to its attention function
                                        (``AttentionInterface`` entry ``posenc_capture``)
``attention_probs``                     ``deepseek_v3/modeling_deepseek_v3.py``: a
                                        ``DeepseekV3Attention`` built from a ``DeepseekV3Config``
                                        with the case's rope_parameters and qk dims; its own
                                        ``scaling`` (``yarn_apply_mscale`` in ``__init__``) fed to
                                        the module's ``eager_attention_forward``, whose
                                        ``attn_weights`` are returned (v is a dummy)
======================================  =====================================================

The HF M-RoPE modules compute angles in float32 and cast cos/sin to the activation dtype; their
cos/sin are ``cat(a, a)`` ``[B, T, head_dim]``, de-duplicated to the canonical half width.

Devices: ``cpu``, and ``cuda`` when ``torch.cuda.is_available()``.
"""

from __future__ import annotations

import torch
import transformers
from torch import nn
from transformers import (
    BertConfig, DataCollatorWithFlattening, DynamicCache, GPT2Config, GPT2Model, GPTJConfig,
    GPTNeoXConfig, LlamaConfig, LlamaForCausalLM, OPTConfig,
)
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.bloom import modeling_bloom as hf_bloom
from transformers.models.mpt import modeling_mpt as hf_mpt
from transformers.models.t5 import modeling_t5 as hf_t5
from transformers.models.t5.configuration_t5 import T5Config
from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
from transformers.models.gpt_neox import modeling_gpt_neox as hf_neox
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_dsv3
from transformers.models.gptj import modeling_gptj as hf_gptj
from transformers.models.llama import modeling_llama as hf_llama
from transformers.models.llama4 import modeling_llama4 as hf_llama4
from transformers.models.llama4.configuration_llama4 import Llama4TextConfig
from transformers.models.bart import modeling_bart as hf_bart
from transformers.models.m2m_100 import modeling_m2m_100 as hf_m2m
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
from transformers.models.roberta import modeling_roberta as hf_roberta
from transformers.models.roberta.configuration_roberta import RobertaConfig
from transformers.models.whisper import modeling_whisper as hf_whisper
from transformers.models.opt.modeling_opt import OPTDecoder, OPTLearnedPositionalEmbedding
from transformers.models.qwen2_vl import modeling_qwen2_vl as hf_qwen2_vl
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
from transformers.models.qwen3_vl import modeling_qwen3_vl as hf_qwen3_vl
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
from transformers.models.smollm3 import configuration_smollm3 as hf_smollm3_config
from transformers.models.smollm3 import modeling_smollm3 as hf_smollm3
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_deepseek_v3
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
from transformers import AttentionInterface

from posenc.spec.errors import AdapterError

from .base import Adapter, Unsupported
from .torch_adapter import DTYPES, TorchAdapter, torch_device_available

#: The base every HF sinusoidal table and GPT-J's rotary table hard-code.
HF_FIXED_BASE = 10000.0
_DEINTERLEAVE_FULL = ("HF's de-interleaved RoPE is DeepSeek-V3's apply_rotary_pos_emb_interleave, which rotates "
                      "the whole rope head (qk_rope_head_dim): no partial rotary")
#: GPT-J's default context (``GPTJConfig.n_positions``); tables grow past it when needed.
GPTJ_MIN_POSITIONS = 2048


def _probe(dtype: torch.dtype, device) -> torch.Tensor:
    """An empty tensor: HF rotary modules read only ``x.dtype`` and ``x.device`` from it."""
    return torch.empty(0, dtype=dtype, device=device)


def _filled_cache(config, batch: int, cache_length: int, heads: int, head_dim: int,
                  dtype: torch.dtype, device) -> DynamicCache | None:
    """A ``DynamicCache`` holding ``cache_length`` dummy (zero) entries for every layer.

    The model then derives its default positions from ``cache.get_seq_length()`` itself.
    """
    if cache_length <= 0:
        return None
    cache = DynamicCache(config=config)
    z = torch.zeros(batch, heads, cache_length, head_dim, dtype=dtype, device=device)
    for layer in range(config.num_hidden_layers):
        cache.update(z, z, layer)
    return cache


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


def _dedup_half(full: torch.Tensor, what: str) -> torch.Tensor:
    """HF's ``[..., r]`` cos/sin is ``cat(c, c)``: return the first half ``c`` ``[..., r/2]``.

    Both halves are checked to be bit-identical, so the de-duplication loses nothing; if a
    future transformers changes the layout this raises instead of guessing.
    """
    h = full.shape[-1] // 2
    first, second = full[..., :h], full[..., h:]
    if not torch.equal(first, second):
        raise AdapterError(f"hf-transformers: HF {what} is not cat(c, c); its halves differ")
    return first


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


#: The ``rope_parameters`` keys HF 5.24 reads for each scaled rope_type (the spec's
#: ``RopeParams`` fields carry the same names).  ``partial_rotary_factor`` is added by the
#: dispatch where a module needs it; ``max_position_embeddings`` is a config attribute.
_HF_SCALING_KEYS = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
             "mscale", "mscale_all_dim", "truncate"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "longrope": ("factor", "original_max_position_embeddings", "attention_factor", "short_factor", "long_factor"),
    "proportional": ("factor",),
}
#: rope_types whose HF init function returns its own attention factor (read from rope_parameters).
_HF_OWN_ATTENTION_FACTOR = ("yarn", "longrope")


def _rope_parameters(params, **extra) -> dict:
    """HF 5.24 ``rope_parameters`` for ``params``: rope_type, rope_theta and the type's keys.

    Fields that are ``None`` are left out, so HF applies its own defaults (beta_fast 32,
    beta_slow 1, truncate true; longrope's factor from ``max_position_embeddings``) -- with one
    exception: YaRN's validation *requires* the ``factor`` key, and ``_compute_yarn_parameters``
    derives the factor from ``max_position_embeddings / original_max_position_embeddings`` only
    when that key holds ``None`` (SCALE-YARN-FACTOR), so a missing yarn factor is passed as
    ``None``.  Lists (short/long factors) go in as Python lists of floats, as in a config.json.
    """
    rp: dict = {"rope_type": params.rope_type, "rope_theta": float(params.rope_theta)}
    for key in _HF_SCALING_KEYS[params.rope_type]:
        value = getattr(params, key)
        if value is None:
            if params.rope_type == "yarn" and key == "factor":
                rp["factor"] = None
            continue
        if key in ("short_factor", "long_factor"):
            value = [float(v) for v in value]
        elif key == "truncate":
            value = bool(value)
        elif key == "original_max_position_embeddings":
            value = int(value)
        else:
            value = float(value)
        rp[key] = value
    rp.update(extra)
    return rp


def _config_extra(params) -> dict:
    """Config attributes besides ``rope_parameters``: ``max_position_embeddings``.

    HF reads it as the dynamic-NTK ``L_max`` (``_compute_dynamic_ntk_parameters`` and the
    rotary module's ``max_seq_len_cached`` / ``original_max_seq_len``) and as the numerator of
    the derived YaRN / LongRoPE factor; when the spec leaves it unset the model class's own
    default stays, which no numbers of the other rope_types depend on.
    """
    if params.max_position_embeddings is not None:
        return {"max_position_embeddings": int(params.max_position_embeddings)}
    if params.rope_type in ("yarn", "llama3", "longrope") and params.factor and params.original_max_position_embeddings:
        # What a published config carries (Qwen2.5: 32768 x 4); only HF's consistency warnings
        # read it, since an explicit factor wins in every one of these init functions.
        return {"max_position_embeddings": int(params.original_max_position_embeddings * params.factor)}
    return {}


def _check_scaling_expressible(params) -> None:
    """Raise :class:`Unsupported` for the scaled cases HF 5.24 has no code for (see the module docstring)."""
    t = params.rope_type
    if t == "default":
        return
    if params.attention_factor is not None and t not in _HF_OWN_ATTENTION_FACTOR:
        raise Unsupported(f"HF's rope init function for rope_type {t!r} ignores an attention_factor (it returns "
                          f"1.0 and rope_parameters has no key for it; only yarn and longrope read one), and "
                          f"the rotary module resets attention_scaling from it"
                          + (" on every dynamic update" if t == "dynamic" else ""))
    if t == "dynamic" and params.dynamic_policy != "grow_until_reset":
        raise Unsupported("dynamic_policy per_call (SCALE-DYNAMIC-PER-CALL): transformers' dynamic_rope_update "
                          "implements only grow-until-reset (SCALE-DYNAMIC-GROW): a grown theta' stays until a "
                          "call shorter than max_position_embeddings")
    if t == "longrope" and params.factor is None and params.max_position_embeddings is None:
        raise Unsupported("longrope without factor and max_position_embeddings: HF would derive the factor from "
                          "the model class's default max_position_embeddings, which the spec does not define")
    if params.pairing == "interleaved" and params.rdim != params.head_dim and t != "proportional":
        raise Unsupported(f"interleaved partial RoPE is GPT-J's, whose rotary table "
                          f"(create_sinusoidal_positions) has no rope scaling (rope_type {t!r})")


def _set_attention_factor(rotary: nn.Module, params) -> None:
    """ROPE-ATTENTION-FACTOR through HF's own mechanism: ``rotary.attention_scaling``.

    Every HF rotary module multiplies cos/sin by ``self.attention_scaling``, which its
    ``rope_init_fn`` sets (1.0 for default RoPE; YaRN / LongRoPE return their factor there).
    Default RoPE has no config key for it, so the attribute is set after construction; the
    scaled types either take it from ``rope_parameters`` (yarn, longrope) or are unsupported
    with an explicit factor (:func:`_check_scaling_expressible`).
    """
    if params.rope_type == "default" and params.attention_factor is not None:
        rotary.attention_scaling = float(params.attention_factor)


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


#: ``MptConfig().max_seq_len``: the length MptModel builds its ALiBi table for.
MPT_DEFAULT_MAX_SEQ_LEN = 2048


def _bloom_bias_max(params) -> None:
    if params.alibi_bias_max != 8:
        raise Unsupported(f"BLOOM's _get_alibi_slopes hard-codes the 8 of 2^(-8k/n) "
                          f"(alibi_bias_max {params.alibi_bias_max:g} is MPT's parameter)")


# --------------------------------------------------------------------------------------------
# The adapter
# --------------------------------------------------------------------------------------------


class HFTransformersAdapter(Adapter):
    name = "hf-transformers"
    framework = "torch"
    devices = ("cpu", "cuda")
    notes = ("HF transformers 5.24 on torch: float32 inv_freq and angles, cos/sin cast to the "
             "activation dtype before the rotation (Llama 4: float32 complex rotation)")

    # Array conversion only is borrowed from the torch adapter; no operation is inherited.
    from_numpy = TorchAdapter.from_numpy
    to_numpy = TorchAdapter.to_numpy
    dtype_of = TorchAdapter.dtype_of
    device_of = TorchAdapter.device_of

    def __init__(self):
        self._llama_lm = None  # tiny LlamaForCausalLM for the position-id rules

    def versions(self):
        return {"torch": torch.__version__, "transformers": transformers.__version__}

    def device_available(self, device):
        return torch_device_available(device)

    # ---- RoPE ------------------------------------------------------------------------------
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
        _check_scaling_expressible(params)
        dt, D, r = DTYPES[dtype], params.head_dim, params.rdim
        full = r == D or params.rope_type == "proportional"
        if params.pairing == "deinterleave" and r != D:
            raise Unsupported(_DEINTERLEAVE_FULL)
        if params.pairing == "interleaved" and not full:
            if params.rope_theta != HF_FIXED_BASE:
                raise Unsupported(f"interleaved partial RoPE is GPT-J's, whose create_sinusoidal_positions "
                                  f"hard-codes theta 10000 (got {params.rope_theta:g})")
            if params.attention_factor not in (None, 1.0):
                raise Unsupported("GPT-J's rotary table has no attention factor (no attention_scaling)")
            return _GptjRope(params, dt, device)
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
        rope_parameters = _rope_parameters(params, **extra)
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
                rotary, apply_fn = hf_llama.LlamaRotaryEmbedding(cfg), hf_llama.apply_rotary_pos_emb
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
        if rotary.inv_freq.shape[-1] * 2 != params.pair_dim:
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
        if params.pairing == "deinterleave":
            if r != params.head_dim:
                raise Unsupported(_DEINTERLEAVE_FULL)
            return hf_dsv3.apply_rotary_pos_emb_interleave(q, k, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))
        if params.pairing == "half":
            c2, s2 = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
            fn = hf_llama.apply_rotary_pos_emb if r == params.head_dim else hf_neox.apply_rotary_pos_emb
            return fn(q, k, c2, s2)
        return _gptj_rotate(q, sin, cos, r), _gptj_rotate(k, sin, cos, r)

    # ---- sinusoidal --------------------------------------------------------------------
    @torch.no_grad()
    def sinusoidal(self, position_ids, params, *, dtype, device):
        """SIN-VASWANI-CONCAT (Marian) / SIN-VASWANI-INTERLEAVED (DistilBERT), ``[B, T, D]``.

        The table has ``max(position_ids) + 1`` rows and is gathered with ``nn.Embedding``.
        """
        if params.base != HF_FIXED_BASE:
            raise Unsupported(f"HF's sinusoidal tables (Marian, DistilBERT, XLM) hard-code base 10000 "
                              f"(got {params.base:g})")
        dt = DTYPES[dtype]
        n_pos = int(position_ids.max()) + 1 if position_ids.numel() else 1
        if params.variant != "vaswani":
            return self._h_minus_1(position_ids, params, dt, n_pos)
        if params.layout == "concat":
            emb = MarianSinusoidalPositionalEmbedding(n_pos, params.dim).to(dtype=dt)
            emb.weight.copy_(emb.create_weight())  # what MarianPreTrainedModel._init_weights does
            emb = emb.to(position_ids.device)
            return emb(position_ids.shape, position_ids=position_ids)
        table = create_sinusoidal_embeddings(n_pos, params.dim, torch.empty(n_pos, params.dim, dtype=dt))
        emb = nn.Embedding.from_pretrained(table.to(position_ids.device), freeze=True)
        return emb(position_ids)

    def _h_minus_1(self, position_ids, params, dt, n_pos):
        """SIN-T2T (M2M100 ``get_embedding`` without a pad row), SIN-FAIRSEQ-POSITIONS (the
        ``M2M100SinusoidalPositionalEmbedding`` table), SIN-WHISPER (``sinusoids``).  The HF
        tables are float32 (the default dtype), cast to the requested dtype as ``model.to``
        would; rows are gathered as the HF modules gather them."""
        D, dev = params.dim, position_ids.device
        if params.variant == "t2t":
            if D // 2 == 1:
                raise Unsupported("SIN-T2T at D // 2 == 1: tensor2tensor clamps the divisor h - 1 to 1, and no "
                                  "transformers code does (M2M100/fairseq get_embedding divides by zero, Whisper's "
                                  "sinusoids too); transformers has no tensor2tensor port")
            table = hf_m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(n_pos, D, None)
        elif params.variant == "fairseq":
            emb = hf_m2m.M2M100SinusoidalPositionalEmbedding(n_pos, D, params.padding_idx).to(device=dev, dtype=dt)
            return emb.weights.index_select(0, position_ids.reshape(-1)).view(*position_ids.shape, -1)
        else:
            table = hf_whisper.sinusoids(n_pos, D)
        emb = nn.Embedding.from_pretrained(table.to(device=dev, dtype=dt), freeze=True)
        return emb(position_ids)

    @torch.no_grad()
    def fairseq_positions(self, input_ids, params, cache_length):
        """SIN-FAIRSEQ-POSITIONS: ``M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids``."""
        return hf_m2m.M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids(
            input_ids, params.padding_idx, cache_length)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        """SIN-FAIRSEQ-POSITIONS end to end: ``M2M100SinusoidalPositionalEmbedding`` forward on
        ``input_ids`` (its own positions; its table regrows past ``num_positions``)."""
        if params.base != HF_FIXED_BASE:
            raise Unsupported(f"M2M100's sinusoids hard-code base 10000 (got {params.base:g})")
        emb = hf_m2m.M2M100SinusoidalPositionalEmbedding(16, params.dim, params.padding_idx)
        emb = emb.to(device=device, dtype=DTYPES[dtype])

        @torch.no_grad()
        def call(input_ids, cache_length=0):
            return emb(input_ids, cache_length=cache_length)
        return call

    # ---- learned -------------------------------------------------------------------------
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

    # ---- position ids --------------------------------------------------------------------
    def _lm(self, device) -> LlamaForCausalLM:
        if self._llama_lm is None:
            cfg = LlamaConfig(vocab_size=2, hidden_size=8, head_dim=8, intermediate_size=8, num_hidden_layers=1,
                              num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=1 << 20,
                              bos_token_id=None, eos_token_id=None, pad_token_id=None)
            self._llama_lm = LlamaForCausalLM(cfg).eval()
        return self._llama_lm.to(device)

    @torch.no_grad()
    def position_ids(self, rule, *, device, **x):
        """POS-PREFILL, POS-DECODE, POS-LEFT-PAD, POS-PACKED from HF code (see module docstring)."""
        if rule in ("prefill", "decode"):
            B, T = x["batch"], x["seq_len"]
            C = x.get("cache_length", 0) if rule == "decode" else 0
            lm = self._lm(device)
            seen = []
            hook = lm.model.rotary_emb.register_forward_pre_hook(
                lambda mod, args, kwargs: seen.append(kwargs.get("position_ids", args[1] if len(args) > 1 else None)),
                with_kwargs=True)
            try:
                cfg = lm.config
                cache = _filled_cache(cfg, B, C, cfg.num_key_value_heads, cfg.head_dim, lm.dtype, device)
                lm.model(input_ids=torch.zeros(B, T, dtype=torch.long, device=device), cache=cache,
                         use_cache=cache is not None)
            finally:
                hook.remove()
            if len(seen) != 1 or seen[0] is None:
                raise AdapterError("hf-transformers: LlamaModel did not pass position_ids to rotary_emb")
            return seen[0].expand(B, T)  # HF broadcasts one row [1, T] over the batch
        if rule == "left_pad":
            mask, C = x["attention_mask"], x.get("cache_length", 0)
            B, L = mask.shape
            lm = self._lm(device)
            ids = torch.zeros(B, L, dtype=torch.long, device=device)
            full = lm._prepare_position_ids_for_generation(ids, {"attention_mask": mask})
            if C == 0:
                return full
            cfg = lm.config
            cache = _filled_cache(cfg, B, C, cfg.num_key_value_heads, cfg.head_dim, lm.dtype, device)
            # What GenerationMixin._prefill does when restarting from a cache with the full inputs.
            inputs = lm.prepare_inputs_for_generation(
                ids, next_sequence_length=L - cache.get_seq_length(), cache=cache, attention_mask=mask,
                position_ids=full)
            return inputs["position_ids"]
        if rule == "packed":
            cu = [int(v) for v in x["cu_seqlens"].tolist()]
            lengths = [b - a for a, b in zip(cu[:-1], cu[1:])]
            features = [{"input_ids": [0] * n} for n in lengths]
            batch = DataCollatorWithFlattening(return_tensors="pt")(features)
            return batch["position_ids"].to(device)
        raise Unsupported(f"position_ids rule {rule!r} is not wired in this adapter")

    # ---- ALiBi -----------------------------------------------------------------------------
    @torch.no_grad()
    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES from HF's own tables (float32, whatever the activations).

        form bloom: ``build_alibi_tensor`` on the mask ``[[1, 1]]`` gives ``m * pos`` with pos
        ``[0, 1]``: its column 1 is the slopes (``_get_alibi_slopes``, exactly).  Other forms:
        ``build_mpt_alibi_tensor(H, 2, alibi_bias_max)`` gives ``m * (j - 1)``: its column 0
        negated is the slopes.
        """
        H = params.num_heads
        if params.form == "bloom":
            _bloom_bias_max(params)
            mask = torch.ones(1, 2, dtype=torch.int64, device=device)
            return hf_bloom.build_alibi_tensor(mask, H, torch.float32)[:, 0, 1]
        return -hf_mpt.build_mpt_alibi_tensor(H, 2, params.alibi_bias_max, device=device)[:, 0, 0]

    @torch.no_grad()
    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        """ALIBI-BLOOM, ALIBI-MPT through HF's builders; canonical ``[B, H, Tq, Tk]`` / ``[H, Tq, Tk]``."""
        dt, H = DTYPES[dtype], params.num_heads
        if params.form == "bloom":
            _bloom_bias_max(params)
            B, tk = attention_mask.shape
            alibi = hf_bloom.build_alibi_tensor(attention_mask, H, dt)  # [B*H, 1, Tk] in dt
            return alibi.view(B, H, 1, tk).expand(B, H, query_length, tk).contiguous()
        if params.form == "mpt":
            n = max(MPT_DEFAULT_MAX_SEQ_LEN, key_length)  # MptModel builds the table over config.max_seq_len
            table = hf_mpt.build_mpt_alibi_tensor(H, n, params.alibi_bias_max, device=device)  # [H, 1, n]
            # MptAttention.forward: position_bias[:, max(0, size(1) - q_len):, max(0, size(2) - k_len):]
            bias = table[:, max(0, table.size(1) - query_length):, max(0, table.size(2) - key_length):]
            return bias.expand(H, query_length, key_length).to(dt).contiguous()
        raise Unsupported(f"ALiBi form {params.form!r}: transformers builds only BLOOM's (+m pos_j, "
                          "build_alibi_tensor) and MPT's (m (j - (L - 1)), build_mpt_alibi_tensor) row-constant "
                          "tables; no model there has the "
                          + ("relative causal -m (i - j) table" if params.form == "causal" else
                             "symmetric (encoder) -m |i - j| bias"))

    # ---- T5 --------------------------------------------------------------------------------
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

    # ---- M-RoPE and NoPE -------------------------------------------------------------------
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


    # ---- YaRN softmax scale ----------------------------------------------------------------
    @torch.no_grad()
    def attention_probs(self, q, k, params):
        """SCALE-YARN-SOFTMAX-SCALE: DeepSeek-V3's attention probabilities, all by transformers.

        ``DeepseekV3Attention.__init__`` computes ``scaling`` = ``yarn_apply_mscale(
        rope_parameters, qk_head_dim ** -0.5)``; the module's ``eager_attention_forward`` forms
        ``softmax(q k^T * scaling)`` (softmax in float32, cast to q's dtype) and returns it as
        ``attn_weights``.  k heads are repeated by HF's ``repeat_kv`` (``num_key_value_heads``).
        """
        rope = params.rope
        if rope.factor is None:
            raise Unsupported("yarn without factor: DeepSeek-V3's yarn_apply_mscale reads rope_parameters['factor'] "
                              "as is (no max_position_embeddings / original fallback, SCALE-YARN-FACTOR) and fails "
                              "on None")
        B, Hq, Tq, D = q.shape
        Hk = k.shape[1]
        if Hq % Hk:
            raise Unsupported(f"DeepseekV3Attention needs q heads ({Hq}) divisible by kv heads ({Hk})")
        if D != params.qk_head_dim or k.shape[-1] != params.qk_head_dim:
            raise ValueError(f"q/k width {D}/{k.shape[-1]} != qk_head_dim {params.qk_head_dim}")
        cfg = DeepseekV3Config(
            hidden_size=8, num_attention_heads=Hq, num_key_value_heads=Hk, q_lora_rank=None, kv_lora_rank=4,
            qk_nope_head_dim=params.qk_head_dim - rope.head_dim, qk_rope_head_dim=rope.head_dim, v_head_dim=1,
            vocab_size=1, intermediate_size=1, moe_intermediate_size=1, num_hidden_layers=1,
            pad_token_id=None, bos_token_id=None, eos_token_id=None,
            rope_parameters=_rope_parameters(rope), **_config_extra(rope))
        attn = hf_deepseek_v3.DeepseekV3Attention(cfg, layer_idx=0).to(device=q.device, dtype=q.dtype).eval()
        if attn.qk_head_dim != params.qk_head_dim:
            raise AdapterError(f"hf-transformers: DeepseekV3Attention built qk_head_dim {attn.qk_head_dim}, "
                               f"expected {params.qk_head_dim}")
        v = torch.zeros(B, Hk, k.shape[2], 1, dtype=q.dtype, device=q.device)
        _, weights = hf_deepseek_v3.eager_attention_forward(attn, q, k, v, None, scaling=attn.scaling)
        return weights


ADAPTER = HFTransformersAdapter

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
                                        + ``apply_rotary_pos_emb`` (rotates the first dims);
                                        a case's own fraction (ROPE-ROTARY-FRACTION) is passed
                                        as is: transformers sizes the width itself
``rope`` interleaved, full              ``llama4/modeling_llama4.py``:
(and proportional, any rotary_dim)      ``Llama4TextRotaryEmbedding`` + ``apply_rotary_emb``
                                        (complex ``freqs_cis``; layout ``[B, T, H, D]``)
``rope`` interleaved, partial           ``gptj/modeling_gptj.py``: ``GPTJRotaryEmbedding``
(rope_type default only)                (``create_sinusoidal_positions``) +
                                        ``apply_rotary_pos_emb`` / ``rotate_every_two``
``rope_apply_with_cos_sin``             half: the Llama (full) or GPT-NeoX (partial)
                                        ``apply_rotary_pos_emb`` with ``cat(c, c)``;
                                        interleaved: GPT-J ``apply_rotary_pos_emb`` (half-width)
``rope`` / ``rope_apply_with_cos_sin``  ``nanochat/modeling_nanochat.py``: ``apply_rotary_pos_emb``
rotation negative, half, full           (its ``rotate_half`` is ``cat(x2, -x1)``) with Llama's
                                        rotary tables; other pairings or partial rotary with
                                        rotation negative: tables only, apply unsupported
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
``sinusoidal`` order cos_first, t2t     ``musicgen``: ``MusicgenSinusoidalPositionalEmbedding``'s
                                        ``weights``, ``index_select`` as its forward does
``sinusoidal`` order cos_first,         ``vibevoice``: ``VibeVoiceDiffusionHeadSinusoidalEmbedding``
vaswani concat (even D, int base)       (``diffusion_max_period`` = base) on the positions; units
                                        turns, a scale other than 1, cos first for fairseq / whisper:
                                        in no transformers table (Unsupported)
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
                   head_dim`` (or the case's own fraction): always the full-width module (``LlamaRotaryEmbedding`` + Llama's
                   ``apply_rotary_pos_emb`` for half pairing, ``Llama4TextRotaryEmbedding`` for
                   interleaved), since its head_dim/2 frequencies end in zeros and the whole head
                   is rotated; cos/sin come back ``[B, T, head_dim/2]`` (``pair_dim/2``)
=================  ==============================================================================

Scaled cases HF cannot express raise :class:`Unsupported`: ``dynamic`` with
``dynamic_policy`` per_call / None (transformers implements grow-until-reset only); an explicit
``attention_factor`` with linear, dynamic, llama3 or proportional (their init functions return
1.0, read no such key, and a dynamic update would reset ``attention_scaling`` from it); any
scaling with interleaved partial RoPE (GPT-J's table has none); longrope with neither
``factor`` nor ``max_position_embeddings`` (HF would take the model class's default length);
condensed positions (ROPE-CONDENSE: transformers has no such key, its linear rule divides the
frequencies) and a fraction for GPT-J's interleaved partial module (it takes ``rotary_dim``, a width).

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

The operations live in :mod:`posenc.adapters.hf_port`, one module per spec family (``rope``,
``rope_scaling`` -- which has ``attention_probs`` --, ``sinusoidal``, ``learned``,
``position_ids``, ``alibi``, ``t5``, ``mrope``, ``nope``); this module composes the adapter
from their ``Ops`` mixins.
"""

from __future__ import annotations

import torch
import transformers

from .base import Adapter, family_ports
from .torch_adapter import TorchAdapter, torch_device_available
from .hf_port._common import HF_FIXED_BASE  # noqa: F401 - re-exported
from .hf_port.alibi import MPT_DEFAULT_MAX_SEQ_LEN  # noqa: F401 - re-exported
from .hf_port.rope import GPTJ_MIN_POSITIONS  # noqa: F401 - re-exported


class HFTransformersAdapter(*family_ports("posenc.adapters.hf_port"), Adapter):
    name = "hf-transformers"
    #: rope.apply and mrope.apply with int32 position_ids and on ``[B, T, H, D]`` (``apply_rotary_pos_emb(...,
    #: unsqueeze_dim=2)``; Llama 4's and GPT-J's rotations take that layout themselves); axial.apply with int32
    #: positions and as tokens ``[N, H, D]`` (the vision towers' own sequence layout)
    call_forms = ("rope.apply_int32", "rope.apply_token_major", "mrope.apply_int32", "mrope.apply_token_major",
                  "axial.apply_int32", "axial.apply_tokens")
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


ADAPTER = HFTransformersAdapter

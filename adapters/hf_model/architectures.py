"""Tiny configurations of real architectures, built from transformers' config classes.

Each :class:`Arch` names a transformers ``model_type``, the named model of
``spec/registry/models.yaml`` whose positional parameters it carries, and tiny sizes.
:func:`tiny_config` gives the ``config.json``-style dict: the config class's sizes shrunk
(2 to 4 layers, width 64 to 224, a vocabulary of 96), the registry entry's positional parameters
overlaid, and the context shrunk so that every regime of the encoding is reached within a few
hundred tokens:

* **head width**: the tiny width (16 or 32); the rotated fraction kept (GPT-NeoX's 1/4, GPT-J's
  rotary_dim / head_dim);
* **context**: ``original_max_position_embeddings`` and ``max_position_embeddings`` divided by one
  power of two ``s`` chosen so the original context becomes ``Arch.context`` (Llama 3.1: 8192 /
  128 = 64; Phi-3.5: 4096 / 128 = 32, 131072 / 128 = 1024, so LongRoPE's switch and its
  attention factor sqrt(1 + ln(32) / ln(4096 / s))... are reached at 32 tokens); the scaling
  factors, theta and the llama3 / YaRN band fields kept;
* **LongRoPE factor lists**: resampled from the real model's d/2 entries to the tiny width's
  m = d'/2 by taking entry ``round(i (n - 1) / (m - 1))`` for i = 0 .. m - 1 (first and last
  kept, monotone lists stay monotone);
* **M-RoPE sections**: scaled to the tiny width's pairs by :func:`scaled_sections` (largest remainder);
* **ALiBi**: the real head count (its slopes depend on it: BLOOM-176B's 112, MPT-7B's 32) with a
  head width of 2;
* **absolute tables**: ``n_positions`` / ``max_position_embeddings`` shrunk to 128.

The import of that dict (:func:`posenc.hf.config.params_from_hf_config`) is the oracle's
parameter set (``HFModelAdapter.encodings``), and the kit's tests check that it equals the
registry entry after the same shrink (``expected_encoding``).  Weights are drawn by torch's
seeded initialiser with ``initializer_range`` 0.2 at width 64 (scaled as 1.6 / sqrt(width)): at
transformers' 0.02 the attention of a tiny random model is nearly uniform and a one-position
shift of the decode steps moves the logits by 1e-3 of their size; at 0.2 by 25 % and more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from posenc.spec.registry import load as load_registry

VOCAB = 96
PAD = 0


@dataclass(frozen=True)
class Arch:
    """One architecture of the model matrix.

    ``sizes``: the config class's keyword arguments for the tiny model; ``registry``: the named
    model whose positional parameters are overlaid (None: the config class's own defaults are
    the subject); ``context``: what the original context shrinks to; ``rope``: ``(function name,
    convention)`` of the modeling module's rotation (``qk``: ``f(q, k, cos, sin) -> (q, k)`` on
    ``[B, H, T, D]``; ``single_bthd_kq`` / ``_qk``: one tensor ``[B, T, H, R]`` at a time, k then q
    (GPT-J) or q then k (Gemma 4));
    ``table``: attribute path of the absolute position table module; ``bias``: the modeling
    module's bias builder; ``capabilities``: what the hf:* model adapter offers for it."""

    model_type: str
    auto: str
    sizes: dict
    registry: Optional[str] = None
    kind: str = "decoder"
    context: int = 64
    rope: Optional[tuple[str, str]] = None
    table: Optional[str] = None
    bias: Optional[tuple[str, str]] = None
    capabilities: tuple[str, ...] = ("cache", "position_ids", "inputs_embeds", "generate", "static_cache",
                                     "attention_mask")
    #: the attention implementations transformers builds it with; ``attention``: whether its attention
    #: goes through transformers' attention functions (the attention probe)
    attn: tuple[str, ...] = ("eager", "sdpa")
    attention: bool = True
    #: dtypes transformers cannot run it at, with the reason (the scenarios report them unsupported)
    unsupported: dict = field(default_factory=dict)
    #: encodings beside the config import's: ``softmax_scale`` (DeepSeek's YaRN mscale on the attention)
    extra_encodings: tuple[str, ...] = ()
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def probes(self) -> tuple[str, ...]:
        kinds = ["rope"] if self.rope else []
        kinds += ["table"] if self.table else []
        kinds += ["bias"] if self.bias else []
        return tuple(kinds) + (("attention",) if self.attention else ())


def _decoder(hidden: int = 64, heads: int = 4, kv_heads: Optional[int] = 2, layers: int = 2, **kw) -> dict:
    d = {"vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_hidden_layers": layers,
         "num_attention_heads": heads, "pad_token_id": PAD, "bos_token_id": 1, "eos_token_id": 2,
         "initializer_range": 1.6 / hidden ** 0.5, "tie_word_embeddings": False}
    if kv_heads:
        d["num_key_value_heads"] = kv_heads
    d.update(kw)
    return d


def _seq2seq(**kw) -> dict:
    """A 2 + 2 layer encoder-decoder of width 64 (4 heads a side); ``kw`` adds or overrides fields."""
    d = {"vocab_size": VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "init_std": 0.2,
         "tie_word_embeddings": False}
    d.update(kw)
    return d


def _vl(rope_parameters: dict, vision: dict, **text) -> dict:
    """A Qwen-VL config: the tiny text model with M-RoPE, a 1-layer vision tower (patches of 2, merged
    2 x 2) and the special tokens 90 .. 93 (image, video, vision start and end)."""
    return {"text_config": _decoder(max_position_embeddings=512, rope_parameters=rope_parameters, **text),
            "vision_config": {"depth": 1, "num_heads": 2, "patch_size": 2, "spatial_merge_size": 2,
                              "temporal_patch_size": 2, "in_channels": 3, **vision},
            "image_token_id": 90, "video_token_id": 91, "vision_start_token_id": 92, "vision_end_token_id": 93,
            "pad_token_id": PAD, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False}


#: Qwen-VL's positions given as [4, B, T] (text row on top), its special tokens never drawn nor generated
_VL_EXTRA = {"text_position_row": True, "reserved": (90, 91, 92, 93)}
_VL_CAPABILITIES = ("cache", "position_ids", "inputs_embeds", "generate", "static_cache", "attention_mask", "images")

ARCHS: dict[str, Arch] = {a.model_type: a for a in (
    Arch("llama", "AutoModelForCausalLM", _decoder(), registry="llama-3.1-8b", rope=("apply_rotary_pos_emb", "qk"),
         notes="Llama 3.1's llama3 scaling (factor 8, band 1..4) at original context 64"),
    Arch("qwen2", "AutoModelForCausalLM", _decoder(), registry="qwen2.5-7b-yarn", rope=("apply_rotary_pos_emb", "qk"),
         notes="Qwen2.5's YaRN recipe (factor 4) at original context 64"),
    Arch("phi3", "AutoModelForCausalLM", _decoder(), registry="phi-3.5-mini", context=32,
         rope=("apply_rotary_pos_emb", "qk"), notes="Phi-3.5-mini's LongRoPE factors resampled to 8 pairs; switch at 32"),
    Arch("gpt_neox", "AutoModelForCausalLM", _decoder(hidden=128, kv_heads=None, use_parallel_residual=True),
         registry="gpt-neox-20b", rope=("apply_rotary_pos_emb", "qk"), notes="partial rotary: 8 of 32 dims"),
    Arch("gptj", "AutoModelForCausalLM",
         {"vocab_size": VOCAB, "n_embd": 128, "n_head": 4, "n_layer": 2, "n_positions": 256, "pad_token_id": PAD,
          "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 1.6 / 128 ** 0.5, "tie_word_embeddings": False},
         registry="gpt-j-6b", rope=("apply_rotary_pos_emb", "single_bthd_kq"),
         notes="interleaved pairs on the first 8 of 32 dims",
         extra={"rotation_table": "GPTJRotaryEmbedding.embed_positions, sin and cos of n_positions rows"}),
    Arch("smollm3", "AutoModelForCausalLM", _decoder(layers=4), registry="smollm3-3b", rope=("apply_rotary_pos_emb", "qk"),
         notes="NoPE on every 4th layer (layer 3 of 4)"),
    Arch("deepseek_v3", "AutoModelForCausalLM",
         _decoder(kv_heads=4, q_lora_rank=None, kv_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16,
                  moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
                  topk_group=1, first_k_dense_replace=2, num_mtp_layers=0, rope_interleave=True),
         registry="deepseek-v3-rope", rope=("apply_rotary_pos_emb_interleave", "qk"), extra_encodings=("softmax_scale",),
         notes="MLA's 16-dim rope part, de-interleaved (rope_interleave), YaRN factor 40 with mscale: the softmax "
               "scale checked on the attention probe"),
    Arch("gemma4_text", "AutoModelForCausalLM",
         _decoder(head_dim=16, hidden_size_per_layer_input=16, vocab_size_per_layer_input=VOCAB, sliding_window=16,
                  layer_types=["sliding_attention", "full_attention"], per_layer_config={"01": {"head_dim": 64}},
                  rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                   "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                      "rope_theta": 1000000.0}}),
         registry="gemma-4-full-attention", rope=("apply_rotary_pos_emb", "single_bthd_qk"),
         notes="Gemma 4: a sliding layer (theta 1e4, window 16) and a full-attention layer with proportional RoPE on "
               "16 of its 64 dims (theta 1e6), the registry's 512 / 128 shrunk by 8"),
    Arch("qwen2_vl", "AutoModelForImageTextToText",
         _vl({"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
             {"embed_dim": 32, "hidden_size": 64, "mlp_ratio": 2}),
         registry="qwen2-vl", rope=("apply_rotary_pos_emb", "qk"), extra=_VL_EXTRA, capabilities=_VL_CAPABILITIES,
         notes="M-RoPE over 8 pairs, sections [2, 3, 3] (Qwen2-VL's [16, 24, 24] over 64, scaled by 1/8); a "
               "1-layer vision tower; images of 4 x 6 patches merged 2 x 2"),
    Arch("qwen3_vl", "AutoModelForImageTextToText",
         _vl({"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [3, 3, 2], "mrope_interleaved": True},
             {"hidden_size": 32, "intermediate_size": 64, "out_hidden_size": 64, "num_position_embeddings": 16,
              "deepstack_visual_indexes": [0]}, head_dim=16),
         registry="qwen3-vl", rope=("apply_rotary_pos_emb", "qk"), extra=_VL_EXTRA, capabilities=_VL_CAPABILITIES,
         notes="interleaved M-RoPE over 8 pairs, sections [3, 3, 2] (Qwen3-VL's [24, 20, 20] over 64, scaled by 1/8 "
               "with the largest remainder); a 1-layer vision tower with DeepStack into layer 0"),
    Arch("gpt2", "AutoModelForCausalLM",
         {"vocab_size": VOCAB, "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 128, "pad_token_id": PAD,
          "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.2, "tie_word_embeddings": False},
         registry="gpt2", table="transformer.wpe", notes="learned table of 128 rows"),
    Arch("opt", "AutoModelForCausalLM",
         {"vocab_size": VOCAB, "hidden_size": 64, "ffn_dim": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
          "max_position_embeddings": 128, "word_embed_proj_dim": 64, "pad_token_id": PAD, "bos_token_id": 1,
          "eos_token_id": 2, "init_std": 0.2, "tie_word_embeddings": False},
         registry="opt-125m", table="model.decoder.embed_positions", notes="learned table of 128 + 2 rows (offset 2)"),
    Arch("xglm", "AutoModelForCausalLM",
         {"vocab_size": VOCAB, "d_model": 64, "ffn_dim": 128, "num_layers": 2, "attention_heads": 4,
          "max_position_embeddings": 128, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "init_std": 0.2,
          "tie_word_embeddings": False},
         table="model.embed_positions", attn=("eager",), attention=False,
         unsupported={"float64": "transformers 5.24's XGLMAttention.forward clamps with torch.full((), "
                                 "finfo(float64).min), a float32 scalar that overflows: XGLM raises at float64"},
         notes="fairseq sinusoids (rows position + 2, padding_idx 1), its own attention (eager only)"),
    Arch("bloom", "AutoModelForCausalLM",
         {"vocab_size": VOCAB, "hidden_size": 224, "n_layer": 2, "n_head": 112, "pad_token_id": PAD, "bos_token_id": 1,
          "eos_token_id": 2, "initializer_range": 1.6 / 224 ** 0.5, "tie_word_embeddings": False},
         registry="bloom-176b", bias=("alibi", "bloom"), attn=("eager",), attention=False,
         capabilities=("cache", "inputs_embeds", "generate", "static_cache", "attention_mask"),
         notes="ALiBi over BLOOM-176B's 112 heads (width 2 each), from the attention mask; no position_ids"),
    Arch("mpt", "AutoModelForCausalLM",
         {"vocab_size": VOCAB, "d_model": 64, "n_layers": 2, "n_heads": 32, "expansion_ratio": 2, "max_seq_len": 128,
          "pad_token_id": PAD, "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.2,
          "attn_config": {"alibi": True, "alibi_bias_max": 8}, "tie_word_embeddings": False},
         registry="mpt-7b", bias=("position_bias", "mpt"), attn=("eager",), attention=False,
         capabilities=("cache", "inputs_embeds", "generate", "attention_mask"),
         extra={"bias_table": "MptModel.alibi, built once for max_seq_len keys: a longer sequence raises"},
         notes="ALiBi over MPT-7B's 32 heads (width 2 each), relative to the last key; no position_ids"),
    Arch("bart", "AutoModelForSeq2SeqLM",
         _seq2seq(max_position_embeddings=128, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                  decoder_start_token_id=2, forced_eos_token_id=None),
         registry="bart-base", kind="encoder-decoder", table="model.decoder.embed_positions",
         capabilities=("cache", "inputs_embeds", "generate", "static_cache", "attention_mask"),
         notes="the decoder's learned table (rows position + 2); a fixed 12-token source"),
    Arch("m2m_100", "AutoModelForSeq2SeqLM",
         _seq2seq(max_position_embeddings=128, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                  decoder_start_token_id=2),
         registry="m2m100-418m", kind="encoder-decoder", table="model.decoder.embed_positions",
         capabilities=("cache", "inputs_embeds", "generate", "static_cache", "attention_mask"),
         extra={"table_grows": "M2M100SinusoidalPositionalEmbedding.forward rebuilds its sinusoids longer for a longer "
                               "sequence (positions from the cache length: no position_ids)"},
         notes="the decoder's fairseq sinusoids (rows padding_idx + 1 + position, padding-aware); a fixed source"),
    Arch("whisper", "AutoModelForSpeechSeq2Seq",
         _seq2seq(num_mel_bins=8, max_source_positions=16, max_target_positions=128, pad_token_id=0, bos_token_id=1,
                  eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None, begin_suppress_tokens=None),
         registry="whisper-tiny", kind="encoder-decoder", table="model.decoder.embed_positions",
         capabilities=("cache", "inputs_embeds", "position_ids", "static_cache", "attention_mask"),
         extra={"features": (8, 32)},
         notes="the decoder's learned table; fixed log-mel features; no generate (Whisper's generate is its speech "
               "pipeline: language and task tokens, timestamps)"),
    Arch("t5", "AutoModelForSeq2SeqLM",
         {"vocab_size": VOCAB, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
          "num_heads": 4, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0, "initializer_factor": 4.0,
          "tie_word_embeddings": False},
         registry="t5-base", kind="encoder-decoder", bias=("compute_bias", "t5"),
         capabilities=("cache", "inputs_embeds", "generate", "static_cache", "attention_mask"),
         notes="relative buckets (32, max distance 128) in the decoder's first layer; a fixed source"),
    Arch("bert", "AutoModelForMaskedLM",
         {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "max_position_embeddings": 128, "pad_token_id": PAD, "initializer_range": 0.2,
          "tie_word_embeddings": False},
         registry="bert-base", kind="encoder", table="bert.embeddings.position_embeddings",
         capabilities=("position_ids", "inputs_embeds", "attention_mask"), notes="learned table of 128 rows, 2 token types"),
    Arch("roberta", "AutoModelForMaskedLM",
         {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "max_position_embeddings": 130, "pad_token_id": 1, "bos_token_id": 0,
          "eos_token_id": 2, "initializer_range": 0.2, "tie_word_embeddings": False, "type_vocab_size": 1,
          "layer_norm_eps": 1e-5},
         registry="roberta-base", kind="encoder", table="roberta.embeddings.position_embeddings",
         capabilities=("position_ids", "inputs_embeds", "attention_mask"),
         extra={"position_ids_are_rows": "RobertaEmbeddings.forward indexes its table with position_ids as given "
                                         "(rows padding_idx + 1 + position)"},
         notes="padding-aware rows padding_idx + 1 + position (128 + 2 rows)"),
)}


def architectures() -> list[str]:
    """The model types of the model matrix, in its order."""
    return list(ARCHS)


def _shrink(v: float, s: int) -> int:
    return max(1, int(round(v / s)))


def resample(factors, m: int) -> list[float]:
    """LongRoPE's per-pair factors for a tiny width: ``m`` entries, entry i the real list's
    ``round(i (n - 1) / (m - 1))`` (first and last kept)."""
    f = list(factors)
    n = len(f)
    if m == 1:
        return [f[0]]
    return [float(f[int(round(i * (n - 1) / (m - 1)))]) for i in range(m)]


def scaled_sections(sections, pairs: int) -> list[int]:
    """M-RoPE's ``mrope_section`` for a tiny width of ``pairs`` frequencies: each section scaled by
    ``pairs / sum(sections)``, floored, the pairs left over given to the largest remainders (first
    first on a tie): Qwen2-VL's [16, 24, 24] over 8 pairs is [2, 3, 3], Qwen3-VL's [24, 20, 20] is
    [3, 3, 2]."""
    total = sum(sections)
    exact = [x * pairs / total for x in sections]
    out = [int(x) for x in exact]
    for i in sorted(range(len(out)), key=lambda i: (-(exact[i] - out[i]), i))[:pairs - sum(out)]:
        out[i] += 1
    return out


def _head_dim(sizes: dict) -> int:
    hidden = sizes.get("hidden_size", sizes.get("n_embd"))
    heads = sizes.get("num_attention_heads", sizes.get("n_head"))
    return int(sizes.get("head_dim", hidden // heads))


def _rope_overlay(a: Arch, v: dict) -> dict:
    """HF config keys of a RopeParams registry entry, shrunk (module docstring)."""
    d = _head_dim(a.sizes)
    out: dict[str, Any] = {}
    rp: dict[str, Any] = {"rope_type": v.get("rope_type", "default"), "rope_theta": float(v["rope_theta"])}
    rdim = v.get("rotary_dim")
    if rdim is not None and rdim != v["head_dim"]:
        frac = rdim / v["head_dim"]
        if a.model_type == "gptj":
            out["rotary_dim"] = int(d * frac)
        else:
            rp["partial_rotary_factor"] = frac
    orig = v.get("original_max_position_embeddings")
    s = 1
    if orig:
        s = max(1, orig // a.context)
        rp["original_max_position_embeddings"] = _shrink(orig, s)
    for k in ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
              "attention_factor", "truncate"):
        if v.get(k) is not None:
            rp[k] = v[k]
    for k in ("short_factor", "long_factor"):
        if v.get(k) is not None:
            rp[k] = resample(v[k], (int(d * (rdim / v["head_dim"])) if rdim else d) // 2)
    if v.get("max_position_embeddings"):
        out["max_position_embeddings"] = _shrink(v["max_position_embeddings"], s)
    if a.model_type == "phi3" and orig:
        out["original_max_position_embeddings"] = rp["original_max_position_embeddings"]
    if a.model_type == "gptj":
        if rp["rope_theta"] != 10000.0 or rp["rope_type"] != "default":
            raise ValueError("GPT-J hard-codes theta 10000 and no scaling")
        return out
    out["rope_parameters"] = rp
    return out


def tiny_config(model_type: str) -> dict:
    """The tiny ``config.json``-style dict of ``model_type`` (``model_type`` key included)."""
    a = ARCHS[model_type]
    cfg: dict[str, Any] = {"model_type": a.model_type, **a.sizes}
    if a.registry and not _per_layer_type(a):
        e = load_registry()[a.registry]
        v = dict(e.values)
        if e.params_model == "RopeParams":
            cfg.update(_rope_overlay(a, v))
        elif e.params_model == "NopeParams":
            cfg["no_rope_layer_interval"] = v["no_rope_layer_interval"]
    cfg.update(a.extra)
    return cfg


def _per_layer_type(a: Arch) -> bool:
    """Whether the tiny config writes its RoPE sets per layer type itself (Gemma 4: the registry's
    set is the full-attention one, ``rope.full_attention`` in the import)."""
    rp = a.sizes.get("rope_parameters")
    return isinstance(rp, dict) and all(isinstance(x, dict) for x in rp.values())


def expected_encoding(model_type: str) -> dict:
    """The registry entry's values after the shrink, field by field, for the parameters the tiny
    config overlays (what the kit's tests compare with the config import)."""
    a = ARCHS[model_type]
    if not a.registry:
        return {}
    e = load_registry()[a.registry]
    v = dict(e.values)
    if e.params_model == "MRopeParams":  # the text model's head width, the sections scaled to it
        d = _head_dim(a.sizes["text_config"])
        return {"rope_theta": v["rope_theta"], "layout": v["layout"], "head_dim": d,
                "mrope_section": tuple(scaled_sections(v["mrope_section"], d // 2))}
    if e.params_model != "RopeParams":
        return {k: x for k, x in v.items() if k not in ("num_hidden_layers", "vocab_size", "n_embd", "hidden_size",
                                                        "n_positions", "max_position_embeddings", "dim")}
    d = _head_dim(a.sizes)
    if _per_layer_type(a):  # the set the registry entry names, at the tiny full-attention width
        d = int(a.sizes["per_layer_config"]["01"]["head_dim"])
    out = {k: x for k, x in v.items() if k in ("rope_theta", "pairing", "rope_type", "factor", "low_freq_factor",
                                                "high_freq_factor", "rotation")}
    out["head_dim"] = d
    if v.get("rotary_dim") is not None:
        # the rotated width (``rdim``): the tiny config states it as the fraction rotary_dim / head_dim
        # (GPT-J as the width int(d * fraction)), which the import keeps and sizes (ROPE-ROTARY-FRACTION)
        from posenc.spec.models import rotary_width
        out["rdim"] = rotary_width(d, v["rotary_dim"] / v["head_dim"], v.get("rope_type") == "proportional")
    return out


#: Size keys of a user's config.json that ``tiny_from_config`` replaces (every other key, the
#: positional ones among them, is kept as written).
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_WIDTH = ("hidden_size", "n_embd", "d_model")
_FFN = ("intermediate_size", "ffn_dim", "n_inner")
_DROP = ("architectures", "auto_map", "quantization_config", "torch_dtype", "dtype", "transformers_version",
         "_name_or_path", "use_cache")


def tiny_from_config(config: dict) -> dict:
    """A user's ``config.json`` shrunk to a tiny model of the same architecture, its positional
    parameters kept as written (rope_parameters / rope_scaling, theta, partial rotary, the
    contexts, NoPE flags, layer types): 2 heads of the config's own head width (1 key/value head
    where the config has fewer key/value heads than heads), 2 layers (4 where per-layer NoPE flags
    or layer types are set, so one of each kind runs; the flag lists are kept whole), a vocabulary of
    96 with pad / bos / eos 0 / 1 / 2, the width 2 x head width and the feed-forward twice that,
    ``initializer_range`` 1.6 / sqrt(width).  A vision-language model (Qwen2-VL, Qwen3-VL): its
    language model shrunk so (from ``text_config``, or the top level of an older flat config), with
    the kit's own tiny vision tower and special token ids (its images are the kit's).  Raises
    ``ValueError`` for a model type the hf:* adapters have no probes for, or sizes that are not
    positive integers."""
    cfg = {k: v for k, v in dict(config).items() if k not in _DROP}
    mt = cfg.get("model_type")
    if not isinstance(mt, str) or mt not in ARCHS:
        raise ValueError(f"model_type {mt!r}: the model-level suite builds {', '.join(ARCHS)} "
                         "(docs/model-adapter.md says how to write a model adapter for another)")
    a = ARCHS[mt]
    if "text_config" in a.sizes:
        tiny = tiny_config(mt)
        text = cfg.get("text_config")
        if not isinstance(text, dict):  # a flat config: the language model's keys at the top level
            text = {k: v for k, v in cfg.items() if k not in ("vision_config", "model_type", "text_config")
                    and not k.endswith("_token_id")}
        text = {k: v for k, v in text.items() if k not in _DROP and k != "model_type"}
        _shrink_sizes(text, mt, tiny["text_config"])
        # the vision tower's output feeds the language model: as wide as its (new) width
        old_width, new_width = tiny["text_config"]["hidden_size"], text["hidden_size"]
        vision = {k: new_width if k in ("hidden_size", "out_hidden_size") and v == old_width else v
                  for k, v in tiny["vision_config"].items()}
        return {**tiny, "text_config": text, "vision_config": vision, **({"_posenc_context_shrink": text.pop("_posenc_context_shrink")}
                                                 if "_posenc_context_shrink" in text else {})}
    _shrink_sizes(cfg, mt, a.sizes)
    return cfg


def _shrink_sizes(cfg: dict, mt: str, sizes: dict) -> None:
    """:func:`tiny_from_config`'s shrink of one (language) model's config, in place; ``sizes``: the
    tiny config whose size keys name the ones the architecture reads."""
    def first(keys, default=None):
        return next((cfg[k] for k in keys if cfg.get(k) is not None), default)

    heads, width = first(_HEADS, 2), first(_WIDTH, 64)
    for name, v in (("the head count", heads), ("the width", width), ("head_dim", cfg.get("head_dim", 1))):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    hd = int(cfg.get("head_dim") or width // heads)
    if not 2 <= hd <= 1024:
        raise ValueError(f"head width {hd}: the tiny model keeps the config's head width, which must be in [2, 1024]")
    kv = cfg.get("num_key_value_heads")
    layers = 4 if any(cfg.get(k) is not None for k in ("no_rope_layers", "no_rope_layer_interval", "layer_types")) else 2
    tiny_heads, tiny_width = 2, 2 * hd
    for keys, value in ((LAYER_KEYS, layers), (_HEADS, tiny_heads), (_WIDTH, tiny_width), (_FFN, 2 * tiny_width)):
        present = [k for k in keys if k in cfg] or [k for k in keys if k in sizes][:1]
        for k in present:
            cfg[k] = value
    if kv is not None:
        cfg["num_key_value_heads"] = 1 if int(kv) < heads else tiny_heads
    if "head_dim" in cfg:
        cfg["head_dim"] = hd
    if cfg.get("rotary_dim") is not None and mt == "gptj":
        cfg["rotary_dim"] = int(cfg["rotary_dim"])
    cfg.update(vocab_size=VOCAB, pad_token_id=PAD, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    key = "init_std" if mt == "opt" else "initializer_range"
    cfg[key] = 1.6 / tiny_width ** 0.5
    if mt == "opt":
        cfg["word_embed_proj_dim"] = tiny_width
    _shrink_contexts(cfg)


#: The context a shrunk per-call RoPE keeps at most: LongRoPE's original context (its switch), dynamic
#: NTK's max_position_embeddings (where its growth starts); the scenarios' 20 to 40 tokens cross both.
_SHRUNK_CONTEXT = {"longrope": 32, "su": 32, "dynamic": 16}


def _shrink_contexts(cfg: dict) -> None:
    """A per-call RoPE's regime change within reach of the scenarios.  LongRoPE: its
    ``original_max_position_embeddings`` and ``max_position_embeddings`` divided by one ``s`` (the
    rope dict's and the top level's) so the original context is at most 64 -- its frequencies (the
    factor lists over theta) and attention factor (the contexts' ratio) unchanged, only where the
    switch happens moves.  Dynamic NTK: its ``max_position_embeddings`` (and any
    ``original_max_position_embeddings``) divided by ``s`` so growth starts within 16 tokens --
    theta' depends on the length only through ``L / max_position_embeddings``, so the shrunk
    model's theta' at L is the full model's at ``s * L``.  Records ``(rope type, s, the new
    context)`` under ``_posenc_context_shrink``."""
    for key in ("rope_parameters", "rope_scaling"):
        rp = cfg.get(key)
        kind = rp.get("rope_type", rp.get("type")) if isinstance(rp, dict) else None
        if kind not in _SHRUNK_CONTEXT:
            continue
        # the context the regime changes at: LongRoPE's original one (transformers falls back to
        # max_position_embeddings without it), dynamic NTK's max_position_embeddings
        keys = ("original_max_position_embeddings", "max_position_embeddings")
        if kind == "dynamic":
            keys = keys[::-1]
        orig = next((d[k] for k in keys for d in (rp, cfg) if d.get(k) is not None), None)
        if isinstance(orig, float) and orig.is_integer():
            orig = int(orig)
        limit = _SHRUNK_CONTEXT[kind]
        if isinstance(orig, bool) or not isinstance(orig, int) or orig <= 2 * limit:
            continue
        s = orig // limit
        for d in (rp, cfg):
            for k in ("original_max_position_embeddings", "max_position_embeddings"):
                v = d.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    d[k] = _shrink(v, s)
        cfg["_posenc_context_shrink"] = (kind, s, _shrink(orig, s))
        return

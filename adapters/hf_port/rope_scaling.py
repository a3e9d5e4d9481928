"""RoPE scaling (SCALE-*): HF's ``rope_parameters`` for a rope_type, what HF cannot express,
and the YaRN softmax scale through DeepSeek-V3's attention (SCALE-YARN-SOFTMAX-SCALE)."""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_deepseek_v3
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config

from posenc.spec.errors import AdapterError

from ..base import Unsupported


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
    if t == "longrope" and params.longrope_policy == "at_init":
        raise Unsupported("longrope_policy at_init (factors fixed by max_position_embeddings > original): "
                          "transformers 5.24 selects per call (dynamic_rope_update / longrope_frequency_update: "
                          "long factors only while max(position_ids) + 1 > original_max_position_embeddings)")
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


class Ops:
    """The RoPE-scaling operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

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

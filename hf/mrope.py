"""The M-RoPE import of a ``config.json`` (Qwen2-VL, Qwen3-VL, GLM-4V, ERNIE-4.5-VL, ...):
:func:`mrope_params_from_hf_config` and the per-model-type rules it reads (:data:`MROPE_RULES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from pydantic import ValidationError

from posenc.spec.errors import SpecError
from posenc.spec.models import (ROPE_TYPE_FIELDS, MRopeParams)
from posenc.hf.tables import ROPE_KEYS, _TextKeys, _check_required, _check_types, _is_number, _msg, _named_errors, _rope_dict, _rule, hf_model_types, read_config


@dataclass(frozen=True)
class MRopeRule:
    """How one multimodal ``model_type`` spells its M-RoPE parameters (transformers 5.24):
    its layout and pairing, the rotary module's default ``mrope_section`` and the order the config
    writes the sections in (``thw``, or ERNIE's ``hwt``), the config class's theta and context,
    and whether its apply function has a pass-through tail (``partial``: partial_rotary_factor)."""

    source: str
    layout: str
    section_default: tuple[int, int, int]
    theta_default: float
    max_position_default: int
    pairing: str = "half"
    section_order: str = "thw"
    partial: bool = False


MROPE_RULES: dict[str, MRopeRule] = {
    "qwen2_vl": MRopeRule("models/qwen2_vl/configuration_qwen2_vl.py::Qwen2VLTextConfig (default_theta); "
                          "modeling_qwen2_vl.py::Qwen2VLRotaryEmbedding (mrope_section default)",
                          "contiguous", (16, 24, 24), 1000000.0, 32768),
    "qwen2_5_vl": MRopeRule("models/qwen2_5_vl/configuration_qwen2_5_vl.py::Qwen2_5_VLTextConfig; "
                            "modeling_qwen2_5_vl.py::Qwen2_5_VLRotaryEmbedding",
                            "contiguous", (16, 24, 24), 1000000.0, 32768),
    # Qwen3VLTextRotaryEmbedding interleaves whatever mrope_interleaved says
    "qwen3_vl": MRopeRule("models/qwen3_vl/configuration_qwen3_vl.py::Qwen3VLTextConfig; "
                          "modeling_qwen3_vl.py::Qwen3VLTextRotaryEmbedding",
                          "interleaved", (24, 20, 20), 500000.0, 128000),
}

_GLM4V = ("contiguous", (8, 12, 12), 10000.0)

MROPE_RULES.update({
    # repeat_interleave(2) with rotate_half_llm (pairwise); apply_rotary_pos_emb passes the tail through
    "glm4v": MRopeRule("models/glm4v/modeling_glm4v.py::Glm4vTextRotaryEmbedding (mrope_section default "
                       "[8, 12, 12]), rotate_half_llm, apply_rotary_pos_emb", *_GLM4V, 32768, "interleaved", partial=True),
    # GLM-4.5V and GLM-Image keep the sections but use cat(a, a) with the half-split rotate_half
    "glm4v_moe": MRopeRule("models/glm4v_moe/modeling_glm4v_moe.py::Glm4vMoeTextRotaryEmbedding."
                           "recomposition_frequencies (cat(freq, freq)), rotate_half", *_GLM4V, 65536, partial=True),
    "glm_image": MRopeRule("models/glm_image/modeling_glm_image.py::GlmImageTextRotaryEmbedding."
                           "recomposition_frequencies (cat(freq, freq)), rotate_half", *_GLM4V, 131072, partial=True),
    # Qwen3-VL's interleaved sections; HYV4VL's apply re-interleaves cat(a, a) for its pairwise rotate_half
    "hy_v4_vl": MRopeRule("models/hy_v4_vl/modeling_hy_v4_vl.py::HYV4VLRotaryEmbedding.recomposition_frequencies, "
                          "apply_rotary_pos_emb", "interleaved", (24, 20, 20), 10000.0, 262144, "interleaved"),
    "cosmos3_edge": MRopeRule("models/cosmos3_edge/modeling_cosmos3_edge.py::Cosmos3EdgeTextRotaryEmbedding."
                              "recomposition_frequencies", "interleaved", (24, 20, 20), 100000000.0, 131072),
    # sections written [h, w, t] ([22, 22, 20]); inv_freq pre-rotated; rotate_half_text is pairwise
    "ernie4_5_vl_moe": MRopeRule("models/ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py::Ernie4_5_VLMoeTextRotaryEmbedding."
                                 "compute_default_rope_parameters, recomposition_frequencies; rotate_half_text",
                                 "hw_alternating", (22, 22, 20), 500000.0, 131072, "interleaved", "hwt"),
})

MROPE_RULES.update({f"{k}_text": v for k, v in list(MROPE_RULES.items())})

# wrappers whose text model is glm4v_text
MROPE_RULES.update({k: MROPE_RULES["glm4v"] for k in ("glm46v", "glmga")})

#: rope keys the Qwen-VL configs carry besides the scaling ones (ignore_keys_at_rope_validation)
_MROPE_KEYS = {"mrope_section", "mrope_interleaved"}


@_named_errors
def mrope_params_from_hf_config(config: Union[dict, str, Path]) -> MRopeParams:
    """``MRopeParams`` for a Qwen2-VL / Qwen2.5-VL / Qwen3-VL ``config.json`` (a dict or a path).

    The text model's keys are read from ``text_config`` when present (5.x layout), else from the
    top level (4.x); the rope dict is ``rope_parameters`` or ``rope_scaling``, whose ``type``
    ``mrope`` means ``default`` (the config classes' BC rule).  ``mrope_section`` defaults to the
    rotary module's default; the layout is the model's (Qwen3-VL always interleaves); theta,
    ``max_position_embeddings`` default to the config class's.  The scaling keys are RopeParams'
    (MROPE-ROPE-TYPE).  A ``partial_rotary_factor`` other than 1 is an error: these models'
    ``apply_rotary_pos_emb`` rotates the whole head.  Raises :class:`SpecError` naming the field.
    """
    config = read_config(config)
    model_type, rule = _rule(config, MROPE_RULES, "M-RoPE import rule")
    text = _text_keys(config, model_type)
    rope, where = _rope_dict(text)
    rope_type = _mrope_type(text, rope, where)
    factor = next((v for v in (rope.pop("partial_rotary_factor", None), text.get("partial_rotary_factor"))
                   if v is not None), None)
    if factor is not None and float(factor) != 1.0 and not rule.partial:
        raise SpecError(f"config.json: {where}.partial_rotary_factor: {factor}: {model_type}'s apply_rotary_pos_emb "
                        f"rotates the whole head (no partial M-RoPE)")
    theta = next((v for v in (rope.pop("rope_theta", None), text.get("rope_theta")) if v is not None),
                 rule.theta_default)
    section = rope.pop("mrope_section", None)
    if section is not None and not (isinstance(section, list) and len(section) == 3
                                    and all(isinstance(v, int) and not isinstance(v, bool) for v in section)):
        raise SpecError(f"config.json: {where}.mrope_section: expected a list of 3 integers, got {section!r}")
    section = tuple(section or rule.section_default)
    if rule.section_order == "hwt":  # the config's [h, w, t] in the spec's (t, h, w) order
        section = (section[2], section[0], section[1])
    rope.pop("mrope_interleaved", None)
    class_keys = _TextKeys(text, rule)
    head = class_keys.head_dim(model_type)
    values: dict[str, Any] = {"head_dim": head, "rope_theta": float(theta), "mrope_section": section,
                              "layout": rule.layout, "pairing": rule.pairing, "rope_type": rope_type}
    if factor is not None and float(factor) != 1.0:  # transformers: int(head_dim * partial_rotary_factor)
        if not _is_number(factor) or not 0 < float(factor) <= 1:
            raise SpecError(f"config.json: {where}.partial_rotary_factor: expected a number in (0, 1], got {factor!r}")
        values["rotary_dim"] = int(head * float(factor))
    values.update({k: v for k, v in rope.items() if v is not None})
    required, optional = ROPE_TYPE_FIELDS[rope_type]
    if rope_type in ("llama3", "yarn", "longrope"):
        orig = text.get("original_max_position_embeddings") or values.get("original_max_position_embeddings")
        values["original_max_position_embeddings"] = orig or class_keys.max_positions()
    if "max_position_embeddings" in required + optional:
        values["max_position_embeddings"] = class_keys.max_positions()
    try:
        return MRopeParams(**values)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'mrope'}: {_msg(err)}" for err in e.errors())
        raise SpecError(f"config.json ({model_type}, rope_type {rope_type}): {msgs}") from None


def _text_keys(config: dict, model_type: str) -> dict:
    """The text model's keys: ``text_config`` over the top level (5.x; then the top level's width keys are
    not read), with the text config class's defaults for the head width keys the config omits (a
    derived head_dim only where none of head_dim, hidden_size, num_attention_heads is stated)."""
    sub = config.get("text_config")
    if sub is not None and not isinstance(sub, dict):
        raise SpecError(f"config.json: text_config: expected an object, got {type(sub).__name__}")
    text = {**config, **(sub or {})}
    # the text config class's defaults for the head width keys the config omits (a derived head_dim
    # only where none of head_dim, hidden_size, num_attention_heads is stated); with a text_config,
    # transformers builds the text model from it alone: the top level's width keys are not read
    row = hf_model_types().get(model_type) or {}
    defaults, derived = row.get("defaults") or {}, row.get("derived") or ()
    width_keys = ("head_dim", "hidden_size", "num_attention_heads")
    if sub is not None:
        for k in width_keys:
            if k not in sub:
                text.pop(k, None)
    for k in width_keys:
        if text.get(k) is None and defaults.get(k) is not None and (
                k != "head_dim" or "head_dim" not in derived or all(text.get(x) is None for x in width_keys)):
            text[k] = defaults[k]
    return text


def _mrope_type(text: dict, rope: dict, where: str) -> str:
    """The set's rope_type (popped from ``rope``; ``mrope`` is ``default``): an M-RoPE one, its keys known,
    typed and the required ones present."""
    rope_type = rope.pop("rope_type", None) or rope.pop("type", None) or "default"
    rope.pop("type", None)
    if rope_type == "mrope":
        rope_type = "default"
    if rope_type not in ROPE_TYPE_FIELDS or rope_type == "proportional":
        raise SpecError(f"config.json: {where}.rope_type: {rope_type!r} is not an M-RoPE rope_type; known: "
                        f"{', '.join(t for t in ROPE_TYPE_FIELDS if t != 'proportional')}")
    unknown = sorted(set(rope) - ROPE_KEYS - _MROPE_KEYS)
    if unknown:
        raise SpecError(f"config.json: {where}: unknown key(s) {', '.join(unknown)} for rope_type {rope_type!r}")
    _check_types(text, rope, where, ("rope_theta", "partial_rotary_factor", "original_max_position_embeddings",
                                     "max_position_embeddings"))
    _check_required(rope, rope_type, where)
    return rope_type

"""Import a Hugging Face ``config.json`` into the spec's parameter models.

RoPE models give :class:`~posenc.spec.models.RopeParams`, one set per layer type where the config
nests them (:func:`rope_import`); learned-embedding, ALiBi, T5 and sinusoid models go through
:func:`params_from_hf_config` (its own rule table).  Every transformers model type is known from
``registry/hf_model_types.json``, read from transformers 5.24 by ``posenc config survey``
(``posenc.conformance.hf_models``): class defaults, ``attribute_map`` aliases, the sub-config the
RoPE keys live in, the pairing probed from the model's own apply function, the 4.x layout of the
per-layer-type models.  The hand rules below remain where a model deviates.

Reads both layouts: transformers 4.x (top-level ``rope_theta`` / ``partial_rotary_factor`` and a
``rope_scaling`` dict whose type key may be ``type``) and 5.x (``rope_parameters`` holding
``rope_type``, ``rope_theta`` and the scaling keys).  Each supported ``model_type`` has one
:class:`ModelRule`: where its theta, head size and rotary share come from, its pairing, its
aliases and its defaults, each default with its provenance.  Errors are :class:`SpecError`
naming the field: an unknown ``model_type``, an unknown ``rope_type``, an unknown key inside the
rope parameters, or a missing theta where the model type defines no default (never a silent
10000).  Sources: transformers 5.24 ``modeling_rope_utils.py::RotaryEmbeddingConfigMixin``
(``convert_rope_params_to_dict``, ``standardize_rope_params``) and each model's configuration
module named in :data:`MODEL_RULES`.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import ValidationError

from .errors import SpecError
from .models import (ROPE_TYPE_FIELDS, LookupParams, AlibiParams, AxialRopeParams, BartEmbeddingParams, BertEmbeddingParams, GPT2EmbeddingParams,
                     LayerRopeParams, MRopeParams, NopeParams, OPTEmbeddingParams, QueryScaleParams, RobertaEmbeddingParams, RopeParams, SinusoidalParams,
                     T5Params)

#: transformers' model types, read from transformers by ``posenc config survey`` (conformance/hf_models.py)
HF_TABLE_PATH = Path(__file__).resolve().parent / "registry" / "hf_model_types.json"
#: the RoPE model types whose default config the import refuses, each with its reason
HF_EXCEPTIONS_PATH = Path(__file__).resolve().parent / "registry" / "hf_exceptions.yaml"

#: Keys that may appear inside rope_scaling / rope_parameters (besides the type key).
ROPE_KEYS = {"rope_theta", "partial_rotary_factor", "factor", "original_max_position_embeddings",
             "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate",
             "low_freq_factor", "high_freq_factor", "short_factor", "long_factor"}


@dataclass(frozen=True)
class ModelRule:
    """How one ``model_type`` spells its RoPE parameters (transformers 5.24)."""

    source: str
    pairing: str = "half"
    #: the direction the pairs turn (ROPE-ROTATION-NEGATIVE: NanoChat's -phi), probed with the pairing
    rotation: str = "positive"
    theta_default: Optional[float] = None
    theta_provenance: str = ""
    theta_keys: tuple[str, ...] = ("rope_theta",)
    fixed_theta: Optional[float] = None  # hard-coded in the model code; no config key
    partial_keys: tuple[str, ...] = ("partial_rotary_factor",)
    partial_default: float = 1.0
    rotary_dim_key: Optional[str] = None  # an absolute rotary width (GPT-J)
    head_dim_keys: tuple[str, ...] = ("head_dim",)
    hidden_keys: tuple[str, ...] = ("hidden_size",)
    heads_keys: tuple[str, ...] = ("num_attention_heads",)
    type_aliases: dict = field(default_factory=dict)
    allows_scaling: bool = True
    #: a boolean config key choosing between two pairings: (key, default, pairing if true, pairing if false)
    pairing_flag: Optional[tuple[str, bool, str, str]] = None


_MIXIN = "transformers 5.24 RotaryEmbeddingConfigMixin.default_theta (library default)"
MODEL_RULES: dict[str, ModelRule] = {
    "llama": ModelRule("models/llama/configuration_llama.py", theta_default=10000.0, theta_provenance=_MIXIN),
    "mistral": ModelRule("models/mistral/configuration_mistral.py", theta_default=10000.0, theta_provenance=_MIXIN),
    "qwen2": ModelRule("models/qwen2/configuration_qwen2.py", theta_default=10000.0, theta_provenance=_MIXIN),
    "gemma": ModelRule("models/gemma/configuration_gemma.py", theta_default=10000.0, theta_provenance=_MIXIN),
    "phi3": ModelRule("models/phi3/configuration_phi3.py", theta_default=10000.0,
                      theta_provenance="Phi3Config.convert_rope_params_to_dict default_theta (library default)",
                      type_aliases={"su": "longrope", "yarn": "longrope"}),
    "gpt_oss": ModelRule("models/gpt_oss/configuration_gpt_oss.py", theta_default=150000.0,
                         theta_provenance="GptOssConfig.default_theta (library default)"),
    # head width: DeepseekV3Config.__post_init__ sets head_dim = qk_rope_head_dim, then a config's own
    # head_dim (a kwarg) overrides it, and DeepseekV3RotaryEmbedding reads head_dim.
    # rope_interleave (default true): apply_rotary_pos_emb_interleave (pairs (2i, 2i+1) written
    # de-interleaved, ROPE-PAIR-DEINTERLEAVE); false: the Llama apply_rotary_pos_emb (half pairs)
    "deepseek_v3": ModelRule("models/deepseek_v3/configuration_deepseek_v3.py", theta_default=10000.0,
                             theta_provenance=_MIXIN, head_dim_keys=("head_dim", "qk_rope_head_dim"),
                             pairing_flag=("rope_interleave", True, "deinterleave", "half")),
    "gpt_neox": ModelRule("models/gpt_neox/configuration_gpt_neox.py", theta_default=10000.0,
                          theta_provenance="GPTNeoXConfig.convert_rope_params_to_dict (rotary_emb_base default)",
                          theta_keys=("rotary_emb_base",),  # a top-level rope_theta is ignored by GPTNeoXConfig
                          partial_keys=("partial_rotary_factor", "rotary_pct"), partial_default=0.25),
    "gptj": ModelRule("models/gptj/modeling_gptj.py::create_sinusoidal_positions", pairing="interleaved",
                      fixed_theta=10000.0, theta_keys=(), partial_keys=(), rotary_dim_key="rotary_dim",
                      hidden_keys=("n_embd", "hidden_size"), heads_keys=("n_head", "num_attention_heads"),
                      allows_scaling=False),
}


def _msg(err: dict) -> str:
    """A pydantic error's message without its ``Value error, `` prefix."""
    return str(err["msg"]).removeprefix("Value error, ")


def _first(cfg: dict, keys, what: str, model_type: str):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    also = f" (or {', '.join(keys[1:])})" if len(keys) > 1 else ""
    raise SpecError(f"config.json: {keys[0]}: missing{also}, the {what} of model_type {model_type!r}, "
                    f"and no default")


def _positive_int(v, key: str) -> int:
    """A config's integer (not a bool, a string or a float): :class:`SpecError` naming ``key``."""
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise SpecError(f"config.json: {key}: expected a positive integer, got {type(v).__name__} {v!r}")
    return v


def _head_dim(cfg: dict, rule: ModelRule, model_type: str, row: Optional[dict] = None,
              provenance: Optional[dict] = None, label: str = "") -> int:
    """The head width: ``head_dim``, else ``hidden_size / num_attention_heads``.  Where that division
    is not exact, the model type's ``head_width`` in the table (``posenc config survey``: what its
    config class and attention do with such a width) decides: ``floor`` is transformers' own
    ``hidden_size // num_attention_heads`` (said in ``provenance``); otherwise :class:`SpecError`."""
    derived = (row or {}).get("head_dim_rule") or {}  # where the class takes it from (posenc config survey)
    if not derived.get("source"):
        derived = {}
    for k in rule.head_dim_keys:
        if cfg.get(k) is not None:
            if derived.get("stated") != "overwritten":
                return _positive_int(cfg[k], k)
            if provenance is not None and not provenance.get(f"{label}{k}", "").endswith(" default"):
                provenance[f"{label}{k}"] = f"{cfg[k]!r} in the config is not what the model uses: {derived['evidence']}"
    if derived.get("source") == "qk_rope_head_dim":  # the MLA models: the rotary width is the rope share
        if cfg.get("qk_rope_head_dim") is not None:
            return _positive_int(cfg["qk_rope_head_dim"], "qk_rope_head_dim")
        if provenance is not None:
            provenance[f"{label}head_dim"] = (f"qk_rope_head_dim {derived['source_default']} "
                                              f"({row['config_class']} default): {derived['evidence']}")
        return int(derived["source_default"])
    hidden = _positive_int(_first(cfg, rule.hidden_keys, "hidden size", model_type), rule.hidden_keys[0])
    heads = _positive_int(_first(cfg, rule.heads_keys, "number of attention heads", model_type), rule.heads_keys[0])
    if derived.get("factor", 1) != 1:  # Zamba2's attention: 2 * hidden_size // num_attention_heads
        hidden *= derived["factor"]
        if provenance is not None:
            provenance[f"{label}head_dim"] = f"{hidden} // {heads} = {hidden // heads}: {derived['evidence']}"
    if hidden % heads:
        width = (row or {}).get("head_width") or {}
        if width.get("rule") != "floor":
            why = f": {width['evidence']}" if width.get("rule") == "refused" else ""
            raise SpecError(f"config.json: {rule.hidden_keys[0]} {hidden} is not divisible by {heads} heads{why}")
        if provenance is not None:
            provenance[f"{label}head_dim"] = (f"{hidden} // {heads} = {hidden // heads}: not an exact division, "
                                              f"floored as the model does ({width['evidence']})")
    return hidden // heads


def _named_errors(fn):
    """The import's last net: an exception a malformed value raises where no check named it
    (a list where a number goes, a number where an object goes) becomes a one-line
    :class:`SpecError` naming the model type, never a traceback."""
    @functools.wraps(fn)
    def wrapper(config, *args, **kwargs):
        try:
            return fn(config, *args, **kwargs)
        except SpecError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError, OverflowError,
                RecursionError) as e:
            mt = config.get("model_type") if isinstance(config, dict) else None
            where = f"model_type {mt!r}" if mt is not None else str(config)
            raise SpecError(f"config.json: {where}: a value has the wrong type or form "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})") from None
    return wrapper


def read_config(config: Union[dict, str, Path]) -> dict:
    """A ``config.json`` as a dict (a dict is returned as is); :class:`SpecError` names an unreadable file."""
    if isinstance(config, dict):
        return config
    path = Path(config)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SpecError(f"{path}: cannot read a JSON config: {e}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object (a config.json), got {type(data).__name__}")
    return data


def _rule(config: dict, rules: dict, what: str):
    """``(model_type, rule)`` of a config; :class:`SpecError` naming the known types otherwise."""
    model_type = config.get("model_type")
    rule = rules.get(model_type)
    if rule is None:
        raise SpecError(f"config.json: model_type: {model_type!r} has no {what}; known: {', '.join(sorted(rules))}")
    return model_type, rule


#: Keys transformers 5.24 requires in the rope dict per rope_type (``_validate_<type>_rope_parameters``;
#: ``rope_theta`` and ``original_max_position_embeddings`` are filled in by ``standardize_rope_params``).
HF_REQUIRED = {"linear": ("factor",), "dynamic": ("factor",), "yarn": ("factor",),
               "llama3": ("factor", "low_freq_factor", "high_freq_factor"), "longrope": ("short_factor", "long_factor")}
_NUMBER_KEYS = ROPE_KEYS - {"truncate", "short_factor", "long_factor"}


def _rope_dict(config: dict) -> tuple[dict[str, Any], str]:
    """A copy of the rope dict and its key, as transformers 5.24 chooses it
    (``convert_rope_params_to_dict``: ``rope_scaling or rope_parameters`` -- a non-empty 4.x
    ``rope_scaling`` wins, and the other dict, its ``rope_theta`` included, is dropped)."""
    for key in ("rope_scaling", "rope_parameters"):
        v = config.get(key)
        if v is not None and not isinstance(v, dict):
            raise SpecError(f"config.json: {key}: expected an object, got {type(v).__name__} {v!r}")
    key = "rope_scaling" if config.get("rope_scaling") else "rope_parameters"
    return dict(config.get(key) or {}), key


def _is_number(v) -> bool:
    """A finite number, not a bool (NaN, infinity and |v| >= 1e300 are not: ``abs(v) < 1e300`` is
    false for them)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e300


def _check_types(config: dict, rope: dict, where: str, top_keys=()) -> None:
    """Numbers where transformers computes with numbers (a string ``rope_theta: "1e6"`` fails its
    rotary construction), booleans and lists where it reads them: :class:`SpecError` naming the field."""
    for k, v in rope.items():
        if v is None:
            continue
        if k in _NUMBER_KEYS and not _is_number(v):
            raise SpecError(f"config.json: {where}.{k}: expected a finite number, got {type(v).__name__} {v!r}")
        if k == "truncate" and not isinstance(v, bool):
            raise SpecError(f"config.json: {where}.truncate: expected true or false, got {v!r}")
        if k in ("short_factor", "long_factor") and not (isinstance(v, list) and all(_is_number(x) for x in v)):
            raise SpecError(f"config.json: {where}.{k}: expected a list of numbers, got {v!r}")
    for k in top_keys:
        v = config.get(k)
        if v is not None and not _is_number(v):
            raise SpecError(f"config.json: {k}: expected a finite number, got {type(v).__name__} {v!r}")


def _check_required(rope: dict, rope_type: str, where: str) -> None:
    missing = [k for k in HF_REQUIRED.get(rope_type, ()) if rope.get(k) is None]
    if missing:
        raise SpecError(f"config.json: {where}.{missing[0]}: required for rope_type {rope_type!r} (transformers "
                        f"5.24 refuses the config without {', '.join(missing)})")


@dataclass(frozen=True)
class RopeImport:
    """A config's RoPE as transformers 5.24 reads it: one parameter set per layer type.

    ``sets``: ``{"all_layers": RopeParams}`` for one set, else ``{layer_type: RopeParams or None}``
    (a nested ``rope_parameters``; ``None``: that layer type has no RoPE); ``{"all_layers": None}``
    where a config switch turns RoPE off on every layer (Zamba2's ``use_mem_rope`` false,
    LAYERS-NO-ROPE; ``provenance["sets.all_layers"]`` says why).  ``layer_types``: the
    config's per-layer list (which layer uses which set), or ``None``.  ``provenance``: where each
    value came from that the config did not state (a class default, a rule, the probed pairing).
    ``query_scale``: the position-dependent query scaling the model applies after RoPE
    (QSCALE-MISTRAL: Ministral 3 / Mistral 4's ``llama_4_scaling_beta``), or ``None``.
    """

    model_type: str
    where: str
    sets: dict
    layer_types: Optional[tuple[str, ...]]
    source: str
    provenance: dict
    query_scale: Optional[QueryScaleParams] = None
    nope: Optional[NopeParams] = None

    def layers(self, name: str) -> list[int]:
        """Indices of the layers that use set ``name`` (all layers for ``all_layers``)."""
        if self.layer_types is None:
            return []
        return [i for i, lt in enumerate(self.layer_types) if name in ("all_layers", lt)]

    def layer_rope(self) -> LayerRopeParams:
        """The per-layer-type sets as :class:`LayerRopeParams` (LAYERS-SETS), for ``layers.apply``:
        ``layer_types`` from the config, ``full_attention`` and ``sliding_attention`` sets that are
        plain RoPE (``default``) or, for full attention, ``linear``, sharing head width and
        pairing; a type whose set is None has no RoPE.  :class:`SpecError` says what does not fit."""
        if self.layer_types is None:
            raise SpecError(f"{self.model_type}: the config has no layer_types: which layer uses which set is not known")
        unknown = sorted(set(self.layer_types) - {"full_attention", "sliding_attention"})
        if unknown or not set(self.sets) <= {"full_attention", "sliding_attention"}:
            raise SpecError(f"{self.model_type}: layer types {', '.join(unknown or sorted(self.sets))}: LayerRopeParams "
                            f"holds full_attention and sliding_attention only")
        full, sliding = self.sets.get("full_attention"), self.sets.get("sliding_attention")
        present = [p for p in (full, sliding) if p is not None]
        if {(p.head_dim, p.rotary_dim, p.pairing) for p in present}.__len__() > 1:
            raise SpecError(f"{self.model_type}: the layer types' sets differ in head width, rotary width or pairing "
                            f"(LayerRopeParams shares them)")
        if any(p.rotation != "positive" for p in present):
            raise SpecError(f"{self.model_type}: pairs that turn by -phi (ROPE-ROTATION-NEGATIVE): LayerRopeParams "
                            f"rotates by +phi only")
        for name, p, allowed in (("full_attention", full, ("default", "linear")), ("sliding_attention", sliding,
                                                                                    ("default",))):
            if p is not None and (p.rope_type not in allowed or p.rotary_dim not in (None, p.head_dim)
                                  or p.attention_factor is not None):
                raise SpecError(f"{self.model_type}: the {name} set (rope_type {p.rope_type}) is not one "
                                f"LayerRopeParams holds ({' or '.join(allowed)}, whole head)")
        try:
            return LayerRopeParams(head_dim=present[0].head_dim, layer_types=self.layer_types,
                                   full_rope_theta=None if full is None else full.rope_theta,
                                   full_factor=1.0 if full is None or full.rope_type == "default" else full.factor,
                                   sliding_rope_theta=None if sliding is None else sliding.rope_theta,
                                   pairing=present[0].pairing)
        except (ValidationError, IndexError) as e:
            raise SpecError(f"{self.model_type}: {e}") from None

    def as_json(self) -> dict:
        out: dict[str, Any] = {"model_type": self.model_type, "rule": self.source}
        if self.where:
            out["read_from"] = self.where
        # the rotation is written out where it is not the standard +phi (ROPE-ROTATION-NEGATIVE)
        out["sets"] = {k: None if v is None else {f: x for f, x in v.model_dump(mode="json", exclude_none=True).items()
                                                  if (f, x) != ("rotation", "positive")}
                       for k, v in self.sets.items()}
        if self.layer_types is not None:
            out["layers"] = {k: self.layers(k) for k in self.sets}
        if self.query_scale is not None:
            out["query_scale"] = self.query_scale.model_dump(mode="json")
        if self.nope is not None:
            out["nope"] = self.nope.model_dump(mode="json", exclude_none=True)
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out


@functools.lru_cache(maxsize=None)
def _hf_table() -> dict:
    try:
        table = json.loads(HF_TABLE_PATH.read_text(encoding="utf-8"))
        return {"transformers": str(table["transformers"]), "model_types": dict(table["model_types"]),
                "layer_types": tuple(table["layer_types"]), "legacy_layer_types": dict(table["legacy_layer_types"])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SpecError(f"{HF_TABLE_PATH}: unreadable model-type table: {e}") from None


def hf_model_types() -> dict:
    """``{model_type: row}`` of :data:`HF_TABLE_PATH` (read from transformers by ``posenc config survey``)."""
    return _hf_table()["model_types"]


def hf_table_version() -> str:
    """The transformers version :data:`HF_TABLE_PATH` was read from."""
    return _hf_table()["transformers"]


def _table_rule(model_type: str, row: dict) -> ModelRule:
    """The generic rule of a model type the hand rules do not list: the standard keys (through
    the class's ``attribute_map`` aliases), the pairing probed from its modeling module, its
    config class's defaults (from the table)."""
    flag = row.get("pairing_flag")
    theta = _default_theta(row)
    return ModelRule(source=f"transformers {hf_table_version()} {row['config_class']} "
                     f"({row.get('rotary_class', 'no rotary module')}; spec/registry/{HF_TABLE_PATH.name})",
                     pairing=row.get("pairing") or "", rotation=row.get("rotation", "positive"), theta_default=theta,
                     theta_provenance=f"{row['config_class']} default rope_theta",
                     pairing_flag=(flag["key"], bool(row.get("defaults", {}).get(flag["key"], True)), flag["true"],
                                   flag["false"]) if flag else None)


def _default_theta(row: dict) -> Optional[float]:
    rope = (row.get("defaults") or {}).get("rope_parameters") or {}
    return rope.get("rope_theta") if isinstance(rope, dict) else None


def _nested(rope: dict) -> bool:
    """A ``rope_parameters`` keyed by layer type (every value a dict or null)."""
    return bool(rope) and not ({"rope_type", "type", "rope_theta"} & set(rope)) and any(
        v is None or isinstance(v, dict) for v in rope.values())


def _locate(config: dict, table: dict) -> tuple[str, dict, str, ModelRule, Optional[dict]]:
    """``(model_type, RoPE config, where, rule, table row)`` of a config's RoPE parameters: the top
    level, or the sub-config the table names (``text_config`` of a multimodal model, a speech
    model's ``encoder_config``), by the table and the hand rules."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise SpecError(f"config.json: model_type: expected a string, got {model_type!r}")
    if model_type in MODEL_RULES:
        return model_type, config, "", MODEL_RULES[model_type], table.get(model_type)
    row = table.get(model_type)
    where = (row.get("where") or "") if row is not None else (
        "text_config" if isinstance(config.get("text_config"), dict) else "")
    cfg = config
    if where:
        sub = config.get(where)
        if sub is not None and not isinstance(sub, dict):
            raise SpecError(f"config.json: {where}: expected an object, got {type(sub).__name__}")
        cfg = dict(sub or {})
        sub_type = cfg.get("model_type") or (row or {}).get("text_model_type")
        sub_row = table.get(sub_type)
        if sub_type in MODEL_RULES or (sub_row is not None and "defaults" in sub_row and not sub_row.get("where")):
            cfg["model_type"] = sub_type
            mt, cfg, _, rule, sub_row = _locate(cfg, table)
            return mt, cfg, where, rule, sub_row
        if row is None:  # an unknown wrapper: its text_config read in the standard layout
            cfg.setdefault("model_type", sub_type or f"{model_type}_text")
            mt, cfg, _, rule, sub_row = _locate(cfg, table)
            return mt, cfg, where, rule, sub_row
        # the sub-config has no row of its own: the wrapper's row describes it
    if row is None:
        if any(cfg.get(k) is not None for k in ("rope_parameters", "rope_scaling", "rope_theta")):
            rule = ModelRule(f"standard layout (model_type {model_type!r} is not a transformers "
                             f"{hf_table_version()} model type: pairing assumed half)")
            return model_type, cfg, where, rule, None
        raise SpecError(f"config.json: model_type: {model_type!r} is not a transformers {hf_table_version()} "
                        f"model type and carries no rope_parameters, rope_scaling or rope_theta")
    if "error" in row:
        raise SpecError(f"config.json: model_type: {model_type!r}: transformers {hf_table_version()} cannot "
                        f"build its default config ({row['error']})")
    if "defaults" not in row:
        raise SpecError(f"config.json: model_type: {model_type!r} has no RoPE parameters in transformers "
                        f"{hf_table_version()} (see docs/model-coverage.md)")
    if "not_covered" in row:
        raise SpecError(f"config.json: model_type: {model_type!r}: not covered: {row['not_covered']}")
    if row.get("components"):
        raise SpecError(f"config.json: model_type: {model_type!r}: its RoPE lives in its sub-models "
                        f"({', '.join(row['components'])}), one set each: read it with component_imports or "
                        f"params_from_hf_config (`posenc config import`)")
    if row.get("axial"):
        raise SpecError(f"config.json: model_type: {model_type!r} uses axial (two-dimensional) RoPE (AXIAL-*), "
                        f"not 1-D RoPE: read it with params_from_hf_config (`posenc config import`)")
    if not row.get("pairing") and not row.get("pairing_flag"):
        raise SpecError(f"config.json: model_type: {model_type!r}: pairing unknown (its apply function was not "
                        f"recognised: {'; '.join(row.get('pairing_evidence', []))})")
    return model_type, cfg, where, _table_rule(model_type, row), row


@_named_errors
def rope_import(config: Union[dict, str, Path]) -> RopeImport:
    """The RoPE parameter sets of a model's ``config.json`` (a dict or a path), per layer type.

    Reads the standard layouts of transformers 4.x and 5.x for every model type in
    :data:`HF_TABLE_PATH` (read from transformers 5.24's config classes and modeling modules),
    with the hand rules of :data:`MODEL_RULES` where a model deviates; a multimodal config's
    ``text_config``; a ``rope_parameters`` nested per layer type with ``layer_types``.  A key the
    config omits takes its config class's default (listed in ``provenance``).  Raises
    :class:`SpecError` naming the field, or the model type and why it is not covered.
    """
    config = read_config(config)
    model_type, cfg, where, rule, row = _locate(config, hf_model_types())
    provenance: dict[str, str] = {}
    vision = config.get("vision_config") if where else None
    if isinstance(vision, dict) and vision is not cfg:
        kind = "axial RoPE (AXIAL-*)" if is_axial(vision) else "its own positional encoding"
        provenance["vision_config"] = (f"not read here: {vision.get('model_type', 'the vision encoder')} has {kind}; "
                                       f"import the vision_config on its own")
    defaults = dict((row or {}).get("defaults") or {})
    default_rope = defaults.pop("rope_parameters", None)
    eff = dict(cfg)
    for k, alias in ((row or {}).get("aliases") or {}).items():  # transformers' attribute_map
        if eff.get(k) is None and eff.get(alias) is not None:
            eff[k] = eff[alias]
            provenance[k] = f"{alias} ({row['config_class']}.attribute_map)"
    groups = (rule.theta_keys, rule.partial_keys, rule.head_dim_keys, rule.hidden_keys, rule.heads_keys)
    for k, v in defaults.items():
        # a class default only where the config sets none of the keys the rule reads for it
        # (GPT-NeoX's rotary_pct is partial_rotary_factor: the default must not shadow it)
        group = next((g for g in groups if k in g), (k,))
        if k in ((row or {}).get("derived") or ()):  # derived from hidden_size / heads by the class
            group = rule.head_dim_keys + rule.hidden_keys + rule.heads_keys
        if all(eff.get(x) is None for x in group):
            eff[k] = v
            provenance[k] = f"{row['config_class']} default"
    _pairing_provenance(eff, rule, row, model_type, provenance)
    legacy = default_rope is not None and _nested(default_rope) and not _nested(eff.get("rope_parameters") or {}) \
        and any(eff.get(k) is not None for k in LEGACY_THETA_KEYS + ("rope_scaling", "rope_parameters"))
    if legacy and (row or {}).get("legacy_not_covered"):
        raise SpecError(f"config.json: rope_parameters: the 4.x layout of {model_type} is not covered: "
                        f"{row['legacy_not_covered']}; write rope_parameters per layer type ({', '.join(default_rope)})")
    if legacy and (row or {}).get("legacy_layout"):
        eff["rope_parameters"] = _legacy_sets(eff, default_rope, row, provenance)
        eff.pop("rope_scaling", None)
    elif legacy:  # a per-layer-type class that maps no 4.x key (Gemma 4): it keeps its default sets
        ignored = [k for k in LEGACY_THETA_KEYS + ("rope_scaling", "rope_parameters") if eff.get(k) is not None]
        eff["rope_parameters"] = default_rope
        eff.pop("rope_scaling", None)
        provenance["rope_parameters"] = (f"{row['config_class']} default per layer type; {', '.join(ignored)} "
                                         f"ignored (the class reads rope_parameters per layer type only)")
    if isinstance(cfg.get("rope_parameters"), dict) and not cfg["rope_parameters"] and not cfg.get("rope_scaling") \
            and not (default_rope is not None and _nested(default_rope)):
        # an explicit empty dict: transformers' standardisation fills rope_type default and the
        # config's rope_theta (else the class's default_theta, probed: empty_rope_theta; 10000 for
        # most), not the class's default rope_parameters
        theta = next((eff[k] for k in rule.theta_keys if eff.get(k) is not None),
                     (row or {}).get("empty_rope_theta", 10000.0))
        eff["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
        provenance["rope_parameters"] = (f"{{}} in the config: transformers fills rope_type default and rope_theta "
                                         f"{theta} (not {(row or {}).get('config_class', 'the class')}'s default)")
    has_rope = any(eff.get(k) for k in ("rope_parameters", "rope_scaling")) or any(
        eff.get(k) is not None for k in rule.theta_keys)
    if not has_rope and default_rope is not None:
        stated = any(eff.get(k) is not None and k not in defaults for k in rule.partial_keys)
        eff["rope_parameters"] = {k: v for k, v in default_rope.items()
                                  if not (stated and k == "partial_rotary_factor")}  # the config's factor wins
        provenance["rope_parameters"] = f"{row['config_class']} default"
    rope, key = _rope_dict(eff)
    prefix = f"{where}." if where else ""
    scaling = _pop_query_scale(rope, model_type, f"{prefix}{key}", provenance)
    layer_types = _layer_types(eff, provenance, row)
    if layer_types is None and _nested(rope):
        provenance["layer_types"] = ("not in the config: which layers use which set is not known here "
                                     "(transformers derives it from num_hidden_layers and the model's pattern)")
    if _nested(rope):
        if default_rope is not None and _nested(default_rope):
            rope = _complete_sets(rope, default_rope, eff, row, provenance)
        sets = {}
        for lt, sub in rope.items():
            if sub is not None and not isinstance(sub, dict):
                raise SpecError(f"config.json: {prefix}{key}.{lt}: expected an object or null, got {sub!r}")
            over = _layer_overrides(eff, lt, row, provenance)
            sets[lt] = None if sub is None else _rope_set({**eff, **over}, dict(sub), rule, model_type,
                                                          f"{prefix}{key}.{lt}", provenance, row)
    else:
        sets = {"all_layers": _rope_set(eff, rope, rule, model_type, f"{prefix}{key}", provenance, row)}
    sets = _gated_sets(sets, (row or {}).get("rope_gate"), eff, layer_types, provenance)
    nope = _layer_flags((row or {}).get("rope_gate"), eff, provenance)
    query_scale = None
    if scaling is not None:
        query_scale = _query_scale(*scaling, sets, rope, model_type, f"{prefix}{key}", provenance)
    elif model_type in QSCALE_LLAMA4_TYPES:
        query_scale = _llama4_query_scale(cfg, model_type, prefix, provenance)
    return RopeImport(model_type, where, sets, tuple(layer_types) if layer_types else None, rule.source, provenance,
                      query_scale, nope)


def _layer_flags(gate: Optional[dict], config: dict, provenance: dict) -> Optional[NopeParams]:
    """The per-layer NoPE flags of a model whose attention rotates only if ``use_rope =
    config.no_rope_layers[layer_idx]`` (the table's ``rope_gate.per_layer_flags``: SmolLM3, Llama
    4, Mistral Large 4) as :class:`NopeParams` (NOPE-*): the config's ``no_rope_layers`` where it
    is a non-empty list, else every ``no_rope_layer_interval``-th layer (the three classes'
    default, an empty list included: Llama 4 Scout's ``[]``), over ``num_hidden_layers``."""
    if not gate or not gate.get("per_layer_flags"):
        return None
    n = config.get("num_hidden_layers", gate.get("num_hidden_layers"))
    flags = config.get("no_rope_layers")
    interval = config.get("no_rope_layer_interval", gate.get("no_rope_layer_interval"))
    if flags is not None and not isinstance(flags, list):
        raise SpecError(f"config.json: no_rope_layers: expected a list of 0 / 1, got {type(flags).__name__} {flags!r}")
    try:
        p = NopeParams(num_hidden_layers=n, no_rope_layers=tuple(flags) if flags else None,
                       no_rope_layer_interval=interval)
        if not flags:  # the classes' own derivation, written out (one form, whatever the config states)
            p = p.model_copy(update={"no_rope_layers": tuple(int((i + 1) % p.no_rope_layer_interval != 0)
                                                             for i in range(p.num_hidden_layers))})
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'nope'}: {_msg(err)}" for err in e.errors())
        raise SpecError(f"config.json: no_rope_layers: {msgs}") from None
    nope = [i for i in range(p.num_hidden_layers) if not p.no_rope_layers[i]]
    provenance["nope"] = (f"no RoPE on layers {nope} of {p.num_hidden_layers} "
                          f"({'no_rope_layers' if flags else f'every {p.no_rope_layer_interval}th layer'}): "
                          f"{gate['evidence']} (NOPE-*)")
    return p


def _gated_sets(sets: dict, gate: Optional[dict], config: dict, layer_types, provenance: dict) -> dict:
    """The sets with None for the layer types whose attention does not rotate (LAYERS-NO-ROPE):
    the model type's ``rope_gate`` (its attention's own guard around ``apply_rotary_*``, evaluated by
    ``posenc config survey`` per layer type; with the config's ``sliding_window`` null where the
    guard reads it).  A type only some of whose layers rotate is said in provenance."""
    if not gate or gate.get("error") or gate.get("per_layer_flags"):  # per layer: _layer_flags (NOPE-*)
        return sets
    if gate.get("flag"):
        on = config.get(gate["flag"])
        if on is not None and not isinstance(on, bool):  # transformers' strict config refuses it too
            raise SpecError(f"config.json: {gate['flag']}: expected true or false, got {type(on).__name__} {on!r}")
        on = gate["flag_default"] if on is None else on
        if not on:  # every layer without RoPE (LAYERS-NO-ROPE); the sets were still read and validated
            provenance["sets.all_layers"] = (f"no RoPE: {gate['flag']} {on!r} "
                                             f"({'the config' if gate['flag'] in config else 'class default'}): "
                                             f"{gate['attention_class']}.forward rotates q and k only if "
                                             f"{gate['condition']} (LAYERS-NO-ROPE on every layer)")
            return {lt: None for lt in sets}
        return sets
    mlp = config.get("mlp_layer_types")
    forced = "force_rope" in gate["condition"] and config.get("prefix_dense_sliding_window_pattern") == 1 and (
        not isinstance(mlp, list) or not layer_types
        or any(m == "dense" and lt == "full_attention" for m, lt in zip(mlp, layer_types)))
    if forced:
        raise SpecError(f"config.json: prefix_dense_sliding_window_pattern: 1: {gate['attention_class']} also rotates "
                        f"the dense prefix's full-attention layers (force_rope), per layer, not per layer type: "
                        f"not covered")
    windowless = "sliding_window" in gate["condition"] and "sliding_window" in config \
        and config["sliding_window"] is None
    no_rope = gate["no_rope_without_window" if windowless else "no_rope"]
    where = f"{gate['attention_class']}.forward rotates q and k only if {gate['condition']}"
    for lt in gate.get("mixed") or ():
        provenance[f"layers.{lt}"] = f"some {lt} layers have no RoPE: {where} (per layer, not per type)"
    if not no_rope:
        return sets
    if set(sets) == {"all_layers"}:
        one = sets["all_layers"]
        types = sorted(set(no_rope) | set(gate.get("types") or ("full_attention", "sliding_attention"))
                       | set(layer_types or ()))
        sets = {lt: None if lt in no_rope else one for lt in types}
    else:
        sets = {lt: None if lt in no_rope else p for lt, p in sets.items()}
    for lt in no_rope:
        provenance[f"sets.{lt}"] = f"no RoPE: {where}" + (" (sliding_window null)" if windowless else "")
    return sets


#: model types whose attention multiplies q (after RoPE) by 1 + beta ln(1 + floor(p / L))
#: (QSCALE-MISTRAL), beta = rope_parameters.llama_4_scaling_beta and L = rope_parameters.
#: original_max_position_embeddings (transformers 5.24 ministral3 / mistral4 modeling,
#: get_llama_4_attn_scale); their config classes list llama_4_scaling_beta and
#: max_position_embeddings in ignore_keys_at_rope_validation (the rotary module reads neither)
QSCALE_MISTRAL_TYPES = ("ministral3", "mistral4")


#: Llama 4's attention temperature tuning (QSCALE-LLAMA4) on its NoPE layers: the config keys and
#: their Llama4TextConfig defaults in transformers 5.24 (tests/test_query_scale.py checks them)
QSCALE_LLAMA4_TYPES = {"llama4_text": {"attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1}}


def _llama4_query_scale(cfg: dict, model_type: str, prefix: str, provenance: dict) -> Optional[QueryScaleParams]:
    """QSCALE-LLAMA4's parameters from ``attn_temperature_tuning``, ``attn_scale`` and
    ``floor_scale`` (class defaults where the config omits them), or None when tuning is off."""
    values = {}
    for k, default in QSCALE_LLAMA4_TYPES[model_type].items():
        v = cfg.get(k)
        values[k] = default if v is None else v
    on, L, beta = values["attn_temperature_tuning"], values["floor_scale"], values["attn_scale"]
    if not isinstance(on, bool):
        raise SpecError(f"config.json: {prefix}attn_temperature_tuning: expected true or false, got {on!r}")
    if not on:
        return None
    if not (isinstance(L, int) and not isinstance(L, bool) and L > 0):
        raise SpecError(f"config.json: {prefix}floor_scale: expected a positive integer, got {L!r}")
    if not _is_number(beta) or not 0 < beta <= 100:
        raise SpecError(f"config.json: {prefix}attn_scale: expected a positive number, got {beta!r}")
    provenance["query_scale"] = (
        f"QSCALE-LLAMA4: beta = {prefix}attn_scale, L = {prefix}floor_scale (Llama4TextConfig defaults where "
        f"omitted); applied on the NoPE layers only (no_rope_layers[i] == 0, NOPE-LAYER-FLAGS); transformers "
        f"computes it from the token index (arange + cache length), not position_ids: DIV-QSCALE-TOKEN-INDEX")
    return QueryScaleParams(form="llama4", beta=float(beta), scale_length=L)


def _pop_query_scale(rope: dict, model_type: str, where: str, provenance: dict):
    """Take the query-scaling keys out of a :data:`QSCALE_MISTRAL_TYPES` model's rope dict (they
    are not RoPE parameters): ``(llama_4_scaling_beta, L)`` (L: the dict's
    original_max_position_embeddings where the rope type has none of its own, else None), ``None``
    for the other model types;
    :class:`SpecError` when the beta is missing or not a positive number."""
    if model_type not in QSCALE_MISTRAL_TYPES or _nested(rope):
        return None
    if rope.get("max_position_embeddings") is not None:
        provenance[f"{where}.max_position_embeddings"] = (
            f"{rope.pop('max_position_embeddings')!r} ignored ({model_type}'s config class skips it at rope "
            f"validation; the rotary module and the query scale do not read it)")
    rope.pop("max_position_embeddings", None)
    beta = rope.pop("llama_4_scaling_beta", None)
    rope_type = rope.get("rope_type") or rope.get("type") or "default"
    required, optional = ROPE_TYPE_FIELDS.get(rope_type, ((), ()))
    # the query scale's L alone where the rope type has no original_max_position_embeddings
    length = rope.pop("original_max_position_embeddings", None) if "original_max_position_embeddings" not in \
        required + optional else None
    if beta is None:
        raise SpecError(f"config.json: {where}.llama_4_scaling_beta: missing: {model_type}'s attention multiplies "
                        f"q by 1 + llama_4_scaling_beta * ln(1 + floor(p / original_max_position_embeddings)) "
                        f"(QSCALE-MISTRAL) and transformers fails without it")
    if not _is_number(beta) or not beta > 0:
        raise SpecError(f"config.json: {where}.llama_4_scaling_beta: expected a positive finite number, got {beta!r}")
    return beta, length


def _query_scale(beta, length, sets: dict, rope: dict, model_type: str, where: str,
                 provenance: dict) -> QueryScaleParams:
    """QSCALE-MISTRAL's parameters: L is the rope dict's original_max_position_embeddings as
    transformers standardises it (yarn / llama3 / longrope fill it from max_position_embeddings)."""
    params = sets.get("all_layers")
    L = getattr(params, "original_max_position_embeddings", None) or length
    stated = rope.get("original_max_position_embeddings") if isinstance(rope, dict) else None
    provenance["query_scale"] = (
        f"QSCALE-MISTRAL: beta = {where}.llama_4_scaling_beta, L = {where}.original_max_position_embeddings"
        + ("" if stated is not None or length is not None else
           f" (not stated: {L} filled from max_position_embeddings, as transformers' rope standardisation does)"))
    if not (isinstance(L, int) and not isinstance(L, bool) and L > 0):
        raise SpecError(f"config.json: {where}.original_max_position_embeddings: expected a positive integer (the "
                        f"length L of {model_type}'s query scale, QSCALE-MISTRAL), got {L!r}")
    return QueryScaleParams(form="mistral", beta=float(beta), scale_length=L)


def _layer_types(config: dict, provenance: dict, row: Optional[dict] = None) -> Optional[list]:
    """The config's ``layer_types``, checked as transformers 5.24 checks them where the config
    class does (``validate_layer_type``: known names, one per layer; the survey's
    ``validates_layer_types``), after its renames of legacy names (``attention`` -> ``full_attention``)."""
    layer_types = config.get("layer_types")
    if layer_types is None:
        return None
    if not (isinstance(layer_types, list) and all(isinstance(x, str) for x in layer_types)):
        raise SpecError(f"config.json: layer_types: expected a list of strings, got {layer_types!r}")
    table = _hf_table()
    renamed = [table["legacy_layer_types"].get(x, x) for x in layer_types]
    if renamed != layer_types:
        provenance["layer_types"] = "legacy names renamed as transformers renames them: " + ", ".join(
            sorted({f"{a} -> {b}" for a, b in zip(layer_types, renamed) if a != b}))
    if not (row or {}).get("validates_layer_types"):
        return renamed
    unknown = sorted(set(renamed) - set(table["layer_types"]))
    if unknown:
        raise SpecError(f"config.json: layer_types: unknown layer type(s) {', '.join(unknown)}; transformers "
                        f"{table['transformers']} knows {', '.join(table['layer_types'])}")
    n = config.get("num_hidden_layers")
    if isinstance(n, int) and not isinstance(n, bool) and n != len(renamed):
        raise SpecError(f"config.json: layer_types: {len(renamed)} entries, num_hidden_layers is {n}")
    return renamed


def _complete_sets(rope: dict, default_rope: dict, config: dict, row: Optional[dict], provenance: dict) -> dict:
    """A per-layer-type ``rope_parameters`` completed as the config class completes it: a layer
    type it lacks takes the class's default set, a set without ``rope_theta`` the 4.x key mapped to
    it (Gemma 3's top-level ``rope_theta`` for full attention) or the class default's theta."""
    rope = {lt: (dict(v) if isinstance(v, dict) else v) for lt, v in rope.items()}
    for lt, st in default_rope.items():
        if rope.get(lt) is None and st is not None:  # absent or null: the class fills its default set
            rope[lt] = dict(st) if isinstance(st, dict) else st
            provenance[f"{lt}"] = f"{(row or {}).get('config_class', 'the class')} default set"
    layout = (row or {}).get("legacy_layout") or {}
    for lt, st in rope.items():
        if not isinstance(st, dict) or st.get("rope_theta") is not None:
            continue
        key = next((k for k in LEGACY_THETA_KEYS if lt in layout.get(k, ()) and config.get(k) is not None), None)
        if key is not None:
            st["rope_theta"] = config[key]
            provenance[f"{lt}.rope_theta"] = f"{key} (mapped as {(row or {}).get('config_class')} maps it)"
        elif isinstance(default_rope.get(lt), dict) and default_rope[lt].get("rope_theta") is not None:
            st["rope_theta"] = default_rope[lt]["rope_theta"]
            provenance[f"{lt}.rope_theta"] = f"{(row or {}).get('config_class')} default"
    return rope


def _legacy_sets(config: dict, default_rope: dict, row: dict, provenance: dict) -> dict:
    """The per-layer-type sets of a 4.x config (Gemma 3's ``rope_theta`` / ``rope_local_base_freq``
    / ``rope_scaling``, ModernBERT's ``global_rope_theta`` / ``local_rope_theta``), mapped as the
    config class maps them (``legacy_layout`` in the table, read from transformers)."""
    layout = row["legacy_layout"]
    flat = config.get("rope_parameters")
    if flat:
        raise SpecError(f"config.json: rope_parameters: {config.get('model_type')} takes one set per layer type "
                        f"({', '.join(default_rope)}), got a single set")
    sets = {lt: {"rope_type": "default"} if st is not None else None for lt, st in default_rope.items()}
    scaling = config.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, dict):
        raise SpecError(f"config.json: rope_scaling: expected an object, got {type(scaling).__name__} {scaling!r}")
    for lt in layout.get("rope_scaling", []) if scaling else []:
        sets[lt].update(scaling)
    provenance["rope_parameters"] = (f"4.x layout mapped per layer type as {row['config_class']} maps it: "
                                     + "; ".join(f"{k} -> {', '.join(v)}" for k, v in layout.items()))
    return _complete_sets(sets, default_rope, config, row, provenance)  # the thetas: the mapped keys, else defaults


LEGACY_THETA_KEYS = ("rope_theta", "rope_local_base_freq", "global_rope_theta", "local_rope_theta")

#: the ``per_layer_config`` keys a RoPE parameter set depends on
LAYER_OVERRIDE_KEYS = ("head_dim", "partial_rotary_factor", "hidden_size", "num_attention_heads", "qk_rope_head_dim")


def _layer_overrides(config: dict, layer_type: str, row: Optional[dict], provenance: dict) -> dict:
    """The keys one layer type's layers override (transformers' ``per_layer_config``: Gemma 4's
    full-attention ``head_dim``): from the config's ``per_layer_config`` (every layer of the type
    alike), else its ``global_head_dim`` (full-attention layers), else the config class default."""
    per_layer, types = config.get("per_layer_config"), config.get("layer_types")
    if isinstance(per_layer, dict) and types:
        entries = [per_layer.get(f"{i:02d}", per_layer.get(str(i))) or {} for i, t in enumerate(types) if t == layer_type]
        bad = next((e for e in entries if not isinstance(e, dict)), None)
        if bad is not None:
            raise SpecError(f"config.json: per_layer_config: expected an object per layer, got {bad!r}")
        seen = {json.dumps({k: v for k, v in e.items() if k in LAYER_OVERRIDE_KEYS}, sort_keys=True) for e in entries}
        if len(seen) > 1:
            raise SpecError(f"config.json: per_layer_config: the {layer_type} layers differ ({', '.join(sorted(seen))})")
        return json.loads(seen.pop()) if seen else {}
    if layer_type == "full_attention" and config.get("global_head_dim") is not None:
        return {"head_dim": _positive_int(config["global_head_dim"], "global_head_dim")}
    over = ((row or {}).get("layer_type_defaults") or {}).get(layer_type) or {}
    if over:
        provenance[f"{layer_type}.head_dim"] = f"{row['config_class']} default per_layer_config"
    return dict(over)


def rope_params_from_hf_config(config: Union[dict, str, Path]) -> RopeParams:
    """``RopeParams`` for a model's ``config.json`` (a dict or a path) with one RoPE parameter set.

    Raises :class:`SpecError` naming the field for an unknown model_type, an unknown rope_type
    or rope key, a missing theta without a model-type default, parameters that do not validate
    (e.g. ``rotary_pct`` giving an odd rotary width), or a config with one set per layer type
    (use :func:`rope_import`).
    """
    imported = rope_import(config)
    if set(imported.sets) != {"all_layers"}:
        raise SpecError(f"config.json: rope_parameters: one set per layer type ({', '.join(imported.sets)}); "
                        f"read it with rope_import")
    if imported.sets["all_layers"] is None:
        raise SpecError(f"config.json: {imported.provenance['sets.all_layers']}: the model has no RoPE to read")
    return imported.sets["all_layers"]


#: model types whose config class computes each layer type's ``partial_rotary_factor`` from other
#: keys, overwriting a stated one: model type -> (rotary width key, its class default, source);
#: the factor is that width over the layer type's ``head_dim``
DERIVED_PARTIAL = {
    "dots3_note_text": ("qk_rope_head_dim", 64, "models/dots3_note/configuration_dots3_note.py::"
                        "Dots3NoteTextConfig.convert_rope_params_to_dict (qk_rope_head_dim / head_dim per layer type)"),
}


def _derived_partial(config: dict, rope: dict, model_type: str, label: str, provenance: dict) -> None:
    """DERIVED_PARTIAL: the set's ``partial_rotary_factor`` as the config class computes it (the
    layer type's own rotary width and head width, from its ``per_layer_config`` where it has one)."""
    key, default, source = DERIVED_PARTIAL[model_type]
    width = config.get(key) if config.get(key) is not None else default
    width = _positive_int(width, key)
    head = _positive_int(config.get("head_dim"), "head_dim") if config.get("head_dim") is not None else None
    if head is None:
        raise SpecError(f"config.json: {label}head_dim: missing; {model_type}'s partial_rotary_factor is "
                        f"{key} / head_dim ({source})")
    if width > head:
        raise SpecError(f"config.json: {label}{key}: {width} exceeds head_dim {head} ({source})")
    stated = rope.get("partial_rotary_factor")
    rope["partial_rotary_factor"] = width / head
    note = f"{key} {width} / head_dim {head}: {source}"
    if stated is not None and stated != width / head:
        note = f"{stated} stated, overwritten by the class: {note}"
    provenance[f"{label}partial_rotary_factor"] = note


def _rope_set(config: dict, rope: dict, rule: ModelRule, model_type: str, where: str,
              provenance: Optional[dict] = None, row: Optional[dict] = None) -> RopeParams:
    """One RoPE parameter set: ``rope`` (a copy of the rope dict or one layer type's) over ``config``;
    the values the rule supplies (not the config) are added to ``provenance``.  ``row``: the
    table row (``partial_field_defaults``: the factor the class puts into a set written without
    one; ``ignores_partial_rotary_factor``: the layer types whose default rope function rotates
    the whole head whatever the factor)."""
    for key in ("rope_type", "type"):
        if rope.get(key) is not None and not isinstance(rope[key], str):
            raise SpecError(f"config.json: {where}.{key}: expected a string, got {type(rope[key]).__name__} {rope[key]!r}")
    provenance = {} if provenance is None else provenance
    label = where.split(".", 1)[1] + "." if "." in where else ""
    layer = where.rsplit(".", 1)[1] if label else "all_layers"
    field_default = ((row or {}).get("partial_field_defaults") or {}).get(layer)
    if rope.get("partial_rotary_factor") is None and all(config.get(k) is None for k in rule.partial_keys) \
            and field_default is not None:
        rope["partial_rotary_factor"] = field_default
        provenance[f"{label}partial_rotary_factor"] = f"{(row or {}).get('config_class', 'the class')} default"
    if model_type in DERIVED_PARTIAL:
        _derived_partial(config, rope, model_type, label, provenance)
    elif layer in ((row or {}).get("ignores_partial_rotary_factor") or ()) \
            and (rope.get("rope_type") or rope.get("type") or "default") == "default":
        stated = rope.pop("partial_rotary_factor", None)
        stated = stated if stated is not None else next((config[k] for k in rule.partial_keys if config.get(k) is not None), None)
        if stated is not None and stated != 1.0:
            provenance[f"{label}partial_rotary_factor"] = (
                f"{stated} ignored: {row.get('rotary_class')} computes rope_type default over the whole head")
        config = {k: v for k, v in config.items() if k not in rule.partial_keys}
    _rule_provenance(config, rope, rule, label, provenance)
    rope_type = rope.pop("rope_type", None) or rope.pop("type", None) or "default"
    rope.pop("type", None)
    rope_type = rule.type_aliases.get(rope_type, rope_type)
    if rope_type not in ROPE_TYPE_FIELDS:
        raise SpecError(f"config.json: {where}.rope_type: unknown rope_type {rope_type!r}; known: "
                        f"{', '.join(ROPE_TYPE_FIELDS)}")
    unknown = sorted(set(rope) - ROPE_KEYS)
    if unknown:
        raise SpecError(f"config.json: {where}: unknown key(s) {', '.join(unknown)} for rope_type {rope_type!r}")
    if rope_type != "default" and not rule.allows_scaling:
        raise SpecError(f"config.json: {where}.rope_type: {model_type} has no RoPE scaling ({rule.source})")
    _check_types(config, rope, where, rule.theta_keys + rule.partial_keys
                 + ("original_max_position_embeddings", "max_position_embeddings"))
    _check_required(rope, rope_type, where)

    theta = _theta(config, rope, rule, model_type)
    head_dim = _head_dim(config, rule, model_type, row, provenance, label)
    rotary_dim = _rotary_dim(config, rope, rule, head_dim)
    pairing = _pairing(config, rule)
    values: dict[str, Any] = {"head_dim": head_dim, "rotary_dim": None if rotary_dim == head_dim else rotary_dim,
                              "rope_theta": float(theta), "pairing": pairing, "rope_type": rope_type}
    if rule.rotation != "positive":
        values["rotation"] = rule.rotation
    required, optional = ROPE_TYPE_FIELDS[rope_type]
    for k, v in rope.items():
        if v is not None:
            values[k] = v
    if rope_type in ("llama3", "yarn", "longrope"):
        # transformers 5.24 standardize_rope_params: a top-level original_max_position_embeddings
        # wins (Phi-3); otherwise the rope dict's, else max_position_embeddings.
        orig = config.get("original_max_position_embeddings") or values.get("original_max_position_embeddings")
        if "original_max_position_embeddings" in rope and rope["original_max_position_embeddings"] in (None, 0):
            # transformers' rope validation refuses null, its yarn / llama3 rules divide by 0
            raise SpecError(f"config.json: {where}.original_max_position_embeddings: expected a positive integer, "
                            f"got {rope['original_max_position_embeddings']!r}")
        values["original_max_position_embeddings"] = orig or config.get("max_position_embeddings")
    if "max_position_embeddings" in required + optional and config.get("max_position_embeddings"):
        values["max_position_embeddings"] = config["max_position_embeddings"]
    if rope_type == "dynamic":
        values["dynamic_policy"] = "grow_until_reset"  # what the model's transformers code does
    try:
        return RopeParams(**values)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'rope'}: {_msg(err)}" for err in e.errors())
        raise SpecError(f"config.json: {where} ({model_type}, rope_type {rope_type}): {msgs}") from None


def _pairing_provenance(config: dict, rule: ModelRule, row: Optional[dict], model_type: str,
                        provenance: dict) -> None:
    """Where the pairing comes from: the probe of the model's apply function, a config flag (or its
    class default), a hand rule, or an assumption (a model type transformers does not know)."""
    if rule.pairing_flag:
        key, default, if_true, if_false = rule.pairing_flag
        value = config.get(key)
        said = f"{key} = {str(value).lower()} (config)" if value is not None else \
            f"{key} = {str(default).lower()} (its default)"
        provenance["pairing"] = f"{said}: true {if_true}, false {if_false} ({rule.source})"
    elif model_type in MODEL_RULES:
        provenance["pairing"] = f"{rule.pairing} (hand rule: {rule.source})"
    elif row is not None:
        provenance["pairing"] = "; ".join(row.get("pairing_evidence", []))
    else:
        provenance["pairing"] = f"assumed half: model_type {model_type!r} is not a transformers model type"
    if rule.rotation != "positive":  # probed together with the pairing (ROPE-ROTATION-NEGATIVE)
        provenance["rotation"] = f"{rule.rotation}: " + "; ".join((row or {}).get("pairing_evidence", []))


def _rule_provenance(config: dict, rope: dict, rule: ModelRule, key: str, provenance: dict) -> None:
    """The values the rule supplies for one set (``key``: its provenance prefix, ``"<layer type>."``)."""
    if rule.fixed_theta is not None:
        provenance[f"{key}rope_theta"] = f"fixed by the model code ({rule.source})"
    elif rope.get("rope_theta") is None and all(config.get(k) is None for k in rule.theta_keys):
        provenance[f"{key}rope_theta"] = rule.theta_provenance or rule.source
    if (not rule.rotary_dim_key and rule.partial_default != 1.0 and rope.get("partial_rotary_factor") is None
            and all(config.get(k) is None for k in rule.partial_keys)):
        provenance[f"{key}partial_rotary_factor"] = f"{rule.partial_default} ({rule.source})"


def _theta(config: dict, rope: dict, rule, model_type) -> float:
    """The base: the rule's fixed value, the rope dict's, the rule's config keys, or its default."""
    if rule.fixed_theta is not None:
        return rule.fixed_theta
    theta = rope.pop("rope_theta", None)
    for k in rule.theta_keys:
        theta = theta if theta is not None else config.get(k)
    if theta is None:
        if rule.theta_default is None:
            raise SpecError(f"config.json: rope_theta: missing, and model_type {model_type!r} defines no default")
        theta = rule.theta_default
    return theta


def _rotary_dim(config: dict, rope: dict, rule, head_dim: int) -> int:
    """The rotated width: the rule's key (GPT-J's rotary_dim), else head_dim x partial_rotary_factor."""
    if rule.rotary_dim_key:
        v = config.get(rule.rotary_dim_key)
        rotary_dim = head_dim if v is None else _positive_int(v, rule.rotary_dim_key)
    else:
        factor = rope.pop("partial_rotary_factor", None)
        for k in rule.partial_keys:
            factor = factor if factor is not None else config.get(k)
        factor = rule.partial_default if factor is None else float(factor)
        rotary_dim = int(head_dim * factor)
    rope.pop("partial_rotary_factor", None)
    return rotary_dim


def _pairing(config: dict, rule) -> str:
    if not rule.pairing_flag:
        return rule.pairing or "half"
    key, default, if_true, if_false = rule.pairing_flag
    flag = config.get(key, default)
    if not isinstance(flag, bool):
        raise SpecError(f"config.json: {key}: expected true or false, got {flag!r}")
    return if_true if flag else if_false


# ---- M-RoPE: Qwen2-VL, Qwen2.5-VL, Qwen3-VL ---------------------------------------------------


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
    rope, where = _rope_dict(text)
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


#: how a vision config gives its head width (transformers 5.24's compute_axial_rope_parameters and
#: their callers), by the rule name the model-type table records per axial model type: (rule, keys)
AXIAL_HEAD_WIDTH = (("head_dim", ("head_dim",)),
                    ("hidden_size / num_attention_heads", ("hidden_size", "num_attention_heads")),
                    ("embed_dim / num_attention_heads", ("embed_dim", "num_attention_heads")),
                    ("memory_attention_hidden_size / (memory_attention_downsample_rate * "
                     "memory_attention_num_attention_heads)",
                     ("memory_attention_hidden_size", "memory_attention_downsample_rate",
                      "memory_attention_num_attention_heads")))


#: the rules whose compute_axial_rope_parameters reads ``getattr(config, "head_dim", None)`` first
#: (a non-null ``head_dim`` in the config wins); SAM 2's memory attention does not
AXIAL_READS_HEAD_DIM = tuple(r for r, _ in AXIAL_HEAD_WIDTH if not r.startswith("memory_attention"))


def axial_head_width(get, rule: str) -> Optional[int]:
    """The head width under one of :data:`AXIAL_HEAD_WIDTH`'s rules, ``get(key)`` reading the config
    (None when a key is missing, not a positive integer, or the division is not exact)."""
    keys = dict(AXIAL_HEAD_WIDTH)[rule]
    vals = [get(k) for k in keys]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in vals):
        return None
    den = 1
    for v in vals[1:]:
        den *= v
    return vals[0] // den if vals[0] % den == 0 else None


def table_row(config: dict) -> Optional[dict]:
    """The model-type table's row of ``config``'s ``model_type`` (None: not a string, not a type)."""
    mt = config.get("model_type") if isinstance(config, dict) else None
    return hf_model_types().get(mt) if isinstance(mt, str) else None


def is_axial(config: dict) -> bool:
    """Whether the model-type table records ``config``'s model type as axial RoPE (AXIAL-*)."""
    return bool((table_row(config) or {}).get("axial"))


def rule_is_memory(row: dict) -> bool:
    """Whether an axial row's head width is SAM 2 video's memory-attention rule."""
    return str((row.get("axial") or {}).get("head_width", "")).startswith("memory_attention")


def is_centred(row: Optional[dict]) -> bool:
    """Whether an axial row's rotary module takes pixel values and centred patch coordinates
    (AXIAL-COORDINATES-CENTRED: EoMT-DINOv3), its grid image_size // patch_size per axis."""
    return ((row or {}).get("axial") or {}).get("coordinates") == "centred"


def axial_provenance(config: Union[dict, str, Path]) -> dict[str, str]:
    """What :func:`axial_params_from_hf_config` derived beyond the config's keys, by field: the grid
    of a module that tabulates its own patches (Llama 4 vision's ``positions``; a centred row's
    ``grid_size`` from image_size // patch_size, which the model recomputes from each image).
    Empty for the other axial rows."""
    config = read_config(config)
    row = table_row(config) or {}
    probed = row.get("axial") or {}
    where = row.get("where") or ""
    cfg = config.get(where, {}) if where else config
    defaults = row.get("defaults") or {}
    out = {}
    grid = probed.get("grid")
    if grid is not None:
        out["positions"] = (f"the rotary module tabulates its own square patch grid, row by row: patch (row, column) "
                            f"+ {grid['offset']}, the class token {grid['class_token'] or 'absent'}"
                            f"{' at (0, 0)' if grid['class_token'] else ''}")
    if is_centred(row):
        size, patch = (cfg.get(k) if cfg.get(k) is not None else defaults.get(k) for k in ("image_size", "patch_size"))
        said = [k for k in ("image_size", "patch_size") if cfg.get(k) is None]
        out["grid_size"] = (f"image_size // patch_size = {size} // {patch} per axis"
                            + (f" ({', '.join(said)}: {row.get('config_class', 'the config class')} default)"
                               if said else "")
                            + ": the grid of a square image_size image; the model recomputes it from each image "
                              "(height // patch_size, width // patch_size)")
        out["coordinates"] = (f"centred, probed: {row.get('axial_evidence', row.get('rotary_class', ''))}; its prefix "
                              f"tokens (class, registers) are not rotated")
    return out


@_named_errors
def axial_params_from_hf_config(config: Union[dict, str, Path]) -> AxialRopeParams:
    """``AxialRopeParams`` for a vision encoder's ``config.json`` whose ``rope_type`` is ``axial``.

    The model type's axes, frequency rule, layout, axis order and head-width rule are the ones the
    model-type table records for it (probed from its transformers 5.24 rotary module and apply
    function against the reference: ``posenc config survey``); ``rope_theta`` and the head-width
    keys are read from the config (``vision_config`` where the table says so), a missing key from
    the config class's default.  A row probed with centred coordinates (a rotary module that takes
    pixel values: EoMT-DINOv3) gives ``coordinates="centred"`` and ``grid_size`` image_size //
    patch_size per axis (:func:`axial_provenance`).  Raises :class:`SpecError` naming the field.
    """
    config = read_config(config)
    model_type = config.get("model_type")
    row = hf_model_types().get(model_type) if isinstance(model_type, str) else None
    if not row or not row.get("axial"):
        raise SpecError(f"config.json: model_type: {model_type!r} has no axial RoPE in transformers "
                        f"{hf_table_version()}")
    where = row.get("where") or ""
    cfg = config.get(where, {}) if where else config
    if not isinstance(cfg, dict):
        raise SpecError(f"config.json: {where}: expected an object, got {type(cfg).__name__}")
    prefix = f"{where}." if where else ""
    defaults, aliases = row.get("defaults") or {}, row.get("aliases") or {}

    def get(k):
        for key in (k, aliases.get(k)):
            if key and cfg.get(key) is not None:
                return cfg[key]
        return defaults.get(k)
    rope, key = _rope_dict(cfg)
    if not rope:  # the class default, its rope_theta below a top-level one
        rope = {k: v for k, v in (defaults.get("rope_parameters") or {}).items() if k != "rope_theta"}
    # a module that tabulates its own grid (Llama 4 vision) or takes pixel values (EoMT-DINOv3) is
    # configured with its class's rope_type
    own = ((defaults.get("rope_parameters") or {}).get("rope_type", "default")
           if row["axial"].get("grid") or is_centred(row) else "axial")
    rope_type = rope.get("rope_type", rope.get("type", own))
    if rope_type != own:
        raise SpecError(f"config.json: {prefix}{key}.rope_type: {rope_type!r}: {model_type}'s vision "
                        f"rotary module supports only {own!r}")
    unknown = sorted(set(rope) - {"rope_type", "type", "rope_theta"})
    if unknown:
        raise SpecError(f"config.json: {prefix}{key}: unknown key(s) {', '.join(unknown)} for rope_type "
                        f"{own!r} ({model_type}'s vision rotary module reads rope_theta only)")
    top = cfg.get("rope_theta")
    if rule_is_memory(row) and cfg.get("memory_attention_rope_theta") is not None:
        # SAM 2 video's deprecated alias: its setter writes rope_parameters["rope_theta"]
        if top is not None and top != cfg["memory_attention_rope_theta"]:
            raise SpecError(f"config.json: {prefix}memory_attention_rope_theta: {cfg['memory_attention_rope_theta']!r} "
                            f"disagrees with {prefix}rope_theta {top!r}; write one")
        top = cfg["memory_attention_rope_theta"]
    # transformers folds a top-level (4.x) rope_theta into the rope dict when the dict has none
    theta = next((v for v in (rope.get("rope_theta"), top,
                              (defaults.get("rope_parameters") or {}).get("rope_theta")) if v is not None), None)
    if rope.get("rope_theta") is not None and top is not None and rope["rope_theta"] != top:
        raise SpecError(f"config.json: {prefix}rope_theta: {top!r} (top level) disagrees with {prefix}{key}."
                        f"rope_theta {rope['rope_theta']!r}; write one")
    if not _is_number(theta) or not theta > 0:
        raise SpecError(f"config.json: {prefix}{key}.rope_theta: expected a positive finite number, "
                        f"got {theta!r}")
    probed = row["axial"]
    rule = probed["head_width"]
    head = axial_head_width(get, rule)
    grid = probed.get("grid")
    centred = is_centred(row)
    if grid is not None or centred:  # the module tabulates image_size // patch_size squared patches itself
        for k in ("image_size", "patch_size"):
            v = get(k)
            if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
                raise SpecError(f"config.json: {prefix}{k}: expected a positive integer (the side of {model_type}'s "
                                f"square patch grid is image_size // patch_size), got {v!r}")
        if get("image_size") < get("patch_size"):
            raise SpecError(f"config.json: {prefix}image_size: {get('image_size')} is smaller than patch_size "
                            f"{get('patch_size')}: the patch grid is empty")
    # the table's width is the rule's alone (the module and the attention take hidden_size // heads)
    explicit = None if grid is not None or centred else cfg.get("head_dim")
    if rule in AXIAL_READS_HEAD_DIM and explicit is not None:
        # compute_axial_rope_parameters: getattr(config, "head_dim", None) or <the rule>
        if not (isinstance(explicit, int) and not isinstance(explicit, bool) and explicit > 0):
            raise SpecError(f"config.json: {prefix}head_dim: expected a positive integer, got {explicit!r}")
        if rule != "head_dim" and head is not None and explicit != head:
            # the rotary module reads head_dim, the attention splits heads of the rule's width
            raise SpecError(f"config.json: {prefix}head_dim: {explicit} disagrees with {model_type}'s head width "
                            f"{rule} = {head}: its rotary module would rotate {explicit} dims of {head}-wide heads "
                            f"(the model cannot run)")
        head = explicit
    elif rule == "head_dim" and "head_dim" in cfg:
        raise SpecError(f"config.json: {prefix}head_dim: null: {row.get('config_class', model_type)} declares head_dim "
                        f"an integer (transformers refuses null)")
    if head is None:
        keys = dict(AXIAL_HEAD_WIDTH)[rule]
        raise SpecError(f"config.json: {prefix}{keys[0]}: the head width of {model_type} is {rule}: expected positive "
                        f"integers that divide ({', '.join(f'{k}={get(k)!r}' for k in keys)})")
    A = probed["num_axes"]
    if A == 2 and head % 4:
        # transformers takes head_dim // 2 (odd here) dims per axis and rotates more dims than the head
        # has (or, Pixtral, gives height and width different widths): no AXIAL-* layout computes that
        raise SpecError(f"config.json: {prefix}head_dim: {model_type}'s head width {head} is not a multiple of "
                        f"4: its two axes would rotate {head // 2} dims each (odd), which transformers' "
                        f"{model_type} module does not compute consistently and AXIAL-* does not define")
    if centred and math.ceil(1 / (4 / head)) != head // 4:
        # EomtDinov3RotaryEmbedding's arange(0, 1, 4 / head_dim) has ceil(1 / (4 / head_dim)) entries
        # (torch's length rule, in double): one too many at 196, 392, 412, ... its apply cannot broadcast
        raise SpecError(f"config.json: {prefix}head_dim: {model_type}'s head width {head}: its rotary module's "
                        f"arange(0, 1, 4 / {head}) gives {math.ceil(1 / (4 / head))} frequencies per axis, not "
                        f"{head // 4}, and its apply_rotary_pos_emb cannot run (a transformers defect at this width)")
    # centred (AXIAL-COORDINATES-CENTRED): the grid of a square image_size image; the model itself
    # recomputes it from each image's height and width (axial_provenance says so)
    coords = {"coordinates": "centred", "grid_size": (get("image_size") // get("patch_size"),) * A} if centred else {}
    try:
        return AxialRopeParams(head_dim=head, rope_theta=float(theta), num_axes=probed["num_axes"],
                               frequencies=probed["frequencies"], layout=probed["layout"],
                               axis_order=None if probed["axis_order"] == list(range(probed["num_axes"]))
                               else tuple(probed["axis_order"]), **coords)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'axial'}: {_msg(err)}" for err in e.errors())
        raise SpecError(f"config.json ({model_type}, axial): {msgs}") from None


#: the standard head-width keys (head_dim, else hidden_size / num_attention_heads)
_STANDARD_KEYS = ModelRule("standard keys")


@dataclass(frozen=True)
class _TextKeys:
    """The text model's head_dim and max_position_embeddings, else the config class's defaults."""

    text: dict
    rule: MRopeRule

    def head_dim(self, model_type) -> int:
        """:func:`_head_dim` over the standard keys, with the model type's ``head_width`` rule."""
        return _head_dim(self.text, _STANDARD_KEYS, model_type, hf_model_types().get(model_type))

    def max_positions(self) -> int:
        return int(self.text.get("max_position_embeddings") or self.rule.max_position_default)


# ---- the other families: learned tables, ALiBi, T5 buckets, sinusoids --------------------------


@dataclass(frozen=True)
class FieldRule:
    """One parameter: the config keys that may hold it (first present wins) and the default
    of the model's transformers 5.24 config class when none is present (None: required)."""

    keys: tuple[str, ...]
    default: Any = None


@dataclass(frozen=True)
class FamilyRule:
    """How one non-RoPE ``model_type`` maps onto a spec parameter model (transformers 5.24)."""

    source: str
    model: type
    fields: dict
    fixed: dict = field(default_factory=dict)  # values the model's code hard-codes


#: ``{model_type: {name: FamilyRule}}`` for the non-RoPE families (transformers 5.24).
FAMILY_RULES: dict[str, dict[str, FamilyRule]] = {
    "gpt2": {"embeddings": FamilyRule(
        "models/gpt2/configuration_gpt2.py::GPT2Config", GPT2EmbeddingParams,
        {"vocab_size": FieldRule(("vocab_size",), 50257), "n_positions": FieldRule(("n_positions", "max_position_embeddings"), 1024),
         "n_embd": FieldRule(("n_embd", "hidden_size"), 768)})},
    "bert": {"embeddings": FamilyRule(
        "models/bert/configuration_bert.py::BertConfig", BertEmbeddingParams,
        {"vocab_size": FieldRule(("vocab_size",), 30522), "max_position_embeddings": FieldRule(("max_position_embeddings",), 512),
         "type_vocab_size": FieldRule(("type_vocab_size",), 2), "hidden_size": FieldRule(("hidden_size",), 768),
         "layer_norm_eps": FieldRule(("layer_norm_eps",), 1e-12)})},
    # RobertaConfig's class defaults are BERT's (512, 2, 1e-12); RoBERTa checkpoints set 514, 1, 1e-5
    "roberta": {"embeddings": FamilyRule(
        "models/roberta/configuration_roberta.py::RobertaConfig", RobertaEmbeddingParams,
        {"vocab_size": FieldRule(("vocab_size",), 50265), "max_position_embeddings": FieldRule(("max_position_embeddings",), 512),
         "type_vocab_size": FieldRule(("type_vocab_size",), 2), "hidden_size": FieldRule(("hidden_size",), 768),
         "layer_norm_eps": FieldRule(("layer_norm_eps",), 1e-12), "padding_idx": FieldRule(("pad_token_id",), 1)})},
    # OPTLearnedPositionalEmbedding(max_position_embeddings, hidden_size): rows + 2
    "opt": {"embeddings": FamilyRule(
        "models/opt/modeling_opt.py::OPTLearnedPositionalEmbedding", OPTEmbeddingParams,
        {"max_position_embeddings": FieldRule(("max_position_embeddings",), 2048),
         "hidden_size": FieldRule(("hidden_size",), 768)})},
    "bart": {"embeddings": FamilyRule(
        "models/bart/modeling_bart.py::BartLearnedPositionalEmbedding", BartEmbeddingParams,
        {"max_position_embeddings": FieldRule(("max_position_embeddings",), 1024),
         "hidden_size": FieldRule(("d_model", "hidden_size"), 1024)})},
    "bloom": {"alibi": FamilyRule(
        "models/bloom/modeling_bloom.py::build_alibi_tensor", AlibiParams,
        {"num_heads": FieldRule(("n_head", "num_attention_heads"), 8)}, {"form": "bloom"})},
    "mpt": {"alibi": FamilyRule(
        "models/mpt/modeling_mpt.py::build_mpt_alibi_tensor", AlibiParams,
        {"num_heads": FieldRule(("n_heads", "num_attention_heads"), 16),
         "alibi_bias_max": FieldRule(("attn_config.alibi_bias_max",), 8)}, {"form": "mpt"})},
    "t5": {part: FamilyRule(
        "models/t5/modeling_t5.py::T5Attention._relative_position_bucket", T5Params,
        {"num_buckets": FieldRule(("relative_attention_num_buckets",), 32),
         "max_distance": FieldRule(("relative_attention_max_distance",), 128)}, {"bidirectional": bidi})
        for part, bidi in (("encoder", True), ("decoder", False))},
    "whisper": {"encoder_positions": FamilyRule(
        "models/whisper/modeling_whisper.py::sinusoids", SinusoidalParams,
        {"dim": FieldRule(("d_model",), 384)}, {"layout": "concat", "variant": "whisper"}),
        # the decoder's learned table: WhisperPositionalEmbedding(max_target_positions, d_model), rows = positions
        "decoder_positions": FamilyRule(
        "models/whisper/modeling_whisper.py::WhisperPositionalEmbedding", LookupParams,
        {"num_rows": FieldRule(("max_target_positions",), 448), "dim": FieldRule(("d_model",), 384)})},
    # XGLM's table rows are position + 2 (XGLMSinusoidalPositionalEmbedding.offset), padding_idx + 1 with
    # its pad_token_id 1; since 5.x its positions are arange + the cache length (padding is not read)
    "xglm": {"positions": FamilyRule(
        "models/xglm/modeling_xglm.py::XGLMSinusoidalPositionalEmbedding", SinusoidalParams,
        {"dim": FieldRule(("d_model",), 1024), "padding_idx": FieldRule(("pad_token_id",), 1)},
        {"layout": "concat", "variant": "fairseq"})},
    "m2m_100": {"positions": FamilyRule(
        "models/m2m_100/modeling_m2m_100.py::M2M100SinusoidalPositionalEmbedding", SinusoidalParams,
        {"dim": FieldRule(("d_model",), 1024), "padding_idx": FieldRule(("pad_token_id",), 1)},
        {"layout": "concat", "variant": "fairseq"})},
}


def _lookup(config: dict, dotted: str):
    value: Any = config
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if i and not isinstance(value, dict):
            raise SpecError(f"config.json: {'.'.join(parts[:i])}: expected an object, got {type(value).__name__} {value!r}")
        if part not in value:
            return None
        value = value[part]
    return value


def _typed(value, model, name: str, key: str):
    """``value`` checked against the parameter model's field type (an int is not a bool or a
    string, a float is a finite number): :class:`SpecError` naming ``key``."""
    ann = str(model.model_fields[name].annotation)
    if "bool" in ann and "int" not in ann:
        ok = isinstance(value, bool)
    elif "int" in ann and "float" not in ann:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif "float" in ann:
        ok = _is_number(value)
    else:
        return value
    if not ok:
        raise SpecError(f"config.json: {key}: expected {ann.replace('<class ', '').replace('>', '')}, "
                        f"got {type(value).__name__} {value!r}")
    return value


@_named_errors
def component_imports(config: Union[dict, str, Path]) -> Optional[dict[str, RopeImport]]:
    """``{sub-config attribute: RopeImport}`` of a model whose RoPE lives in several sub-models,
    each its own registered model type reading its own sub-config (the table's ``components``:
    BLT's ``patcher_config``, ``encoder_config``, ``decoder_config``, ``global_config``), or None
    for any other model.  Each sub-config is imported as its own model type (a sub-config the
    file omits takes that class's defaults); the wrapper's own ``rope_parameters`` is read by
    none of them (``posenc config survey`` probes it: ``components_evidence``).  Raises
    :class:`SpecError` naming the sub-config and field."""
    config = read_config(config)
    row = table_row(config)
    if not row or not row.get("components"):
        return None
    # the wrapper's own RoPE keys are read by no module, but transformers' config class still
    # validates them (a malformed one refuses the whole config): validated by the first sub-model's rules
    top = {k: config[k] for k in ("rope_parameters", "rope_scaling", "rope_theta") if config.get(k) is not None}
    if top:
        first = next(iter(row["components"].values()))
        try:
            rope_import({**top, "model_type": first})
        except SpecError as e:
            raise SpecError(f"{e} (the top level of {row['config_class']}: read by none of its sub-models, "
                            f"validated by transformers all the same)") from None
    out = {}
    for attr, sub_type in row["components"].items():
        sub = config.get(attr)
        if sub is None:
            sub = {}
        if not isinstance(sub, dict):
            raise SpecError(f"config.json: {attr}: expected an object (the {sub_type} sub-config), "
                            f"got {type(sub).__name__} {sub!r}"[:240])
        try:
            out[attr] = rope_import({**sub, "model_type": sub_type})
        except SpecError as e:
            raise SpecError(f"config.json: {attr}.{str(e).removeprefix('config.json: ')}") from None
        stated = sub.get("model_type")
        if stated is not None and stated != sub_type:  # transformers builds the slot's own class regardless
            out[attr].provenance["model_type"] = (f"{stated!r} in the config is ignored: {row['config_class']} builds "
                                                  f"{attr} as {sub_type} whatever it says")
    return out


def is_rope_import(config: dict) -> bool:
    """Whether :func:`params_from_hf_config` reads ``config`` through :func:`rope_import` (every
    model type but the M-RoPE and the other families' rules, and those whose RoPE lives in
    several sub-models, :func:`component_imports`)."""
    return (config.get("model_type") not in MROPE_RULES and config.get("model_type") not in FAMILY_RULES
            and not is_axial(config) and not (table_row(config) or {}).get("components"))


def _rope_import_params(imported: RopeImport) -> dict[str, Any]:
    extra = {} if imported.query_scale is None else {"query_scale": imported.query_scale}
    if imported.nope is not None:
        extra["nope"] = imported.nope
    if set(imported.sets) == {"all_layers"}:
        return {"rope": imported.sets["all_layers"], **extra}
    return {**{f"rope.{lt}": p for lt, p in imported.sets.items()}, **extra}


@_named_errors
def params_from_hf_config(config: Union[dict, str, Path]) -> dict[str, Any]:
    """The spec parameter models a model's ``config.json`` implies, by name.

    RoPE model types (:data:`MODEL_RULES` and every model type of :data:`HF_TABLE_PATH`, through
    :func:`rope_import`) give ``{"rope": RopeParams}`` (``{"rope": None}`` where a config switch
    turns RoPE off on every layer, LAYERS-NO-ROPE), or ``{"rope.<layer_type>": RopeParams or
    None}`` where ``rope_parameters`` holds one set per layer type; GPT-2, BERT, RoBERTa,
    OPT, BART give ``{"embeddings": ...EmbeddingParams}``; BLOOM and MPT ``{"alibi": AlibiParams}``;
    T5 ``{"encoder": T5Params, "decoder": T5Params}`` (bidirectional and causal buckets); Whisper
    ``{"encoder_positions": SinusoidalParams}``; M2M100 (``m2m_100``) ``{"positions": SinusoidalParams}`` (the
    fairseq rule); Qwen2-VL, Qwen2.5-VL, Qwen3-VL (:data:`MROPE_RULES`) ``{"mrope": MRopeParams}``;
    the vision encoders with axial RoPE (the table's ``axial`` rows) ``{"axial": AxialRopeParams}``;
    Ministral 3 and Mistral 4 add ``{"query_scale": QueryScaleParams}`` (QSCALE-MISTRAL), Llama 4
    its temperature tuning (QSCALE-LLAMA4, on the NoPE layers); a model whose RoPE lives in
    several sub-models (BLT, :func:`component_imports`) gives each sub-model's keys prefixed with
    its sub-config (``{"patcher_config.rope": RopeParams, ...}``).
    A key the config lacks takes the transformers 5.24 config class default (see
    the rule's source).  Raises :class:`SpecError` naming the model_type or field.
    """
    config = read_config(config)
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise SpecError(f"config.json: model_type: expected a string, got {type(model_type).__name__} {model_type!r}"
                        if model_type is not None else "config.json: model_type: missing (every config.json names its "
                                                       "model type)")
    if model_type in MROPE_RULES:
        return {"mrope": mrope_params_from_hf_config(config)}
    if is_axial(config):
        return {"axial": axial_params_from_hf_config(config)}
    rules = FAMILY_RULES.get(model_type)
    components = component_imports(config)
    if components is not None:
        out: dict[str, Any] = {}
        for attr, imported in components.items():
            for k, v in _rope_import_params(imported).items():
                out[f"{attr}.{k}"] = v
        return out
    if is_rope_import(config):
        return _rope_import_params(rope_import(config))
    out = {}
    for name, rule in rules.items():
        values = dict(rule.fixed)
        for fname, fr in rule.fields.items():
            found, key = next(((v, k) for v, k in ((_lookup(config, k), k) for k in fr.keys) if v is not None),
                              (None, fr.keys[0]))
            if found is not None:
                _typed(found, rule.model, fname, key)
            if found is None and fr.default is None:
                raise SpecError(f"config.json: {fr.keys[0]}: missing, and {model_type} defines no default")
            values[fname] = fr.default if found is None else found
        try:
            out[name] = rule.model(**values)
        except ValidationError as e:
            msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {_msg(err)}" for err in e.errors())
            raise SpecError(f"config.json ({model_type}, {name}): {msgs}") from None
    return out

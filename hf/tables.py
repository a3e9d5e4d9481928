"""The model-type tables of the transformers bridge and the rules every importer shares.

Every transformers model type is known from ``hf_model_types.json`` (package data of
:mod:`posenc.hf`), read from transformers 5.24 by ``posenc config survey`` (:mod:`posenc.hf.survey`):
class defaults, ``attribute_map`` aliases, the sub-config the RoPE keys live in, the pairing probed
from the model's own apply function, the 4.x layout of the per-layer-type models.  The hand rules
(:data:`MODEL_RULES`, one :class:`ModelRule` per model type that deviates: where its theta, head size
and rotary share come from, its pairing, its aliases and its defaults, each default with its
provenance) remain where a model deviates.  ``hf_exceptions.yaml`` lists the RoPE model types whose
default config the import refuses, each with its reason.

Reads both layouts: transformers 4.x (top-level ``rope_theta`` / ``partial_rotary_factor`` and a
``rope_scaling`` dict whose type key may be ``type``) and 5.x (``rope_parameters`` holding
``rope_type``, ``rope_theta`` and the scaling keys).  Errors are :class:`SpecError` naming the
field.  Sources: transformers 5.24 ``modeling_rope_utils.py::RotaryEmbeddingConfigMixin``
(``convert_rope_params_to_dict``, ``standardize_rope_params``) and each model's configuration
module named in :data:`MODEL_RULES`.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from posenc.spec.errors import SpecError
from posenc.spec.files import NotRegularFile, TooDeep, loads_json, read_regular

if TYPE_CHECKING:
    from posenc.hf.mrope import MRopeRule


#: transformers' model types, read from transformers by ``posenc config survey`` (:mod:`posenc.hf.survey`);
#: package data of :mod:`posenc.hf`, found by package
HF_TABLE_PATH = Path(str(resources.files("posenc.hf").joinpath("hf_model_types.json")))
#: the RoPE model types whose default config the import refuses, each with its reason
HF_EXCEPTIONS_PATH = Path(str(resources.files("posenc.hf").joinpath("hf_exceptions.yaml")))

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
                          partial_keys=("rotary_pct",), partial_default=0.25),  # a top-level partial_rotary_factor is ignored by GPTNeoXConfig (its rotary_pct, default 0.25, fills rope_parameters)
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
        mt = config.get("model_type", "") if isinstance(config, dict) else ""
        if not isinstance(mt, str):  # before any table lookup by it (a list is not even hashable)
            raise SpecError(f"config.json: model_type: expected a string, got {type(mt).__name__} {mt!r}")
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


#: a config.json is a few kilobytes; a bigger file is not read
CONFIG_LIMIT = 16 * 1024 * 1024
def read_config(config: Union[dict, str, Path]) -> dict:
    """A ``config.json`` as a dict (a dict is returned as is).  :class:`SpecError` names an unreadable
    file, malformed JSON (where), JSON nested deeper than 64 levels (``spec.files.JSON_DEPTH``), or a
    file that is not one JSON object."""
    if isinstance(config, dict):
        return config
    path = Path(config)
    try:  # a regular file of at most CONFIG_LIMIT bytes: never a FIFO (a hang) nor /dev/zero (memory)
        data = loads_json(read_regular(path, CONFIG_LIMIT, "config").decode("utf-8-sig"))  # a byte-order mark is fine
    except NotRegularFile as e:
        raise SpecError(f"{path}: cannot read a JSON config: {e}") from None
    except TooDeep as e:
        raise SpecError(f"{path}: cannot read a JSON config: {e} (a config.json is an object of a few levels)") from None
    except (OSError, ValueError) as e:
        raise SpecError(f"{path}: cannot read a JSON config: {' '.join(str(e).split())}") from None
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

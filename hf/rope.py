"""The RoPE import of a ``config.json``: :func:`rope_import` (one :class:`~posenc.spec.models.RopeParams` per layer
type where the config nests them, with the provenance of every value) and :func:`rope_params_from_hf_config`.
The layer-type sets, NoPE flags and query scaling are :mod:`posenc.hf.layers`; the tables :mod:`posenc.hf.tables`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import ValidationError

from posenc.spec.errors import SpecError
from posenc.spec.models import (ROPE_TYPE_FIELDS, LayerRopeParams, NopeParams, QueryScaleParams, RopeParams)
from posenc.hf.layers import LEGACY_THETA_KEYS, QSCALE_LLAMA4_TYPES, _complete_sets, _gated_sets, _layer_flags, _layer_overrides, _layer_types, _legacy_sets, _llama4_query_scale, _pop_query_scale, _query_scale
from posenc.hf.axial import is_axial
from posenc.hf.tables import MODEL_RULES, ModelRule, ROPE_KEYS, _check_required, _check_types, _head_dim, _locate, _msg, _named_errors, _nested, _positive_int, _rope_dict, hf_model_types, read_config


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
        if {(p.head_dim, p.rdim, p.pairing) for p in present}.__len__() > 1:
            raise SpecError(f"{self.model_type}: the layer types' sets differ in head width, rotary width or pairing "
                            f"(LayerRopeParams shares them)")
        if any(p.rotation != "positive" for p in present):
            raise SpecError(f"{self.model_type}: pairs that turn by -phi (ROPE-ROTATION-NEGATIVE): LayerRopeParams "
                            f"rotates by +phi only")
        for name, p, allowed in (("full_attention", full, ("default", "linear")), ("sliding_attention", sliding,
                                                                                    ("default",))):
            if p is not None and (p.rope_type not in allowed or p.rdim != p.head_dim
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
        widths = {k: v.rdim for k, v in self.sets.items() if getattr(v, "partial_rotary_factor", None) is not None}
        if widths:  # the width a fraction gives (ROPE-ROTARY-FRACTION: int(head_dim * f) of the float64 product)
            out["rotary_width"] = widths
        if self.layer_types is not None:
            out["layers"] = {k: self.layers(k) for k in self.sets}
        if self.query_scale is not None:
            out["query_scale"] = self.query_scale.model_dump(mode="json")
        if self.nope is not None:
            out["nope"] = self.nope.model_dump(mode="json", exclude_none=True)
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out


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
    eff, defaults, default_rope = _effective(cfg, row, rule, model_type, provenance)
    _rope_parameters(eff, cfg, row, rule, model_type, defaults, default_rope, provenance)
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
        sets = _layer_type_sets(eff, rope, rule, model_type, f"{prefix}{key}", provenance, row)
    else:
        sets = {"all_layers": _rope_set(eff, rope, rule, model_type, f"{prefix}{key}", provenance, row)}
    sets = _used_sets(sets, layer_types, eff, row, provenance)
    sets = _gated_sets(sets, (row or {}).get("rope_gate"), eff, layer_types, provenance)
    nope = _layer_flags((row or {}).get("rope_gate"), eff, provenance)
    query_scale = None
    if scaling is not None:
        query_scale = _query_scale(*scaling, sets, rope, model_type, f"{prefix}{key}", provenance)
    elif model_type in QSCALE_LLAMA4_TYPES:
        query_scale = _llama4_query_scale(cfg, model_type, prefix, provenance)
    return RopeImport(model_type, where, sets, tuple(layer_types) if layer_types else None, rule.source, provenance,
                      query_scale, nope)


def _effective(cfg: dict, row: Optional[dict], rule, model_type: str, provenance: dict) -> tuple[dict, dict, Optional[dict]]:
    """The config as the class reads it: ``attribute_map`` aliases resolved and the class defaults of the
    keys it omits (each in ``provenance``); with the class defaults and its default ``rope_parameters``."""
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
    return eff, defaults, default_rope


def _rope_parameters(eff: dict, cfg: dict, row: Optional[dict], rule, model_type: str, defaults: dict,
                     default_rope: Optional[dict], provenance: dict) -> None:
    """``eff["rope_parameters"]`` as transformers standardises it: a 4.x layout of a per-layer-type model
    mapped (or refused, or ignored), an explicit empty dict filled, the class default where the config
    has no RoPE keys."""
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


def _layer_type_sets(eff: dict, rope: dict, rule, model_type: str, where: str, provenance: dict,
                     row: Optional[dict]) -> dict:
    """One RoPE set per layer type of a nested ``rope_parameters`` (null: no RoPE on that type), each
    with the layer type's overrides."""
    sets = {}
    for lt, sub in rope.items():
        if sub is not None and not isinstance(sub, dict):
            raise SpecError(f"config.json: {where}.{lt}: expected an object or null, got {sub!r}")
        over = _layer_overrides(eff, lt, row, provenance)
        sets[lt] = None if sub is None else _rope_set({**eff, **over}, dict(sub), rule, model_type,
                                                      f"{where}.{lt}", provenance, row)
    return sets


def _used_sets(sets: dict, layer_types: Optional[list], eff: dict, row: Optional[dict], provenance: dict) -> dict:
    """The sets of the layer types some layer is of, as transformers builds them (its rotary module
    makes one per type in ``layer_types``): the config's ``layer_types``, else the ones its class
    derives (the survey's ``default_layer_types``: at any layer count, or at the class's own).  All the
    sets where neither is known, or where the sets are not named by layer type."""
    used = None
    if layer_types is not None:
        used, why = set(layer_types), "layer_types"
    else:
        derived = (row or {}).get("default_layer_types") or {}
        n = eff.get("num_hidden_layers")
        if derived and (derived.get("any_count") or n is None or n == derived.get("num_hidden_layers")):
            used = set(derived["used"])
            why = (f"the layer_types {row['config_class']} derives (" + ", ".join(derived["used"]) +
                   (")" if derived.get("any_count") else f" for {derived['num_hidden_layers']} layers)"))
    if used is None or not (set(sets) & used):
        return sets
    for lt in sorted(set(sets) - used):
        provenance[f"sets.{lt}"] = f"not built: no layer is of type {lt} in {why} (transformers builds only those)"
    return {lt: s for lt, s in sets.items() if lt in used}


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
    config = _partial_factor(config, rope, rule, model_type, row, label, layer, provenance)
    _rule_provenance(config, rope, rule, label, provenance)
    rope_type = _checked_type(config, rope, rule, model_type, where)
    values = _set_values(config, rope, rope_type, rule, model_type, where, row, label, provenance)
    try:
        return RopeParams(**values)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'rope'}: {_msg(err)}" for err in e.errors())
        raise SpecError(f"config.json: {where} ({model_type}, rope_type {rope_type}): {msgs}") from None


def _partial_factor(config: dict, rope: dict, rule: ModelRule, model_type: str, row: Optional[dict], label: str,
                    layer: str, provenance: dict) -> dict:
    """The set's partial rotary factor as the class computes it: its field default, a factor derived from
    other keys, or none where the layer type's default rope function ignores it (then ``config`` without
    the rule's partial keys is returned)."""
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
    return config


def _checked_type(config: dict, rope: dict, rule: ModelRule, model_type: str, where: str) -> str:
    """The set's rope_type (popped from ``rope``, aliases resolved): known, with its required keys and
    no unknown one, allowed by the model's rule; the values' types checked."""
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
    return rope_type


def _set_values(config: dict, rope: dict, rope_type: str, rule: ModelRule, model_type: str, where: str,
                row: Optional[dict], label: str, provenance: dict) -> dict[str, Any]:
    """The fields of the set's :class:`RopeParams`: theta, head and rotary width, pairing, rotation, the
    scaling keys (transformers' standardisation of the original context), dynamic NTK's policy."""
    theta = _theta(config, rope, rule, model_type)
    head_dim = _head_dim(config, rule, model_type, row, provenance, label)
    rotary_dim, fraction = _rotary_width(config, rope, rule, head_dim)
    pairing = _pairing(config, rule)
    values: dict[str, Any] = {"head_dim": head_dim, "rotary_dim": None if rotary_dim == head_dim else rotary_dim,
                              "rope_theta": float(theta), "pairing": pairing, "rope_type": rope_type}
    if fraction is not None:  # the config's fraction, sized by the spec's rule (ROPE-ROTARY-FRACTION)
        values["partial_rotary_factor"] = fraction
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
    return values


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


def _rotary_width(config: dict, rope: dict, rule, head_dim: int) -> tuple[int, Optional[float]]:
    """The rotated width as the config states it: ``(rotary_dim, None)`` from the rule's key (GPT-J's
    rotary_dim), else ``(head_dim, fraction)`` with the config's ``partial_rotary_factor`` (or the
    rule's keys, e.g. GPT-NeoX's rotary_pct, or its default), which :class:`RopeParams` sizes
    (ROPE-ROTARY-FRACTION); a fraction of 1 is the whole head, ``(head_dim, None)``."""
    if rule.rotary_dim_key:
        v = config.get(rule.rotary_dim_key)
        rope.pop("partial_rotary_factor", None)
        return (head_dim if v is None else _positive_int(v, rule.rotary_dim_key)), None
    factor = rope.pop("partial_rotary_factor", None)
    for k in rule.partial_keys:
        factor = factor if factor is not None else config.get(k)
    factor = rule.partial_default if factor is None else factor  # a number: the config's keys are checked first
    return head_dim, (None if float(factor) == 1.0 else float(factor))


def _pairing(config: dict, rule) -> str:
    if not rule.pairing_flag:
        return rule.pairing or "half"
    key, default, if_true, if_false = rule.pairing_flag
    flag = config.get(key, default)
    if not isinstance(flag, bool):
        raise SpecError(f"config.json: {key}: expected true or false, got {flag!r}")
    return if_true if flag else if_false

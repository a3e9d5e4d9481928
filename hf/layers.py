"""Per-layer-type parts of a RoPE import: the layer types of a config, the NoPE layer flags, the gated
and legacy (transformers 4.x) RoPE sets per layer type, each layer type's overrides and the attention's
query scaling (Llama 4, Mistral).
"""

from __future__ import annotations

import json
from typing import Optional

from pydantic import ValidationError

from posenc.spec.errors import SpecError
from posenc.spec.models import (ROPE_TYPE_FIELDS, NopeParams, QueryScaleParams)
from posenc.hf.tables import _hf_table, _is_number, _msg, _nested, _positive_int


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

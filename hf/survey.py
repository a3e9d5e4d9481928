"""Every transformers model type, read from transformers itself: the table the config import uses
(``hf/hf_model_types.json``, package data of :mod:`posenc.hf`) and the coverage table (``model-coverage.md``,
written into the docs folder ``--docs`` names).

``posenc config survey`` writes both; ``posenc config survey --check`` fails when either differs
from what the pinned transformers gives (CI).  Needs the ``[hf]`` extra (torch, transformers).

What is read, per model type (no weights, no download: config classes and modules only):

* the default config of its config class (``CONFIG_MAPPING[model_type]()``, ``to_dict()``), and
  where its RoPE parameters live (the top level, ``text_config``, a speech model's
  ``encoder_config``);
* the class defaults of the keys the import reads (:data:`DEFAULT_KEYS`), which it falls back on
  when a ``config.json`` omits a key (``save_pretrained`` writes only the keys that differ from
  the class defaults), the ``attribute_map`` aliases, and by rebuilding the class with one key
  changed: the defaults it derives from others (:func:`derived_defaults`), the layer types whose
  default rope function ignores ``partial_rotary_factor`` (:func:`ignores_partial`), the factor it
  puts into a set written without one (:func:`partial_field_defaults`), whether it validates
  ``layer_types``, the 4.x layout of per-layer-type models (:func:`legacy_layout`);
* the pairing, probed (:func:`probe_pairing`): the model's own apply function run on random q
  with its own rotary module's cos/sin, compared with the reference's three pairings
  (ROPE-PAIR-HALF / -INTERLEAVED / -DEINTERLEAVE) on those cos/sin; for axial (2-D) RoPE, which
  head-width rule, axes, frequencies, layout and axis order (AXIAL-*) its rotary module and apply
  function compute (:func:`axial_probe`; a module whose forward takes pixel values and computes
  the patch coordinates itself, EoMT-DINOv3's: :func:`axial_pixel_probe`, which also finds the
  coordinate rule, AXIAL-COORDINATES-CENTRED);
* the positional-encoding family of every other model type, from the names in its modeling
  source (:data:`SOURCE_FAMILIES`; evidence listed per row).

The frequencies themselves are *not* copied from transformers: the import computes them with the
reference, and ``tests/test_hf_model_types.py`` compares them with each rotary module's
``inv_freq`` and ``attention_scaling``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from posenc.hf.axial import AXIAL_HEAD_WIDTH
from posenc.hf.axial_probes import axial_grid_probe, axial_pixel_probe, axial_probe, takes_pixel_values
from posenc.hf.coverage import coverage_text
from posenc.hf.defaults import _legacy_layouts, head_width_rule, rope_gate
from posenc.hf.layers import _layer_overrides
from posenc.hf.modeling import (
    _jsonable,
    _modeling,
    _quiet,
    apply_functions,
    class_value,
    is_axial_rope,
    modeling_via,
    probe_pairing,
    rotary_frequencies,
    rotary_modules,
)
from posenc.hf.tables import HF_TABLE_PATH, _hf_table, _nested
from posenc.spec.errors import SpecError

#: the coverage table, written into the docs folder ``posenc config survey --docs DIR`` names
COVERAGE_NAME = "model-coverage.md"

#: keys of a config that the import reads, kept as class defaults in the table
DEFAULT_KEYS = ("rope_parameters", "hidden_size", "num_attention_heads", "head_dim", "partial_rotary_factor",
                "max_position_embeddings", "original_max_position_embeddings", "rope_interleave")

#: keys whose transformers ``attribute_map`` alias the table records
ALIAS_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "max_position_embeddings")

#: sub-configs searched for RoPE parameters, in order (the text model first)
SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "encoder_config", "decoder_config")


def _rope_location(cfg_dict: dict) -> Optional[str]:
    if cfg_dict.get("rope_parameters") is not None:
        return ""
    for sub in SUB_CONFIGS:
        s = cfg_dict.get(sub)
        if isinstance(s, dict) and s.get("rope_parameters") is not None:
            return sub
    return None


def _layer_type_overrides(sub: dict) -> dict:
    """``{layer_type: overrides}`` of a default config's ``per_layer_config`` (Gemma 4: the
    full-attention layers' ``head_dim``), read as the import reads a config's
    (``hf_config._layer_overrides``: the keys a set depends on, alike in every layer of the type)."""
    if not isinstance(sub.get("per_layer_config"), dict) or not sub.get("layer_types"):
        return {}
    out = {}
    for lt in sorted(set(sub["layer_types"])):
        try:
            over = _layer_overrides(sub, lt, None, {})
        except SpecError:  # the layers of the type differ: no default for it
            continue
        if over:
            out[lt] = over
    return out


def _fixed_layer_defaults(model_type: str, sub: dict, overrides: dict) -> None:
    """Add to ``overrides`` the per-layer-type defaults that equal the top-level value at the class
    defaults (so ``per_layer_config`` omits them) but stay put when the top-level key moves (Dots
    3 Note's sliding layers keep head_dim 256): the class rebuilt with each such key moved."""
    from transformers import CONFIG_MAPPING

    from posenc.hf.layers import LAYER_OVERRIDE_KEYS
    for key in LAYER_OVERRIDE_KEYS:
        v = sub.get(key)
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        try:
            moved = _layer_type_overrides(CONFIG_MAPPING[model_type](**{key: v + 32}).to_dict())
        except Exception:  # noqa: BLE001 - the class refuses the move
            continue
        for lt, over in moved.items():
            if over.get(key) == v and lt in overrides:
                overrides[lt].setdefault(key, v)


def _rope_row(model_type: str, cfg, cfg_dict: dict) -> dict:
    """The table's row of a model type whose default config has RoPE parameters."""
    where = _rope_location(cfg_dict)
    sub_obj = cfg if where == "" else getattr(cfg, where)
    sub = cfg_dict if where == "" else cfg_dict[where]
    text_type = sub.get("model_type") or model_type
    row: dict[str, Any] = {"config_class": type(sub_obj).__name__, "where": where}
    if where:
        row["text_model_type"] = text_type
    defaults = row["defaults"] = _class_defaults(row, sub, sub_obj)
    if where == "" and not _nested(sub["rope_parameters"]):  # what transformers fills for rope_parameters {}
        empty = _empty_rope_theta(model_type)
        if empty is not None:
            row["empty_rope_theta"] = empty
    overrides = _layer_type_overrides(sub)
    if where == "" and overrides:
        _fixed_layer_defaults(model_type, sub, overrides)
    if overrides:
        row["layer_type_defaults"] = overrides
    used = _default_layer_types(sub_obj, sub)
    if used:
        row["default_layer_types"] = used
    if is_axial_rope(sub["rope_parameters"]):
        return _axial_row(row, defaults, text_type, sub_obj)
    module, modname = _modeling(text_type)
    if module is None:
        row["not_covered"] = f"no modeling module {modname}"
        return row
    via = modeling_via(text_type)
    if via:
        row["modeling_via"] = via
    return _rotary_row(row, defaults, module, model_type, cfg, sub_obj, where)


def _default_layer_types(sub_obj, sub: dict) -> Optional[dict]:
    """For a ``rope_parameters`` per layer type: the layer types the class derives where the config gives
    no ``layer_types`` (its model builds the sets of those only): ``used`` at the class's
    ``num_hidden_layers``, and ``any_count`` when every count from 1 to 24 gives the same."""
    rope = sub.get("rope_parameters")
    if not (isinstance(rope, dict) and rope and all(isinstance(v, dict) or v is None for v in rope.values())):
        return None
    if not isinstance(sub.get("layer_types"), list) or not isinstance(sub.get("num_hidden_layers"), int):
        return None
    cls = type(sub_obj)
    seen = set()
    for n in range(1, 25):
        try:
            seen.add(tuple(sorted(set(cls(num_hidden_layers=n).layer_types or ()))))
        except Exception:  # noqa: BLE001 - a count the class refuses
            continue
    return {"num_hidden_layers": sub["num_hidden_layers"], "used": sorted(set(sub["layer_types"])),
            "any_count": len(seen) == 1}


def _class_defaults(row: dict, sub: dict, sub_obj) -> dict:
    """The class defaults of the keys the import reads (:data:`DEFAULT_KEYS`), the ``attribute_map``
    aliases (recorded in ``row``) and the defaults under the names the import reads."""
    defaults = {}
    aliases = getattr(type(sub_obj), "attribute_map", {}) or {}
    for k in DEFAULT_KEYS:
        # a class-level default, not an alias of another key (Zamba2's head_dim is its derived
        # attention_head_dim, which the class recomputes from hidden_size)
        v = sub.get(k) if sub.get(k) is not None else (None if k in aliases else class_value(sub_obj, k))
        if v is not None:
            defaults[k] = _jsonable(v)
    # transformers' attribute_map: the class reads these keys under another name (Moonshine's
    # num_attention_heads is decoder_num_attention_heads, DBRX's hidden_size d_model)
    alias = {k: v for k, v in aliases.items() if k in DEFAULT_KEYS + ALIAS_KEYS and isinstance(v, str)}
    if alias:
        row["aliases"] = dict(sorted(alias.items()))
    for k, target in alias.items():  # the default under the name the import reads (DBRX's d_model)
        if k not in defaults and sub.get(target) is not None:
            defaults[k] = _jsonable(sub[target])
    return defaults


def _empty_rope_theta(model_type: str) -> Optional[float]:
    """The theta the class fills into ``rope_parameters={}``, where not 10000 (else None)."""
    from transformers import CONFIG_MAPPING
    try:
        empty = (CONFIG_MAPPING[model_type](rope_parameters={}).rope_parameters or {}).get("rope_theta")
    except Exception:  # noqa: BLE001 - the class refuses an empty dict
        empty = None
    return float(empty) if isinstance(empty, (int, float)) and empty != 10000.0 else None


def _int_defaults(defaults: dict, sub_obj, keys) -> None:
    """The class's integer defaults of ``keys``, where ``defaults`` has none yet."""
    for k in keys:
        v = class_value(sub_obj, k)
        if k not in defaults and isinstance(v, int) and not isinstance(v, bool):
            defaults[k] = v


def _axial_row(row: dict, defaults: dict, text_type: str, sub_obj) -> dict:
    """An axial (vision) RoPE set: its rule probed from the model's rotary module and apply function."""
    module, _ = _modeling(text_type)
    found, evidence = axial_probe(module, sub_obj) if module is not None else (None, "no modeling module")
    row["axial_evidence"] = evidence
    if found is None:
        row["not_covered"] = f"axial (two-dimensional) RoPE of a vision encoder: {evidence}"
    else:
        row["axial"] = found
        row["rotary_class"] = evidence.split(" probed")[0]
        # the class defaults the import falls back on
        _int_defaults(defaults, sub_obj, dict(AXIAL_HEAD_WIDTH)[found["head_width"]])
    return row


def _rotary_row(row: dict, defaults: dict, module, model_type: str, cfg, sub_obj, where: str) -> dict:
    """The model's rotary module: a grid table, RoPE in sub-models, a patch grid from pixel values, or
    RoPE whose head width, gate and pairing are probed."""
    errors: list[str] = []
    built = rotary_modules(module, sub_obj, errors)
    if not built:  # a table of its own patch grid (Llama 4 vision)
        found, evidence = axial_grid_probe(module, sub_obj)
        if found is not None:
            row.update(axial=found, axial_evidence=evidence, rotary_class=evidence.split(" probed")[0])
            _int_defaults(defaults, sub_obj, ("image_size", "patch_size"))  # the grid's side: image_size // patch_size
            return row
    if not built and where == "":
        comp = rope_components(model_type, cfg)
        if comp is not None:
            row["components"], row["components_evidence"] = comp
            return row
    if not built:
        row["not_covered"] = (f"no *RotaryEmbedding of {module.__name__} builds from {type(sub_obj).__name__}"
                              + (f" (the default config: {errors[0]})" if errors else ""))
        return row
    name, rotary = built[0]
    row["rotary_class"] = f"{module.__name__.removeprefix('transformers.models.')}.{name}"
    if takes_pixel_values(rotary):  # it tabulates an image's patch grid itself (EoMT-DINOv3)
        found, evidence = axial_pixel_probe(module, sub_obj, name, rotary)
        row["axial_evidence"] = evidence
        if found is None:
            row["not_covered"] = f"axial RoPE of an image's patch grid: {evidence}"
            return row
        row["axial"] = found
        _int_defaults(defaults, sub_obj, ("image_size", "patch_size"))  # a square image's grid: image_size // patch_size
        return row
    width = head_width_rule(module, sub_obj)
    if width is not None:
        row["head_width"] = width
    gate = rope_gate(module, sub_obj)
    if gate is not None:
        row["rope_gate"] = gate
    _pairing_row(row, defaults, module, rotary)
    return row


def _pairing_row(row: dict, defaults: dict, module, rotary) -> None:
    """The pairing the model's apply functions compute (probed on its own rotary module's cos/sin), a
    flag that chooses between two, and a rotation by -phi."""
    functions = apply_functions(module)
    probed = {f: [probe_pairing(module, rotary, lt, f) for lt in rotary_frequencies(rotary)]
              for f in functions or ("apply_rotary_pos_emb",)}
    pairing = {f: ({p for p, _ in got if p}.pop() if len({p for p, _ in got if p}) == 1
                   and all(p for p, _ in got) else None) for f, got in probed.items()}
    row["pairing_evidence"] = sorted({e for got in probed.values() for _, e in got})
    plain, inter = pairing.get("apply_rotary_pos_emb"), pairing.get("apply_rotary_pos_emb_interleave")
    if "rope_interleave" in defaults and plain and inter:
        # the attention chooses by the flag (DeepSeek-V3's layout: `if self.config.rope_interleave`)
        row["pairing_flag"] = {"key": "rope_interleave", "true": inter, "false": plain}
    elif "apply_rotary_pos_emb_interleave" in functions:
        if inter:  # the main attention's function where a module defines both (MLA models)
            row["pairing"] = inter
    elif plain:
        row["pairing"] = plain
    elif pairing.get("apply_rotary_emb"):
        row["pairing"] = pairing["apply_rotary_emb"]
    if "/" in row.get("pairing", ""):  # pairs that turn by -phi (NanoChat): ROPE-ROTATION-NEGATIVE
        row["pairing"], row["rotation"] = row["pairing"].split("/")
    if any("/" in v for v in (row.get("pairing_flag") or {}).values() if isinstance(v, str)):
        del row["pairing_flag"]  # a flag between rotations is no layout the import reads: pairing unknown


def rope_components(model_type: str, cfg) -> Optional[tuple[dict, str]]:
    """The sub-models of a model whose RoPE lives in several sub-configs, each read by its own
    model (BLT: patcher, local encoder, local decoder, global transformer): ``({attribute: sub
    model type}, evidence)`` for the config attributes that are configs of a registered RoPE model
    type, or None.  Refused (None) where the class passes its own ``rope_parameters`` down to one
    of them (probed with a marker theta): then the top-level set is not dead and a sub-config's
    import alone would be wrong."""
    from transformers import CONFIG_MAPPING, PreTrainedConfig
    comps = {}
    for attr in sorted(vars(cfg)):
        sub = getattr(cfg, attr, None)
        if isinstance(sub, PreTrainedConfig) and sub.model_type in CONFIG_MAPPING \
                and getattr(sub, "rope_parameters", None):
            module, _ = _modeling(sub.model_type)
            if module is None or not rotary_modules(module, sub):
                return None  # a sub-model without a rotary module of its own: not this layout
            comps[attr] = sub.model_type
    if len(comps) < 2:
        return None
    try:
        marked = CONFIG_MAPPING[model_type](rope_parameters={"rope_type": "default", "rope_theta": 12345.0})
    except Exception:  # noqa: BLE001 - the class refuses a top-level set
        return None
    if any((getattr(marked, a).rope_parameters or {}).get("rope_theta") == 12345.0 for a in comps):
        return None
    return comps, (f"{type(cfg).__name__}'s sub-configs {', '.join(comps)} each build their own "
                   f"*RotaryEmbedding (no module builds from {type(cfg).__name__}); its own rope_parameters "
                   f"reaches none of them (probed with rope_theta 12345)")


def survey() -> dict:
    """The table ``hf/hf_model_types.json`` holds, from the installed transformers."""
    transformers = _quiet()
    from transformers import CONFIG_MAPPING
    rows = {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        try:
            cfg = CONFIG_MAPPING[model_type]()
            cfg_dict = cfg.to_dict()
        except Exception as e:  # noqa: BLE001 - the default config does not build: a listed row
            rows[model_type] = {"error": f"default config: {type(e).__name__}: {str(e).splitlines()[0][:160]}"}
            continue
        if _rope_location(cfg_dict) is None:
            rows[model_type] = {"config_class": type(cfg).__name__}
            continue
        rows[model_type] = _rope_row(model_type, cfg, cfg_dict)
    _legacy_layouts(rows)
    from transformers.configuration_utils import _LEGACY_LAYER_TYPE_REMAP, ALLOWED_LAYER_TYPES
    return {"transformers": transformers.__version__, "layer_types": list(ALLOWED_LAYER_TYPES),
            "legacy_layer_types": dict(_LEGACY_LAYER_TYPE_REMAP), "model_types": rows}


def table_text(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(check: bool, docs_dir: Path = Path("docs"), table_path: Optional[Path] = None) -> int:
    """``posenc config survey [--check] [--docs DIR] [--table PATH]``: write (or check) the model-type table
    (default: the one the import reads, :data:`~posenc.hf.tables.HF_TABLE_PATH`, package data of
    :mod:`posenc.hf`) and the coverage table ``DIR/model-coverage.md`` (``DIR`` default: ``docs`` of the
    working directory -- never a path inside the installed package)."""
    table_path = Path(table_path or HF_TABLE_PATH)
    coverage_path = Path(docs_dir) / COVERAGE_NAME
    table = survey()
    texts = {table_path: table_text(table)}
    if not check:  # the coverage rows import through the table: write it first
        table_path.write_text(texts[table_path])
        _hf_table.cache_clear()
    texts[coverage_path] = coverage_text(table)
    stale = [p for p, t in texts.items() if not p.is_file() or p.read_text() != t]
    if check:
        for p in stale:
            print(f"{p} is stale for transformers {table['transformers']}: run `posenc config survey`")
        if not stale:
            print(f"{table_path.name} and {coverage_path.name} are fresh (transformers {table['transformers']})")
        return 1 if stale else 0
    coverage_path.parent.mkdir(parents=True, exist_ok=True)
    coverage_path.write_text(texts[coverage_path])
    rows = table["model_types"]
    rope = [r for r in rows.values() if "defaults" in r]
    print(f"wrote {table_path} and {coverage_path}: {len(rows)} model types, {len(rope)} with RoPE parameters")
    return 0

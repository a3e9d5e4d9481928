"""Building a card (:func:`build_card`) from a ``config.json`` (through the config import, which
records the provenance), a registry model name or ``hf:<model_type>``; the sizes it computes over
are bounded (an error naming the field).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Optional

from posenc.hf import (
    FAMILY_RULES,
    MROPE_RULES,
    axial_provenance,
    component_imports,
    hf_model_types,
    is_rope_import,
    params_from_hf_config,
    rope_import,
    table_row,
)
from posenc.hf.components import _lookup as config_value
from posenc.spec.errors import PosencError, SpecError
from posenc.tools.card.clauses import _clause_infos, _clauses_of, _param_clauses, _spec
from posenc.tools.card.figures import _FAMILY, _extended, _learned_tables, _rope_figures, _t5_buckets
from posenc.tools.card.model import Component, Param
from posenc.tools.card.render import Card
from posenc.tools.card.text import _slug, _spans

_ALIASES = {"rope_theta": ("rope_theta", "rotary_emb_base"), "head_dim": ("head_dim", "qk_rope_head_dim"),
            "max_position_embeddings": ("max_position_embeddings", "n_positions")}

_ROPE_DICT_FIELDS = {"rope_theta", "rope_type", "factor", "original_max_position_embeddings", "attention_factor",
                     "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate", "low_freq_factor",
                     "high_freq_factor", "short_factor", "long_factor"}


def _rope_provenance(name: str, value, label: str, cfg: dict, rope_dict: dict, rope_key: str, prov: dict,
                     source: str, prefix: str) -> str:
    if f"{label}{name}" in prov:
        return prov[f"{label}{name}"]
    if name == "rope_type":
        for k in ("rope_type", "type"):
            if rope_dict.get(k) is not None:
                return f"config: {prefix}{rope_key}.{k}"
        return prov.get("rope_parameters", "no rope_type in the config: default")
    if name in _ROPE_DICT_FIELDS and name in rope_dict:
        return f"config: {prefix}{rope_key}.{name}"
    if name == "partial_rotary_factor":  # the key the imported fraction was read from (a class may ignore others)
        def same(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) == float(value)
        if same(rope_dict.get(name)):
            return f"config: {prefix}{rope_key}.{name}"
        for k in ("rotary_pct", "partial_rotary_factor"):
            if same(cfg.get(k)):
                return f"config: {prefix}{k}"
        return prov.get(f"{label}partial_rotary_factor", f"the model's partial_rotary_factor ({source})")
    for k in _ALIASES.get(name, (name,)):
        if cfg.get(k) is not None:
            if name == "original_max_position_embeddings" and rope_dict.get(name) is None:
                return f"config: {prefix}{k} (top level; transformers' standardize_rope_params reads it first)"
            return f"config: {prefix}{k}"
    if name == "original_max_position_embeddings":
        return (f"not stated: max_position_embeddings ({prov.get('max_position_embeddings', 'config')}), as "
                f"transformers' standardize_rope_params fills it")
    if name == "head_dim":
        hid = next((k for k in ("hidden_size", "n_embd", "d_model") if k in cfg), None)
        heads = next((k for k in ("num_attention_heads", "n_head", "n_heads") if k in cfg), None)
        if hid and heads:
            return f"config: {prefix}{hid} / {prefix}{heads}"
        return prov.get("head_dim", f"the import rule ({source})")
    if name in ("rotary_dim", "partial_rotary_factor"):  # the width, or the fraction that sizes it
        for k in ("rotary_dim", "partial_rotary_factor", "rotary_pct"):
            if cfg.get(k) is not None or rope_dict.get(k) is not None:
                return f"head_dim x config: {prefix}{k}" if name == "rotary_dim" != k else f"config: {prefix}{k}"
        return prov.get(f"{label}partial_rotary_factor", f"the model's partial_rotary_factor ({source})")
    if name == "dynamic_policy":
        return "grow_until_reset: what transformers' dynamic_rope_update does (the import's rule)"
    if name in _ROPE_DICT_FIELDS and "rope_parameters" in prov:
        return prov["rope_parameters"]
    return f"the import rule ({source})"


def _rope_dict_of(cfg: dict, layer: str) -> tuple[dict, str]:
    key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    d = cfg.get(key) or {}
    if layer != "all_layers" and isinstance(d.get(layer), dict):
        return d[layer], f"{key}.{layer}"
    return (d if isinstance(d, dict) else {}), key


def _fields(p) -> list[tuple[str, Any]]:
    out = []
    for k, v in p.model_dump(mode="json").items():
        if v is None:
            continue
        if isinstance(v, list) and len(v) > 8:
            v = f"[{', '.join(f'{x:.4g}' for x in v[:4])}, ... ({len(v)} entries)]"
        out.append((k, v))
    return out


def _length(v, field: str) -> Optional[int]:
    """A context length read from a config: an int, or a float with an integral value (JSON writes
    ``128.0``; the config import's pydantic models take it as 128); ``None`` for null.  Anything
    else (a fraction, a string, a bool, <= 0) is :class:`SpecError` naming ``field``: the card
    never falls back to a default when the config states the key."""
    if v is None:
        return None
    if isinstance(v, float) and not isinstance(v, bool) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        what = "a fractional number" if isinstance(v, float) and math.isfinite(v) else type(v).__name__
        raise SpecError(f"config.json: {field}: expected a positive integer (a context length), got {what} {v!r} "
                        f"(the config import refuses a fractional length where the rope type reads it)")
    return v


def _context_of(cfg: dict, row: Optional[dict], prov: dict, prefix: str) -> tuple[Optional[int], str]:
    for k in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = _length(cfg.get(k), f"{prefix}{k}")
        if v is not None:
            return v, f"config: {prefix}{k}"
    cls = (row or {}).get("config_class", "the config class")
    try:
        v = _length(((row or {}).get("defaults") or {}).get("max_position_embeddings"), "max_position_embeddings")
    except SpecError:
        v = None  # the table's default, not the config's: no card error for it
    if v is not None:
        return v, f"max_position_embeddings: {cls} default"
    return None, "no max_position_embeddings in the config"


def _config_name(path: Path, config: dict) -> tuple[str, str]:
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return _slug(named.split("/")[-1]), named
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return _slug(stem), stem


def _rewrite(e: SpecError, label: str) -> SpecError:
    """The import's ``config.json: field: ...`` with the file it was."""
    msg = str(e)
    if msg.startswith("config.json: "):
        return SpecError(f"{label}: {msg.removeprefix('config.json: ')}")
    if msg.startswith("config.json"):
        return SpecError(f"{label}{msg.removeprefix('config.json')}")
    return SpecError(msg if label in msg else f"{label}: {msg}")


#: bounds on what a card computes in proportion to a parameter (a config may say anything)
MAX_HEAD_DIM = 65536

MAX_HEADS = 65536

MAX_T5 = 65536

MAX_TABLE_ROWS = 1 << 22

MAX_LENGTH = 1 << 53  # positions exact in float64


def _where(parameters: list[Param], name: str, fallback: Optional[str] = None) -> str:
    """The config field a parameter came from (its provenance ``config: <key>``), else its name."""
    prov = next((p.provenance for p in parameters if p.name == name), "")
    if prov.startswith("config: "):
        return prov.removeprefix("config: ").split(" (")[0]
    return fallback or name


def _check_bounds(p, parameters: list[Param], context: Optional[int], context_source: str) -> None:
    """:class:`SpecError` naming the field where a figure would be computed over an absurd size."""
    name = type(p).__name__
    checks = []  # (field, parameter, value, limit, why)
    rope = p.rope if name == "MRopeParams" else p if name == "RopeParams" else None
    if rope is not None:
        checks.append((_where(parameters, "head_dim"), "head_dim", rope.head_dim, MAX_HEAD_DIM,
                       "the card computes every frequency pair"))
        ctx = context or getattr(p, "max_position_embeddings", None)
        cfield = context_source.removeprefix("config: ") if context_source.startswith("config: ") else \
            "max_position_embeddings"
        checks.append((cfield, "context", ctx, MAX_LENGTH, "positions beyond 2^53 are not exact in float64"))
        orig = getattr(rope, "original_max_position_embeddings", None)
        checks.append((_where(parameters, "original_max_position_embeddings"), "original_max_position_embeddings",
                       orig, MAX_LENGTH, "positions beyond 2^53 are not exact in float64"))
        if rope.rope_type != "default" and (ctx or 0) <= MAX_LENGTH and (orig or 0) <= MAX_LENGTH:
            ext, src = _extended(rope, ctx, orig)
            checks.append((_where(parameters, "factor"), f"the extended context ({src})", ext, MAX_LENGTH,
                           "positions beyond 2^53 are not exact in float64"))
    elif name == "AlibiParams":
        checks.append((_where(parameters, "num_heads"), "num_heads", p.num_heads, MAX_HEADS, "one slope per head"))
    elif name == "T5Params":
        checks.append((_where(parameters, "num_buckets"), "num_buckets", p.num_buckets, MAX_T5, "one row per bucket"))
        checks.append((_where(parameters, "max_distance"), "max_distance", p.max_distance, MAX_T5,
                       "the bucket map is computed over 8 x max_distance relative positions"))
    elif name == "GPT2EmbeddingParams":
        checks.append((_where(parameters, "n_positions"), "n_positions", p.n_positions, MAX_TABLE_ROWS,
                       "the card maps every position to its row"))
    elif name in ("BertEmbeddingParams", "RobertaEmbeddingParams", "OPTEmbeddingParams", "BartEmbeddingParams"):
        checks.append((_where(parameters, "max_position_embeddings"), "max_position_embeddings",
                       p.max_position_embeddings, MAX_TABLE_ROWS, "the card maps every position to its row"))
    for fld, what, value, limit, why in checks:
        if value is not None and value > limit:
            shown = f"{value:,}" if value < 1e21 else f"{value:.4g}"
            raise SpecError(f"config.json: {fld}: {what} {shown} is beyond the card's bound of {limit:,} ({why}); "
                            f"no card is made")


def _component(key: str, p, parameters: list[Param], notes=(), context=None, context_source="") -> Component:
    name = type(p).__name__
    fam = _FAMILY.get(name, name)
    clause_pairs = _clauses_of(p)
    ids = [c for c, _ in clause_pairs]
    for prm in parameters:
        prm.defined_by = _param_clauses(prm.name, list(dict.fromkeys(ids)))
    _check_bounds(p, parameters, context, context_source)
    comp = Component(key, fam, name, p, parameters, _clause_infos(clause_pairs), notes=list(notes))
    if name in ("RopeParams", "MRopeParams"):
        csrc = context_source if context or not p.max_position_embeddings else "params: max_position_embeddings"
        comp.rope = _rope_figures(p if name == "RopeParams" else p.rope, context or p.max_position_embeddings, csrc)
    if name == "MRopeParams":
        comp.notes.append("figures of MRopeParams.rope: every axis shares these frequencies (MROPE-*)")
    elif name == "AlibiParams":
        from posenc.reference import alibi
        comp.slopes = [float(x) for x in alibi.slopes(p)]
    elif name == "T5Params":
        comp.buckets = _t5_buckets(p)
    elif name == "NopeParams":
        off = [i for i, f in enumerate(p.no_rope_layers or ()) if not f]
        comp.notes.append(f"layers without RoPE: {_spans(off) or 'none'} of {p.num_hidden_layers}")
    comp.tables = _learned_tables(p)
    if fam == "sinusoidal":
        comp.notes.append("a computed table: no learned parameters")
    return comp


def _name_fields(e: SpecError, config: dict) -> SpecError:
    """The import's ``config.json (<model_type>, <set>): : <message>`` (a check over several fields
    has no field of its own) with the config key of the first parameter the message names, e.g.
    ``relative_attention_max_distance: max_distance 8 must exceed ...``; the empty field dropped
    where none is named."""
    m = re.match(r"^(config\.json \(([^,()]+), ([^()]+)\)): (.*)$", str(e), re.S)
    if not m:
        return e
    head, model_type, set_name, rest = m.groups()
    rule = (FAMILY_RULES.get(model_type) or {}).get(set_name)

    def key_for(text: str) -> Optional[str]:
        hits = []
        for fname, fr in (rule.fields.items() if rule is not None else ()):
            mm = re.search(rf"(?<![A-Za-z0-9_]){re.escape(fname)}(?![A-Za-z0-9_])", text)
            if mm:
                hits.append((mm.start(), fname, fr))
        if not hits:
            return None
        fr = min(hits, key=lambda h: h[0])[2]
        return next((k for k in fr.keys if config_value(config, k) is not None), fr.keys[0])

    parts = []
    for piece in rest.split("; "):
        if piece.startswith(": ") or piece == ":":
            text = piece[2:]
            k = key_for(text)
            parts.append(f"{k}: {text}" if k else text)
        else:
            parts.append(piece)
    return SpecError(f"{head}: {'; '.join(parts)}")


def _from_config(config: dict, label: str, kind: str, name: str, title: str) -> Card:
    try:
        return _from_config_(config, label, kind, name, title)
    except SpecError as e:  # the card's own checks say config.json: too
        raise _rewrite(e, label) from None


def _from_config_(config: dict, label: str, kind: str, name: str, title: str) -> Card:
    try:
        model_type = config.get("model_type")
        components_imp = component_imports(config)
        imported = rope_import(config) if components_imp is None and is_rope_import(config) else None
        found = params_from_hf_config(config)
    except SpecError as e:
        raise _rewrite(_name_fields(e, config), label) from None
    comps: list[Component] = []
    notes: list[str] = []
    rule = ""
    imports = {}
    if components_imp is not None:
        imports = {f"{a}.": imp for a, imp in components_imp.items()}
        rule = "; ".join(sorted({imp.source for imp in components_imp.values()}))
        notes.append(str((table_row(config) or {}).get("components_evidence", "")))
    elif imported is not None:
        imports = {"": imported}
        rule = imported.source
    for prefix, imp in imports.items():
        _rope_components(config, prefix, imp, comps, notes)
    if not imports:
        rule = _other_components(config, model_type, found, comps, notes)
    return _finish(Card(name, title, label, kind, model_type, rule, comps, notes, _matrix_available()))


def _rope_components(config: dict, prefix: str, imp, comps: list, notes: list) -> None:
    """The components of one RoPE import (``prefix``: its sub-model's attribute and a dot, or ""): a set
    per layer type (or one for all layers), NoPE flags, query scaling; the provenance the card does not
    show by parameter as notes."""
    sub = config.get(prefix.rstrip(".")) if prefix else config
    cfg = (sub.get(imp.where) if imp.where else sub) or {}
    cprefix = f"{prefix}{imp.where}." if imp.where else prefix
    row = hf_model_types().get(imp.model_type)
    context, csrc = _context_of(cfg, row, imp.provenance, cprefix)
    multi = set(imp.sets) != {"all_layers"}
    for lt, p in imp.sets.items():
        key = f"{prefix}rope" + (f".{lt}" if multi else "")
        if p is None:
            why = imp.provenance.get(f"sets.{lt}", "no RoPE on these layers")
            ci = _clause_infos([("LAYERS-NO-ROPE", why)])
            comps.append(Component(key, "none", "None", None, [], ci, notes=[why]))
            continue
        label_ = f"{lt}." if multi else ""
        rope_dict, rope_key = _rope_dict_of(cfg, lt)
        params = [Param(k, v, _rope_provenance(k, v, label_, cfg, rope_dict, rope_key, imp.provenance, imp.source,
                                               cprefix)) for k, v in _fields(p)]
        comp = _component(key, p, params, context=context, context_source=csrc)
        if multi:
            layers = imp.layers(lt)
            comp.notes.append(f"layer type {lt}" + (f": layers {_spans(layers)}" if layers else ""))
            comp.clauses = _clause_infos([("LAYERS-SETS", "one RoPE set per layer type")]) + comp.clauses
        comps.append(comp)
    if imp.nope is not None:
        comps.append(_component(f"{prefix}nope", imp.nope, [Param(k, v, imp.provenance.get("nope", "config"))
                                                               for k, v in _fields(imp.nope)]))
    if imp.query_scale is not None:
        comps.append(_component(f"{prefix}query_scale", imp.query_scale,
                                [Param(k, v, imp.provenance.get("query_scale", "config"))
                                 for k, v in _fields(imp.query_scale)]))
    used = {"nope", "query_scale"} | {k for k in imp.provenance if k.startswith("sets.")}
    names = {f for st in imp.sets.values() if st is not None for f, _ in _fields(st)} | {"partial_rotary_factor"}
    for k, v in imp.provenance.items():
        base = k.split(".", 1)[1] if k.split(".", 1)[0] in imp.sets and "." in k else k
        if k not in used and base not in names:
            notes.append(f"{prefix}{k}: {v}")


def _other_components(config: dict, model_type, found: dict, comps: list, notes: list) -> str:
    """The components of a model without a RoPE import (learned tables, ALiBi, T5, sinusoids, M-RoPE,
    axial), each parameter with its provenance; returns the import rule the card names."""
    rules = FAMILY_RULES.get(model_type) or {}
    extra = axial_provenance(config) if "axial" in found else {}
    mrule = MROPE_RULES.get(model_type)
    rule = "; ".join(sorted({r.source for r in rules.values()})) or (mrule.source if mrule else "") or \
        (table_row(config) or {}).get("config_class", "")
    for key, p in found.items():
        fr = rules.get(key)
        params = [Param(k, v, _param_provenance(config, k, fr, extra, rule)) for k, v in _fields(p)]
        ctx, csrc = (None, "")
        if type(p).__name__ == "MRopeParams":
            ctx, csrc = _mrope_context(config, mrule)
        comps.append(_component(key, p, params, context=ctx, context_source=csrc))
    for k, v in extra.items():
        if k not in dict(_fields(found.get("axial"))) if found.get("axial") is not None else True:
            notes.append(f"{k}: {v}")
    return rule


def _param_provenance(config: dict, k: str, fr, extra: dict, rule: str) -> str:
    """Where parameter ``k`` of a non-RoPE component came from: a config key, the library default of its
    family rule ``fr``, the model code, the axial import's derivation, or the import rule's default."""
    if fr is not None and k in fr.fields:
        f = fr.fields[k]
        hit = next((kk for kk in f.keys if config_value(config, kk) is not None), None)
        return f"config: {hit}" if hit else f"{f.default!r}: library default ({fr.source})"
    if fr is not None and k in fr.fixed:
        return f"fixed by the model code ({fr.source})"
    if k in extra:
        return str(extra[k])
    where = "text_config." if isinstance(config.get("text_config"), dict) and k in config["text_config"] else ""
    src = config.get("text_config") if where else config
    return f"config: {where}{k}" if isinstance(src, dict) and src.get(k) is not None else \
        f"not in the config: the import rule's default ({rule})"


def _mrope_context(config: dict, mrule) -> tuple:
    """M-RoPE's context and where it came from: the text model's max_position_embeddings, else the
    config class's default."""
    tc = isinstance(config.get("text_config"), dict)
    text = config["text_config"] if tc else config
    ctx = _length(text.get("max_position_embeddings"), ("text_config." if tc else "") + "max_position_embeddings")
    csrc = f"config: {'text_config.' if tc else ''}max_position_embeddings"
    if ctx is None:
        ctx = mrule.max_position_default if mrule else None
        csrc = "max_position_embeddings: the config class default"
    return ctx, csrc


def _matrix_available() -> bool:
    from posenc.tools.matrix_status import matrix_available
    return matrix_available()


def _finish(card: Card) -> Card:
    """Add the model-level scenarios (MODEL-*) of the model type from the model matrix."""
    from posenc.tools.matrix_status import clause_status
    if card.model_type:
        impl = f"hf:{card.model_type}"
        for cid, c in sorted(_spec().clauses.items()):
            if not cid.startswith("MODEL-") or c.superseded_by:
                continue
            st = clause_status(cid)
            for s in st or ():
                if s.implementation == impl:
                    card.model_scenarios.append((cid, c.title, s))
    return card


def _registry_provenance(key: str, value, sources) -> str:
    """Where a registry entry's value comes from.  The registry gives sources per entry, not per
    field: a source is credited with a field only where its location names the field (the key as
    a word) or states its value (a number of 3 or more significant characters or a word, as a
    whole token); otherwise the value is the entry's, its sources listed without any of them
    being credited with this field (llama-3.1-8b's ``pairing: half`` is the HF-converted layout,
    which Meta's own interleaved code, its only source, does not state)."""
    words = {key}
    if isinstance(value, bool):
        pass
    elif isinstance(value, (int, float)):
        for form in {str(value), f"{value:g}", str(int(value)) if float(value).is_integer() else str(value)}:
            if len(form.lstrip("-").replace(".", "")) >= 3:
                words.add(form)
    elif isinstance(value, str) and len(value) >= 3:
        words.add(value)
    pats = [re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(w)}(?![A-Za-z0-9_]|\.\d)") for w in words]
    match = [s for s in sources if s.location and any(pt.search(s.location) for pt in pats)]
    if match:
        return "registry: " + "; ".join(f"{s.citation} [{s.provenance}]" for s in match)
    listed = "; ".join(f"{s.citation} [{s.provenance}]" for s in sources) or "none"
    return f"registry entry (no source names this field; the entry's sources: {listed})"


def _from_registry(name: str) -> Card:
    from posenc.spec.models import PARAM_MODELS
    from posenc.spec.registry import load
    e = load()[name]
    try:
        p = PARAM_MODELS[e.params_model](**e.values)
    except Exception as exc:  # noqa: BLE001 - validated by load(); said plainly all the same
        raise SpecError(f"registry entry {name}: {exc}") from None
    srcs = [f"{s.citation}" + (f" ({s.location})" if s.location else "") + f" [{s.provenance}]" for s in e.sources]
    params = []
    for k, v in _fields(p):
        if k in e.values:
            prov = _registry_provenance(k, v, e.sources)
        else:
            prov = f"not in the registry entry: the {e.params_model} default"
        params.append(Param(k, v, prov))
    key = {"RopeParams": "rope", "MRopeParams": "mrope", "AlibiParams": "alibi", "SinusoidalParams": "positions",
           "NopeParams": "nope"}.get(e.params_model, "embeddings" if _FAMILY.get(e.params_model) == "learned"
                                     else _FAMILY.get(e.params_model, "params"))
    if e.params_model == "T5Params":
        key = "encoder" if p.bidirectional else "decoder"
    ctx = getattr(p, "max_position_embeddings", None) if e.params_model in ("RopeParams", "MRopeParams") else None
    csrc = "registry: max_position_embeddings" if ctx else ""
    if e.params_model in ("RopeParams", "MRopeParams") and not ctx:
        csrc = "the registry entry gives no max_position_embeddings"
    comp = _component(key, p, params, context=ctx, context_source=csrc)
    card = Card(name, e.title, f"registry:{name}", "registry", None, f"spec/registry/models.yaml ({e.params_model})",
                [comp], [], _matrix_available(), sources=srcs)
    return card


def _resolve(source) -> tuple[str, Any]:
    """``("config", Path)``, ``("registry", name)``, ``("hf", model_type)`` or ``("dict", dict)``."""
    if isinstance(source, dict):
        return "dict", source
    text = str(source)
    path = Path(source)
    if path.is_file():
        return "config", path
    if text.startswith("hf:") and len(text) > 3:
        return "hf", text[3:]
    if text.startswith("registry:"):
        text = text.removeprefix("registry:")
    from posenc.spec.registry import load
    if text in load():
        return "registry", text
    if path.exists():
        raise SpecError(f"{path}: not a file (a config.json is expected)")
    known = ", ".join(sorted(load()))
    raise SpecError(f"{path}: no such file, and not a registry model name (known: {known}) or hf:<model_type>")


def build_card(source) -> Card:
    """The card of ``source``: a ``config.json`` path, a config dict, a registry model name
    (``spec/registry/models.yaml``, optionally ``registry:<name>``) or ``hf:<model_type>`` (the
    transformers config class's defaults).  Raises :class:`SpecError` naming the file and field."""
    kind, what = _resolve(source)
    if kind == "registry":
        return _from_registry(what)
    if kind == "hf":
        return _from_config({"model_type": what}, f"hf:{what}", "hf-defaults", _slug(f"hf-{what}"),
                            f"{what} (transformers config class defaults)")
    if kind == "dict":
        name = _slug(str(what.get("_name_or_path") or what.get("model_type") or "model").split("/")[-1])
        return _from_config(what, "config.json", "config", name, name)
    from posenc.hf import read_config
    config = read_config(what)  # SpecError names the file
    name, title = _config_name(what, config)
    return _from_config(config, str(what), "config", name, title)


def registry_cards() -> list[Card]:
    """The cards of the registry's named models (``spec/registry/models.yaml``) whose
    parameters make a card; an entry that does not is left out."""
    from posenc.spec.registry import load
    out = []
    for name in load():
        try:
            out.append(_from_registry(name))
        except (PosencError, ValueError):
            continue
    return out

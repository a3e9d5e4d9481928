"""What a model type's config class does with the keys the import reads, found by rebuilding it with one
key changed: the defaults it derives from others (:func:`derived_defaults`), its head-width rule
(:func:`head_dim_rule`), the layer types whose default rope function ignores ``partial_rotary_factor``
(:func:`ignores_partial`), the factor it puts into a set written without one
(:func:`partial_field_defaults`), the 4.x layout of per-layer-type models (:func:`legacy_layout`), and
which layers its attention gates RoPE off on (:func:`rope_gate`).  Needs the ``[hf]`` extra.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Optional

from posenc.hf.rope import DERIVED_PARTIAL
from posenc.hf.layers import LEGACY_THETA_KEYS
from posenc.hf.tables import _nested
from posenc.hf.modeling import _modeling, rotary_frequencies, rotary_modules


def _attention_classes(module):
    """``(name, class)`` of the module's own ``*Attention`` classes, by name."""
    return [(n, c) for n, c in sorted(vars(module).items())
            if isinstance(c, type) and n.endswith("Attention") and c.__module__ == module.__name__]


def head_width_rule(module, sub_config) -> Optional[dict]:
    """What the model does with a hidden size that is not a multiple of its head count, where the
    head width comes from ``hidden_size / num_attention_heads`` (a config without ``head_dim``):
    its config class built with ``hidden_size`` one more than a multiple (or as it is,
    where the default already is not one) either refuses it (``{"rule": "refused"}``: Llama's
    ``validate_architecture``) or builds, and then the model's own ``*Attention`` classes built
    on the meta device say the width they use: ``{"rule": "floor"}`` when every one that builds
    takes ``hidden_size // num_attention_heads`` (GLM-4.5's ``Glm4MoeAttention``).  None where
    neither is observed (no attention class builds, or they disagree)."""
    import torch
    d = sub_config.to_dict()
    hidden, heads = d.get("hidden_size"), d.get("num_attention_heads")
    if not (type(hidden) is int and type(heads) is int and heads > 1):
        return None
    if hidden % heads == 0:
        hidden = hidden + 1
    d = {**d, "hidden_size": hidden}
    d.pop("head_dim", None)
    cls = type(sub_config)
    try:
        cfg = cls(**d)
    except Exception as e:  # noqa: BLE001 - the class's own validation: recorded
        msg = " ".join(str(e).split())[:200]
        return {"rule": "refused", "evidence": f"{cls.__name__} refuses such a config (probed at hidden_size {hidden} "
                                               f"over {heads} heads: {type(e).__name__}: {msg})"}
    widths = {}
    for name, att in _attention_classes(module):
        try:
            with torch.device("meta"):
                w = getattr(att(cfg, 0), "head_dim", None)
        except Exception:  # noqa: BLE001 - an attention of another sub-model
            continue
        if type(w) is int:
            widths[name] = w
    if widths and set(widths.values()) == {hidden // heads}:
        return {"rule": "floor", "evidence": f"{', '.join(widths)}: head_dim {hidden // heads} at hidden_size "
                                             f"{hidden} over {heads} heads (hidden_size // num_attention_heads)"}
    return None


#: an attention forward that rotates q and k only under a condition (Cohere 2: ``if
#: self.sliding_window is not None:``, EXAONE 4: ``if self.sliding_window is None or self.is_sliding:``)
_ROPE_GATE = re.compile(r"^[ \t]*if (?P<cond>[^\n#]+?):[ \t]*(?:#[^\n]*)?\n"  # a trailing comment (Llama 4)
                        r"(?:[ \t]+\w+, \w+ = position_embeddings\n)?"
                        r"[ \t]*\w+, \w+ = apply_rotary_\w+\(", re.M)


def rope_gate(module, sub_config) -> Optional[dict]:
    """Which layer types of a model rotate q and k, read from its own attention modules: the
    condition guarding ``apply_rotary_*`` in an ``*Attention.forward`` evaluated on that class built
    (on the meta device) for every layer of the config's ``layer_types`` (two layers, one of each
    type, where the class has none by default), and again with ``sliding_window`` None where the
    condition reads it and the class accepts None.  ``{"condition", "attention_class", "no_rope",
    "no_rope_without_window", "mixed"}`` or None (no gate); ``no_rope``: the layer types none of
    whose layers rotate; ``mixed``: types some of whose layers rotate and some not (Cohere 2 MoE's
    forced dense-prefix layers)."""
    flags = _per_layer_flags(module, sub_config)
    if flags is not None:
        return flags
    for name, cls in _attention_classes(module):
        found = _conditional_gate(name, cls, sub_config)
        if found is not None:
            return found
    return None


def _per_layer_flags(module, sub_config) -> Optional[dict]:
    """An attention class whose ``use_rope`` comes from ``config.no_rope_layers[layer_idx]`` (SmolLM3,
    Llama 4, Mistral Large 4): the gate as per-layer flags, or None."""
    for name, cls in _attention_classes(module):
        try:
            init_src, fwd_src = inspect.getsource(cls.__init__), inspect.getsource(cls.forward)
        except (OSError, TypeError):
            continue
        if "config.no_rope_layers[layer_idx]" in init_src and re.search(r"if self\.use_rope\b", fwd_src):
            layers = getattr(sub_config, "num_hidden_layers", None)
            return {"condition": "self.use_rope", "attention_class": name, "per_layer_flags": "no_rope_layers",
                    "num_hidden_layers": layers,
                    "no_rope_layer_interval": getattr(sub_config, "no_rope_layer_interval", None) or 4,
                    "evidence": f"{name}.__init__: use_rope = config.no_rope_layers[layer_idx]; forward rotates "
                                f"only if self.use_rope"}
    return None


def _conditional_gate(name: str, cls, sub_config) -> Optional[dict]:
    """The condition guarding ``apply_rotary_*`` in ``cls.forward``, if it is a layer's RoPE switch (a
    config flag for every layer, or a per-layer condition evaluated on the built class); None where the
    forward has no such switch."""
    try:
        src = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return None
    m = _ROPE_GATE.search(src)
    if m is None or "self." not in m.group("cond"):
        return None
    indent = re.match(r"[ \t]*", src[m.start():]).group(0)
    rest = src[m.end():]
    branch = re.search(rf"^{indent}(\S[^\n]*)", rest, re.M)  # the next line at the if's own level
    if branch and branch.group(1).startswith("else") and re.search(
            r"apply_rotary_\w+\(", rest[branch.end():branch.end() + 400]):
        return None  # an if / else that rotates either way (DeepSeek-V3's rope_interleave): not a switch
    cond = m.group("cond")
    flag = re.fullmatch(r"self\.config\.(\w+)", cond)
    if flag:  # a config switch for every layer (Zamba2's use_mem_rope)
        return {"condition": cond, "attention_class": name, "flag": flag.group(1),
                "flag_default": bool(getattr(sub_config, flag.group(1), False))}
    if not re.search(r"sliding|is_local|use_rope", cond):  # not a layer's RoPE switch (an if / else
        return None                                         # that rotates either way: Mistral Large 4)
    return _gate_verdicts(name, cls, cond, sub_config)


def _gate_verdicts(name: str, cls, cond: str, sub_config) -> dict:
    """``cond`` evaluated on ``cls`` built (on the meta device) for every layer of the config's layer types
    (two layers, one of each type, where the class has none by default), and again with ``sliding_window``
    None where the condition reads it and the class accepts None."""
    import torch

    def build(**over):
        d = {**sub_config.to_dict(), **over}
        if not d.get("layer_types"):
            d.update(layer_types=["sliding_attention", "full_attention"], num_hidden_layers=2)
        return type(sub_config)(**d)

    def verdicts(cfg):
        seen: dict[str, set] = {}
        with torch.device("meta"):
            for i, lt in enumerate(cfg.layer_types[:cfg.num_hidden_layers]):
                att = cls(cfg, i)
                seen.setdefault(lt, set()).add(bool(eval(cond, {"__builtins__": {}}, {"self": att})))  # noqa: S307
        return seen
    try:
        seen = verdicts(build())
    except Exception as e:  # noqa: BLE001 - the class does not build: recorded
        return {"condition": cond, "attention_class": name, "error": f"{type(e).__name__}: {e}"[:160]}
    out = {"condition": cond, "attention_class": name, "types": sorted(seen),
           "no_rope": sorted(lt for lt, v in seen.items() if v == {False}),
           "mixed": sorted(lt for lt, v in seen.items() if len(v) > 1)}
    out["no_rope_without_window"] = out["no_rope"]
    if "sliding_window" in cond:
        try:
            nowin = verdicts(build(sliding_window=None))
            out["no_rope_without_window"] = sorted(lt for lt, v in nowin.items() if v == {False})
        except Exception:  # noqa: BLE001 - the class refuses sliding_window None: it is always set
            pass
    return out


def legacy_layout(model_type: str) -> dict:
    """``{legacy key: [layer types it lands in]}`` of a per-layer-type model's config class, read by
    building the class with each 4.x key (``rope_theta``, ``rope_local_base_freq``, ...,
    ``rope_scaling``) at a marker value and seeing which layer type's set receives it."""
    from transformers import CONFIG_MAPPING
    out = {}
    trials = {k: {k: 12345.0} for k in LEGACY_THETA_KEYS}
    trials["rope_scaling"] = {"rope_scaling": {"rope_type": "linear", "factor": 3.25}}
    for key, kwargs in trials.items():
        try:
            rope = CONFIG_MAPPING[model_type](**kwargs).to_dict()["rope_parameters"]
        except Exception:  # noqa: BLE001 - the class refuses the key: not part of its layout
            continue
        if not _nested(rope):
            continue
        hit = sorted(lt for lt, st in rope.items() if st and (
            st.get("rope_theta") == 12345.0 if key != "rope_scaling" else st.get("factor") == 3.25))
        if hit:
            out[key] = hit
    return out


def legacy_trial(layout: dict) -> dict:
    """Constructor kwargs setting every key of a 4.x layout at once, each at its own value."""
    kwargs: dict[str, Any] = {k: 1000.0 * (i + 3) for i, k in enumerate(k for k in layout if k != "rope_scaling")}
    if "rope_scaling" in layout:
        kwargs["rope_scaling"] = {"rope_type": "linear", "factor": 2.5}
    return kwargs


def _frequency_count(model_type: str, row: dict, overrides: dict) -> Optional[dict]:
    """``{layer type: number of frequencies}`` of the model's rotary module built from its config
    class with ``overrides`` (on the sub-config the RoPE lives in), or None when it does not build."""
    from transformers import CONFIG_MAPPING
    where = row.get("where")
    try:
        cfg = CONFIG_MAPPING[model_type](**({where: overrides} if where else overrides))
        sub = getattr(cfg, where) if where else cfg
        module, _ = _modeling(row.get("text_model_type") or model_type)
        built = rotary_modules(module, sub)
    except Exception:  # noqa: BLE001 - the class refuses the change
        return None
    return {lt: len(w) for lt, (w, _) in rotary_frequencies(built[0][1]).items()} if built else None


def derived_defaults(model_type: str, row: dict) -> list[str]:
    """The class defaults that the class derives from other keys (Llama's head_dim = hidden_size //
    num_attention_heads, Falcon's head_dim property): the rotary module rebuilt with hidden_size
    doubled has another width.  The import must not take those as defaults when the config sets
    what they derive from."""
    defaults = row["defaults"]
    if "head_dim" not in defaults or not isinstance(defaults.get("hidden_size"), int):
        return []
    base = _frequency_count(model_type, row, {})
    bigger = _frequency_count(model_type, row, {"hidden_size": 2 * defaults["hidden_size"]})
    return ["head_dim"] if base and bigger and base != bigger else []


def head_dim_rule(model_type: str, row: dict) -> Optional[dict]:
    """Where a class takes the rotary head width from, where that is not the import's standard (a
    stated ``head_dim`` honoured, else ``hidden_size / num_attention_heads``): read from its rotary
    module's width rebuilt with a ``head_dim`` stated (under the key a config.json carries:
    Zamba2's ``attention_head_dim``), with ``qk_rope_head_dim`` moved (the MLA models' width),
    and, for a derived default, with ``hidden_size`` doubled.  ``{"source": "qk_rope_head_dim" |
    "hidden_size / num_attention_heads", "factor", "stated": "honoured" | "overwritten",
    "source_default", "evidence"}`` or None.  Zamba2: ``2 * hidden_size // num_attention_heads``,
    a stated one honoured; DeepSeek-V2, MiniCPM3, AXK2: ``qk_rope_head_dim``, a stated head_dim
    overwritten; DeepSeek-OCR 2's text config: ``hidden_size // num_attention_heads``, overwritten."""
    d = row["defaults"]
    hidden, heads, width = d.get("hidden_size"), d.get("num_attention_heads"), d.get("head_dim")
    rope = d.get("rope_parameters") or {}
    partial = rope.get("partial_rotary_factor", 1.0)
    if not all(isinstance(v, int) for v in (hidden, heads, width)) or _nested(rope) \
            or not isinstance(partial, (int, float)) or not 0 < partial <= 1:
        return None
    key = (row.get("aliases") or {}).get("head_dim", "head_dim")  # the name a config.json carries

    def rotary_width(over):  # the head width the rotary module's frequency count implies
        got = _frequency_count(model_type, row, over)
        if not got or len(set(got.values())) != 1:
            return None
        w = 2 * next(iter(got.values())) / partial
        return int(w) if w == int(w) else None
    base, stated = rotary_width({}), rotary_width({key: width + 32})
    if base is None or stated is None:
        return None
    kept = stated == width + 32
    cls = row["config_class"]
    from transformers import CONFIG_MAPPING
    try:
        full = CONFIG_MAPPING[model_type]().to_dict()
        q = (full.get(row["where"]) if row.get("where") else full).get("qk_rope_head_dim")
    except Exception:  # noqa: BLE001 - no such default
        q = None
    if isinstance(q, int) and not kept and base == q and rotary_width({"qk_rope_head_dim": q + 16}) == q + 16:
        return {"source": "qk_rope_head_dim", "factor": 1, "stated": "overwritten", "source_default": q,
                "evidence": f"{cls}: the rotary width is qk_rope_head_dim ({q}; {q + 16} when it is {q + 16}); a "
                            f"stated {key} {width + 32} is overwritten"}
    # a second point of hidden_size / heads: hidden doubled, else (a class that ties hidden_size to
    # other sizes: Dots 3 Note's audio encoder) the heads halved
    second = None
    if "head_dim" in (row.get("derived") or ()) or not kept:
        for h2, n2 in ((2 * hidden, heads), (hidden, heads // 2 if heads % 2 == 0 else 0)):
            w2 = rotary_width({"hidden_size": h2, "num_attention_heads": n2}) if n2 else None
            if w2 is not None and w2 != base:
                second = (h2, n2, w2)
                break
    if second is None or (base * heads) % hidden or (second[2] * second[1]) % second[0]:
        return None if kept else {"source": None, "stated": "overwritten",
                                  "evidence": f"{cls}: a stated {key} {width + 32} is overwritten (rotary width {base})"}
    factor = base * heads // hidden
    if factor != second[2] * second[1] // second[0] or (factor == 1 and kept):
        return None
    return {"source": "hidden_size / num_attention_heads", "factor": factor, "stated": "honoured" if kept else "overwritten",
            "evidence": f"{cls}: the rotary width is {factor} * hidden_size // num_attention_heads ({base} at "
                        f"{hidden} over {heads} heads, {second[2]} at {second[0]} over {second[1]}); a stated {key} "
                        f"{width + 32} is {'honoured' if kept else 'overwritten'}"}


def _default_type_sets(rope: dict, partial: Optional[float]) -> dict:
    """The default rope dict with every set made rope_type default (theta kept), at ``partial``."""
    def one(st):
        out = {"rope_type": "default", "rope_theta": st.get("rope_theta", 10000.0)}
        return out if partial is None else {**out, "partial_rotary_factor": partial}
    return {lt: one(st) if st else st for lt, st in rope.items()} if _nested(rope) else one(rope)


def ignores_partial(model_type: str, row: dict) -> list:
    """The layer types (``"all_layers"`` for one set) whose rotary module ignores
    ``partial_rotary_factor`` for rope_type default (``modeling_rope_utils`` reads it; many models'
    own ``compute_default_rope_parameters`` do not): rebuilt with the factor 0.5 and without it,
    does the frequency count change?"""
    if model_type in DERIVED_PARTIAL:  # the class overwrites the factor: not ignored, derived
        return []
    rope = row["defaults"]["rope_parameters"]
    full = _frequency_count(model_type, row, {"rope_parameters": _default_type_sets(rope, 1.0)})  # not None:
    half = _frequency_count(model_type, row, {"rope_parameters": _default_type_sets(rope, 0.5)})  # a field default
    if not full or not half:
        return []
    return sorted("all_layers" if lt is None else lt for lt in full if full[lt] == half.get(lt))


def partial_field_defaults(model_type: str, row: dict) -> dict:
    """``{layer type or "all_layers": factor}`` the config class puts into a ``rope_parameters``
    the config writes without ``partial_rotary_factor`` (Phi's field default 0.5; not Gemma 4's,
    whose 0.25 lives only in its default rope dict)."""
    from transformers import CONFIG_MAPPING
    rope = row["defaults"]["rope_parameters"]
    where = row.get("where")
    trial = _default_type_sets(rope, None)
    try:
        cfg = CONFIG_MAPPING[model_type](**({where: {"rope_parameters": trial}} if where else {"rope_parameters": trial}))
        got = (getattr(cfg, where) if where else cfg).to_dict()["rope_parameters"]
    except Exception:  # noqa: BLE001 - the class refuses a default-type set: nothing known
        return {}
    sets = got.items() if _nested(got) else [("all_layers", got)]
    return {lt: st["partial_rotary_factor"] for lt, st in sets
            if isinstance(st, dict) and st.get("partial_rotary_factor") not in (None, 1.0)}


def _legacy_layouts(rows: dict) -> None:
    """Second pass: the derived defaults of each row (:func:`derived_defaults`) and the 4.x layout
    of each per-layer-type model (:func:`legacy_layout`), kept
    only where mapping every key at once as the single-key trials say reproduces what the config
    class does with them together (DOTS3's rope_scaling replaces every set, theta included)."""
    from transformers import CONFIG_MAPPING

    from posenc.hf.layers import _legacy_sets
    for model_type, row in rows.items():
        if "defaults" in row and not row.get("where") and model_type in CONFIG_MAPPING:
            try:  # does the class run transformers' validate_layer_type?
                CONFIG_MAPPING[model_type](layer_types=["no_such_attention"], num_hidden_layers=1)
            except Exception as e:  # noqa: BLE001 - refused: it validates
                if "layer_types" in str(e):
                    row["validates_layer_types"] = True
        if "rotary_class" in row:
            derived = derived_defaults(model_type, row)
            if derived:
                row["derived"] = derived
            rule = head_dim_rule(model_type, row)
            if rule:
                row["head_dim_rule"] = rule
            ignored = ignores_partial(model_type, row)
            if ignored:
                row["ignores_partial_rotary_factor"] = ignored
            field_defaults = partial_field_defaults(model_type, row)
            if field_defaults:
                row["partial_field_defaults"] = field_defaults
        if "rotary_class" not in row or row.get("where") or not _nested(row["defaults"]["rope_parameters"]):
            continue
        layout = legacy_layout(model_type)
        if not layout:
            continue
        kwargs = legacy_trial(layout)
        theirs = CONFIG_MAPPING[model_type](**json.loads(json.dumps(kwargs))).to_dict()["rope_parameters"]
        ours = _legacy_sets(kwargs, row["defaults"]["rope_parameters"], {**row, "legacy_layout": layout}, {})
        same = all((st or {}).get(k) == (ours.get(lt) or {}).get(k) for lt, st in theirs.items()
                   for k in ("rope_theta", "rope_type", "factor"))
        if same:
            row["legacy_layout"] = layout
        else:
            row["legacy_not_covered"] = (f"its 4.x keys interact ({', '.join(layout)} together do not map as each "
                                         f"alone does in {row['config_class']}.convert_rope_params_to_dict)")

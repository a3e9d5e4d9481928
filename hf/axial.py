"""The axial (vision) RoPE import of a ``config.json``: :func:`axial_params_from_hf_config` from the
model-type table's axial rule, with the provenance of every value (:func:`axial_provenance`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Union

from pydantic import ValidationError

from posenc.spec.errors import SpecError
from posenc.spec.models import (AxialRopeParams)
from posenc.hf.tables import _is_number, _msg, _named_errors, _rope_dict, hf_model_types, hf_table_version, read_config


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
    theta = _axial_theta(cfg, row, prefix, model_type)
    probed, centred = row["axial"], is_centred(row)
    head = _axial_head(get, cfg, row, prefix, model_type)
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


def _axial_theta(cfg: dict, row: dict, prefix: str, model_type: str):
    """The axial set's ``rope_theta`` (its rope dict, a top-level or a deprecated alias, the class default); its
    rope_type the module supports and no other key."""
    defaults = row.get("defaults") or {}
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
    return theta


def _axial_head(get, cfg: dict, row: dict, prefix: str, model_type: str):
    """The head width the axial module rotates: the table's rule over the config's keys (``get``), a
    module's own patch grid checked, an explicit ``head_dim`` where the rule reads one."""
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
    return head

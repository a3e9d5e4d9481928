"""Agreement: the import (the reference's math on the imported parameters) against each model's own
rotary module -- its frequencies, its apply function, M-RoPE's and axial RoPE's, the query scaling, the
layers whose attention gates RoPE off (NoPE) -- per model type (:func:`agreement`, what
``tests/test_hf_model_types.py`` and the coverage table report).  Needs the ``[hf]`` extra.
"""

from __future__ import annotations

import copy
import inspect
from typing import Optional

import numpy as np

from posenc.hf.axial_probes import (
    AXIAL_GRID_APPLY,
    PIXEL_APPLY,
    PIXEL_GRIDS,
    _full_grid,
    _positive_int,
    _table_rows,
    axial_call,
    axial_grid_call,
    axial_grid_positions,
    grid_tables,
    pixel_grid_call,
)
from posenc.hf.modeling import _apply, _matches, _modeling, apply_functions, rotary_frequencies, rotary_modules
from posenc.hf.modeling import class_value
from posenc.spec.errors import SpecError


def _sets(found: dict) -> dict:
    """``{layer_type or None: params}`` of :func:`~posenc.hf.config.params_from_hf_config`'s result."""
    out = {None if k in ("rope", "mrope") else k.split(".", 1)[1]: v for k, v in found.items()
           if k in ("rope", "mrope") or k.startswith("rope.")}
    rotating = [v for v in out.values() if v is not None]
    if None not in out and rotating and all(v == rotating[0] for v in rotating):
        out[None] = rotating[0]  # one rotary module for every layer that rotates (Cohere 2's sliding layers)
    return out


def _reference_freq(p) -> tuple[np.ndarray, float]:
    from posenc.reference import mrope, rope
    from posenc.spec.models import MRopeParams
    if isinstance(p, MRopeParams):
        return mrope.inv_freq(p), mrope.attention_factor(p)
    return rope.inv_freq(p)


def compare_frequencies(found: dict, truth: dict) -> list[str]:
    """What differs between the imported parameter sets (reference ``inv_freq`` and attention
    factor) and a rotary module's buffers, one line per layer type; ``[]`` when they agree
    (float32 buffers: relative 4e-6)."""
    from posenc.spec.models import MRopeParams
    sets, problems = _sets(found), []
    for lt, (w, a) in truth.items():
        p = sets.get(lt, sets.get(None))
        if p is None:
            problems.append(f"{lt or 'all layers'}: no imported parameter set (has {', '.join(map(str, sets))})")
            continue
        rw, ra = _reference_freq(p)
        if isinstance(p, MRopeParams):  # a module may hold them permuted (ERNIE's pre-rotated inv_freq_3d):
            rw, w = np.sort(rw), np.sort(w)  # the order is the apply comparison's (compare_mrope_apply)
        if rw.shape != w.shape:
            problems.append(f"{lt or 'all layers'}: {len(rw)} frequencies imported, the module has {len(w)}")
        elif not np.allclose(rw, w, rtol=4e-6, atol=0):
            i = int(np.argmax(np.abs(rw - w) / np.abs(w)))
            problems.append(f"{lt or 'all layers'}: inv_freq[{i}] {rw[i]:.9g} imported, the module has {w[i]:.9g}")
        if abs(ra - a) > 4e-6 * max(1.0, abs(a)):
            problems.append(f"{lt or 'all layers'}: attention factor {ra:.9g} imported, the module has {a:.9g}")
    return problems


def compare_apply(module, rotary, found: dict, seq: int = 12) -> list[str]:
    """The model's own apply function on random q with its own cos/sin, against the reference's
    RoPE with the *imported* parameters (their frequencies and pairing), per layer type."""
    import torch

    from posenc.reference.rope import apply_with_cos_sin
    from posenc.spec.models import MRopeParams
    sets, problems = _sets(found), []
    functions = apply_functions(module)
    for lt in rotary_frequencies(rotary):
        p = sets.get(lt, sets.get(None))
        if p is None or isinstance(p, MRopeParams) or p.rope_type in ("dynamic", "longrope", "proportional"):
            continue
        name = next((f for f in ("apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb", "apply_rotary_emb")
                     if f in functions and (f != "apply_rotary_pos_emb_interleave" or p.pairing == "deinterleave")),
                    None)
        if name is None:
            continue
        fn, kind = functions[name]
        rw, ra = _reference_freq(p)
        r = 2 * len(rw)
        q = torch.randn(1, 1, seq, r, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
        phi = np.arange(seq, dtype=np.float64)[None, :, None] * rw
        want = apply_with_cos_sin(q.double().numpy(), ra * np.cos(phi), ra * np.sin(phi), r, p.pairing, p.rotation)
        try:
            outs = _apply(fn, kind, rotary, lt, q, seq)
        except Exception as e:  # noqa: BLE001 - reported
            problems.append(f"{lt or 'all layers'}: {name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
            continue
        if not _matches(outs, want):
            problems.append(f"{lt or 'all layers'}: {name} differs from the reference RoPE with the imported "
                            f"parameters (pairing {p.pairing}, rotation {p.rotation})")
    return problems


def compare_mrope_apply(module, rotary, p, n: int = 9) -> list[str]:
    """The imported :class:`~posenc.spec.models.MRopeParams` against a multimodal model's own text
    rotary module and ``apply_rotary_pos_emb``: random q at random, different (t, h, w) positions
    (vision tokens), computed by the reference (MROPE-*: the layout, the pairing, the tail)."""
    import torch

    from posenc.reference import mrope
    if p.rope_type in ("dynamic", "longrope"):
        return []
    fn = getattr(module, "apply_rotary_pos_emb", None)
    if fn is None:
        return ["no apply_rotary_pos_emb"]
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 1, n, p.head_dim, generator=g, dtype=torch.float32)
    pos = torch.randint(0, 64, (3, 1, n), generator=g)
    try:
        with torch.no_grad():
            cos, sin = rotary(q, pos)
            out = fn(q, q, cos, sin)
        got = (out[0] if isinstance(out, tuple) else out).double().numpy()
    except Exception as e:  # noqa: BLE001 - reported
        return [f"apply_rotary_pos_emb: {type(e).__name__}: {str(e).splitlines()[0][:100]}"]
    want = mrope.apply(q.double().numpy(), q.double().numpy(), pos.numpy(), p)[0]
    if got.shape != want.shape or not np.allclose(got, want, atol=2e-5 * max(1.0, float(np.abs(want).max())), rtol=0):
        return [f"apply_rotary_pos_emb at vision positions differs from the reference M-RoPE with the imported "
                f"parameters (layout {p.layout}, pairing {p.pairing}, rotary_dim {p.rdim})"]
    return []


def compare_axial(module, rotary, p, n: int = 11) -> list[str]:
    """The imported :class:`~posenc.spec.models.AxialRopeParams` against a vision encoder's own rotary
    module (its ``inv_freq``: the shared frequencies, or Pixtral's two halves) and apply function
    (random q at random coordinates, :func:`axial_call`), computed by the reference."""
    import torch

    from posenc.reference import axial
    problems = []
    w = next(b for name, b in rotary.named_buffers() if name == "inv_freq").double().numpy()
    f = axial.axis_frequencies(p)
    want = f[0] if p.frequencies == "shared" else f.reshape(-1)
    if want.shape != w.shape:
        problems.append(f"{len(want)} frequencies imported, the module has {len(w)}")
    elif not np.allclose(want, w, rtol=4e-6, atol=0):
        i = int(np.argmax(np.abs(want - w) / np.abs(w)))
        problems.append(f"inv_freq[{i}] {want[i]:.9g} imported, the module has {w[i]:.9g}")
    g = torch.Generator().manual_seed(3)
    q = torch.randn(n, p.head_dim, generator=g, dtype=torch.float32)
    pos = torch.randint(0, 64, (p.num_axes, n), generator=g)
    try:
        got = axial_call(module, rotary, q, pos)
    except Exception as e:  # noqa: BLE001 - reported
        return problems + [f"apply: {type(e).__name__}: {str(e).splitlines()[0][:100]}"]
    ref = axial.apply(q.double().numpy()[None, None], q.double().numpy()[None, None], pos.numpy()[:, None, :], p)[0][0, 0]
    if not np.allclose(got, ref, atol=2e-5 * max(1.0, float(np.abs(ref).max())), rtol=0):
        problems.append(f"the apply function differs from the reference axial RoPE with the imported parameters "
                        f"(layout {p.layout}, axis order {list(p.order)})")
    return problems


def compare_axial_grid(module, rotary, p, grid: dict) -> list[str]:
    """The imported :class:`~posenc.spec.models.AxialRopeParams` against a vision rotary module that
    tabulates its own patch grid (Llama 4 vision): random q, one row per table row, through the
    model's :data:`AXIAL_GRID_APPLY`, against the reference at the grid's positions under the
    recorded rule (``grid``: offset, class token)."""
    import torch

    from posenc.reference import axial
    n = _table_rows(rotary)
    pos = axial_grid_positions(n, grid["offset"], grid["class_token"])
    if pos is None:
        return [f"the table's {n} rows are no square grid{' plus a class token' if grid['class_token'] else ''}"]
    q = torch.randn(n, p.head_dim, generator=torch.Generator().manual_seed(3), dtype=torch.float32)
    try:
        got = axial_grid_call(module, rotary, q)
    except Exception as e:  # noqa: BLE001 - reported
        return [f"{AXIAL_GRID_APPLY}: {type(e).__name__}: {str(e).splitlines()[0][:100]}"]
    want = axial.apply(q.double().numpy()[None, None], q.double().numpy()[None, None], pos[:, None, :], p)[0][0, 0]
    bad = np.flatnonzero(np.abs(got - want).max(axis=1) > 2e-5 * max(1.0, float(np.abs(want).max())))
    if bad.size:
        i = int(bad[0])
        return [f"{AXIAL_GRID_APPLY} differs from the reference axial RoPE with the imported parameters (layout "
                f"{p.layout}, axis order {list(p.order)}) from table row {i} on, at (row, column) "
                f"{tuple(int(v) for v in pos[:, i])}"]
    return []


def compare_axial_pixels(module, rotary, p, sub_config) -> list[str]:
    """The imported :class:`~posenc.spec.models.AxialRopeParams` (centred coordinates) against a
    rotary module whose forward takes pixel values (EoMT-DINOv3): its ``inv_freq`` against the
    reference's axis frequencies; the imported ``grid_size`` against the config's image_size //
    patch_size; then, at that grid and at each grid of :data:`PIXEL_GRIDS` (the model recomputes
    the grid from each image), random q with the model's prefix tokens (the class token and the
    registers) first, through :func:`pixel_grid_call`: the prefix rows unchanged and the patch rows
    equal to the reference's axial RoPE at every patch of the grid, row by row."""
    import torch

    from posenc.reference import axial
    problems = []
    w = next((b for name, b in rotary.named_buffers() if name == "inv_freq"), None)
    want = axial.axis_frequencies(p)[0]
    if w is None or want.shape != tuple(w.shape):
        problems.append(f"{len(want)} frequencies imported, the module has {None if w is None else len(w)}")
    elif not np.allclose(want, w.double().numpy(), rtol=4e-6, atol=0):
        w = w.double().numpy()
        i = int(np.argmax(np.abs(want - w) / np.abs(w)))
        problems.append(f"inv_freq[{i}] {want[i]:.9g} imported, the module has {w[i]:.9g}")
    size, patch = (_positive_int(class_value(sub_config, k)) for k in ("image_size", "patch_size"))
    if patch is None:
        return problems + ["patch_size is no positive integer"]
    if size is not None and tuple(p.grid_size or ()) != (size // patch,) * p.num_axes:
        problems.append(f"grid_size {list(p.grid_size or ())} imported, image_size // patch_size is {size // patch}")
    registers = _positive_int(class_value(sub_config, "num_register_tokens")) or 0
    prefix = 1 + registers
    g = torch.Generator().manual_seed(3)
    for grid in ((tuple(p.grid_size),) if p.grid_size else ()) + PIXEL_GRIDS:
        q = torch.randn(prefix + grid[0] * grid[1], p.head_dim, generator=g, dtype=torch.float32)
        try:
            got = pixel_grid_call(module, rotary, q, grid, patch, prefix)
        except Exception as e:  # noqa: BLE001 - reported
            problems.append(f"{PIXEL_APPLY} at grid {grid[0]} x {grid[1]}: {type(e).__name__}: "
                            f"{str(e).splitlines()[0][:100]}")
            continue
        if not np.array_equal(got[:prefix], q[:prefix].double().numpy()):
            problems.append(f"{PIXEL_APPLY} changes the {prefix} prefix tokens (class and {registers} registers) at "
                            f"grid {grid[0]} x {grid[1]}")
        patches, pos = q[prefix:].double().numpy()[None, None], _full_grid(grid)
        here = p.model_copy(update={"grid_size": tuple(grid)}) if p.coordinates == "centred" else p
        ref = axial.apply(patches, patches, pos[:, None, :], here)[0][0, 0]
        bad = np.flatnonzero(np.abs(got[prefix:] - ref).max(axis=1) > 2e-5 * max(1.0, float(np.abs(ref).max())))
        if bad.size:
            i = int(bad[0])
            problems.append(f"{PIXEL_APPLY} differs from the reference axial RoPE with the imported parameters "
                            f"(coordinates {p.coordinates}, layout {p.layout}, axis order {list(p.order)}) at grid "
                            f"{grid[0]} x {grid[1]} from patch {i} on, (row, column) {tuple(int(v) for v in pos[:, i])}")
    return problems


def compare_query_scale(module, sub_config, qs) -> list[str]:
    """What differs between the imported query scale (QSCALE-MISTRAL) and the model's own
    ``get_llama_4_attn_scale`` called as its attention calls it (with ``rope_parameters``'
    ``llama_4_scaling_beta`` and ``original_max_position_embeddings`` of the transformers config
    ``sub_config``) at positions around multiples of L (float32 factor: relative 1e-6); ``[]``
    when they agree.  A model module without that function cannot scale q by position."""
    import torch

    from posenc.reference import query_scale
    fn = getattr(module, "get_llama_4_attn_scale", None)
    if fn is None:
        return [f"{module.__name__} has no get_llama_4_attn_scale: the imported query scale has no counterpart"]
    rp = getattr(sub_config, "rope_parameters", None) or {}
    beta, L = rp.get("llama_4_scaling_beta"), rp.get("original_max_position_embeddings")
    if beta is None or L is None:
        return [f"{type(sub_config).__name__}.rope_parameters has no llama_4_scaling_beta / "
                f"original_max_position_embeddings: {module.__name__}'s attention cannot compute its query scale"]
    Ls = sorted({int(L), qs.scale_length})
    pos = np.asarray([[0, 1] + [v for n in Ls for v in (n - 1, n, n + 1, 2 * n - 1, 2 * n, 3 * n, 7 * n + 5,
                                                          100 * n - 1)] + [12345]], np.int64)
    got = fn(torch.from_numpy(pos), beta, L).reshape(-1).double().numpy()
    want = query_scale.scale(pos, qs).reshape(-1)
    bad = np.flatnonzero(np.abs(got - want) > 1e-6 * np.abs(want))
    if bad.size:
        i = int(bad[0])
        return [f"query scale at position {int(pos[0, i])}: {module.__name__}.get_llama_4_attn_scale gives "
                f"{got[i]:.9g} (beta {beta}, L {L}), the reference with the imported beta {qs.beta}, L "
                f"{qs.scale_length} ({qs.form} form) {want[i]:.9g}"]
    return []


def _gate_attention(module, row: dict):
    """The attention class the survey's ``rope_gate`` names in ``module``, or None."""
    return getattr(module, (row.get("rope_gate") or {}).get("attention_class") or "", None)


def compare_rope_off(module, sub_config, row: dict, rotary) -> list[str]:
    """An import that says no layer has RoPE (``{"rope": None}``: a config switch such as Zamba2's
    ``use_mem_rope`` false, LAYERS-NO-ROPE) against the model's own attention: the class the
    survey's ``rope_gate`` names, built from the config (shrunk to hidden_size 64 over 4 heads
    where the class allows it) with seeded weights, run on one input with its rotary module's
    cos/sin at two different orders of positions (a shift would not tell: RoPE is relative);
    ``[]`` when the outputs are equal, the attention ignoring the positions."""
    import torch
    gate = row.get("rope_gate") or {}
    cls = _gate_attention(module, row)
    if cls is None:
        return [f"the import has no RoPE, and no attention class to check it on (rope_gate {gate or 'absent'})"]
    d = sub_config.to_dict()
    for k in row.get("derived", []) + list((row.get("aliases") or {}).values()):
        d.pop(k, None)
    configs = []
    try:
        configs.append(type(sub_config)(**{**d, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4}))
    except Exception:  # noqa: BLE001 - the class does not shrink
        pass
    configs.append(sub_config)  # as it is, where the shrunk one is refused or does not run
    init = inspect.signature(cls.__init__).parameters
    fwd = inspect.signature(cls.forward).parameters
    failure = None
    for cfg in configs:
        try:
            outs = _rope_off_outputs(module, cls, cfg, init, fwd, rotary)
            break
        except Exception as e:  # noqa: BLE001 - reported if no config runs
            failure = e
    else:
        return [f"{cls.__name__} does not run for the check: {type(failure).__name__}: "
                f"{str(failure).splitlines()[0][:100]}"]
    if not torch.equal(outs[0], outs[1]):
        return [f"the import has no RoPE ({gate.get('condition')} false), but {cls.__name__}'s output changes with "
                f"the positions (max {float((outs[0] - outs[1]).abs().max()):.3g})"]
    return []


def _rope_off_outputs(module, cls, cfg, init, fwd, rotary) -> list:
    """The attention ``cls`` built from ``cfg`` (seeded), its outputs at two orders of positions."""
    import torch
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    # the arguments the model's own layers pass (Zamba2AttentionDecoderLayer: num_fwd_mem_blocks =
    # len(hybrid_layer_ids), block_id; its forward's layer_idx is a hybrid layer's index)
    hybrid = list(getattr(cfg, "hybrid_layer_ids", None) or [0])
    extra = {k: v for k, v in (("layer_idx", 0), ("num_fwd_mem_blocks", len(hybrid)), ("block_id", 0)) if k in init}
    att = cls(cfg, **extra).eval()
    small = rotary_modules(module, cfg)
    rot = small[0][1] if small else rotary
    x = torch.randn(1, 6, att.q_proj.in_features, generator=torch.Generator().manual_seed(1))
    outs = []
    with torch.no_grad():
        for pos in ([0, 1, 2, 3, 4, 5], [0, 3, 1, 9, 2, 7]):
            kw = {"hidden_states": x, "position_embeddings": rot(x, torch.tensor([pos]))}
            if "layer_idx" in fwd:
                kw["layer_idx"] = hybrid[0]
            out = att(**kw)
            outs.append(out[0] if isinstance(out, tuple) else out)
    return outs


def compare_nope(module, sub_config, row: dict, p) -> list[str]:
    """The imported per-layer NoPE flags (:class:`~posenc.spec.models.NopeParams`, NOPE-*) against
    the model's own attention: the class the survey's ``rope_gate`` names built for every layer
    (meta device) from ``sub_config``, its ``use_rope``; ``[]`` when every layer agrees."""
    import torch

    from posenc.reference.nope import layer_flags
    cls = _gate_attention(module, row)
    if cls is None:
        return ["the import has per-layer NoPE flags, and no attention class to check them on"]
    want = layer_flags(p)
    got = []
    try:
        with torch.device("meta"):
            for i in range(sub_config.num_hidden_layers):
                got.append(int(bool(cls(sub_config, i).use_rope)))
    except Exception as e:  # noqa: BLE001 - reported
        return [f"{cls.__name__} does not build for the NoPE check: {type(e).__name__}: {str(e).splitlines()[0][:100]}"]
    if len(got) != p.num_hidden_layers or list(want[:len(got)]) != got:
        bad = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(got), p.num_hidden_layers))
        return [f"NoPE flags differ from layer {bad} on: imported {[int(v) for v in want]}, {cls.__name__}.use_rope "
                f"per layer {got}"]
    return []


def agreement(model_type: str, rows: Optional[dict] = None, config: Optional[dict] = None) -> tuple[str, str]:
    """``(status, detail)`` of one RoPE model type: ``agrees`` (frequencies, attention factor and
    the apply function match the reference on the imported parameters), ``disagrees``,
    ``import error`` or ``not covered``.  ``config``: constructor overrides (a perturbed config)."""
    from transformers import CONFIG_MAPPING

    from posenc.hf.tables import hf_model_types
    from posenc.hf.components import params_from_hf_config
    rows = rows or hf_model_types()
    row = rows[model_type]
    if "not_covered" in row:
        return "not covered", row["not_covered"]
    cfg = CONFIG_MAPPING[model_type](**(config or {}))
    try:
        found = params_from_hf_config(cfg.to_dict())
    except SpecError as e:
        return "import error", str(e)
    if config:  # the config as a user writes it must read as transformers' own round trip of it
        try:
            raw = params_from_hf_config({"model_type": model_type, **copy.deepcopy(config)})
        except SpecError as e:
            return "import error", f"the config as written: {e}"
        if raw != found:
            diff = sorted(k for k in set(raw) | set(found) if raw.get(k) != found.get(k))
            wrote = ", ".join(f"{k}: {raw.get(k)!r}" for k in diff)[:600]
            back = ", ".join(f"{k}: {found.get(k)!r}" for k in diff)[:600]
            return "disagrees", f"the config as written imports {wrote} where transformers' to_dict() of it imports {back}"
    if row.get("components"):  # RoPE in several sub-models (BLT): each against its own module
        problems, classes = [], []
        for attr, sub_type in row["components"].items():
            mine = {k[len(attr) + 1:]: v for k, v in found.items() if k.startswith(f"{attr}.")}
            status, detail = _agreement_of(sub_type, rows[sub_type], getattr(cfg, attr), mine)
            if status == "agrees":
                classes.append(f"{attr}: {detail}")
            else:
                problems.append(f"{attr}: {status}: {detail}")
        return ("disagrees", "; ".join(problems)) if problems else ("agrees", "; ".join(classes))
    return _agreement_of(model_type, row, getattr(cfg, row["where"]) if row.get("where") else cfg, found)


def _agreement_of(model_type: str, row: dict, sub, found: dict) -> tuple[str, str]:
    """:func:`agreement` of one model's imported parameters ``found`` against the modules built from
    its transformers config ``sub`` (the config, or the sub-config its RoPE lives in)."""
    module, _ = _modeling(row.get("text_model_type") or model_type)
    grid = (row.get("axial") or {}).get("grid")
    if grid is not None and "axial" in found:
        tables = grid_tables(module, sub)
        if not tables:
            return "not covered", f"no grid table builds from {type(sub).__name__}"
        problems = compare_axial_grid(module, tables[0][1], found["axial"], grid)
        return ("disagrees", "; ".join(problems)) if problems else ("agrees", row.get("rotary_class", ""))
    built = rotary_modules(module, sub)
    if not built:
        return "not covered", f"no rotary module builds from {type(sub).__name__}"
    rotary = built[0][1]
    if found.get("rope", 0) is None:
        problems = compare_rope_off(module, sub, row, rotary)
        return ("disagrees", "; ".join(problems)) if problems else (
            "agrees", f"no RoPE: {row['rope_gate']['condition']} false ({row['rope_gate']['attention_class']}'s "
                      f"output does not depend on the positions)")
    if "axial" in found and (row.get("axial") or {}).get("coordinates") == "centred":
        problems = compare_axial_pixels(module, rotary, found["axial"], sub)
        return ("disagrees", "; ".join(problems)) if problems else ("agrees", row.get("rotary_class", ""))
    if "axial" in found:
        problems = compare_axial(module, rotary, found["axial"])
        return ("disagrees", "; ".join(problems)) if problems else ("agrees", row.get("rotary_class", ""))
    problems = compare_frequencies(found, rotary_frequencies(rotary)) or compare_apply(module, rotary, found)
    if not problems and "mrope" in found:
        problems = compare_mrope_apply(module, rotary, found["mrope"])
    if not problems and "nope" in found:
        problems = compare_nope(module, sub, row, found["nope"])
    if not problems and "query_scale" in found and found["query_scale"].form == "mistral":
        # (Llama 4's tuning is inline in its attention: tests/test_query_scale.py checks its defaults)
        problems = compare_query_scale(module, sub, found["query_scale"])
    return ("disagrees", "; ".join(problems)) if problems else ("agrees", row.get("rotary_class", ""))

"""Every transformers model type, read from transformers itself: the table the config import uses
(``spec/registry/hf_model_types.json``) and the coverage table (``docs/model-coverage.md``).

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

import copy
import importlib
import importlib.util
import inspect
import json
import re
import typing
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np

from posenc.spec.errors import SpecError
from posenc.spec.hf_config import (AXIAL_HEAD_WIDTH, DERIVED_PARTIAL, HF_TABLE_PATH, LEGACY_THETA_KEYS, _hf_table,
                                    _layer_overrides, _nested, axial_head_width, hf_model_types)

COVERAGE_PATH = Path(__file__).resolve().parents[1] / "docs" / "model-coverage.md"
#: keys of a config that the import reads, kept as class defaults in the table
DEFAULT_KEYS = ("rope_parameters", "hidden_size", "num_attention_heads", "head_dim", "partial_rotary_factor",
                "max_position_embeddings", "original_max_position_embeddings", "rope_interleave")
#: keys whose transformers ``attribute_map`` alias the table records
ALIAS_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "max_position_embeddings")
#: sub-configs searched for RoPE parameters, in order (the text model first)
SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "encoder_config", "decoder_config")


def _quiet():
    """transformers, imported with its own warnings and logging silenced (the survey builds 822
    default configs, many of which warn about their own defaults)."""
    warnings.filterwarnings("ignore", module=r"(transformers|torch|torchao)(\.|$)")
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


def _jsonable(v):
    return json.loads(json.dumps(v, default=str))


def _resolve_modeling(model_type: str) -> tuple[Any, str, Optional[str]]:
    """``(module or None, name or reason, via)``: the model type's modeling module.  A model type
    without a modeling module of its own runs another's: its base model class in transformers'
    ``MODEL_MAPPING_NAMES`` (EXAONE, InternLM 3 and IQuest-Coder are ``LlamaModel``, Sarvam-MLA
    ``DeepseekV3Model``), whose module is then the one used, ``via`` saying so
    (``"exaone -> LlamaModel (MODEL_MAPPING_NAMES)"``; None where it has its own)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    mod = model_type_to_module_name(model_type)
    try:
        return importlib.import_module(f"transformers.models.{mod}.modeling_{mod}"), mod, None
    except ModuleNotFoundError as e:
        if e.name != f"transformers.models.{mod}.modeling_{mod}":
            return None, f"{mod} ({type(e).__name__})", None
        missing = e
    except Exception as e:  # noqa: BLE001 - a model type whose modeling module fails is a listed row
        return None, f"{mod} ({type(e).__name__})", None
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    cls_name = MODEL_MAPPING_NAMES.get(model_type)
    import transformers
    cls = getattr(transformers, cls_name, None) if isinstance(cls_name, str) else None
    if cls is None:
        return None, f"{mod} ({type(missing).__name__})", None
    return (importlib.import_module(cls.__module__), cls.__module__.removeprefix("transformers.models.").split(".")[0],
            f"{model_type} -> {cls_name} (MODEL_MAPPING_NAMES)")


def _modeling(model_type: str):
    """``(module, name)`` of :func:`_resolve_modeling`, or ``(None, reason)``."""
    return _resolve_modeling(model_type)[:2]


def modeling_via(model_type: str) -> Optional[str]:
    """The base model class a model type without a modeling module of its own runs (:func:`_resolve_modeling`)."""
    return _resolve_modeling(model_type)[2]


def _config_hint(cls):
    try:
        return typing.get_type_hints(cls.__init__).get("config")
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to trying the class
        return None


def _rotary_classes(module) -> dict[str, type]:
    """``{name: class}`` of the ``*RotaryEmbedding`` classes the modeling module defines itself."""
    return {n: c for n, c in vars(module).items()
            if n.endswith("RotaryEmbedding") and inspect.isclass(c) and c.__module__ == module.__name__}


def rotary_modules(module, sub_config, errors: Optional[list] = None) -> list[tuple[str, Any]]:
    """``[(class name, instance)]`` of the module's ``*RotaryEmbedding`` classes built from
    ``sub_config``: those annotated with the sub-config's class, else every one that builds."""
    classes = _rotary_classes(module)
    typed = [n for n, c in classes.items() if _config_hint(c) is type(sub_config)]
    built = []
    for name in typed or sorted(classes):
        try:
            built.append((name, classes[name](sub_config)))
        except Exception as e:  # noqa: BLE001 - a class for another sub-config
            if typed and errors is not None:  # the class written for this sub-config refuses it: why
                errors.append(f"{name}: {type(e).__name__}: {e}"[:160])
            continue
    return [(n, r) for n, r in built if any(b.endswith("inv_freq") for b, _ in r.named_buffers())]



def rotary_frequencies(rotary) -> dict[Optional[str], tuple[np.ndarray, float]]:
    """``{layer_type or None: (inv_freq float64, attention_scaling)}`` of a built rotary module."""
    out = {}
    for name, buf in rotary.named_buffers():
        if not name.endswith("inv_freq") or "original" in name or "." in name:
            continue
        lt = name[: -len("inv_freq")].rstrip("_") or None
        scaling = getattr(rotary, f"{lt}_attention_scaling" if lt else "attention_scaling", 1.0)
        out[lt] = (buf.detach().double().numpy().copy(), float(scaling))
    return out


def _cos_sin(rotary, layer_type, seq: int):
    import torch
    x = torch.zeros(1, seq, 8, dtype=torch.float32)
    pos = torch.arange(seq)[None]
    kwargs = {"layer_type": layer_type} if layer_type else {}
    return rotary(x, pos, **kwargs)


#: the modeling modules' apply functions probed: name -> the leading parameters it may have
APPLY_FUNCTIONS = {"apply_rotary_pos_emb_interleave": (("q", "k", "cos", "sin"),),
                   "apply_rotary_pos_emb": (("q", "k", "cos", "sin"), ("x", "cos", "sin")),
                   # Llama 4, DeepSeek-V2: q times a complex freqs_cis [B, T, D/2]
                   "apply_rotary_emb": (("xq", "xk", "freqs_cis"),)}


def apply_functions(module) -> dict:
    """``{name: (function, kind)}`` of the module's own apply functions (:data:`APPLY_FUNCTIONS`);
    kind ``qk`` (q, k, cos, sin), ``x`` (x, cos, sin) or ``complex`` (xq, xk, freqs_cis)."""
    out = {}
    for name, leads in APPLY_FUNCTIONS.items():
        fn = getattr(module, name, None)
        if fn is None or getattr(fn, "__module__", None) != module.__name__:
            continue
        params = tuple(inspect.signature(fn).parameters)
        for lead in leads:
            if params[:len(lead)] == lead:
                out[name] = (fn, "complex" if lead[0] == "xq" else {4: "qk", 3: "x"}[len(lead)])
    return out


def _apply(fn, kind: str, rotary, layer_type, q, seq: int) -> list[np.ndarray]:
    """The outputs of one apply function on ``q [1, 1, T, r]`` with the rotary module's own
    cos/sin (or freqs_cis), each as ``[1, 1, T, r]`` float64: both layouts for a complex one
    (DeepSeek-V2 takes q [B, H, T, D], Llama 4 [B, T, H, D])."""
    import torch
    with torch.no_grad():
        if kind == "complex":
            freqs = _cos_sin(rotary, layer_type, seq)
            if not torch.is_complex(freqs):
                raise TypeError("the rotary module does not return a complex freqs_cis")
            outs = [fn(q, q.clone(), freqs)[0], fn(q.transpose(1, 2), q.transpose(1, 2), freqs)[0].transpose(1, 2)]
        else:
            cos, sin = _cos_sin(rotary, layer_type, seq)
            out = fn(q, q.clone(), cos, sin) if kind == "qk" else fn(q, cos, sin)
            outs = [out[0] if kind == "qk" else out]
    return [o.double().numpy() for o in outs if tuple(o.shape) == tuple(q.shape)]


def _matches(outs: list, want: np.ndarray) -> bool:
    tol = 1e-5 * max(1.0, float(np.abs(want).max()))
    return any(np.allclose(o, want, rtol=0, atol=tol) for o in outs)


def probe_pairing(module, rotary, layer_type=None, function: str = "apply_rotary_pos_emb",
                  seq: int = 12) -> tuple[Optional[str], str]:
    """The pairing and rotation of one of the model's apply functions (:data:`APPLY_FUNCTIONS`)
    with this rotary module's cos/sin: ``(pairing or None, evidence)``, the pairing suffixed
    ``/negative`` where the pairs turn by -phi (ROPE-ROTATION-NEGATIVE: NanoChat).  q is random
    (seeded) and the output is compared with the reference's three pairings (ROPE-PAIR-HALF /
    -INTERLEAVED / -DEINTERLEAVE) in both directions on the module's own frequencies (float32
    tolerance); anything else matches none."""
    import torch
    from posenc.reference.rope import apply_with_cos_sin
    short = module.__name__.removeprefix("transformers.models.")
    found = apply_functions(module)
    if function not in found:
        return None, f"no {function}(q, k, cos, sin) or (x, cos, sin) in {short}"
    fn, kind = found[function]
    where = f"{short}.{function}"
    w, a = rotary_frequencies(rotary)[layer_type]
    r = 2 * len(w)
    q = torch.randn(1, 1, seq, r, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    try:
        outs = _apply(fn, kind, rotary, layer_type, q, seq)
    except Exception as e:  # noqa: BLE001 - recorded as the row's evidence
        return None, f"{where}: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    phi = np.arange(seq, dtype=np.float64)[None, :, None] * w
    matches = [(pairing, rotation) for rotation in ("positive", "negative")
               for pairing in ("half", "interleaved", "deinterleave")
               if _matches(outs, apply_with_cos_sin(q.double().numpy(), a * np.cos(phi), a * np.sin(phi), r, pairing,
                                                    rotation))]
    if len(matches) != 1:
        named = [p if rot == "positive" else f"{p} by -phi" for p, rot in matches]
        return None, f"{where}: matches {named or 'no pairing'} of the reference"
    pairing, rotation = matches[0]
    if rotation == "negative":
        return f"{pairing}/negative", f"{where} probed (ROPE-PAIR-{pairing.upper()}, ROPE-ROTATION-NEGATIVE)"
    return pairing, f"{where} probed (ROPE-PAIR-{pairing.upper()})"


#: the modeling modules' apply functions of axial (vision) RoPE, in the order they are preferred
AXIAL_APPLY = ("apply_rotary_pos_emb_vision", "apply_rotary_pos_emb_2d", "apply_rotary_pos_emb_2d_self_attn",
               "apply_multidimensional_rope", "apply_rotary_pos_emb")
def axial_call(module, rotary, q, pos):
    """The model's own axial RoPE on ``q [N, D]`` (torch float32) at ``pos [A, N]`` (int): its rotary
    module's cos/sin (positions ``[N, A]``, else ``[1, N, A]``) and its apply function
    (:data:`AXIAL_APPLY`), q laid out as the function broadcasts it; float64 ``[N, D]``."""
    import torch
    fn = next((getattr(module, n) for n in AXIAL_APPLY if getattr(getattr(module, n, None), "__module__", None)
               == module.__name__), None)
    if fn is None:
        raise LookupError(f"no apply function of {', '.join(AXIAL_APPLY)}")
    N, D = q.shape
    last = None
    for p in (pos.T.contiguous(), pos.T[None].contiguous()):
        try:
            with torch.no_grad():
                cos, sin = rotary(q[None], p)
                if fn.__name__ == "apply_multidimensional_rope":
                    out = fn(q[None, :, None, :], cos, sin, p)
                    return out.reshape(N, D).double().numpy()
                for x in (q[:, None, :], q[None, None]):
                    try:
                        out = fn(x, x, cos, sin)
                    except Exception as e:  # noqa: BLE001 - another layout of q
                        last = e
                        continue
                    out = out[0] if isinstance(out, tuple) else out
                    if tuple(out.shape) == tuple(x.shape):
                        return out.reshape(N, D).double().numpy()
        except Exception as e:  # noqa: BLE001 - the other position layout
            last = e
    raise RuntimeError(f"{fn.__name__}: {type(last).__name__ if last else 'no layout of q broadcasts'}")


def axial_candidates(head_dim: int, theta: float):
    """Every :class:`~posenc.spec.models.AxialRopeParams` the probe tries, in order of preference."""
    import itertools
    from posenc.spec.models import AxialRopeParams
    for A in (2, 3):
        orders = [tuple(range(A)), tuple(reversed(range(A)))]
        for freq, layout, order in itertools.product(("shared", "alternating"),
                                                     ("split", "blocks", "interleaved", "alternate"), orders):
            try:
                yield AxialRopeParams(head_dim=head_dim, rope_theta=theta, num_axes=A, frequencies=freq,
                                      layout=layout, axis_order=None if order == tuple(range(A)) else order)
            except ValueError:
                continue


def axial_probe(module, sub_config, n: int = 9) -> tuple[Optional[dict], str]:
    """Which axial RoPE (head-width rule, axes, frequencies, layout, axis order) a vision encoder's
    rotary module and apply function compute: random q at random coordinates against the
    reference with every candidate (:func:`axial_candidates`); exactly one must match.  Returns
    ``({head_width, num_axes, frequencies, layout, axis_order}, evidence)`` or ``(None, why)``."""
    import torch
    from posenc.reference import axial
    d = sub_config.to_dict()
    theta = (d.get("rope_parameters") or {}).get("rope_theta")
    built = rotary_modules(module, sub_config)
    if not built or not theta:
        return None, "no rotary module builds" if not built else "rope_theta unknown"
    name, rotary = built[0]
    g = torch.Generator().manual_seed(0)
    tried = []
    declared = {k for c in type(sub_config).__mro__ for k in getattr(c, "__annotations__", {})} | set(
        getattr(type(sub_config), "attribute_map", {}))
    for rule, keys in AXIAL_HEAD_WIDTH:
        if not set(keys) <= declared:  # Pixtral's head_dim is derived (hidden_size // heads in __post_init__)
            continue
        D = axial_head_width(lambda k: _class_value(sub_config, k), rule)
        if D is None or D % 2 or D in tried:
            continue
        tried.append(D)
        q = torch.randn(n, D, generator=g, dtype=torch.float32)
        matches, outs = [], {}
        for cand in axial_candidates(D, float(theta)):
            A = cand.num_axes
            if A not in outs:
                pos = torch.randint(0, 40, (A, n), generator=torch.Generator().manual_seed(A))
                try:
                    outs[A] = (pos, axial_call(module, rotary, q, pos))
                except Exception as e:  # noqa: BLE001 - this axis count does not fit the module
                    outs[A] = (pos, e)
            pos, got = outs[A]
            if isinstance(got, Exception):
                continue
            want = axial.apply(q.double().numpy()[None, None], q.double().numpy()[None, None],
                               pos.numpy()[:, None, :], cand)[0][0, 0]
            if np.allclose(got, want, atol=2e-5 * max(1.0, float(np.abs(want).max())), rtol=0):
                matches.append(cand)
        if len(matches) == 1:
            m = matches[0]
            where = f"{module.__name__.removeprefix('transformers.models.')}.{name}"
            return ({"head_width": rule, "num_axes": m.num_axes, "frequencies": m.frequencies, "layout": m.layout,
                     "axis_order": list(m.order)}, f"{where} probed against AXIAL-* (head width {rule})")
        if len(matches) > 1:
            return None, f"{name}: {len(matches)} candidate layouts match (the probe cannot tell them apart)"
    errors = {type(v[1]).__name__ for v in outs.values() if isinstance(v[1], Exception)} if tried else set()
    return None, (f"{name}: no axial layout of the reference matches (head widths tried {tried}"
                  f"{'; ' + ', '.join(sorted(errors)) if errors else ''})")


#: the apply function of a vision rotary module that tabulates its own patch grid (Llama 4 vision:
#: q times the complex freqs_ci [N, 1, D/2], N the grid's patches and the class token)
AXIAL_GRID_APPLY = "vision_apply_rotary_emb"

#: the position rules such a table may follow, in order: (offset added to the patch's (row,
#: column), where the class token sits at angle 0: "last", "first" or None)
AXIAL_GRID_RULES = tuple((offset, cls) for offset in (0, 1) for cls in ("last", "first", None))


def grid_tables(module, sub_config) -> list[tuple[str, Any]]:
    """``[(class name, instance)]`` of the module's ``*RotaryEmbedding`` classes written for
    ``sub_config``'s class that tabulate their own patch grid: built from it, one complex buffer
    and no ``inv_freq`` (Llama 4 vision's ``freqs_ci``)."""
    import torch
    out = []
    for name, cls in sorted(_rotary_classes(module).items()):
        if _config_hint(cls) is not type(sub_config):
            continue
        try:
            r = cls(sub_config)
        except Exception:  # noqa: BLE001 - refuses the config: not a table of it
            continue
        bufs = dict(r.named_buffers())
        if sum(torch.is_complex(b) for b in bufs.values()) == 1 and not any(n.endswith("inv_freq") for n in bufs):
            out.append((name, r))
    return out


def axial_grid_positions(n: int, offset: int, cls: Optional[str]) -> Optional[np.ndarray]:
    """``[2, n]`` (row, column) positions of the rows of an ``n``-row grid table: a square patch grid
    tabulated row by row, ``offset`` added to each patch's coordinates, and the class token (angle 0)
    ``"first"``, ``"last"`` or absent (None); None where ``n`` is no such grid."""
    side = int(round((n - (cls is not None)) ** 0.5))
    if side * side + (cls is not None) != n:
        return None
    i = np.arange(side * side)
    pos = np.stack([i // side, i % side]).astype(np.int64) + offset
    zero = np.zeros((2, 1), np.int64)
    return np.concatenate([zero, pos], 1) if cls == "first" else np.concatenate([pos, zero], 1) if cls == "last" else pos


def _table_rows(rotary) -> int:
    """The rows of a grid table module's complex buffer (:func:`grid_tables`): patches and class token."""
    import torch
    return int(next(b for b in rotary.buffers() if torch.is_complex(b)).shape[0])


def axial_grid_call(module, rotary, q):
    """The model's own table RoPE on ``q [N, D]`` (torch float32, one row per table row): its
    :data:`AXIAL_GRID_APPLY` with its rotary module's table, q laid out ``[1, N, 1, D]`` as the
    function broadcasts it; float64 ``[N, D]``."""
    import torch
    fn = getattr(module, AXIAL_GRID_APPLY)
    with torch.no_grad():
        table = rotary(q)
        out = fn(q[None, :, None, :], q[None, :, None, :].clone(), table)[0]
    return out.reshape(q.shape).double().numpy()


def _probe_widths(sub_config):
    """``(rule, head width)`` of each :data:`AXIAL_HEAD_WIDTH` rule whose keys the config class
    declares and that gives an even width: the widths a probe tries, in order."""
    declared = {k for c in type(sub_config).__mro__ for k in getattr(c, "__annotations__", {})}
    for rule, keys in AXIAL_HEAD_WIDTH:
        D = axial_head_width(lambda k: _class_value(sub_config, k), rule) if set(keys) <= declared else None
        if D is not None and D % 2 == 0:
            yield rule, D


def axial_grid_probe(module, sub_config) -> tuple[Optional[dict], str]:
    """Which axial RoPE and which grid position rule a vision rotary module that tabulates its own
    patch grid computes (:func:`grid_tables`): random q, one row per table row, through the model's
    :data:`AXIAL_GRID_APPLY`, against the reference with every two-axis candidate
    (:func:`axial_candidates`) at every rule of :data:`AXIAL_GRID_RULES`; exactly one must match.
    ``({head_width, num_axes, frequencies, layout, axis_order, grid: {offset, class_token}},
    evidence)`` or ``(None, why)``."""
    import torch
    from posenc.reference import axial
    tables = grid_tables(module, sub_config)
    theta = (sub_config.to_dict().get("rope_parameters") or {}).get("rope_theta")
    if not tables or getattr(getattr(module, AXIAL_GRID_APPLY, None), "__module__", None) != module.__name__ \
            or not theta:
        return None, "no grid table and apply function"
    name, rotary = tables[0]
    n = _table_rows(rotary)
    g = torch.Generator().manual_seed(0)
    for rule, D in _probe_widths(sub_config):
        q = torch.randn(n, D, generator=g, dtype=torch.float32)
        try:
            got = axial_grid_call(module, rotary, q)
        except Exception:  # noqa: BLE001 - not this head width
            continue
        matches = []
        for cand in (c for c in axial_candidates(D, float(theta)) if c.num_axes == 2):
            for offset, cls in AXIAL_GRID_RULES:
                pos = axial_grid_positions(n, offset, cls)
                if pos is None:
                    continue
                want = axial.apply(q.double().numpy()[None, None], q.double().numpy()[None, None],
                                   pos[:, None, :], cand)[0][0, 0]
                if np.allclose(got, want, atol=2e-5 * max(1.0, float(np.abs(want).max())), rtol=0):
                    matches.append((cand, offset, cls))
        if len(matches) == 1:
            m, offset, cls = matches[0]
            where = f"{module.__name__.removeprefix('transformers.models.')}.{name}"
            return ({"head_width": rule, "num_axes": 2, "frequencies": m.frequencies, "layout": m.layout,
                     "axis_order": list(m.order), "grid": {"offset": offset, "class_token": cls}},
                    f"{where} probed against AXIAL-* (head width {rule}; its own grid: (row, column) + {offset}, "
                    f"the class token {cls or 'absent'}{' at angle 0' if cls else ''})")
        if len(matches) > 1:
            return None, f"{name}: {len(matches)} candidate layouts and grid rules match"
    return None, f"{name}: no axial layout and grid rule of the reference matches"


#: the one parameter of a rotary module's forward that tabulates an image's patches itself
#: (EoMT-DINOv3): no positions; the grid is the pixel values' (H // patch_size, W // patch_size)
PIXEL_ARGUMENT = "pixel_values"
#: the apply function of such a module's model (it rotates the last grid-many tokens only)
PIXEL_APPLY = "apply_rotary_pos_emb"
#: the non-square grids the probe and the check run a pixel-values module at (rows, columns)
PIXEL_GRIDS = ((3, 5), (6, 2))


def takes_pixel_values(rotary) -> bool:
    """Whether a built rotary module's forward takes the image itself (:data:`PIXEL_ARGUMENT`) and
    no positions: it computes the patch coordinates of the image's grid on its own."""
    try:
        names = list(inspect.signature(type(rotary).forward).parameters)[1:]
    except (TypeError, ValueError):
        return False
    return names == [PIXEL_ARGUMENT]


def _positive_int(v) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def pixel_grid_call(module, rotary, q, grid, patch: int, prefix: int = 0) -> np.ndarray:
    """The model's own RoPE on ``q [prefix + n_h n_w, D]`` (torch float32; the first ``prefix`` rows
    the prefix tokens): the rotary module in eval mode on zero pixel values ``[1, 3, n_h patch, n_w
    patch]``, then the module's :data:`PIXEL_APPLY` with q laid out ``[1, 1, tokens, D]`` as its
    attention lays it out; float64 ``[prefix + n_h n_w, D]``."""
    import torch
    fn = getattr(module, PIXEL_APPLY)
    n_h, n_w = grid
    was = rotary.training
    rotary.eval()  # training mode shifts, jitters and rescales the coordinates at random
    try:
        with torch.no_grad():
            cos, sin = rotary(torch.zeros(1, 3, n_h * patch, n_w * patch, dtype=torch.float32))
            x = q[None, None]
            out = fn(x, x.clone(), cos, sin)
    finally:
        rotary.train(was)
    out = out[0] if isinstance(out, tuple) else out
    return out.reshape(q.shape).double().numpy()


def _full_grid(grid) -> np.ndarray:
    """``[2, n_h n_w]`` (row, column) of every patch of ``grid``, row by row."""
    i = np.arange(grid[0] * grid[1])
    return np.stack([i // grid[1], i % grid[1]]).astype(np.int64)


def axial_pixel_probe(module, sub_config, name: str, rotary, prefix: int = 2) -> tuple[Optional[dict], str]:
    """Which axial RoPE a rotary module whose forward takes pixel values (:func:`takes_pixel_values`)
    computes: random q, ``prefix`` prefix rows then one row per patch of each non-square grid of
    :data:`PIXEL_GRIDS`, through :func:`pixel_grid_call`, against the reference with every two-axis
    candidate (:func:`axial_candidates`) with index and with centred coordinates
    (AXIAL-COORDINATES-CENTRED) at the grid's own size; the prefix rows must come back unchanged and
    exactly one candidate must match at every grid.  ``({head_width, num_axes, frequencies, layout,
    axis_order, coordinates}, evidence)`` or ``(None, why)``."""
    import torch
    from posenc.reference import axial
    theta = (sub_config.to_dict().get("rope_parameters") or {}).get("rope_theta")
    patch = _positive_int(_class_value(sub_config, "patch_size"))
    fn = getattr(module, PIXEL_APPLY, None)
    if not theta or patch is None or getattr(fn, "__module__", None) != module.__name__:
        return None, (f"{name}: its forward takes {PIXEL_ARGUMENT}, but "
                      + ("rope_theta is unknown" if not theta else "patch_size is no positive integer"
                         if patch is None else f"the module has no {PIXEL_APPLY} of its own"))
    g = torch.Generator().manual_seed(0)
    for rule, D in _probe_widths(sub_config):
        matches = None
        for grid in PIXEL_GRIDS:
            q = torch.randn(prefix + grid[0] * grid[1], D, generator=g, dtype=torch.float32)
            try:
                got = pixel_grid_call(module, rotary, q, grid, patch, prefix)
            except Exception:  # noqa: BLE001 - not this head width
                matches = None
                break
            if not np.array_equal(got[:prefix], q[:prefix].double().numpy()):
                return None, f"{name}: {PIXEL_APPLY} changes the {prefix} prefix tokens (AXIAL-* covers patches only)"
            patches, pos = q[prefix:].double().numpy()[None, None], _full_grid(grid)[:, None, :]
            here = []
            for cand in (c for c in axial_candidates(D, float(theta)) if c.num_axes == 2):
                for coords in ("index", "centred"):
                    c = cand if coords == "index" else cand.model_copy(update={"coordinates": "centred",
                                                                               "grid_size": tuple(grid)})
                    want = axial.apply(patches, patches, pos, c)[0][0, 0]
                    if np.allclose(got[prefix:], want, atol=2e-5 * max(1.0, float(np.abs(want).max())), rtol=0):
                        here.append((cand, coords))
            matches = here if matches is None else [m for m in matches if m in here]
        if matches is None:
            continue
        if len(matches) == 1:
            (m, coords), = matches
            if coords != "centred":
                return None, f"{name}: index coordinates over a pixel grid (no import rule reads such a module)"
            where = f"{module.__name__.removeprefix('transformers.models.')}.{name}"
            return ({"head_width": rule, "num_axes": 2, "frequencies": m.frequencies, "layout": m.layout,
                     "axis_order": list(m.order), "coordinates": "centred"},
                    f"{where} probed against AXIAL-* (head width {rule}; its forward takes {PIXEL_ARGUMENT}: centred "
                    f"patch coordinates over its own height // patch_size x width // patch_size grid, "
                    f"AXIAL-COORDINATES-CENTRED; {PIXEL_APPLY} leaves the prefix tokens unrotated)")
        return None, (f"{name}: {len(matches)} candidate layouts match" if matches else
                      f"{name}: no axial layout and coordinate rule of the reference matches")
    return None, f"{name}: no head width of {', '.join(r for r, _ in AXIAL_HEAD_WIDTH)} runs its {PIXEL_APPLY}"


def _rope_location(cfg_dict: dict) -> Optional[str]:
    if cfg_dict.get("rope_parameters") is not None:
        return ""
    for sub in SUB_CONFIGS:
        s = cfg_dict.get(sub)
        if isinstance(s, dict) and s.get("rope_parameters") is not None:
            return sub
    return None


def _is_axial(rope: dict) -> bool:
    sets = rope.values() if _nested(rope) else [rope]
    return any(isinstance(s, dict) and s.get("rope_type") == "axial" for s in sets)


def _class_value(obj, key):
    """A config attribute (a class-level default that ``to_dict`` leaves out included)."""
    try:
        return getattr(obj, key, None)
    except Exception:  # noqa: BLE001 - transformers' per-layer attributes refuse a global read
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
    from posenc.spec.hf_config import LAYER_OVERRIDE_KEYS
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
    where = _rope_location(cfg_dict)
    sub_obj = cfg if where == "" else getattr(cfg, where)
    sub = cfg_dict if where == "" else cfg_dict[where]
    text_type = sub.get("model_type") or model_type
    row: dict[str, Any] = {"config_class": type(sub_obj).__name__, "where": where}
    if where:
        row["text_model_type"] = text_type
    defaults = {}
    aliases = getattr(type(sub_obj), "attribute_map", {}) or {}
    for k in DEFAULT_KEYS:
        # a class-level default, not an alias of another key (Zamba2's head_dim is its derived
        # attention_head_dim, which the class recomputes from hidden_size)
        v = sub.get(k) if sub.get(k) is not None else (None if k in aliases else _class_value(sub_obj, k))
        if v is not None:
            defaults[k] = _jsonable(v)
    row["defaults"] = defaults
    # transformers' attribute_map: the class reads these keys under another name (Moonshine's
    # num_attention_heads is decoder_num_attention_heads, DBRX's hidden_size d_model)
    alias = {k: v for k, v in aliases.items() if k in DEFAULT_KEYS + ALIAS_KEYS and isinstance(v, str)}
    if alias:
        row["aliases"] = dict(sorted(alias.items()))
    for k, target in alias.items():  # the default under the name the import reads (DBRX's d_model)
        if k not in defaults and sub.get(target) is not None:
            defaults[k] = _jsonable(sub[target])
    if where == "" and not _nested(sub["rope_parameters"]):  # what transformers fills for rope_parameters {}
        from transformers import CONFIG_MAPPING
        try:
            empty = (CONFIG_MAPPING[model_type](rope_parameters={}).rope_parameters or {}).get("rope_theta")
        except Exception:  # noqa: BLE001 - the class refuses an empty dict
            empty = None
        if isinstance(empty, (int, float)) and empty != 10000.0:
            row["empty_rope_theta"] = float(empty)
    overrides = _layer_type_overrides(sub)
    if where == "" and overrides:
        _fixed_layer_defaults(model_type, sub, overrides)
    if overrides:
        row["layer_type_defaults"] = overrides
    rope = sub["rope_parameters"]
    if _is_axial(rope):
        module, _ = _modeling(text_type)
        found, evidence = axial_probe(module, sub_obj) if module is not None else (None, "no modeling module")
        row["axial_evidence"] = evidence
        if found is None:
            row["not_covered"] = f"axial (two-dimensional) RoPE of a vision encoder: {evidence}"
        else:
            row["axial"] = found
            row["rotary_class"] = evidence.split(" probed")[0]
            for k in dict(AXIAL_HEAD_WIDTH)[found["head_width"]]:  # the class defaults the import falls back on
                v = _class_value(sub_obj, k)
                if k not in defaults and isinstance(v, int) and not isinstance(v, bool):
                    defaults[k] = v
        return row
    module, modname = _modeling(text_type)
    if module is None:
        row["not_covered"] = f"no modeling module {modname}"
        return row
    via = modeling_via(text_type)
    if via:
        row["modeling_via"] = via
    errors: list[str] = []
    built = rotary_modules(module, sub_obj, errors)
    if not built:  # a table of its own patch grid (Llama 4 vision)
        found, evidence = axial_grid_probe(module, sub_obj)
        if found is not None:
            row.update(axial=found, axial_evidence=evidence, rotary_class=evidence.split(" probed")[0])
            for k in ("image_size", "patch_size"):  # the grid's side, image_size // patch_size
                v = _class_value(sub_obj, k)
                if isinstance(v, int) and not isinstance(v, bool):
                    defaults[k] = v
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
        for k in ("image_size", "patch_size"):  # the grid of a square image, image_size // patch_size
            v = _class_value(sub_obj, k)
            if isinstance(v, int) and not isinstance(v, bool):
                defaults[k] = v
        return row
    width = head_width_rule(module, sub_obj)
    if width is not None:
        row["head_width"] = width
    gate = rope_gate(module, sub_obj)
    if gate is not None:
        row["rope_gate"] = gate
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
    return row


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
    import torch
    for name, cls in _attention_classes(module):  # per-layer flags (SmolLM3, Llama 4, Mistral Large 4)
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
    for name, cls in _attention_classes(module):
        try:
            src = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            continue
        m = _ROPE_GATE.search(src)
        if m is None or "self." not in m.group("cond"):
            continue
        indent = re.match(r"[ \t]*", src[m.start():]).group(0)
        rest = src[m.end():]
        branch = re.search(rf"^{indent}(\S[^\n]*)", rest, re.M)  # the next line at the if's own level
        if branch and branch.group(1).startswith("else") and re.search(
                r"apply_rotary_\w+\(", rest[branch.end():branch.end() + 400]):
            continue  # an if / else that rotates either way (DeepSeek-V3's rope_interleave): not a switch
        cond = m.group("cond")
        flag = re.fullmatch(r"self\.config\.(\w+)", cond)
        if flag:  # a config switch for every layer (Zamba2's use_mem_rope)
            return {"condition": cond, "attention_class": name, "flag": flag.group(1),
                    "flag_default": bool(getattr(sub_config, flag.group(1), False))}
        if not re.search(r"sliding|is_local|use_rope", cond):  # not a layer's RoPE switch (an if / else
            continue                                            # that rotates either way: Mistral Large 4)

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
    return None


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
    from posenc.spec.hf_config import _legacy_sets
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


def survey() -> dict:
    """The table ``spec/registry/hf_model_types.json`` holds, from the installed transformers."""
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
    from transformers.configuration_utils import ALLOWED_LAYER_TYPES, _LEGACY_LAYER_TYPE_REMAP
    return {"transformers": transformers.__version__, "layer_types": list(ALLOWED_LAYER_TYPES),
            "legacy_layer_types": dict(_LEGACY_LAYER_TYPE_REMAP), "model_types": rows}


def table_text(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(check: bool) -> int:
    """``posenc config survey [--check]``: write (or check) the model-type table and the coverage table."""
    table = survey()
    texts = {HF_TABLE_PATH: table_text(table)}
    if not check:  # the coverage rows import through the table: write it first
        HF_TABLE_PATH.write_text(texts[HF_TABLE_PATH])
        _hf_table.cache_clear()
    texts[COVERAGE_PATH] = coverage_text(table)
    stale = [p for p, t in texts.items() if not p.is_file() or p.read_text() != t]
    if check:
        for p in stale:
            print(f"{p} is stale for transformers {table['transformers']}: run `posenc config survey`")
        if not stale:
            print(f"{HF_TABLE_PATH.name} and {COVERAGE_PATH.name} are fresh (transformers {table['transformers']})")
        return 1 if stale else 0
    COVERAGE_PATH.write_text(texts[COVERAGE_PATH])
    rows = table["model_types"]
    rope = [r for r in rows.values() if "defaults" in r]
    print(f"wrote {HF_TABLE_PATH} and {COVERAGE_PATH}: {len(rows)} model types, {len(rope)} with RoPE parameters")
    return 0


# ---- agreement: the import (reference math) against each model's own rotary module -----------

def _sets(found: dict) -> dict:
    """``{layer_type or None: params}`` of :func:`~posenc.spec.hf_config.params_from_hf_config`'s result."""
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
    size, patch = (_positive_int(_class_value(sub_config, k)) for k in ("image_size", "patch_size"))
    if patch is None:
        return problems + ["patch_size is no positive integer"]
    if size is not None and tuple(p.grid_size or ()) != (size // patch,) * p.num_axes:
        problems.append(f"grid_size {list(p.grid_size or ())} imported, image_size // patch_size is {size // patch}")
    registers = _positive_int(_class_value(sub_config, "num_register_tokens")) or 0
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
    from posenc.spec.hf_config import hf_model_types, params_from_hf_config
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


# ---- the coverage table of every model type (docs/model-coverage.md) ---------------------------

#: positional encodings recognised in a modeling module's source, in order: (family, what the spec
#: covers of it or None, pattern).  A module may match several (a learned table and a sinusoid).
SOURCE_FAMILIES = (
    ("ALiBi", "ALIBI-*", r"alibi"),
    ("T5 relative buckets", "T5-*", r"relative_attention_num_buckets|_relative_position_bucket"),
    ("DeBERTa disentangled relative attention", None, r"DisentangledSelfAttention|pos_att_type"),
    ("Swin / BEiT relative position bias table", None, r"relative_position_bias_table"),
    ("Transformer-XL / XLNet relative sinusoid", None, r"r_w_bias|RelPartialLearnable|relative_positional_encoding"),
    ("Reformer axial learned embeddings", None, r"AxialPositionEmbeddings"),
    ("convolutional positional embedding", None, r"PositionalConvEmbedding|pos_conv_embed"),
    ("RoPE without rope_parameters", "ROPE-*", r"RotaryEmbedding|rotate_every_two|apply_rotary_pos_emb"
                                               r"|create_sinusoidal_positions"),
    ("2-D sine position embedding (DETR-style)", None, r"SinePositionEmbedding|PositionEmbeddingSine"),
    ("sinusoidal table", "SIN-*", r"SinusoidalPositionalEmbedding|def sinusoids|_get_sinusoid|sinusoidal_embedding"
                                  r"|def positional_encoding|SinusoidsPositionEmbedding"),
    ("learned patch position parameter (vision, interpolated)", None,
     r"position_embeddings = nn\.Parameter|pos_embed = nn\.Parameter|position_embedding = nn\.Parameter"),
    ("learned absolute table", "LEARNED-*", r"nn\.Embedding\(\s*config\.max_position_embeddings|position_embeddings = nn\.Embedding"
                                            r"|position_embedding = nn\.Embedding|nn\.Embedding\(self\.num_positions"
                                            r"|LearnedPositionalEmbedding"),
    ("other relative position scheme", None, r"relative_position_embeddings|rel_pos_|relative_position_index"),
    ("state-space / recurrent (no positions)", None, r"selective_scan|MambaMixer|ssm_state|RwkvLinearAttention"),
)


def default_config(model_type: str) -> dict:
    """The default config of a model type's transformers config class, as a ``config.json`` dict."""
    from transformers import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]().to_dict()


def _source(model_type: str) -> Optional[str]:
    import importlib.util
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    mod = model_type_to_module_name(model_type)
    spec = importlib.util.find_spec(f"transformers.models.{mod}")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / f"modeling_{mod}.py"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def source_families(model_type: str) -> list[tuple[str, Optional[str], str]]:
    """``[(family, spec clauses or None, evidence)]`` found in the model type's modeling source."""
    text = _source(model_type)
    if text is None:
        return []
    out = []
    for family, clauses, pattern in SOURCE_FAMILIES:
        m = re.search(pattern, text)
        if m:
            out.append((family, clauses, m.group(0)))
    return out


def _sub_config_families(model_type: str) -> list[tuple[str, Optional[str], str]]:
    """The families of a composite model's sub-configs' model types (a wrapper whose modeling
    module builds its parts from other model types)."""
    try:
        d = default_config(model_type)
    except Exception:  # noqa: BLE001 - listed as found nothing
        return []
    out = []
    for key, sub in sorted(d.items()):
        if isinstance(sub, dict) and isinstance(sub.get("model_type"), str) and sub["model_type"] != model_type:
            for family, clauses, evidence in source_families(sub["model_type"]):
                if all(f != family for f, _, _ in out):
                    out.append((family, clauses, f"{key} {sub['model_type']}: {evidence}"))
    return out


def _exceptions() -> dict:
    import yaml
    from posenc.spec.hf_config import HF_EXCEPTIONS_PATH
    return yaml.safe_load(HF_EXCEPTIONS_PATH.read_text(encoding="utf-8"))["exceptions"]


def coverage_rows(table: dict, results: Optional[dict] = None) -> list[dict]:
    """One row per model type: family, variant, status and evidence (see docs/model-coverage.md).
    ``results``: :func:`agreement` per RoPE model type when already computed (the kit test's)."""
    from posenc.spec.hf_config import FAMILY_RULES, MODEL_RULES, MROPE_RULES, params_from_hf_config
    exceptions = _exceptions()
    rows = table["model_types"]
    out = []
    for mt, row in sorted(rows.items()):
        r = {"model_type": mt, "config_class": row.get("config_class", "")}
        if "error" in row:
            r.update(family="unknown", variant="", status="default config does not build", evidence=row["error"])
        elif "defaults" in row:
            rope = row["defaults"]["rope_parameters"]
            types = sorted({s.get("rope_type", "default") for s in (rope.values() if _nested(rope) else [rope]) if s})
            variant = ", ".join(types) + (" per layer type" if _nested(rope) else "")
            variant += f" ({row['where']})" if row.get("where") else ""
            flag = row.get("pairing_flag")
            layout = [f"{row['pairing']} pairs" if row.get("pairing") not in (None, "half") else "",
                      f"{flag['key']}: {flag['true']} or {flag['false']} pairs" if flag else "",
                      "rotation -phi" if row.get("rotation") == "negative" else "",
                      "centred coordinates" if (row.get("axial") or {}).get("coordinates") == "centred" else ""]
            variant += "".join(f", {x}" for x in layout if x)  # what the table probed beyond the rope_type
            r.update(family="M-RoPE" if mt in MROPE_RULES or "mrope_section" in json.dumps(rope) else
                     "axial RoPE" if _is_axial(rope) or row.get("axial") else "RoPE",
                     variant=variant, evidence=row.get("rotary_class") or "; ".join(
                         f"{a}: {t}" for a, t in (row.get("components") or {}).items()))
            if "not_covered" in row:
                r["status"] = f"not covered: {row['not_covered']}"
            elif mt in exceptions:
                e = exceptions[mt]
                r["status"] = f"{'not covered' if e['kind'] == 'not-covered' else 'transformers defect'}: {e['what']}"
            else:
                status, detail = results[mt] if results and mt in results else agreement(mt, rows)
                r["status"] = "agrees" if status == "agrees" else f"{status}: {detail}"
                if status == "agrees" and detail.startswith("no RoPE"):  # switched off by default (Zamba2)
                    r["variant"] = f"none by default ({detail.split(' (')[0].removeprefix('no RoPE: ')})"
        else:
            found = source_families(mt) or _sub_config_families(mt)
            r["family"] = "; ".join(f for f, _, _ in found) or "none found"
            r["variant"] = ""
            r["evidence"] = "; ".join(f"`{e}`" for _, _, e in found) or "no positional code matched"
            covered = [c for _, c, _ in found if c]
            if mt in FAMILY_RULES or mt in MODEL_RULES:
                try:
                    params_from_hf_config(default_config(mt))
                    r["status"] = "imported"
                except SpecError as e:
                    r["status"] = f"import error: {e}"
            elif covered and len(covered) == len(found):
                r["status"] = f"covered by {', '.join(covered)}; no import rule"
            elif found:
                r["status"] = "not covered: " + ", ".join(f for f, c, _ in found if not c)
            else:
                r["status"] = "no positional encoding recognised (convolutional and recurrent models have none)"
        out.append(r)
    return out


def counts(results: dict) -> dict:
    """``{status: n}`` of :func:`agreement` results, and the RoPE model types' total."""
    c: dict[str, int] = {}
    for status, _ in results.values():
        c[status] = c.get(status, 0) + 1
    return {"rope_model_types": len(results), **dict(sorted(c.items()))}


def coverage_text(table: dict, results: Optional[dict] = None) -> str:
    rows = coverage_rows(table, results)
    rope = [r for r in rows if r.get("family") in ("RoPE", "M-RoPE", "axial RoPE")]
    agree = sum(r["status"] == "agrees" for r in rope)
    fam: dict[str, int] = {}
    for r in rows:
        for f in r["family"].split("; "):
            fam[f] = fam.get(f, 0) + 1
    lines = [
        f"# Model coverage (transformers {table['transformers']})", "",
        "Written by `posenc config survey` (do not edit): every model type transformers registers, its "
        "positional encoding and what the kit does with it. RoPE rows: the config import of the type's default "
        "config, computed by the reference, against the model's own rotary module (`inv_freq`, attention "
        "scaling, per layer type) and its apply function (`agrees`; tests/test_hf_model_types.py). Other rows: "
        "the family recognised in the modeling source (evidence: the matched name), `imported` where the config "
        "import has a rule. Exceptions and their reasons: `spec/registry/hf_exceptions.yaml` and the survey's "
        "`not_covered` (`spec/registry/hf_model_types.json`).", "",
        f"**{len(rows)} model types; {len(rope)} carry RoPE parameters, {agree} of them "
        f"({100 * agree / max(1, len(rope)):.1f} %) import and agree with transformers.**", "",
        "| family | model types |", "|---|---:|",
        *(f"| {f} | {n} |" for f, n in sorted(fam.items(), key=lambda kv: (-kv[1], kv[0]))), "",
        "| model type | config class | family | variant | status | evidence |", "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [f"`{r['model_type']}`", r["config_class"], r["family"], r["variant"], r["status"], r["evidence"]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"

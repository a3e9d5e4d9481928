"""Probing a vision model's axial (2-D) RoPE for the survey: which head-width rule, axes, frequencies,
layout and axis order (AXIAL-*) its rotary module and apply function compute (:func:`axial_probe`), a
grid table's (:func:`axial_grid_probe`), and a module whose forward takes pixel values and computes
the patch coordinates itself (:func:`axial_pixel_probe`, which also finds the coordinate rule,
AXIAL-COORDINATES-CENTRED).  Needs the ``[hf]`` extra.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

import numpy as np

from posenc.hf.axial import AXIAL_HEAD_WIDTH, axial_head_width
from posenc.hf.modeling import _config_hint, _rotary_classes, rotary_modules
from posenc.hf.modeling import class_value

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
        D = axial_head_width(lambda k: class_value(sub_config, k), rule)
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
        D = axial_head_width(lambda k: class_value(sub_config, k), rule) if set(keys) <= declared else None
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
    patch = _positive_int(class_value(sub_config, "patch_size"))
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

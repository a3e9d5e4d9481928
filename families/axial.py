"""The axial RoPE family (AXIAL-*): references and error scales of axial.cos_sin and axial.apply,
the mutants of its divergences and its golden cases; the math is :mod:`posenc.reference.axial`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, arange_x
from posenc.reference import axial, rope
from posenc.reference.rounding import round_to_dtype
from posenc.spec.models import AxialRopeParams

from . import add_cases, case_clauses, mutant, reference
from ._common import Outputs
from .rope import exponent_amplification
from .rope_calls import layout_forms


@case_clauses("axial")
def axial_clauses(p, op: str) -> list[str]:
    """The clauses an axial case exercises beyond its own: the axes' order wherever there are two or more."""
    return ["AXIAL-AXIS-ORDER"] if p.num_axes >= 2 else []



def axial_outputs(op, p: AxialRopeParams, x, positions=None, freq=None, rotate=None) -> Outputs:
    """Outputs of an axial op.  Mutants substitute ``positions`` (``[B, T, R/2]``, what each pair's
    frequency multiplies: the position, or ``2 pi`` times the patch centre with coordinates
    centred), ``freq`` (``[R/2]``, each pair's frequency) and ``rotate`` (``fn(x, c, s)``, the
    rotation applied to q and k)."""
    pos = axial.pair_coordinates(x["position_ids"], p) if positions is None else positions
    w = axial.pair_frequencies(p) if freq is None else freq
    phi = np.asarray(pos, np.float64) * w
    c, s = np.cos(phi), np.sin(phi)
    if op == "axial.cos_sin":
        return {"cos": c, "sin": s}
    rot = rotate or (lambda v: axial.apply_with_cos_sin(v, c, s, p))
    return {n: rot(x[n]) if rotate is None else rotate(x[n], c, s) for n in ("q", "k")}


def _pair_amplification(p: AxialRopeParams) -> np.ndarray:
    """The float32 exponent error of each pair's frequency (:func:`exponent_amplification` over the
    width its exponent is taken over)."""
    n = p.adim // 2
    width = p.adim if p.frequencies == "shared" else p.rdim
    amp = exponent_amplification(np.ones(p.rdim // 2 if p.frequencies != "shared" else n), p.rope_theta, width)
    if p.frequencies == "shared":
        return np.asarray([amp[j] for _, j in p.pairs])
    return np.asarray([amp[p.num_axes * j + a] for a, j in p.pairs])


def _pair_scales(x, p: AxialRopeParams, phi_abs):
    """Per-element (dtype, angle) scales of the rotation of ``x [B, H, T, D]``; tail dims 0."""
    x = np.asarray(x, np.float64)
    ds, an = np.zeros_like(x), np.zeros_like(x)
    R, ad, n = p.rdim, p.adim, p.adim // 2
    if p.layout in ("split", "alternate", "interleaved"):
        pairing = "interleaved" if p.layout == "interleaved" else "half"
        a, b = rope.pair_indices(R, pairing)
        norm = np.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
        for idx in rope.output_indices(R, pairing):
            ds[..., idx] = norm
            an[..., idx] = norm * phi_abs
        return ds, an
    for blk in range(p.num_axes):
        a, b = (blk * ad + np.arange(n), blk * ad + n + np.arange(n))
        norm = np.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
        for idx in (a, b):
            ds[..., idx] = norm
            an[..., idx] = norm * phi_abs[..., blk * n:(blk + 1) * n]
    return ds, an


def _angle_magnitudes(p: AxialRopeParams, position_ids) -> np.ndarray:
    """``[B, T, R/2]`` the magnitude a float32 angle's error is relative to: ``|phi|`` for
    coordinates index; centred: ``2 pi f (1 + |c|)``, since a float32 patch centre ``(2 i + 1) / n -
    1`` is off by a few eps absolutely (not relative to ``c``, which is 0 at an odd grid's centre)."""
    if p.coordinates == "index":
        return np.abs(axial.angles(position_ids, p))
    c = axial.pair_coordinates(position_ids, p) / (2.0 * np.pi)
    return 2.0 * np.pi * (1.0 + np.abs(c)) * axial.pair_frequencies(p)


def _axial_scales_for(op):
    def f(p, x):
        phi = _angle_magnitudes(p, x["position_ids"]) * _pair_amplification(p)
        if op == "axial.cos_sin":
            sc = (np.ones_like(phi), phi)
            return {"cos": sc, "sin": sc}
        return {n: _pair_scales(x[n], p, phi[:, None]) for n in ("q", "k")}
    return f


def _axial_reference(op):
    def fn(p, x):
        return axial_outputs(op, p, x)
    fn.__name__ = fn.__qualname__ = f"axial_outputs[{op}]"
    return fn


for _op in ("axial.cos_sin", "axial.apply"):
    reference(_op, scales=_axial_scales_for(_op))(_axial_reference(_op))


# ---- mutants (DIV-AXIAL-*) -------------------------------------------------------------------
_OPS = ("axial.cos_sin", "axial.apply")


def _per_pair(coords, p: AxialRopeParams) -> np.ndarray:
    """``[A, B, T]`` per-axis coordinates to the ``[B, T, R/2]`` each pair reads."""
    axes = np.asarray([a for a, _ in p.pairs])
    return np.moveaxis(np.asarray(coords, np.float64)[axes], 0, -1)


@mutant("axial_axes_swapped", *_OPS)
def axial_axes_swapped(op, p, x, dtype=None):
    """The height and width coordinates exchanged (the last two axes of position_ids: [0] and [1]
    of (h, w), [1] and [2] of (t, h, w); with centred coordinates each is normalised over its own
    axis first, the normalised values exchanged)."""
    coords = axial.axis_coordinates(x["position_ids"], p).copy()
    h, w = p.num_axes - 2, p.num_axes - 1
    coords[[h, w]] = coords[[w, h]]
    return axial_outputs(op, p, x, positions=_per_pair(coords, p))


@mutant("axial_full_width_frequencies", *_OPS)
def axial_full_width_frequencies(op, p, x, dtype=None):
    """Each axis's j-th frequency ``theta ** (-2j / head_dim)`` (the 1-D rule over the whole head)
    instead of the axis's own rule."""
    w = np.asarray([p.rope_theta ** (-2.0 * j / p.head_dim) for _, j in p.pairs])
    return axial_outputs(op, p, x, freq=w)


@mutant("axial_half_frequencies", *_OPS)
def axial_half_frequencies(op, p, x, dtype=None):
    """Each pair's frequency held in the activation dtype (a frequency buffer or parameter cast with
    the model), the angle product and cos / sin above it; half dtypes only."""
    if dtype not in ("bfloat16", "float16"):
        return None
    return axial_outputs(op, p, x, freq=round_to_dtype(axial.pair_frequencies(p), dtype))


@mutant("axial_pairing", "axial.apply")
def axial_pairing(op, p, x, dtype=None):
    """The layout's per-dim cos/sin applied with the other rotation: rotate_half where the layout
    pairs adjacent dims, a pairwise rotation where it pairs (i, i + R/2); blocks as one half
    rotation over all R dims."""
    R = p.rdim

    def rot(v, c, s):
        v = np.asarray(v, np.float64)
        C, S = axial.full_width(c, p)[:, None], axial.full_width(s, p)[:, None]
        xr = v[..., :R]
        if p.layout == "interleaved":  # rotate_half on repeat_interleave'd cos
            h = R // 2
            other = np.concatenate([-xr[..., h:], xr[..., :h]], -1)
        else:  # a pairwise rotation on cat(a, a)-style cos
            other = np.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
        return np.concatenate([xr * C + other * S, v[..., R:]], -1)
    return axial_outputs(op, p, x, rotate=rot)


@mutant("axial_1d_positions", *_OPS)
def axial_1d_positions(op, p, x, dtype=None):
    """Every pair reads the flattened patch index t (positions ``arange(T)`` on every axis); no form
    for centred coordinates (a flattened index is no patch index of an axis)."""
    pos = np.asarray(x["position_ids"])
    _, B, T = pos.shape
    if T < 2 or p.coordinates != "index":
        return None
    flat = np.broadcast_to(np.arange(T, dtype=np.int64)[None, :, None], (B, T, p.rdim // 2))
    return axial_outputs(op, p, x, positions=flat)


def _centred_mutant(coords_of):
    """A mutant of centred coordinates: ``coords_of(i, n)`` ``[A, B, T]`` float what each axis's
    frequencies multiply, from the indices and the grid; no form for coordinates index."""
    def fn(op, p, x, dtype=None):
        if p.coordinates != "centred":
            return None
        axial.axis_coordinates(x["position_ids"], p)  # the reference's range check
        i = np.asarray(x["position_ids"], np.float64)
        n = np.asarray(p.grid_size, np.float64).reshape(-1, 1, 1)
        return axial_outputs(op, p, x, positions=_per_pair(coords_of(i, n), p))
    return fn


@mutant("axial_corner_coordinates", *_OPS)
def axial_corner_coordinates(op, p, x, dtype=None):
    """The patch's corner instead of its centre: ``2 pi (2 i / n - 1)`` (DIV-AXIAL-CORNER-COORDINATES)."""
    return _centred_mutant(lambda i, n: 2.0 * np.pi * (2.0 * i / n - 1.0))(op, p, x, dtype)


@mutant("axial_unnormalised_coordinates", *_OPS)
def axial_unnormalised_coordinates(op, p, x, dtype=None):
    """The integer patch index as the coordinate, ``i`` (the index rule where centred is meant)."""
    return _centred_mutant(lambda i, n: i)(op, p, x, dtype)


@mutant("axial_centred_without_2pi", *_OPS)
def axial_centred_without_2pi(op, p, x, dtype=None):
    """The patch centre without the 2 pi: ``(2 i + 1) / n - 1``."""
    return _centred_mutant(lambda i, n: axial.centred(i, n))(op, p, x, dtype)


# ---- golden cases ----------------------------------------------------------------------------
# Head widths and thetas: Qwen2.5-VL vision as published (hidden 1280 / 16 heads = 80, theta 10000;
# transformers' Qwen2_5_VLVisionConfig defaults to 3584 / 16 = 224), and transformers 5.24 library
# defaults: Qwen3-VL vision (1152 / 16 = 72), Pixtral
# (head_dim 64), Gemma 4 vision (head_dim 64, theta 100), SAM 3 ViT (1024 / 16 = 64), Inkling 2
# (1024 / 16 = 64, width first), Kimi K2.5 (1152 / 16 = 72, alternate, width first), MiniMax-M3
# (1280 / 16 = 80, three axes of 26 dims).  The figure cases (head_dim 8, theta 100) are hand-derived
# in the spec's statements and in tests/test_axial.py.

def _grid(*rows) -> np.ndarray:
    """position_ids [A, B, T] from per-row lists of coordinate tuples."""
    A = len(rows[0][0])
    return np.asarray([[[tok[a] for tok in row] for row in rows] for a in range(A)], dtype=np.int64)


def _patches(h: int, w: int, h0: int = 0, w0: int = 0) -> list[tuple[int, int]]:
    return [(h0 + i, w0 + j) for i in range(h) for j in range(w)]


# row 0: a 2 x 3 patch grid, then (3, 5) and (5, 3) (swapping the axes changes them); row 1: a
# large image's far corner (up to 4095) and a non-square block
_GRID2 = _grid(_patches(2, 3) + [(3, 5), (5, 3)], [(4095, 4095), (0, 4095), (4095, 0), (17, 2), (2, 17),
                                                   (1023, 511), (100, 7), (7, 100)])
# larger coordinates with shifts that are not multiples of a power of two (a 12345-frame video, a
# 3001-patch-wide panorama)
_GRID_FAR = _grid([(12345, 3), (3, 12345), (3001, 2999), (2999, 3001), (777, 1), (1, 777)])
_GRID3 = _grid([(0, 0, 0), (0, 1, 2), (1, 0, 0), (3, 5, 7), (63, 31, 15)],
               [(7, 5, 3), (0, 4095, 1), (255, 0, 255), (12, 12, 12), (1, 2, 3)])
_FIG = dict(head_dim=8, rope_theta=100.0)
_FIG_POS = _grid([(3, 5)])
_FIG_X = arange_x((1, 1, 1, 8))
_QWEN25 = AxialRopeParams(head_dim=80, rope_theta=10000.0)
_QWEN3 = AxialRopeParams(head_dim=72, rope_theta=10000.0)
_PIXTRAL = AxialRopeParams(head_dim=64, rope_theta=10000.0, frequencies="alternating")
_GEMMA4 = AxialRopeParams(head_dim=64, rope_theta=100.0, layout="blocks")
_SAM3 = AxialRopeParams(head_dim=64, rope_theta=10000.0, layout="interleaved")
_INKLING2 = AxialRopeParams(head_dim=64, rope_theta=10000.0, layout="interleaved", axis_order=(1, 0))
_KIMI = AxialRopeParams(head_dim=72, rope_theta=10000.0, layout="alternate", axis_order=(1, 0))
_STEP37 = AxialRopeParams(head_dim=96, rope_theta=10000.0, axis_order=(1, 0))
_MINIMAX = AxialRopeParams(head_dim=80, rope_theta=10000.0, num_axes=3)
_LFM3 = AxialRopeParams(head_dim=64, rope_theta=1000000.0)


def _apply(cid, p, clauses, pos, note, heads=(4, 2)):
    B, T = pos.shape[1], pos.shape[2]
    return Case(cid, "axial.apply", clauses, p,
                {"q": Gen((B, heads[0], T, p.head_dim)), "k": Gen((B, heads[1], T, p.head_dim)), "position_ids": pos}, note)


_F = "AXIAL-FREQUENCIES"
add_cases(
    Case("axial-figure-split-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT"), AxialRopeParams(**_FIG),
         {"position_ids": _FIG_POS}, "head_dim 8, theta 100, (h, w) = (3, 5): angles [3, 0.3, 5, 0.5]"),
    Case("axial-figure-split-apply", "axial.apply", (_F, "AXIAL-SPLIT"), AxialRopeParams(**_FIG),
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _FIG_POS},
         "the figure end to end, x = 0..7: pairs (p, p + 4)"),
    Case("axial-figure-blocks-apply", "axial.apply", (_F, "AXIAL-BLOCKS"), AxialRopeParams(**_FIG, layout="blocks"),
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _FIG_POS},
         "pairs (0, 2), (1, 3) by [3, 0.3]; (4, 6), (5, 7) by [5, 0.5]"),
    Case("axial-figure-interleaved-apply", "axial.apply", (_F, "AXIAL-INTERLEAVED"),
         AxialRopeParams(**_FIG, layout="interleaved"),
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _FIG_POS},
         "pairs (0, 1), (2, 3), (4, 5), (6, 7) by [3, 0.3, 5, 0.5]"),
    Case("axial-figure-alternate-cos-sin", "axial.cos_sin", (_F, "AXIAL-ALTERNATE", "AXIAL-AXIS-ORDER"),
         AxialRopeParams(**_FIG, layout="alternate", axis_order=(1, 0)), {"position_ids": _FIG_POS},
         "width first, alternating: [5, 3, 0.5, 0.3]"),
    Case("axial-figure-axis-order-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT", "AXIAL-AXIS-ORDER"),
         AxialRopeParams(**_FIG, axis_order=(1, 0)), {"position_ids": _FIG_POS}, "width first: [5, 0.5, 3, 0.3]"),
    Case("axial-figure-pixtral-cos-sin", "axial.cos_sin", ("AXIAL-FREQUENCIES-ALTERNATING", "AXIAL-SPLIT"),
         AxialRopeParams(**_FIG, frequencies="alternating"), {"position_ids": _FIG_POS},
         "F = [1, 0.316228, 0.1, 0.0316228]: [3, 0.3, 1.58114, 0.158114]"),
    Case("axial-figure-3-axes-apply", "axial.apply", (_F, "AXIAL-SPLIT", "AXIAL-PARTIAL"),
         AxialRopeParams(**_FIG, num_axes=3), {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(),
                                               "position_ids": _grid([(2, 3, 5)])},
         "three axes of 2 dims: angles [2, 3, 5] on (0, 3), (1, 4), (2, 5); dims 6, 7 pass through"),
    _apply("axial-qwen2.5-vl-vision", _QWEN25, (_F, "AXIAL-SPLIT", "AXIAL-RELATIVE"), _GRID2,
           "Qwen2.5-VL vision: head 80 (1280 / 16), 20 frequencies per axis, positions up to 4095"),
    Case("axial-qwen2.5-vl-vision-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT"), _QWEN25, {"position_ids": _GRID2},
         "the Qwen2.5-VL grid's per-pair angles"),
    _apply("axial-qwen3-vl-vision", _QWEN3, (_F, "AXIAL-SPLIT", "AXIAL-RELATIVE"), _GRID2,
           "Qwen3-VL vision: head 72 (1152 / 16), 18 frequencies per axis"),
    _apply("axial-lfm3-vl-vision", _LFM3, (_F, "AXIAL-SPLIT"), _GRID2, "LFM3-VL vision: theta 1e6, head 64"),
    _apply("axial-pixtral", _PIXTRAL, ("AXIAL-FREQUENCIES-ALTERNATING", "AXIAL-SPLIT", "AXIAL-RELATIVE"), _GRID2,
           "Pixtral: the 1-D vector over 64 dealt to the height (even) and width (odd)"),
    Case("axial-pixtral-cos-sin", "axial.cos_sin", ("AXIAL-FREQUENCIES-ALTERNATING", "AXIAL-SPLIT"), _PIXTRAL,
         {"position_ids": _GRID2}, "Pixtral's per-pair angles"),
    _apply("axial-gemma4-vision", _GEMMA4, (_F, "AXIAL-BLOCKS", "AXIAL-RELATIVE"), _GRID2,
           "Gemma 4 vision: theta 100, two 32-dim half-paired blocks (height, width)"),
    _apply("axial-sam3-vit", _SAM3, (_F, "AXIAL-INTERLEAVED", "AXIAL-RELATIVE"), _GRID2,
           "SAM 3 ViT: adjacent pairs, height first"),
    Case("axial-sam3-vit-cos-sin", "axial.cos_sin", (_F, "AXIAL-INTERLEAVED"), _SAM3, {"position_ids": _GRID2},
         "SAM 3's per-pair angles"),
    _apply("axial-inkling2-vision", _INKLING2, (_F, "AXIAL-INTERLEAVED", "AXIAL-AXIS-ORDER", "AXIAL-RELATIVE"), _GRID2,
           "Inkling 2: adjacent pairs, width first"),
    _apply("axial-kimi-k2.5-vision", _KIMI, (_F, "AXIAL-ALTERNATE", "AXIAL-AXIS-ORDER", "AXIAL-RELATIVE"), _GRID2,
           "Kimi K2.5: half pairing, width and height frequencies in turn"),
    Case("axial-kimi-k2.5-vision-cos-sin", "axial.cos_sin", (_F, "AXIAL-ALTERNATE", "AXIAL-AXIS-ORDER"), _KIMI,
         {"position_ids": _GRID2}, "Kimi K2.5's per-pair angles"),
    _apply("axial-step3.7-vision", _STEP37, (_F, "AXIAL-SPLIT", "AXIAL-AXIS-ORDER"), _GRID2,
           "Step 3.7 vision: split, width first, head 96"),
    _apply("axial-minimax-m3-vision", _MINIMAX, (_F, "AXIAL-SPLIT", "AXIAL-PARTIAL", "AXIAL-RELATIVE"), _GRID3,
           "MiniMax-M3 vision: three axes (t, h, w) of 26 dims; 78 of 80 rotate", heads=(2, 1)),
    _apply("axial-blocks-width-first", AxialRopeParams(head_dim=64, rope_theta=100.0, layout="blocks",
                                                       axis_order=(1, 0)),
           (_F, "AXIAL-BLOCKS", "AXIAL-AXIS-ORDER", "AXIAL-RELATIVE"), _GRID2,
           "Gemma 4's blocks with the width's block first"),
    _apply("axial-3-axes-order-201", AxialRopeParams(head_dim=80, rope_theta=10000.0, num_axes=3, axis_order=(2, 0, 1)),
           (_F, "AXIAL-SPLIT", "AXIAL-AXIS-ORDER", "AXIAL-PARTIAL"), _GRID3,
           "three axes laid out (w, t, h): axis 2's 13 angles first", heads=(2, 1)),
    Case("axial-3-axes-interleaved-order-120-cos-sin", "axial.cos_sin", (_F, "AXIAL-INTERLEAVED", "AXIAL-AXIS-ORDER"),
         AxialRopeParams(head_dim=48, rope_theta=500.0, num_axes=3, layout="interleaved", axis_order=(1, 2, 0)),
         {"position_ids": _GRID3}, "three axes, adjacent pairs, laid out (h, w, t)"),
    _apply("axial-far-coordinates", _QWEN25, (_F, "AXIAL-SPLIT", "AXIAL-RELATIVE"), _GRID_FAR,
           "coordinates to 12345, differences 2998, 12342, 776 (no power of two)"),
    _apply("axial-pixtral-far-coordinates", _PIXTRAL, ("AXIAL-FREQUENCIES-ALTERNATING", "AXIAL-SPLIT"), _GRID_FAR,
           "Pixtral's alternating frequencies at far coordinates"),
    Case("axial-minimax-m3-vision-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT"), _MINIMAX, {"position_ids": _GRID3},
         "MiniMax-M3's 39 per-pair angles"),
)


# ---- centred coordinates (AXIAL-COORDINATES-CENTRED) -----------------------------------------
# EoMT-DINOv3 as transformers 5.24 defines it: EomtDinov3Config's hidden_size 1024 over 16 heads (head
# 64), rope_theta 100, image_size 640 / patch_size 16 (a 40 x 40 grid; the model takes the grid of
# each image); its rotary module tabulates the whole grid row by row, so the full-grid cases below
# are what the model computes for a 48 x 80 (3 x 5 patches), 64 x 112, ... pixel image.

def _full_grid(h: int, w: int, batch: int = 1) -> np.ndarray:
    """position_ids [2, batch, h * w]: every patch of an h x w grid, row by row (the model's order)."""
    return _grid(*[_patches(h, w)] * batch)


_CENTRED = "AXIAL-COORDINATES-CENTRED"
_CFIG = AxialRopeParams(**_FIG, coordinates="centred", grid_size=(2, 4))
_CFIG_POS = _grid([(1, 0)])


def _eomt(grid, head_dim: int = 64, theta: float = 100.0, **kw) -> AxialRopeParams:
    return AxialRopeParams(head_dim=head_dim, rope_theta=theta, coordinates="centred", grid_size=grid, **kw)


add_cases(
    Case("axial-figure-centred-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT", _CENTRED), _CFIG,
         {"position_ids": _CFIG_POS}, "grid (2, 4), patch (1, 0): c = (0.5, -0.75), angles 2 pi [0.5, 0.05, -0.75, "
                                      "-0.075]"),
    Case("axial-figure-centred-apply", "axial.apply", (_F, "AXIAL-SPLIT", _CENTRED), _CFIG,
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": _CFIG_POS},
         "the centred figure end to end, x = 0..7: pairs (p, p + 4)"),
    _apply("axial-eomt-dinov3-grid-3x5", _eomt((3, 5)), (_F, "AXIAL-SPLIT", _CENTRED), _full_grid(3, 5),
           "EoMT-DINOv3 (head 64, theta 100): every patch of a 3 x 5 grid, row by row", heads=(2, 1)),
    Case("axial-eomt-dinov3-grid-3x5-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT", _CENTRED), _eomt((3, 5)),
         {"position_ids": _full_grid(3, 5)}, "the 3 x 5 grid's per-pair angles"),
    Case("axial-eomt-dinov3-grid-7x4-cos-sin", "axial.cos_sin", (_F, "AXIAL-SPLIT", _CENTRED), _eomt((7, 4)),
         {"position_ids": _full_grid(7, 4)}, "a tall 7 x 4 grid: the height's centres over 7, the width's over 4"),
    _apply("axial-eomt-dinov3-grid-2x6-batch", _eomt((2, 6), head_dim=32), (_F, "AXIAL-SPLIT", _CENTRED),
           _full_grid(2, 6, batch=2), "two images of 2 x 6 patches, head 32", heads=(2, 1)),
    _apply("axial-eomt-dinov3-grid-1x8", _eomt((1, 8)), (_F, "AXIAL-SPLIT", _CENTRED), _full_grid(1, 8),
           "one row of patches: the height's centre c = 0 (angle 0) everywhere"),
    _apply("axial-centred-theta-1e4-grid-5x9", _eomt((5, 9), head_dim=32, theta=10000.0),
           (_F, "AXIAL-SPLIT", _CENTRED), _full_grid(5, 9), "theta 10000, head 32, a 5 x 9 grid (odd: centre c = 0)",
           heads=(2, 1)),
    _apply("axial-eomt-dinov3-default-grid-scattered", _eomt((40, 40)), (_F, "AXIAL-SPLIT", _CENTRED),
           _grid([(0, 0), (0, 39), (39, 0), (39, 39), (19, 20), (20, 19)],
                 [(7, 33), (33, 7), (1, 38), (38, 1), (20, 20), (0, 21)]),
           "the default config's 40 x 40 grid (640 / 16): corners, centre and scattered patches", heads=(2, 1)),
    Case("axial-centred-interleaved-width-first-cos-sin", "axial.cos_sin",
         (_F, "AXIAL-INTERLEAVED", "AXIAL-AXIS-ORDER", _CENTRED),
         _eomt((3, 4), theta=1000.0, layout="interleaved", axis_order=(1, 0)), {"position_ids": _full_grid(3, 4)},
         "centred coordinates with adjacent pairs, width first (the rule is the layout's, not EoMT's)"),
    _apply("axial-centred-3-axes-blocks", _eomt((2, 3, 5), head_dim=48, theta=500.0, num_axes=3, layout="blocks"),
           (_F, "AXIAL-BLOCKS", _CENTRED), _grid([(0, 0, 0), (1, 2, 4), (0, 1, 3), (1, 0, 2)]),
           "three axes (t, h, w) over 2 x 3 x 5, one block per axis", heads=(2, 1)),
)


# the call forms of axial.apply that keep each token's positions (ROPE-CALL-FORM): tokens, token-major, int32, in place,
# strided
layout_forms("axial.apply")

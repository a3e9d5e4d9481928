"""Axial (two- and three-dimensional) RoPE of vision encoders, NumPy float64 reference.

Clauses AXIAL-FREQUENCIES (``rope_theta ** (-2j / axis_dim)`` shared by the axes),
AXIAL-FREQUENCIES-ALTERNATING (Pixtral: every A-th entry of the 1-D vector over ``A axis_dim``),
AXIAL-SPLIT / AXIAL-BLOCKS / AXIAL-INTERLEAVED / AXIAL-ALTERNATE (which dims form a pair and which
axis and frequency each pair takes), AXIAL-AXIS-ORDER and AXIAL-PARTIAL (dims ``>= A axis_dim``
pass through).  Primary sources (HF transformers 5.24): ``models/qwen2_5_vl/modeling_qwen2_5_vl.py
::Qwen2_5_VLVisionRotaryEmbedding`` (``compute_axial_rope_parameters``, ``recomposition_frequencies``)
and ``apply_rotary_pos_emb_vision``; ``models/gemma4/modeling_gemma4.py::Gemma4VisionRotaryEmbedding``,
``apply_multidimensional_rope``; ``models/sam3/modeling_sam3.py::Sam3ViTRotaryEmbedding``,
``apply_rotary_pos_emb_2d``; ``models/kimi_k25/modeling_kimi_k25.py::Kimi_K25VisionRotaryEmbedding``;
``models/pixtral/modeling_pixtral.py::PixtralVisionRotaryEmbedding``; Heo et al., "Rotary Position
Embedding for Vision Transformer" (arXiv:2403.13298), section 3.2 (RoPE-Axial).

AXIAL-COORDINATES-CENTRED (DINOv3 / EoMT-DINOv3, coordinates ``centred``): the integer patch index
``i`` of axis a (of ``grid_size[a]`` patches) becomes the patch centre ``c = (2 i + 1) / grid_size[a]
- 1`` in (-1, 1), and the angle of a pair of that axis is ``2 pi c f``.  Source: HF transformers 5.24
``models/eomt_dinov3/modeling_eomt_dinov3.py::get_patches_center_coordinates`` and
``EomtDinov3RotaryEmbedding.forward`` (eval mode: no coordinate augmentation).

Shapes and dtypes: ``position_ids`` integer ``[A, B, T]`` (height, width; or temporal, height,
width); cos/sin float64 ``[B, T, A axis_dim / 2]``, one angle per rotated pair in the layout's pair
order; q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]`` float64.
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import AxialRopeParams

from . import rope


def positions(position_ids, params: AxialRopeParams) -> np.ndarray:
    """``position_ids`` checked: integer ``[num_axes, B, T]``."""
    pos = np.asarray(position_ids)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"AXIAL-SPLIT: position_ids must be integers, got {pos.dtype}")
    if pos.ndim != 3 or pos.shape[0] != params.num_axes:
        raise ValueError(f"AXIAL-SPLIT: position_ids must be [{params.num_axes}, B, T], got {list(pos.shape)}")
    return pos


def axis_frequencies(params: AxialRopeParams) -> np.ndarray:
    """``[num_axes, axis_dim / 2]`` float64: row a the frequencies of axis a.

    shared (AXIAL-FREQUENCIES): ``rope_theta ** (-2j / axis_dim)`` on every row; alternating
    (AXIAL-FREQUENCIES-ALTERNATING): ``F[A j + a]`` with ``F[k] = rope_theta ** (-2k / (A axis_dim))``.
    """
    A, n = params.num_axes, params.adim // 2
    if params.frequencies == "shared":
        f = params.rope_theta ** (-2.0 * np.arange(n) / params.adim)
        return np.tile(f, (A, 1))
    full = params.rope_theta ** (-2.0 * np.arange(A * n) / (A * params.adim))
    return np.stack([full[a::A] for a in range(A)])


def pair_frequencies(params: AxialRopeParams) -> np.ndarray:
    """The frequency of each rotated pair, ``[A axis_dim / 2]``, in pair order."""
    f = axis_frequencies(params)
    return np.asarray([f[a, j] for a, j in params.pairs])


def pair_positions(position_ids, params: AxialRopeParams) -> np.ndarray:
    """The position each rotated pair reads, ``[B, T, A axis_dim / 2]`` int64: ``position_ids[axis(p)]``."""
    pos = positions(position_ids, params)
    axes = np.asarray([a for a, _ in params.pairs])
    return np.moveaxis(pos[axes], 0, -1).astype(np.int64)


def centred(index, n) -> np.ndarray:
    """AXIAL-COORDINATES-CENTRED: the centre of patch ``index`` of ``n`` along one axis, normalised to
    (-1, 1): ``(2 index + 1) / n - 1`` (n = 4: -0.75, -0.25, 0.25, 0.75), float64."""
    return (2.0 * np.asarray(index, np.float64) + 1.0) / np.asarray(n, np.float64) - 1.0


def axis_coordinates(position_ids, params: AxialRopeParams) -> np.ndarray:
    """float64 ``[A, B, T]``: what the frequencies of each axis multiply.  coordinates ``index``:
    the position itself; ``centred`` (AXIAL-COORDINATES-CENTRED): ``2 pi c``, ``c`` the patch centre
    (:func:`centred`) over ``grid_size[a]`` patches; an index outside ``[0, grid_size[a])`` is a
    ``ValueError``."""
    pos = positions(position_ids, params)
    if params.coordinates == "index":
        return pos.astype(np.float64)
    n = np.asarray(params.grid_size, np.int64).reshape(-1, 1, 1)
    bad = (pos < 0) | (pos >= n)
    if bad.any():
        a, b, t = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"AXIAL-COORDINATES-CENTRED: position_ids[{a}, {b}, {t}] = {int(pos[a, b, t])} is not a patch "
                         f"index of axis {a} (grid_size {list(params.grid_size)}: 0 .. {int(n[a, 0, 0]) - 1})")
    return 2.0 * np.pi * centred(pos, n)


def pair_coordinates(position_ids, params: AxialRopeParams) -> np.ndarray:
    """What each rotated pair's frequency multiplies, float64 ``[B, T, A axis_dim / 2]``: the
    :func:`axis_coordinates` of the pair's axis."""
    coords = axis_coordinates(position_ids, params)
    axes = np.asarray([a for a, _ in params.pairs])
    return np.moveaxis(coords[axes], 0, -1)


def angles(position_ids, params: AxialRopeParams) -> np.ndarray:
    """``phi[b, t, p] = x[axis(p), b, t] * freq(p)``, float64 ``[B, T, A axis_dim / 2]``: x the
    position (coordinates index) or ``2 pi`` times the patch centre (centred)."""
    return pair_coordinates(position_ids, params) * pair_frequencies(params)


def cos_sin(position_ids, params: AxialRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """``cos(phi)``, ``sin(phi)`` per rotated pair ``[B, T, A axis_dim / 2]`` (no attention factor)."""
    phi = angles(position_ids, params)
    return np.cos(phi), np.sin(phi)


def apply_with_cos_sin(x, c, s, params: AxialRopeParams) -> np.ndarray:
    """Rotate ``x [B, H, T, D]`` by per-pair cos/sin ``[B, T, A axis_dim / 2]`` with the layout's pairs:
    split / alternate ``(p, p + R/2)`` over the first R = A axis_dim dims, interleaved ``(2p, 2p + 1)``,
    blocks ``(a ad + j, a ad + j + ad/2)`` within block a; dims ``>= R`` unchanged (AXIAL-PARTIAL)."""
    R, ad = params.rdim, params.adim
    if params.layout in ("split", "alternate"):
        return rope.apply_with_cos_sin(x, c, s, R, "half")
    if params.layout == "interleaved":
        return rope.apply_with_cos_sin(x, c, s, R, "interleaved")
    y = np.array(x, np.float64, copy=True)
    n = ad // 2
    for b in range(params.num_axes):
        sl = slice(b * ad, (b + 1) * ad)
        y[..., sl] = rope.apply_with_cos_sin(y[..., sl], c[..., b * n:(b + 1) * n], s[..., b * n:(b + 1) * n], ad, "half")
    return y


def apply(q, k, position_ids, params: AxialRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """Axial RoPE on q ``[B, Hq, T, D]`` and k ``[B, Hk, T, D]`` (AXIAL-*)."""
    c, s = cos_sin(position_ids, params)
    return apply_with_cos_sin(q, c, s, params), apply_with_cos_sin(k, c, s, params)


def full_width(c, params: AxialRopeParams) -> np.ndarray:
    """The per-dim vector ``[B, T, R]`` an implementation multiplies q by (HF's recomposed cos):
    split / alternate ``cat(c, c)``, interleaved ``repeat_interleave(c, 2)``, blocks ``cat(c_b, c_b)``
    per block."""
    c = np.asarray(c)
    if params.layout in ("split", "alternate"):
        return np.concatenate([c, c], -1)
    if params.layout == "interleaved":
        return np.repeat(c, 2, axis=-1)
    n = params.adim // 2
    return np.concatenate([np.concatenate([c[..., b * n:(b + 1) * n]] * 2, -1) for b in range(params.num_axes)], -1)

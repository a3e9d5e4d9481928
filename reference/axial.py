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


def angles(position_ids, params: AxialRopeParams) -> np.ndarray:
    """``phi[b, t, p] = position_ids[axis(p), b, t] * freq(p)``, float64 ``[B, T, A axis_dim / 2]``."""
    return pair_positions(position_ids, params).astype(np.float64) * pair_frequencies(params)


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

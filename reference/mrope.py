"""Multimodal RoPE (M-RoPE) of Qwen2-VL and Qwen3-VL text attention, NumPy float64 reference.

Clauses MROPE-SECTIONS (contiguous sections, Qwen2-VL / Qwen2.5-VL), MROPE-INTERLEAVED (Qwen3-VL)
and MROPE-TEXT-REDUCES (t = h = w gives 1-D RoPE).  Primary sources: HF transformers 5.24
``models/qwen2_vl/modeling_qwen2_vl.py::Qwen2VLRotaryEmbedding.forward``, ``recomposition_frequencies``
and ``apply_rotary_pos_emb`` (half pairing over ``cat(a, a)``);
``models/qwen3_vl/modeling_qwen3_vl.py::Qwen3VLTextRotaryEmbedding.recomposition_frequencies``.

Shapes and dtypes: ``position_ids`` integer ``[3, B, T]`` (temporal, height, width); cos/sin
float64 half width ``[B, T, head_dim/2]``; q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]`` float64.
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import MRopeParams

from . import rope, rope_scaling


def _positions(position_ids) -> np.ndarray:
    pos = np.asarray(position_ids)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"MROPE-SECTIONS: position_ids must be integers, got {pos.dtype}")
    if pos.ndim != 3 or pos.shape[0] != 3:
        raise ValueError(f"MROPE-SECTIONS: position_ids must be [3, B, T] (t, h, w), got {list(pos.shape)}")
    return pos


def inv_freq(params: MRopeParams) -> np.ndarray:
    """``rope_theta ** (-2k / head_dim)``, k = 0 .. head_dim/2 - 1 (ROPE-INV-FREQ over the whole head)."""
    return rope_scaling.base_inv_freq(params.rope_theta, params.head_dim)


def axis_positions(position_ids, params: MRopeParams) -> np.ndarray:
    """Position each frequency uses, ``[B, T, head_dim/2]`` int64: ``position_ids[axis(k), b, t]``.

    axis(k) by ``params.layout`` (MROPE-SECTIONS contiguous, MROPE-INTERLEAVED interleaved);
    see :func:`posenc.spec.models.mrope_axes`.
    """
    pos = _positions(position_ids)
    axes = np.asarray(params.axes)
    return np.moveaxis(pos[axes], 0, -1).astype(np.int64)  # [half, B, T] -> [B, T, half]


def angles(position_ids, params: MRopeParams) -> np.ndarray:
    """``phi[b, t, k] = position_ids[axis(k), b, t] * inv_freq[k]``, float64 ``[B, T, head_dim/2]``."""
    return axis_positions(position_ids, params).astype(np.float64) * inv_freq(params)


def cos_sin(position_ids, params: MRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """Half-width cos and sin ``[B, T, head_dim/2]`` (HF's full width is ``cat(c, c)``)."""
    phi = angles(position_ids, params)
    return np.cos(phi), np.sin(phi)


def apply(q, k, position_ids, params: MRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """M-RoPE on q ``[B, Hq, T, D]`` and k ``[B, Hk, T, D]``: half pairing (i, i + D/2) with
    the recomposed angles (MROPE-SECTIONS / MROPE-INTERLEAVED)."""
    c, s = cos_sin(position_ids, params)
    return (rope.apply_with_cos_sin(q, c, s, params.head_dim, "half"),
            rope.apply_with_cos_sin(k, c, s, params.head_dim, "half"))


def multipliers(t: int, h: int, w: int, params: MRopeParams) -> list[int]:
    """Per-frequency position multipliers for one token at (t, h, w) (the G.1 figures)."""
    return axis_positions(np.array([[[t]], [[h]], [[w]]], np.int64), params)[0, 0].tolist()

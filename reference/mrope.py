"""Multimodal RoPE (M-RoPE) of Qwen2-VL and Qwen3-VL text attention, NumPy float64 reference.

Clauses MROPE-SECTIONS (contiguous sections, Qwen2-VL / Qwen2.5-VL), MROPE-INTERLEAVED (Qwen3-VL),
MROPE-HW-ALTERNATING (ERNIE 4.5-VL), MROPE-PAIR-INTERLEAVED (GLM-4V's adjacent pairs),
MROPE-TEXT-REDUCES (t = h = w gives 1-D RoPE), MROPE-ROPE-TYPE (the frequencies of the configured
rope_type), MROPE-ATTENTION-SCALING (cos and sin times the attention factor) and MROPE-PARTIAL
(the sections split the rotary_dim/2 frequencies; the tail passes through).  The scaled
frequencies are :func:`posenc.reference.rope.inv_freq` of ``params.rope`` (never re-derived here).  Primary sources: HF transformers 5.24
``models/qwen2_vl/modeling_qwen2_vl.py::Qwen2VLRotaryEmbedding.forward``, ``recomposition_frequencies``
and ``apply_rotary_pos_emb`` (half pairing over ``cat(a, a)``);
``models/qwen3_vl/modeling_qwen3_vl.py::Qwen3VLTextRotaryEmbedding.recomposition_frequencies``.

Shapes and dtypes: ``position_ids`` integer ``[3, B, T]`` (temporal, height, width); cos/sin
float64 half width ``[B, T, rotary_dim/2]``; q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]`` float64.
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


def seq_len_of(position_ids) -> int:
    """``max(position_ids) + 1`` over all three axes: the length dynamic / longrope frequencies
    depend on (HF's ``dynamic_rope_update`` takes ``torch.max`` of the ``[3, B, T]`` ids)."""
    return rope.seq_len_of(position_ids)


def inv_freq_and_factor(params: MRopeParams, seq_len=None) -> tuple[np.ndarray, float]:
    """``(inv_freq [rotary_dim/2], attention_factor)`` of ``params.rope`` (MROPE-ROPE-TYPE,
    MROPE-ATTENTION-SCALING): the 1-D rule of the rope_type over rotary_dim."""
    return rope.inv_freq(params.rope, seq_len)


def inv_freq(params: MRopeParams, seq_len=None) -> np.ndarray:
    """Inverse frequencies ``[rotary_dim/2]``: ``rope_theta ** (-2k / rotary_dim)`` for the default
    rope_type (ROPE-INV-FREQ), else the rope_type's scaled rule (MROPE-ROPE-TYPE)."""
    return inv_freq_and_factor(params, seq_len)[0]


def attention_factor(params: MRopeParams, seq_len=None) -> float:
    """The factor multiplying cos and sin (MROPE-ATTENTION-SCALING; 1 unless yarn / longrope or explicit)."""
    return float(inv_freq_and_factor(params, seq_len)[1])


def axis_positions(position_ids, params: MRopeParams) -> np.ndarray:
    """Position each frequency uses, ``[B, T, rotary_dim/2]`` int64: ``position_ids[axis(k), b, t]``.

    axis(k) by ``params.layout`` (MROPE-SECTIONS contiguous, MROPE-INTERLEAVED interleaved);
    see :func:`posenc.spec.models.mrope_axes`.
    """
    pos = _positions(position_ids)
    axes = np.asarray(params.axes)
    return np.moveaxis(pos[axes], 0, -1).astype(np.int64)  # [half, B, T] -> [B, T, half]


def angles(position_ids, params: MRopeParams) -> np.ndarray:
    """``phi[b, t, k] = position_ids[axis(k), b, t] * inv_freq[k]``, float64 ``[B, T, rotary_dim/2]``."""
    return axis_positions(position_ids, params).astype(np.float64) * inv_freq(params, seq_len_of(position_ids))


def cos_sin(position_ids, params: MRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """Half-width ``a cos`` and ``a sin`` ``[B, T, rotary_dim/2]`` (HF's full width is
    ``cat(c, c)``), a the attention factor (MROPE-ATTENTION-SCALING)."""
    phi = angles(position_ids, params)
    a = attention_factor(params, seq_len_of(position_ids))
    return a * np.cos(phi), a * np.sin(phi)


def apply(q, k, position_ids, params: MRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """M-RoPE on q ``[B, Hq, T, D]`` and k ``[B, Hk, T, D]``: the pairing's pairs over the first
    rotary_dim dims (half (k, k + r/2), MROPE-SECTIONS; interleaved (2k, 2k + 1),
    MROPE-PAIR-INTERLEAVED) rotated by the recomposed angles (MROPE-SECTIONS / -INTERLEAVED /
    -HW-ALTERNATING); dims ``>= rotary_dim`` unchanged (MROPE-PARTIAL)."""
    c, s = cos_sin(position_ids, params)
    return (rope.apply_with_cos_sin(q, c, s, params.rdim, params.pairing),
            rope.apply_with_cos_sin(k, c, s, params.rdim, params.pairing))


def multipliers(t: int, h: int, w: int, params: MRopeParams) -> list[int]:
    """Per-frequency position multipliers for one token at (t, h, w) (the G.1 figures)."""
    return axis_positions(np.array([[[t]], [[h]], [[w]]], np.int64), params)[0, 0].tolist()

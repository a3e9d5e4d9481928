"""Position-dependent query scaling, NumPy float64 reference.

Clauses QSCALE-MISTRAL (Ministral 3 / Mistral 4 ``llama_4_scaling_beta``: ``s(p) = 1 + beta
ln(1 + floor(p / original_max_position_embeddings))``), QSCALE-LLAMA4 (Llama 4's
``attn_temperature_tuning``: ``s(p) = 1 + attn_scale ln(1 + floor((p + 1) / floor_scale))``) and
QSCALE-POSITIONS (each row's own positions).  Primary sources (HF transformers 5.24):
``models/ministral3/modeling_ministral3.py::get_llama_4_attn_scale`` and
``Ministral3Attention.forward`` (q after RoPE times ``s(position_ids)``);
``models/llama4/modeling_llama4.py::Llama4TextAttention.forward``; Nakanishi, "Scalable-Softmax Is
Superior for Attention" (arXiv:2501.19399), the log-length scaling both rules approximate.

Shapes and dtypes: q float64 ``[B, H, T, D]``, position_ids integer ``[B, T]``; the scale
``[B, T]`` float64.
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import QueryScaleParams


def scale(position_ids, params: QueryScaleParams) -> np.ndarray:
    """``s[b, t]``, float64 ``[B, T]`` (QSCALE-MISTRAL / QSCALE-LLAMA4)."""
    pos = np.asarray(position_ids)
    if not np.issubdtype(pos.dtype, np.integer) or pos.ndim != 2:
        raise ValueError(f"QSCALE-POSITIONS: position_ids must be integer [B, T], got {pos.dtype} {list(pos.shape)}")
    if pos.size and pos.min() < 0:
        raise ValueError(f"QSCALE-POSITIONS: position ids must be >= 0, got {int(pos.min())}")
    p = pos.astype(np.int64) + (1 if params.form == "llama4" else 0)
    return 1.0 + params.beta * np.log1p(np.floor_divide(p, params.scale_length).astype(np.float64))


def apply(q, position_ids, params: QueryScaleParams) -> np.ndarray:
    """``q * s`` broadcast over heads and dims: ``[B, H, T, D]`` float64."""
    return np.asarray(q, np.float64) * scale(position_ids, params)[:, None, :, None]

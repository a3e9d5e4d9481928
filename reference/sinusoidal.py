"""Sinusoidal absolute position encodings, NumPy float64 reference.

Primary source: Vaswani et al., *Attention Is All You Need* (arXiv:1706.03762), section 3.5.
Layouts: interleaved (PE[p, 2i] = sin, PE[p, 2i+1] = cos; HF transformers 5.24
``models/distilbert/modeling_distilbert.py::_create_sinusoidal_embeddings``) and concatenated
[sin | cos] (``models/marian/modeling_marian.py::MarianSinusoidalPositionalEmbedding.create_weight``).
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import SinusoidalParams


def column_angles(position_ids, params: SinusoidalParams) -> np.ndarray:
    """Angles per output column, ``[..., D]`` float64 radians, in the clause's layout.

    SIN-VASWANI-INTERLEAVED: column j uses ``p * base ** (-2 * (j // 2) / D)``; odd D gives an
    extra sin column (exponent (D-1)/D).
    SIN-VASWANI-CONCAT: the sin block has ``ceil(D/2)`` columns with exponent ``2i/D``; the cos
    block has ``floor(D/2)`` columns with exponent ``2i/D``.
    """
    p = np.asarray(position_ids)
    if not np.issubdtype(p.dtype, np.integer):
        raise TypeError(f"SIN: position_ids must be integers, got {p.dtype}")
    D = params.dim
    if params.layout == "interleaved":
        expo = 2.0 * (np.arange(D) // 2) / D
    else:
        ns, nc = (D + 1) // 2, D // 2
        expo = np.concatenate([2.0 * np.arange(ns) / D, 2.0 * np.arange(nc) / D])
    return p.astype(np.float64)[..., None] * params.base ** (-expo)


def is_sin_column(params: SinusoidalParams) -> np.ndarray:
    """Boolean ``[D]``: which columns hold sin (the others hold cos)."""
    D = params.dim
    if params.layout == "interleaved":
        return np.arange(D) % 2 == 0
    return np.arange(D) < (D + 1) // 2


def table(position_ids, params: SinusoidalParams) -> np.ndarray:
    """PE rows for ``position_ids`` (integers, any shape ``S``) -> ``S + [D]`` float64.

    Clauses: SIN-VASWANI-INTERLEAVED or SIN-VASWANI-CONCAT, by ``params.layout``.
    """
    phi = column_angles(position_ids, params)
    return np.where(is_sin_column(params), np.sin(phi), np.cos(phi))

"""Sinusoidal absolute position encodings, NumPy float64 reference.

Primary source: Vaswani et al., *Attention Is All You Need* (arXiv:1706.03762), section 3.5.
Layouts: interleaved (PE[p, 2i] = sin, PE[p, 2i+1] = cos; HF transformers 5.24
``models/distilbert/modeling_distilbert.py::_create_sinusoidal_embeddings``) and concatenated
[sin | cos] (``models/marian/modeling_marian.py::MarianSinusoidalPositionalEmbedding.create_weight``).

The h - 1 divisor family (``params.variant`` t2t / fairseq / whisper), always [sin | cos]:
tensor2tensor ``tensor2tensor/layers/common_attention.py::get_timing_signal_1d`` (SIN-T2T),
fairseq 0.12.2 ``fairseq/modules/sinusoidal_positional_embedding.py`` + ``fairseq/utils.py::
make_positions`` and its HF port ``models/m2m_100/modeling_m2m_100.py::
M2M100SinusoidalPositionalEmbedding`` (SIN-FAIRSEQ-POSITIONS), OpenAI Whisper
``whisper/model.py::sinusoids`` and HF ``models/whisper/modeling_whisper.py::sinusoids``
(SIN-WHISPER).
"""

from __future__ import annotations

import numpy as np

from posenc.spec.errors import DegenerateWidth
from posenc.spec.models import SinusoidalParams


def check_width(params: SinusoidalParams) -> None:
    """Raise :class:`DegenerateWidth` where the variant's rule cannot build width ``D``.

    fairseq (SIN-FAIRSEQ-POSITIONS): h = D // 2 == 1 (D = 2 or 3) divides by h - 1 = 0.
    whisper (SIN-WHISPER): odd D, and D = 2 (h - 1 = 0).  t2t clamps the divisor (SIN-T2T) and
    vaswani has no divisor: neither raises.
    """
    D, v = params.dim, params.variant
    if v == "whisper" and D % 2:
        raise DegenerateWidth("SIN-WHISPER", D, "Whisper's sinusoids need an even number of channels")
    if v in ("fairseq", "whisper") and D // 2 == 1:
        clause = "SIN-WHISPER" if v == "whisper" else "SIN-FAIRSEQ-POSITIONS"
        raise DegenerateWidth(clause, D, f"h = D // 2 = 1 makes the {v} divisor h - 1 zero "
                                         "(tensor2tensor clamps it to 1; this rule does not)")


def h_minus_1_inv_freq(params: SinusoidalParams) -> np.ndarray:
    """``base ** (-i / max(h - 1, 1))`` for i < h = D // 2 (float64): 1 down to 1/base."""
    h = params.dim // 2
    return params.base ** (-np.arange(h, dtype=np.float64) / max(h - 1, 1))


def h_minus_1_exponents(params: SinusoidalParams) -> np.ndarray:
    """Exponent ``e_j`` per output column of the h - 1 table (``inv = base ** -e``); 0 for the zero column."""
    h = params.dim // 2
    e = np.arange(h, dtype=np.float64) / max(h - 1, 1)
    return np.concatenate([e, e, np.zeros(params.dim - 2 * h)])


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
    if params.h_minus_1:
        check_width(params)
        w = h_minus_1_inv_freq(params)
        phi = p.astype(np.float64)[..., None] * w
        return np.concatenate([phi, phi, np.zeros(phi.shape[:-1] + (D - 2 * w.size,))], -1)
    if params.layout == "interleaved":
        expo = 2.0 * (np.arange(D) // 2) / D
    else:
        ns, nc = (D + 1) // 2, D // 2
        expo = np.concatenate([2.0 * np.arange(ns) / D, 2.0 * np.arange(nc) / D])
    return p.astype(np.float64)[..., None] * params.base ** (-expo)


def is_sin_column(params: SinusoidalParams) -> np.ndarray:
    """Boolean ``[D]``: which columns hold sin (the others hold cos)."""
    D = params.dim
    if params.h_minus_1:
        return np.arange(D) < D // 2
    if params.layout == "interleaved":
        return np.arange(D) % 2 == 0
    return np.arange(D) < (D + 1) // 2


def table(position_ids, params: SinusoidalParams) -> np.ndarray:
    """PE rows for ``position_ids`` (integers, any shape ``S``) -> ``S + [D]`` float64.

    Clauses: SIN-VASWANI-INTERLEAVED or SIN-VASWANI-CONCAT, by ``params.layout``, for
    ``variant='vaswani'``.  The h - 1 family: ``[sin(p w) | cos(p w)]`` with ``w = base **
    (-i / max(h - 1, 1))``, h = D // 2, and a zero column appended for odd D (SIN-T2T);
    ``fairseq`` also zeroes every row equal to ``padding_idx`` (SIN-FAIRSEQ-POSITIONS: here
    ``position_ids`` are fairseq's positions, i.e. table rows); ``whisper`` (SIN-WHISPER).
    Raises :class:`DegenerateWidth` for fairseq at D // 2 == 1 and for whisper at odd D or D = 2.
    """
    phi = column_angles(position_ids, params)
    pe = np.where(is_sin_column(params), np.sin(phi), np.cos(phi))
    if params.h_minus_1 and params.dim % 2:
        pe[..., -1] = 0.0  # the appended zero column (t2t, fairseq)
    if params.variant == "fairseq":
        pe = np.where((np.asarray(position_ids) == params.padding_idx)[..., None], 0.0, pe)
    return pe


def fairseq_positions(input_ids, padding_idx: int, cache_length: int = 0) -> np.ndarray:
    """SIN-FAIRSEQ-POSITIONS / LEARNED-ROBERTA-POSITIONS: ``(cumsum(mask) + cache_length) * mask +
    padding_idx`` with ``mask = input_ids != padding_idx`` (cumsum over the T given tokens).

    Real tokens count from padding_idx + 1 at the first non-pad token (left padding is
    handled); pads read padding_idx.  ``cache_length`` is added as HF does
    (``create_position_ids_from_input_ids``): it counts every cached slot, pads included.
    Returns int64 ``[B, T]``.
    """
    ids = np.asarray(input_ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"input_ids must be integers, got {ids.dtype}")
    if cache_length < 0:
        raise ValueError(f"cache_length must be >= 0, got {cache_length}")
    m = (ids != padding_idx).astype(np.int64)
    return (np.cumsum(m, axis=-1) + int(cache_length)) * m + int(padding_idx)


def fairseq_embeddings(input_ids, params: SinusoidalParams, cache_length: int = 0) -> np.ndarray:
    """SIN-FAIRSEQ-POSITIONS end to end (M2M100 / fairseq forward): ``table(fairseq_positions(...))``
    ``[B, T, D]``; pad tokens read the zero row ``padding_idx``."""
    if params.variant != "fairseq":
        raise ValueError(f"SIN-FAIRSEQ-POSITIONS needs variant 'fairseq', got {params.variant!r}")
    return table(fairseq_positions(input_ids, params.padding_idx, cache_length), params)

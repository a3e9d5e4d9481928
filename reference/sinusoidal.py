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

Options of every variant (spec 0.5.0; ``params.order``, ``params.units``, ``params.scale``):
``cos_first`` swaps the blocks of a [sin | cos] table (SIN-ORDER-COS-FIRST: transformers
``models/musicgen/modeling_musicgen.py::MusicgenSinusoidalPositionalEmbedding.get_embedding``,
audiocraft ``audiocraft/modules/transformer.py::create_sin_embedding``, moshi
``moshi/moshi/modules/transformer.py::create_sin_embedding``); ``turns`` takes the angle as ``2π p w``
(SIN-UNITS-TURNS: safari ``src/models/sequence/hyena.py::PositionalEmbedding``, diffusers
``models/embeddings.py::GaussianFourierProjection``); ``scale`` multiplies every entry
(SIN-OUTPUT-SCALE: x-transformers ``x_transformers/x_transformers.py::ScaledSinusoidalEmbedding``,
cramming ``cramming/architectures/embeddings.py::ScaledSinosoidal``).
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


def block_sizes(params: SinusoidalParams) -> tuple[int, int]:
    """``(n_sin, n_cos)``: the columns of the sin and the cos block of a [sin | cos] table (``ceil(D/2)``
    and ``floor(D/2)`` for Vaswani, h and h for the h - 1 variants, whose odd D adds a zero column)."""
    D = params.dim
    return (D // 2, D // 2) if params.h_minus_1 else ((D + 1) // 2, D // 2)


def column_exponents(params: SinusoidalParams) -> np.ndarray:
    """Exponent ``e_j`` per output column, ``[D]`` float64, the column's frequency ``base ** -e_j``.

    SIN-VASWANI-INTERLEAVED: ``2 * (j // 2) / D`` (odd D: an extra sin column, exponent (D-1)/D).
    SIN-VASWANI-CONCAT: ``2i/D`` within each block (the sin block ``ceil(D/2)`` columns, the cos block
    ``floor(D/2)``).  The h - 1 variants: ``i / max(h - 1, 1)`` within each block, 0 for the zero
    column.  SIN-ORDER-COS-FIRST: the cos block's exponents come first.
    """
    D = params.dim
    if params.h_minus_1:
        return h_minus_1_exponents(params)
    if params.layout == "interleaved":
        return 2.0 * (np.arange(D) // 2) / D
    first, second = block_sizes(params)[::1 if params.order == "sin_first" else -1]
    return np.concatenate([2.0 * np.arange(first) / D, 2.0 * np.arange(second) / D])


def column_angles(position_ids, params: SinusoidalParams) -> np.ndarray:
    """Angles per output column, ``[..., D]`` float64 radians, in the clause's layout and order:
    ``p * base ** -e_j`` (:func:`column_exponents`), times ``2π`` for ``units='turns'``
    (SIN-UNITS-TURNS); 0 in the zero column of an odd h - 1 table."""
    p = np.asarray(position_ids)
    if not np.issubdtype(p.dtype, np.integer):
        raise TypeError(f"SIN: position_ids must be integers, got {p.dtype}")
    D = params.dim
    if params.h_minus_1:
        check_width(params)
        w = h_minus_1_inv_freq(params)
        if params.units == "turns":
            w = 2.0 * np.pi * w
        phi = p.astype(np.float64)[..., None] * w
        return np.concatenate([phi, phi, np.zeros(phi.shape[:-1] + (D - 2 * w.size,))], -1)
    w = params.base ** (-column_exponents(params))
    if params.units == "turns":
        w = 2.0 * np.pi * w
    return p.astype(np.float64)[..., None] * w


def is_sin_column(params: SinusoidalParams) -> np.ndarray:
    """Boolean ``[D]``: which columns hold sin (the others hold cos, or the zero column)."""
    D = params.dim
    j = np.arange(D)
    if params.layout == "interleaved":
        return j % 2 == 0
    n_sin, n_cos = block_sizes(params)
    return j < n_sin if params.order == "sin_first" else (j >= n_cos) & (j < n_cos + n_sin)


def from_angles(phi, params: SinusoidalParams, rows) -> np.ndarray:
    """The table from its column angles ``phi`` ``S + [D]`` (any precision; :func:`column_angles` for the
    reference): sin or cos per column (:func:`is_sin_column`), the zero column of an odd h - 1 table,
    fairseq's zero row where ``rows`` (``S``, the table rows) equal ``padding_idx``, every entry times
    ``params.scale`` (SIN-OUTPUT-SCALE; a zero stays zero).  ``S + [D]`` float64."""
    with np.errstate(invalid="ignore"):
        pe = np.where(is_sin_column(params), np.sin(phi), np.cos(phi))
    if params.h_minus_1 and params.dim % 2:
        pe[..., -1] = 0.0  # the appended zero column (t2t, fairseq)
    if params.variant == "fairseq":
        pe = np.where((np.asarray(rows) == params.padding_idx)[..., None], 0.0, pe)
    if params.scale != 1.0:
        pe = pe * params.scale
    return pe


def table(position_ids, params: SinusoidalParams) -> np.ndarray:
    """PE rows for ``position_ids`` (integers, any shape ``S``) -> ``S + [D]`` float64.

    Clauses: SIN-VASWANI-INTERLEAVED or SIN-VASWANI-CONCAT, by ``params.layout``, for
    ``variant='vaswani'``.  The h - 1 family: ``[sin(p w) | cos(p w)]`` with ``w = base **
    (-i / max(h - 1, 1))``, h = D // 2, and a zero column appended for odd D (SIN-T2T);
    ``fairseq`` also zeroes every row equal to ``padding_idx`` (SIN-FAIRSEQ-POSITIONS: here
    ``position_ids`` are fairseq's positions, i.e. table rows); ``whisper`` (SIN-WHISPER).
    Every variant: ``[cos | sin]`` for ``order='cos_first'`` (SIN-ORDER-COS-FIRST), angles ``2π p w``
    for ``units='turns'`` (SIN-UNITS-TURNS), every entry times ``scale`` (SIN-OUTPUT-SCALE).
    Raises :class:`DegenerateWidth` for fairseq at D // 2 == 1 and for whisper at odd D or D = 2.
    """
    return from_angles(column_angles(position_ids, params), params, position_ids)


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

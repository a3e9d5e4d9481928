"""Learned absolute position embeddings (clauses LEARNED-*), NumPy float64 reference.

Primary sources (HF transformers 5.24): ``models/gpt2/modeling_gpt2.py::GPT2Model.forward``,
``models/bert/modeling_bert.py::BertEmbeddings.forward``,
``models/opt/modeling_opt.py::OPTLearnedPositionalEmbedding.forward``; Radford et al. 2019
(GPT-2), Devlin et al. 2019 section 3 (BERT input representation), Zhang et al. 2022 (OPT).
"""

from __future__ import annotations

import numpy as np

from posenc.spec.errors import PositionOutOfRange

from . import position_ids as _pos

OPT_OFFSET = 2


def lookup(table, rows) -> np.ndarray:
    """``table[rows]`` with a range check before indexing (LEARNED-ROW-RANGE).

    ``table``: ``[N, E]``; ``rows``: integer array of any shape.  Raises
    :class:`PositionOutOfRange` for any row ``< 0`` or ``>= N`` -- never clamps or wraps.
    """
    t = np.asarray(table, dtype=np.float64)
    r = np.asarray(rows)
    if not np.issubdtype(r.dtype, np.integer):
        raise TypeError(f"LEARNED-ROW-RANGE: rows must be integers, got {r.dtype}")
    if r.size and (r.min() < 0 or r.max() >= t.shape[0]):
        raise PositionOutOfRange(r.min(), r.max(), t.shape[0])
    return t[r]


def gpt2_embeddings(wte, wpe, input_ids, position_ids=None, cache_length: int = 0) -> np.ndarray:
    """``wte[input_ids] + wpe[position_ids]`` -> ``[B, T, n_embd]`` (LEARNED-GPT2-SUM).

    ``position_ids`` default to ``cache_length + arange(T)`` (LEARNED-GPT2-POSITIONS), which
    ignores padding.  No LayerNorm at the input; dropout is off (eval).
    """
    ids = np.asarray(input_ids)
    if position_ids is None:
        position_ids = _pos.decode(ids.shape[0], ids.shape[1], cache_length)
    return lookup(wte, ids) + lookup(wpe, position_ids)


def layer_norm(x, gamma, beta, eps: float) -> np.ndarray:
    """LayerNorm over the last axis with biased variance (``torch.nn.LayerNorm``)."""
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def bert_embeddings(
    word, position, token_type, gamma, beta, input_ids, token_type_ids=None, position_ids=None,
    cache_length: int = 0, layer_norm_eps: float = 1e-12,
) -> np.ndarray:
    """``LayerNorm(word[ids] + token_type[tt] + position[p])`` -> ``[B, T, hidden]``.

    Clauses LEARNED-BERT-SUM (that order, then LayerNorm with ``layer_norm_eps``, eval mode),
    LEARNED-BERT-TOKEN-TYPE (``token_type_ids`` default to zeros), LEARNED-BERT-POSITIONS
    (default ``cache_length + arange(T)``).
    """
    ids = np.asarray(input_ids)
    if token_type_ids is None:
        token_type_ids = np.zeros_like(ids)
    if position_ids is None:
        position_ids = _pos.decode(ids.shape[0], ids.shape[1], cache_length)
    x = lookup(word, ids) + lookup(token_type, token_type_ids) + lookup(position, position_ids)
    return layer_norm(x, gamma, beta, layer_norm_eps)


def opt_positions(attention_mask, cache_length: int = 0) -> np.ndarray:
    """LEARNED-OPT-POSITIONS: 0-based ``cumsum(mask) * mask - 1``, sliced after ``cache_length``.

    ``attention_mask``: 0/1 ``[B, cache_length + T]`` covering the past.  Padding gets -1.
    Returns int64 ``[B, T]``.
    """
    m = np.asarray(attention_mask).astype(np.int64)
    if not 0 <= cache_length <= m.shape[-1]:
        raise ValueError(f"LEARNED-OPT-POSITIONS: cache_length must be in [0, {m.shape[-1]}], got {cache_length}")
    return (np.cumsum(m, axis=-1) * m - 1)[:, cache_length:]


def opt_rows(positions) -> np.ndarray:
    """LEARNED-OPT-OFFSET: table row = position + 2, so padding (-1) reads row 1."""
    return np.asarray(positions, dtype=np.int64) + OPT_OFFSET


def opt_embeddings(table, attention_mask, cache_length: int = 0) -> np.ndarray:
    """``table[opt_rows(opt_positions(mask, cache_length))]`` -> ``[B, T, E]``.

    ``table``: ``[max_position_embeddings + 2, E]``.  Clauses LEARNED-OPT-POSITIONS,
    LEARNED-OPT-OFFSET, LEARNED-ROW-RANGE.
    """
    return lookup(table, opt_rows(opt_positions(attention_mask, cache_length)))


# ---- RoBERTa (LEARNED-ROBERTA-POSITIONS) and BART (LEARNED-BART-POSITIONS) -------------------
BART_OFFSET = 2


def roberta_positions(input_ids, padding_idx: int, cache_length: int = 0) -> np.ndarray:
    """LEARNED-ROBERTA-POSITIONS: table rows ``(cumsum(mask) + cache_length) * mask + padding_idx``
    with ``mask = input_ids != padding_idx`` (fairseq ``make_positions``; HF
    ``models/roberta/modeling_roberta.py::RobertaEmbeddings.create_position_ids_from_input_ids``).

    Real tokens start at ``padding_idx + 1`` from the first non-pad token; pads read row
    ``padding_idx``.  ids ``[[1,1,0,9,2],[0,9,9,9,2]]`` with pad 1 -> ``[[1,1,2,3,4],[2,3,4,5,6]]``.
    int64 ``[B, T]``.  The same rule as SIN-FAIRSEQ-POSITIONS.
    """
    from . import sinusoidal

    return sinusoidal.fairseq_positions(input_ids, padding_idx, cache_length)


def roberta_embeddings(
    word, position, token_type, gamma, beta, input_ids, token_type_ids=None, position_ids=None,
    cache_length: int = 0, padding_idx: int = 1, layer_norm_eps: float = 1e-5,
) -> np.ndarray:
    """``LayerNorm(word[ids] + token_type[tt] + position[rows])`` -> ``[B, T, hidden]``.

    BERT's sum and LayerNorm (LEARNED-BERT-SUM, LEARNED-BERT-TOKEN-TYPE) with RoBERTa's default
    rows (LEARNED-ROBERTA-POSITIONS) when ``position_ids`` are not given.
    """
    if position_ids is None:
        position_ids = roberta_positions(input_ids, padding_idx, cache_length)
    return bert_embeddings(word, position, token_type, gamma, beta, input_ids, token_type_ids,
                           position_ids, 0, layer_norm_eps)


def bart_rows(batch: int, seq_len: int, cache_length: int = 0) -> np.ndarray:
    """LEARNED-BART-POSITIONS: rows ``arange(cache_length, cache_length + T) + 2`` for every row of
    the batch; padding is ignored by design (HF ``models/bart/modeling_bart.py::
    BartLearnedPositionalEmbedding.forward``).  int64 ``[B, T]``."""
    if cache_length < 0:
        raise ValueError(f"LEARNED-BART-POSITIONS: cache_length must be >= 0, got {cache_length}")
    return _pos.decode(batch, seq_len, cache_length) + BART_OFFSET


def bart_embeddings(table, input_ids, cache_length: int = 0) -> np.ndarray:
    """``table[bart_rows(B, T, cache_length)]`` -> ``[B, T, E]`` (only the shape of ``input_ids``
    is read).  ``table``: ``[max_position_embeddings + 2, E]``.  Clauses LEARNED-BART-POSITIONS,
    LEARNED-ROW-RANGE."""
    B, T = np.shape(input_ids)
    return lookup(table, bart_rows(B, T, cache_length))

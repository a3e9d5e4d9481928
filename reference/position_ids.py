"""Position-id rules (clauses POS-*), NumPy reference.  All outputs are int64 ``[B, T]``.

Primary sources: HF transformers 5.24 ``models/llama/modeling_llama.py::LlamaModel.forward``
(arange + past length), ``generation/utils.py::GenerationMixin._prepare_position_ids_for_generation``
(cumsum(mask) - 1 under left padding), ``data/data_collator.py::DataCollatorWithFlattening``
(packed sequences restart at 0); flash-attn ``flash_attn_varlen_func`` (``cu_seqlens``).
"""

from __future__ import annotations

import numpy as np


def prefill(batch: int, seq_len: int) -> np.ndarray:
    """POS-PREFILL: ``arange(T)`` for every row."""
    return np.broadcast_to(np.arange(seq_len, dtype=np.int64), (batch, seq_len)).copy()


def decode(batch: int, seq_len: int, cache_length: int) -> np.ndarray:
    """POS-DECODE: ``cache_length + arange(T)`` after ``cache_length`` cached tokens."""
    if cache_length < 0:
        raise ValueError(f"POS-DECODE: cache_length must be >= 0, got {cache_length}")
    return prefill(batch, seq_len) + int(cache_length)


def left_pad(attention_mask, cache_length: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """POS-LEFT-PAD: ``cumsum(mask) - 1`` at real tokens, sliced after ``cache_length``.

    ``attention_mask``: 0/1 ``[B, cache_length + T]`` covering the past too.
    Returns ``(position_ids [B, T], compared [B, T] bool)``.  Padded slots hold 0 here but are
    *unspecified* by POS-LEFT-PAD (HF generate fills 1 in 4.x and 0 in 5.x); ``compared`` marks
    the real tokens, the only slots compared by default.  POS-LEFT-PAD-FILL (opt-in) requires a
    given fill value there.
    """
    m = np.asarray(attention_mask)
    if m.ndim != 2 or not np.isin(m, (0, 1)).all():
        raise ValueError("POS-LEFT-PAD: attention_mask must be a 0/1 matrix [B, L]")
    if not 0 <= cache_length <= m.shape[1]:
        raise ValueError(f"POS-LEFT-PAD: cache_length must be in [0, {m.shape[1]}], got {cache_length}")
    m = m.astype(np.int64)
    pos = np.where(m == 1, np.cumsum(m, axis=-1) - 1, 0)
    return pos[:, cache_length:], (m == 1)[:, cache_length:]


def packed(cu_seqlens) -> np.ndarray:
    """POS-PACKED: positions restart at 0 at each document boundary of ``cu_seqlens``.

    ``cu_seqlens``: int ``[N + 1]``, non-decreasing, starting at 0 (flash-attn varlen
    convention).  Returns ``[1, cu_seqlens[-1]]``.
    """
    cu = np.asarray(cu_seqlens)
    if not np.issubdtype(cu.dtype, np.integer):
        raise ValueError(f"POS-PACKED: cu_seqlens must be integers, got {cu.dtype}")
    cu = cu.astype(np.int64)
    if cu.ndim != 1 or cu.size < 2 or cu[0] != 0 or (np.diff(cu) < 0).any():
        raise ValueError(f"POS-PACKED: cu_seqlens must start at 0 and be non-decreasing, got {cu}")
    out = np.concatenate([np.arange(n, dtype=np.int64) for n in np.diff(cu)]) if cu[-1] else np.zeros(0, np.int64)
    return out[None, :]

"""ALiBi (attention with linear biases), NumPy float64 reference (clauses ALIBI-*).

Shapes and dtypes: slopes float64 ``[H]``; biases float64 ``[H, Tq, Tk]`` (``causal``,
``symmetric``, ``mpt``) or ``[B, H, Tq, Tk]`` (``bloom``, which reads an ``attention_mask``
``[B, Tk]``).  Queries are the *last* ``Tq`` of the ``Tk`` key positions (bottom-right aligned:
query row ``i`` sits at key position ``i' = i + Tk - Tq``, as after ``Tk - Tq`` cached tokens).
Each bias comes with a bool ``compared`` mask of the slots its clause specifies.

Primary sources: Press et al., "Train Short, Test Long" (arXiv:2108.12409) section 3 and the
paper's code ``ofirpress/attention_with_linear_biases`` ``fairseq/models/transformer.py::
get_slopes``; HF transformers 5.24 ``models/bloom/modeling_bloom.py::_get_alibi_slopes,
build_alibi_tensor`` and ``models/mpt/modeling_mpt.py::build_mpt_alibi_tensor``; llm-foundry
``llmfoundry/models/layers/attention.py::gen_slopes, build_alibi_bias(full=True)``;
flash-attn ``flash_attn_interface.py`` (``alibi_slopes``, bottom-right alignment).
"""

from __future__ import annotations

import numpy as np


def _exponents(num_heads: int, bias_max: float) -> tuple[np.ndarray, np.ndarray]:
    """``(e, k)``: slope ``h`` is ``2^(-e_h)``; ``k_h`` is the power BLOOM raises its base to."""
    c = 1 << (num_heads.bit_length() - 1)  # 2^floor(log2 n), exact for every int n >= 1
    k = np.arange(1, c + 1, dtype=np.int64)
    e = bias_max * k / c
    if c != num_heads:
        extra = np.arange(1, 2 * (num_heads - c), 2, dtype=np.int64)  # 1, 3, 5, ...: slopes(2c)[0::2]
        k = np.concatenate([k, extra])
        e = np.concatenate([e, bias_max * extra / (2 * c)])
    return e.astype(np.float64), k


def slopes(p) -> np.ndarray:
    """ALIBI-SLOPES: float64 ``[num_heads]`` slopes ``2^(-e_h)``.

    n a power of two: ``2^(-B k / n)``, k = 1..n.  Otherwise, with ``c = 2^floor(log2 n)``:
    the c slopes of ``c`` heads, then every other slope of ``2c`` heads (``2^(-B(2j+1)/(2c))``,
    j = 0..n-c-1).  ``B = alibi_bias_max`` (8 in the paper and BLOOM; MPT's parameter).
    6 heads -> [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125] (not monotone).
    """
    e, _ = _exponents(p.num_heads, p.alibi_bias_max)
    return np.exp2(-e)


def slope_powers(p) -> np.ndarray:
    """int64 ``[H]``: the power ``k`` a float32 implementation raises its rounded base to.

    BLOOM computes ``torch.pow(base, k)`` with a float32 ``base = 2^(-8/c)`` (or ``2^(-4/c)``
    for the extra slopes): the base's rounding is amplified ``k`` times (error scales)."""
    return _exponents(p.num_heads, p.alibi_bias_max)[1]


def _lengths(query_length: int, key_length: int) -> tuple[int, int, int]:
    tq, tk = int(query_length), int(key_length)
    if tq < 0 or tk < 0 or tq > tk:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {tq} and {tk}")
    return tq, tk, tk - tq


def query_positions(query_length: int, key_length: int) -> np.ndarray:
    """int64 ``[Tq]``: key positions of the queries, ``i + Tk - Tq`` (bottom-right aligned)."""
    tq, tk, off = _lengths(query_length, key_length)
    return off + np.arange(tq, dtype=np.int64)


def distance(query_length: int, key_length: int) -> np.ndarray:
    """int64 ``[Tq, Tk]``: ``i' - j`` (positive for past keys, negative for future keys)."""
    tq, tk, _ = _lengths(query_length, key_length)
    return query_positions(tq, tk)[:, None] - np.arange(tk, dtype=np.int64)[None, :]


def bias(p, query_length=None, key_length=None, attention_mask=None) -> tuple[np.ndarray, np.ndarray]:
    """The bias of ``p.form`` and the bool mask of the slots its clause specifies.

    * ``causal`` (ALIBI-CAUSAL): ``-m_h (i' - j)`` ``[H, Tq, Tk]``; future keys (j > i') not
      compared (the value stored there is the same formula, but unspecified).
    * ``symmetric`` (ALIBI-SYMMETRIC): ``-m_h |i' - j|`` ``[H, Tq, Tk]``; every slot compared.
    * ``mpt`` (ALIBI-MPT): ``m_h (j - (Tk - 1))`` ``[H, Tq, Tk]`` (the same row for every
      query); future keys not compared.
    * ``bloom`` (ALIBI-BLOOM): ``m_h pos[b, j]`` with ``pos = (cumsum(mask) - 1) * mask``,
      ``[B, H, Tq, Tk]`` for ``attention_mask [B, Tk]`` (``key_length`` is its width); compared
      where the key is real, not in the future, and the query itself is real.

    Raises ``ValueError`` unless ``0 <= query_length <= key_length``.
    """
    m = slopes(p)
    if p.form == "bloom":
        if attention_mask is None:
            raise ValueError("ALIBI-BLOOM: the bloom form needs an attention_mask [B, Tk]")
        mask = np.asarray(attention_mask).astype(np.int64)
        tk = mask.shape[1]
        d = distance(query_length, tk)
        pos = (np.cumsum(mask, axis=-1) - 1) * mask  # [B, Tk]
        tq = d.shape[0]
        out = m[None, :, None, None] * pos[:, None, None, :].astype(np.float64)
        out = np.broadcast_to(out, (mask.shape[0], p.num_heads, tq, tk)).copy()
        real_q = mask[:, query_positions(tq, tk)] == 1  # [B, Tq]
        cmp = (d >= 0)[None, None] & (mask == 1)[:, None, None, :] & real_q[:, None, :, None]
        return out, np.broadcast_to(cmp, out.shape).copy()
    d = distance(query_length, key_length)
    tq, tk = d.shape
    if p.form == "causal":
        out = -m[:, None, None] * d[None].astype(np.float64)
        cmp = d >= 0
    elif p.form == "symmetric":
        out = -m[:, None, None] * np.abs(d)[None].astype(np.float64)
        cmp = np.ones_like(d, bool)
    elif p.form == "mpt":
        j = np.arange(tk, dtype=np.int64) - (tk - 1)
        out = np.broadcast_to(m[:, None, None] * j[None, None, :].astype(np.float64), (p.num_heads, tq, tk)).copy()
        cmp = d >= 0
    else:
        raise ValueError(f"unknown ALiBi form {p.form!r}")
    return out, np.broadcast_to(cmp[None], out.shape).copy()


def causal_equivalent(p, query_length, key_length=None, attention_mask=None) -> tuple[np.ndarray, np.ndarray]:
    """ALIBI-ROW-CONSTANT: ``-m_h (pos_i' - pos_j)`` and the valid keys, shaped like ``bias(p, ...)``.

    For ``causal`` and ``mpt`` the positions are the column indices; for ``bloom`` they are the
    mask's token positions ``(cumsum(mask) - 1) * mask`` (the same up to a row constant without
    holes in the mask).  Every causal-family form differs from this by a constant per query
    row over the valid keys, so ``masked_softmax(scores + bias, valid)`` agrees.
    """
    out, valid = bias(p, query_length, key_length, attention_mask)
    m = slopes(p)
    if p.form == "bloom":
        mask = np.asarray(attention_mask).astype(np.int64)
        pos = (np.cumsum(mask, axis=-1) - 1) * mask  # [B, Tk]
        qpos = pos[:, query_positions(query_length, mask.shape[1])]  # [B, Tq]
        d = qpos[:, :, None] - pos[:, None, :]  # [B, Tq, Tk]
        return -m[None, :, None, None] * d[:, None].astype(np.float64), valid
    if p.form not in ("causal", "mpt"):
        raise ValueError(f"ALIBI-ROW-CONSTANT: form {p.form!r} is not a causal form")
    d = distance(query_length, key_length)
    return np.broadcast_to(-m[:, None, None] * d[None].astype(np.float64), out.shape).copy(), valid


def masked_softmax(logits, valid) -> np.ndarray:
    """Softmax over the last axis restricted to ``valid`` (rows with no valid key give 0)."""
    logits = np.asarray(logits, np.float64)
    valid = np.broadcast_to(np.asarray(valid, bool), logits.shape)
    x = np.where(valid, logits, -np.inf)
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(valid, np.exp(x - top), 0.0)
    s = e.sum(-1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1.0), 0.0)


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


"""Rotary position embedding (RoPE), NumPy float64 reference.

Primary sources: Su et al., *RoFormer: Enhanced Transformer with Rotary Position Embedding*
(arXiv:2104.09864), section 3.4 (interleaved pairs); GPT-NeoX / HF transformers 5.24
``models/llama/modeling_llama.py::rotate_half`` and ``apply_rotary_pos_emb`` (half pairing);
``models/nanochat/modeling_nanochat.py::rotate_half`` (``cat(x2, -x1)``: the rotation by -phi of
``rotation: negative``, ROPE-ROTATION-NEGATIVE).

Layout is canonical ``[B, H, T, D]`` for q and k (q and k may have different head counts, as
in GQA); ``position_ids`` are integers ``[B, T]``; cos and sin are half width
``[B, T, pair_dim/2]`` (the ONNX / flash-attn level; pair_dim is rotary_dim except for the
``proportional`` rope_type, whose pairs span head_dim).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from posenc.spec.models import RopeParams

from . import rope_scaling as rs


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def inv_freq(params: RopeParams, seq_len: Optional[int] = None) -> tuple[np.ndarray, float]:
    """Inverse frequencies ``[pair_dim/2]`` and the attention factor, by ``rope_type``.

    default: ``rope_theta ** (-2i / rotary_dim)``, i = 0 .. rotary_dim/2 - 1 (ROPE-INV-FREQ);
    the scaled types follow :mod:`posenc.reference.rope_scaling` (SCALE-*).  ``seq_len`` is
    ``max(position_ids) + 1`` of the current call (used by ``dynamic`` and ``longrope``; the
    per-call policy).  The attention factor is ``attention_factor`` when given, else the
    rope_type's own rule (ROPE-ATTENTION-FACTOR).
    Returns ``(inv_freq float64, attention_factor)``.
    """
    t = params.rope_type
    explicit = params.attention_factor
    if t == "default":
        return rs.base_inv_freq(params.rope_theta, params.rdim), 1.0 if explicit is None else explicit
    if t == "yarn":
        return rs.yarn(params), rs.yarn_attention_factor(params)
    if t == "longrope":
        return rs.longrope(params, seq_len), rs.longrope_attention_factor(params)
    w = {"linear": lambda: rs.linear(params), "dynamic": lambda: rs.dynamic(params, seq_len),
         "llama3": lambda: rs.llama3(params), "proportional": lambda: rs.proportional(params)}[t]()
    return w, 1.0 if explicit is None else explicit


def seq_len_of(position_ids) -> int:
    """``max(position_ids) + 1``: the sequence length a call's frequencies may depend on."""
    pos = np.asarray(position_ids)
    return int(pos.max()) + 1 if pos.size else 0


def angle_positions(position_ids, params: RopeParams) -> np.ndarray:
    """The positions the angles multiply, float64 ``[B, T]``: ``position_ids / condense_ratio``
    (ROPE-CONDENSE: LitGPT ``model.py::build_rope_cache``, ``arange(seq_len) / condense_ratio``),
    else ``position_ids`` (ROPE-ANGLE)."""
    pos = np.asarray(position_ids).astype(np.float64)
    c = getattr(params, "condense_ratio", None)
    return pos if c is None else pos / c


def angles(position_ids, params: RopeParams) -> np.ndarray:
    """Angles ``phi[b, t, i] = (position_ids[b, t] / c) * inv_freq[i]`` in radians, float64, with
    ``c`` the condensing ratio (ROPE-CONDENSE; 1 when unset).

    Clause ROPE-ANGLE.  ``position_ids``: integer ``[B, T]``, any values (never assumed arange).
    """
    pos = np.asarray(position_ids)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"ROPE-ANGLE: position_ids must be integers, got {pos.dtype}")
    w, _ = inv_freq(params, seq_len_of(pos))
    return angle_positions(pos, params)[..., None] * w


def cos_sin(position_ids, params: RopeParams) -> tuple[np.ndarray, np.ndarray]:
    """``attention_factor * cos(phi)`` and ``attention_factor * sin(phi)``, ``[B, T, rotary_dim/2]``.

    Clauses: ROPE-ANGLE, ROPE-CONDENSE, ROPE-ATTENTION-FACTOR.
    """
    phi = angles(position_ids, params)
    a = inv_freq(params, seq_len_of(position_ids))[1]
    return a * np.cos(phi), a * np.sin(phi)


def pair_indices(rotary_dim: int, pairing: str) -> tuple[np.ndarray, np.ndarray]:
    """Input indices ``(first, second)`` of the rotated pairs, one pair per frequency i.

    half: (i, i + rotary_dim/2) (ROPE-PAIR-HALF); interleaved and deinterleave: (2i, 2i + 1)
    (ROPE-PAIR-INTERLEAVED, ROPE-PAIR-DEINTERLEAVE).
    """
    h = rotary_dim // 2
    i = np.arange(h)
    if pairing == "half":
        return i, i + h
    if pairing in ("interleaved", "deinterleave"):
        return 2 * i, 2 * i + 1
    raise ValueError(f"ROPE-PAIR: unknown pairing {pairing!r} (expected 'half', 'interleaved' or 'deinterleave')")


def output_indices(rotary_dim: int, pairing: str) -> tuple[np.ndarray, np.ndarray]:
    """Where the rotated pair of frequency i is written: the input pair, except for
    'deinterleave' (ROPE-PAIR-DEINTERLEAVE), which writes it to (i, i + rotary_dim/2)."""
    return pair_indices(rotary_dim, "half" if pairing == "deinterleave" else pairing)


def apply_with_cos_sin(x, cos, sin, rotary_dim: int, pairing: str, rotation: str = "positive") -> np.ndarray:
    """Rotate the first ``rotary_dim`` dims of ``x [B, H, T, D]`` by given cos/sin ``[B, T, r/2]``.

    For each input pair (a, b) of frequency i, written to its output pair (a', b')
    (:func:`output_indices`): ``y_a' = x_a cos - x_b sin``, ``y_b' = x_b cos + x_a sin``; with
    ``rotation`` ``"negative"`` the pair turns the other way, ``y_a' = x_a cos + x_b sin``,
    ``y_b' = x_b cos - x_a sin`` (ROPE-ROTATION-NEGATIVE).  Dims ``>= rotary_dim`` are returned
    unchanged (ROPE-PARTIAL).
    Clauses: ROPE-PAIR-HALF, ROPE-PAIR-INTERLEAVED, ROPE-PAIR-DEINTERLEAVE, ROPE-PARTIAL,
    ROPE-ROTATION-NEGATIVE.  Raises ``ValueError`` for an unknown pairing or rotation.
    """
    if rotation not in ("positive", "negative"):
        raise ValueError(f"ROPE-ROTATION-NEGATIVE: unknown rotation {rotation!r} (expected 'positive' or 'negative')")
    x = _f64(x)
    c = _f64(cos)[:, None]  # [B, 1, T, r/2]
    s = _f64(sin)[:, None] * (-1.0 if rotation == "negative" else 1.0)
    a, b = pair_indices(rotary_dim, pairing)
    oa, ob = output_indices(rotary_dim, pairing)
    y = x.copy()
    xa, xb = x[..., a], x[..., b]
    y[..., oa] = xa * c - xb * s
    y[..., ob] = xb * c + xa * s
    return y


def apply(q, k, position_ids, params: RopeParams) -> tuple[np.ndarray, np.ndarray]:
    """End-to-end RoPE on ``q [B, Hq, T, D]`` and ``k [B, Hk, T, D]``.

    Clauses: ROPE-INV-FREQ, ROPE-ANGLE, ROPE-CONDENSE, ROPE-PAIR-*, ROPE-PARTIAL, ROPE-ROTARY-FRACTION (the
    width ``params.rdim``), ROPE-ATTENTION-FACTOR.
    Raises ``ValueError`` when q/k are not ``[B, H, T, head_dim]`` or position_ids not ``[B, T]``.
    """
    q, k = _f64(q), _f64(k)
    pid = np.asarray(position_ids)
    for name, x in (("q", q), ("k", k)):
        if x.ndim != 4 or x.shape[-1] != params.head_dim:
            raise ValueError(f"{name} must be [B, H, T, {params.head_dim}], got {x.shape}")
        if pid.shape != (x.shape[0], x.shape[2]):
            raise ValueError(f"ROPE-ANGLE: position_ids must be [B, T] = {[x.shape[0], x.shape[2]]} "
                             f"for {name} {list(x.shape)}, got {list(pid.shape)}")
    c, s = cos_sin(position_ids, params)
    r = params.pair_dim
    return (apply_with_cos_sin(q, c, s, r, params.pairing, params.rotation),
            apply_with_cos_sin(k, c, s, r, params.pairing, params.rotation))


def apply_complex(x, position_ids, params: RopeParams) -> np.ndarray:
    """Second, independent formulation: pairs as complex numbers times ``e^{j phi}``.

    Interleaved: ``z_i = x_{2i} + j x_{2i+1}`` (Meta ``llama/model.py::apply_rotary_emb``);
    half: ``z_i = x_i + j x_{i+r/2}``; rotation negative multiplies by ``e^{-j phi}`` instead
    (ROPE-ROTATION-NEGATIVE).  Used only to cross-check :func:`apply` in tests.
    """
    x = _f64(x)
    if params.rope_type != "default":
        raise ValueError("apply_complex cross-checks the default rope_type only")
    r = params.rdim
    a, b = pair_indices(r, params.pairing)
    oa, ob = output_indices(r, params.pairing)
    w = params.rope_theta ** (-np.arange(0, r, 2, dtype=np.float64) / r)
    af = 1.0 if params.attention_factor is None else params.attention_factor
    pos = np.asarray(position_ids, dtype=np.float64) / (params.condense_ratio or 1.0)
    rot = af * np.exp(params.sin_sign * 1j * np.multiply.outer(pos, w))
    z = (x[..., a] + 1j * x[..., b]) * rot[:, None]
    y = x.copy()
    y[..., oa], y[..., ob] = z.real, z.imag
    return y

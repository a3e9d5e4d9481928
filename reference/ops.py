"""The operation table: one entry per operation name, shared by goldens, mutants and tests.

Every operation has the uniform signature ``fn(params, inputs) -> {output_name: ndarray}``
where ``inputs`` maps input names to NumPy arrays (scalars as 0-d arrays), and an *error
scale* function ``scales(params, inputs) -> {output_name: (dtype_scale, angle_scale)}`` for
float outputs, used by the tolerance rule (see ``posenc.spec.tolerance``):

* ``dtype_scale``: the magnitude whose rounding an implementation in the requested dtype may
  lose (e.g. the pair norm ``|x_pair|`` for a rotation);
* ``angle_scale``: ``|phi| * |x_pair|`` for angle-based encodings (0 elsewhere).

Integer outputs compare exactly.  An output ``NAME`` may come with ``NAME.compared``, a bool
mask of the slots a clause specifies (other slots are not compared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import learned, position_ids, rope, sinusoidal

Outputs = dict[str, np.ndarray]


def _i(inputs, name) -> int:
    return int(np.asarray(inputs[name]))


def _opt(inputs, name):
    return inputs.get(name)


# ---- RoPE -----------------------------------------------------------------------------------


def _rope_inv_freq(p, x):
    w, a = rope.inv_freq(p)
    return {"inv_freq": w, "attention_factor": np.float64(a)}


def _rope_inv_freq_scales(p, x):
    w, _ = rope.inv_freq(p)
    # A float32 implementation rounds the exponent 2i/r too; the error is amplified by ln(theta).
    return {"inv_freq": (np.abs(w) * (1.0 + np.log(p.rope_theta)), 0 * w),
            "attention_factor": (np.float64(p.attention_factor), np.float64(0))}


def _rope_cos_sin(p, x):
    c, s = rope.cos_sin(x["position_ids"], p)
    return {"cos": c, "sin": s}


def _rope_cos_sin_scales(p, x):
    phi = np.abs(rope.angles(x["position_ids"], p))
    a = p.attention_factor
    sc = (np.full_like(phi, a), a * phi)
    return {"cos": sc, "sin": sc}


def _pair_scales(x, cos_mag, phi_abs, rotary_dim, pairing):
    """Per-element (dtype, angle) scales for a rotation of ``x [B, H, T, D]``; tail dims 0."""
    x = np.asarray(x, np.float64)
    a, b = rope.pair_indices(rotary_dim, pairing)
    norm = np.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
    ds, an = np.zeros_like(x), np.zeros_like(x)
    for idx in (a, b):
        ds[..., idx] = norm * cos_mag
        an[..., idx] = norm * cos_mag * phi_abs
    return ds, an


def _rope_apply(p, x):
    q, k = rope.apply(x["q"], x["k"], x["position_ids"], p)
    return {"q": q, "k": k}


def _rope_apply_scales(p, x):
    phi = np.abs(rope.angles(x["position_ids"], p))[:, None]
    return {n: _pair_scales(x[n], p.attention_factor, phi, p.rdim, p.pairing) for n in ("q", "k")}


def _rope_apply_cs(p, x):
    r = p.rdim
    return {n: rope.apply_with_cos_sin(x[n], x["cos"], x["sin"], r, p.pairing) for n in ("q", "k")}


def _rope_apply_cs_scales(p, x):
    mag = np.sqrt(np.asarray(x["cos"]) ** 2 + np.asarray(x["sin"]) ** 2)[:, None]
    return {n: _pair_scales(x[n], mag, 0.0, p.rdim, p.pairing) for n in ("q", "k")}


# ---- sinusoidal ---------------------------------------------------------------------------


def _sin(p, x):
    return {"pe": sinusoidal.table(x["position_ids"], p)}


def _sin_scales(p, x):
    phi = np.abs(sinusoidal.column_angles(x["position_ids"], p))
    return {"pe": (np.ones_like(phi), phi)}


# ---- learned ------------------------------------------------------------------------------


def _lookup(p, x):
    return {"embeddings": learned.lookup(x["table"], x["rows"])}


def _exact_scales(names):
    def f(p, x):
        return {n: (np.float64(0), np.float64(0)) for n in names}
    return f


def _gpt2(p, x):
    return {"embeddings": learned.gpt2_embeddings(
        x["wte"], x["wpe"], x["input_ids"], _opt(x, "position_ids"), _i(x, "cache_length"))}


def _gpt2_scales(p, x):
    ids = np.asarray(x["input_ids"])
    pos = x.get("position_ids")
    if pos is None:
        pos = position_ids.decode(ids.shape[0], ids.shape[1], _i(x, "cache_length"))
    mag = np.abs(np.asarray(x["wte"])[ids]) + np.abs(np.asarray(x["wpe"])[pos])
    return {"embeddings": (mag, 0 * mag)}


def _bert(p, x):
    return {"embeddings": learned.bert_embeddings(
        x["word_embeddings"], x["position_embeddings"], x["token_type_embeddings"],
        x["layer_norm_weight"], x["layer_norm_bias"], x["input_ids"],
        _opt(x, "token_type_ids"), _opt(x, "position_ids"), _i(x, "cache_length"),
        p.layer_norm_eps)}


def _bert_scales(p, x):
    ids = np.asarray(x["input_ids"])
    tt = x.get("token_type_ids")
    tt = np.zeros_like(ids) if tt is None else np.asarray(tt)
    pos = x.get("position_ids")
    if pos is None:
        pos = position_ids.decode(ids.shape[0], ids.shape[1], _i(x, "cache_length"))
    parts = [np.asarray(x["word_embeddings"])[ids], np.asarray(x["token_type_embeddings"])[tt],
             np.asarray(x["position_embeddings"])[pos]]
    s = sum(parts)
    sigma = np.sqrt(s.var(-1, keepdims=True) + p.layer_norm_eps)
    # Rounding of the summands (relative to their magnitude) passes through 1/sigma and gamma;
    # the output itself is rounded once more.
    mag = sum(np.abs(t) for t in parts).max(-1, keepdims=True)
    y = learned.layer_norm(s, x["layer_norm_weight"], x["layer_norm_bias"], p.layer_norm_eps)
    ds = np.abs(np.asarray(x["layer_norm_weight"])) * mag / sigma + np.abs(y) + np.abs(np.asarray(x["layer_norm_bias"]))
    return {"embeddings": (ds, 0 * ds)}


def _opt_positions(p, x):
    return {"positions": learned.opt_positions(x["attention_mask"], _i(x, "cache_length"))}


def _opt_rows(p, x):
    return {"rows": learned.opt_rows(x["positions"])}


def _opt_embed(p, x):
    return {"embeddings": learned.opt_embeddings(x["table"], x["attention_mask"], _i(x, "cache_length"))}


# ---- position ids -------------------------------------------------------------------------


def _pos_prefill(p, x):
    return {"position_ids": position_ids.prefill(_i(x, "batch"), _i(x, "seq_len"))}


def _pos_decode(p, x):
    return {"position_ids": position_ids.decode(_i(x, "batch"), _i(x, "seq_len"), _i(x, "cache_length"))}


def _pos_left_pad(p, x):
    pos, cmp = position_ids.left_pad(x["attention_mask"], _i(x, "cache_length"))
    return {"position_ids": pos, "position_ids.compared": cmp}


def _pos_packed(p, x):
    return {"position_ids": position_ids.packed(x["cu_seqlens"])}


@dataclass(frozen=True)
class Op:
    """One operation: reference function, error scales, and whether it computes angles.

    ``angle_based`` ops may compute cos/sin in float32 whatever the activation dtype (clause
    ROPE-PRECISION / SIN-PRECISION), so their dtype term never drops below float32's eps.
    """

    fn: Callable
    scales: Callable
    angle_based: bool = False


OPS: dict[str, Op] = {k: Op(*v) for k, v in {
    "rope.inv_freq": (_rope_inv_freq, _rope_inv_freq_scales, True),
    "rope.cos_sin": (_rope_cos_sin, _rope_cos_sin_scales, True),
    "rope.apply": (_rope_apply, _rope_apply_scales, True),
    "rope.apply_with_cos_sin": (_rope_apply_cs, _rope_apply_cs_scales),
    "sinusoidal.table": (_sin, _sin_scales, True),
    "learned.lookup": (_lookup, _exact_scales(["embeddings"])),
    "learned.gpt2": (_gpt2, _gpt2_scales),
    "learned.bert": (_bert, _bert_scales),
    "learned.opt_positions": (_opt_positions, _exact_scales([])),
    "learned.opt_rows": (_opt_rows, _exact_scales([])),
    "learned.opt_embeddings": (_opt_embed, _exact_scales(["embeddings"])),
    "position_ids.prefill": (_pos_prefill, _exact_scales([])),
    "position_ids.decode": (_pos_decode, _exact_scales([])),
    "position_ids.left_pad": (_pos_left_pad, _exact_scales([])),
    "position_ids.packed": (_pos_packed, _exact_scales([])),
}.items()}


def run(op: str, params, inputs: dict) -> Outputs:
    """Run reference operation ``op``; raises ``KeyError`` naming the known ops."""
    if op not in OPS:
        raise KeyError(f"unknown operation {op!r}; known: {sorted(OPS)}")
    return OPS[op].fn(params, inputs)


def scales(op: str, params, inputs: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return OPS[op].scales(params, inputs)

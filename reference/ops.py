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

from . import alibi, attention, learned, mrope, nope, position_ids, rope, rope_scaling, sinusoidal, t5

Outputs = dict[str, np.ndarray]


def _i(inputs, name) -> int:
    return int(np.asarray(inputs[name]))


def _opt(inputs, name):
    return inputs.get(name)


# ---- RoPE ----------------------------------------------------------------------------------


def freq_provider(p) -> Callable:
    """``seq_len -> (inv_freq, attention_factor)`` for one prepared operation.

    Stateless (per call) except for ``dynamic`` with ``dynamic_policy='grow_until_reset'``,
    whose provider keeps transformers' state across calls (SCALE-DYNAMIC-GROW).
    """
    if p.rope_type == "dynamic" and p.dynamic_policy == "grow_until_reset":
        state = rope_scaling.DynamicGrowState(p)
        af = 1.0 if p.attention_factor is None else p.attention_factor
        return lambda seq_len: (state.inv_freq(seq_len), af)
    return lambda seq_len: rope.inv_freq(p, seq_len)


def call_keys(x, prefix: str = "position_ids.") -> list[str]:
    """Input names of a call sequence, in call order: ``position_ids.0``, ``position_ids.1``, ..."""
    return sorted((k for k in x if k.startswith(prefix)), key=lambda k: int(k.rsplit(".", 1)[1]))


def _per_call(fn, p, x, freq) -> dict:
    """``rope.cos_sin_calls``: ``fn('rope.cos_sin', ...)`` for each call in order, one ``freq``
    (so a stateful provider sees the sequence), keyed ``cos.<k>`` / ``sin.<k>``."""
    out = {}
    for key in call_keys(x):
        k = key.rsplit(".", 1)[1]
        r = fn("rope.cos_sin", p, {"position_ids": x[key]}, freq)
        out[f"cos.{k}"], out[f"sin.{k}"] = r["cos"], r["sin"]
    return out


def rope_outputs(op, p, x, freq) -> Outputs:
    """Outputs of a RoPE operation given a frequency provider (the reference's or a mutant's)."""
    if op == "rope.inv_freq":
        w, a = freq(None)
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    if op == "rope.cos_sin_calls":
        return _per_call(rope_outputs, p, x, freq)
    pid = np.asarray(x["position_ids"])
    w, a = freq(rope.seq_len_of(pid))
    phi = pid.astype(np.float64)[..., None] * w
    c, s = a * np.cos(phi), a * np.sin(phi)
    if op == "rope.cos_sin":
        return {"cos": c, "sin": s}
    return {n: rope.apply_with_cos_sin(x[n], c, s, p.pair_dim, p.pairing) for n in ("q", "k")}


def rope_scales(op, p, x, freq) -> dict:
    if op == "rope.inv_freq":
        w, a = freq(None)
        # A float32 implementation rounds the exponent 2i/r too; the error is amplified by ln(theta).
        return {"inv_freq": (np.abs(w) * (1.0 + np.log(p.rope_theta)), 0 * w),
                "attention_factor": (np.float64(a), np.float64(0))}
    if op == "rope.cos_sin_calls":
        return _per_call(rope_scales, p, x, freq)
    pid = np.asarray(x["position_ids"])
    w, a = freq(rope.seq_len_of(pid))
    phi = np.abs(pid.astype(np.float64)[..., None] * w) * exponent_amplification(w, p.rope_theta, p.pair_dim)
    if op == "rope.cos_sin":
        sc = (np.full_like(phi, a), a * phi)
        return {"cos": sc, "sin": sc}
    return {n: _pair_scales(x[n], a, phi[:, None], p.pair_dim, p.pairing) for n in ("q", "k")}


def exponent_amplification(w, theta: float, dim: int) -> np.ndarray:
    """``1 + e_i ln(theta)`` with ``e_i = 2i/dim``: a float32 ``theta ** -e_i`` also rounds its
    exponent, a relative error that ln(theta) amplifies (largest for the lowest frequencies).
    For scaled rules, theta is the base whose power gives ``w`` (dynamic: theta')."""
    n = np.shape(w)[-1]
    if n > 1 and w[1] > 0:
        theta = max(theta, float(w[1]) ** (-dim / 2))  # theta' of dynamic NTK
    return 1.0 + (2.0 * np.arange(n) / dim) * np.log(max(theta, np.e))


def _pair_scales(x, cos_mag, phi_abs, rotary_dim, pairing):
    """Per-element (dtype, angle) scales for a rotation of ``x [B, H, T, D]``; tail dims 0."""
    x = np.asarray(x, np.float64)
    a, b = rope.pair_indices(rotary_dim, pairing)
    norm = np.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
    ds, an = np.zeros_like(x), np.zeros_like(x)
    for idx in rope.output_indices(rotary_dim, pairing):
        ds[..., idx] = norm * cos_mag
        an[..., idx] = norm * cos_mag * phi_abs
    return ds, an


def _rope_op(op):
    return (lambda p, x: rope_outputs(op, p, x, freq_provider(p)),
            lambda p, x: rope_scales(op, p, x, freq_provider(p)))


def _rope_apply_cs(p, x):
    r = p.pair_dim
    return {n: rope.apply_with_cos_sin(x[n], x["cos"], x["sin"], r, p.pairing) for n in ("q", "k")}


def _rope_apply_cs_scales(p, x):
    mag = np.sqrt(np.asarray(x["cos"]) ** 2 + np.asarray(x["sin"]) ** 2)[:, None]
    return {n: _pair_scales(x[n], mag, 0.0, p.pair_dim, p.pairing) for n in ("q", "k")}


# ---- sinusoidal ---------------------------------------------------------------------------


def _sin(p, x):
    return {"pe": sinusoidal.table(x["position_ids"], p)}


def _sin_scales(p, x):
    phi = np.abs(sinusoidal.column_angles(x["position_ids"], p))
    if p.h_minus_1:  # e_j = i / (h - 1): a float32 base ** -e_j rounds e_j ln(base) too
        amp = 1.0 + sinusoidal.h_minus_1_exponents(p) * np.log(p.base)
        return {"pe": (np.ones_like(phi), phi * amp)}
    if p.layout == "concat":
        ns = (p.dim + 1) // 2
        expo = 2.0 * np.concatenate([np.arange(ns), np.arange(p.dim - ns)])
    else:
        expo = 2.0 * (np.arange(p.dim) // 2)
    amp = 1.0 + expo / p.dim * np.log(p.base)
    return {"pe": (np.ones_like(phi), phi * amp)}


def _fairseq_positions(p, x):
    return {"positions": sinusoidal.fairseq_positions(x["input_ids"], p.padding_idx, _i(x, "cache_length"))}


def _fairseq(p, x):
    return {"pe": sinusoidal.fairseq_embeddings(x["input_ids"], p, _i(x, "cache_length"))}


def _fairseq_scales(p, x):
    rows = sinusoidal.fairseq_positions(x["input_ids"], p.padding_idx, _i(x, "cache_length"))
    return _sin_scales(p, {"position_ids": rows})


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


def _bert_scales(p, x, default_positions=None):
    ids = np.asarray(x["input_ids"])
    tt = x.get("token_type_ids")
    tt = np.zeros_like(ids) if tt is None else np.asarray(tt)
    pos = x.get("position_ids")
    if pos is None and default_positions is not None:
        pos = default_positions(p, x)
    elif pos is None:
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


def _roberta_rows(p, x):
    return learned.roberta_positions(x["input_ids"], p.padding_idx, _i(x, "cache_length"))


def _roberta_positions(p, x):
    return {"positions": _roberta_rows(p, x)}


def _roberta(p, x):
    return {"embeddings": learned.roberta_embeddings(
        x["word_embeddings"], x["position_embeddings"], x["token_type_embeddings"],
        x["layer_norm_weight"], x["layer_norm_bias"], x["input_ids"],
        _opt(x, "token_type_ids"), _opt(x, "position_ids"), _i(x, "cache_length"),
        p.padding_idx, p.layer_norm_eps)}


def _roberta_scales(p, x):
    return _bert_scales(p, x, _roberta_rows)


def _bart_embed(p, x):
    return {"embeddings": learned.bart_embeddings(x["table"], x["input_ids"], _i(x, "cache_length"))}


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


# ---- ALiBi ----------------------------------------------------------------------------------


def slope_amplification(p) -> np.ndarray:
    """``1 + k/8`` per head: a float32 ``base ** k`` (BLOOM's ``torch.pow``) amplifies the
    rounding of its base ``k`` times; the float64 reference's exact ``2^e`` has no such error."""
    return 1.0 + alibi.slope_powers(p) / 8.0


def _alibi_slopes(p, x):
    return {"slopes": alibi.slopes(p)}


def _alibi_slopes_scales(p, x):
    m = alibi.slopes(p)
    return {"slopes": (m * slope_amplification(p), 0 * m)}


def _alibi_inputs(x) -> dict:
    out = {"query_length": _i(x, "query_length")}
    if "attention_mask" in x:
        out["attention_mask"] = x["attention_mask"]
    else:
        out["key_length"] = _i(x, "key_length")
    return out


def _alibi_bias(p, x):
    b, cmp = alibi.bias(p, **_alibi_inputs(x))
    return {"bias": b, "bias.compared": cmp}


def _alibi_bias_scales(p, x):
    b, _ = alibi.bias(p, **_alibi_inputs(x))
    amp = slope_amplification(p)[:, None, None]  # heads axis is -3 in every form
    ds = np.abs(b) * amp
    return {"bias": (ds, 0 * ds)}


# ---- T5 -------------------------------------------------------------------------------------


def _t5_buckets(p, x):
    return {"buckets": t5.buckets(x["relative_position"], p)}


def _t5_bias(p, x):
    return {"bias": t5.bias(x["table"], p, _i(x, "query_length"), _i(x, "key_length"), _i(x, "cache_length"))}


def _t5_bias_scales(p, x):
    b = np.abs(_t5_bias(p, x)["bias"])  # a gather: only the table's rounding to the dtype
    return {"bias": (b, 0 * b)}


# ---- M-RoPE and NoPE ------------------------------------------------------------------------


def mrope_outputs(op, p, x, axis_positions=None) -> Outputs:
    """Outputs of an M-RoPE op; ``axis_positions`` (``[B, T, D/2]``) replaces the recomposed
    per-frequency positions (mutants)."""
    ap = mrope.axis_positions(x["position_ids"], p) if axis_positions is None else axis_positions
    phi = np.asarray(ap, np.float64) * mrope.inv_freq(p)
    c, s = np.cos(phi), np.sin(phi)
    if op == "mrope.cos_sin":
        return {"cos": c, "sin": s}
    return {n: rope.apply_with_cos_sin(x[n], c, s, p.head_dim, "half") for n in ("q", "k")}


def _mrope_scales_for(op):
    def f(p, x):
        w = mrope.inv_freq(p)
        phi = np.abs(mrope.angles(x["position_ids"], p)) * exponent_amplification(w, p.rope_theta, p.head_dim)
        if op == "mrope.cos_sin":
            sc = (np.ones_like(phi), phi)
            return {"cos": sc, "sin": sc}
        return {n: _pair_scales(x[n], 1.0, phi[:, None], p.head_dim, "half") for n in ("q", "k")}
    return f


def _mrope_op(op):
    return (lambda p, x: mrope_outputs(op, p, x)), _mrope_scales_for(op)


def _nope_apply(p, x):
    q, k = nope.apply(x["q"], x["k"], _i(x, "layer_idx"), p)
    return {"q": q, "k": k}


def _nope_flags(p, x):
    return {"use_rope": nope.layer_flags(p)}


# ---- attention probabilities (SCALE-YARN-SOFTMAX-SCALE) -----------------------------------


def _attn_probs(p, x):
    return {"probs": attention.probs(x["q"], x["k"], p)}


def _attn_probs_scales(p, x):
    ds = attention.probs_error_scale(x["q"], x["k"], p)
    return {"probs": (ds, 0 * ds)}


@dataclass(frozen=True)
class Op:
    """One operation: reference function, error scales, and whether it computes angles.

    ``angle_based`` ops may compute cos/sin in float32 whatever the activation dtype (clause
    ROPE-PRECISION / SIN-PRECISION), so their dtype term never drops below float32's eps.
    ``float32_floor`` ops are not angle-based but the spec equally allows float32 arithmetic
    at every activation dtype (ALiBi slopes and biases: BLOOM, MPT and flash-attn hold the
    slopes in float32), so their dtype term never drops below float32's eps either.
    """

    fn: Callable
    scales: Callable
    angle_based: bool = False
    float32_floor: bool = False
    #: outputs held in float32 or float64 whatever the activation dtype, compared at float32
    float32_outputs: tuple[str, ...] = ()

    @property
    def eps_floor_float32(self) -> bool:
        """Whether the tolerance's dtype term uses at least float32's eps (``bound(angle_based=)``)."""
        return self.angle_based or self.float32_floor


OPS: dict[str, Op] = {
    "rope.inv_freq": Op(*_rope_op("rope.inv_freq"), angle_based=True, float32_outputs=("inv_freq",)),
    "rope.cos_sin": Op(*_rope_op("rope.cos_sin"), angle_based=True),
    "rope.cos_sin_calls": Op(*_rope_op("rope.cos_sin_calls"), angle_based=True),
    "rope.apply": Op(*_rope_op("rope.apply"), angle_based=True),
    "rope.apply_with_cos_sin": Op(_rope_apply_cs, _rope_apply_cs_scales),
    "sinusoidal.table": Op(_sin, _sin_scales, angle_based=True),
    "sinusoidal.fairseq_positions": Op(_fairseq_positions, _exact_scales([])),
    "sinusoidal.fairseq": Op(_fairseq, _fairseq_scales, angle_based=True),
    "learned.lookup": Op(_lookup, _exact_scales(["embeddings"])),
    "learned.gpt2": Op(_gpt2, _gpt2_scales),
    "learned.bert": Op(_bert, _bert_scales),
    "learned.opt_positions": Op(_opt_positions, _exact_scales([])),
    "learned.opt_rows": Op(_opt_rows, _exact_scales([])),
    "learned.opt_embeddings": Op(_opt_embed, _exact_scales(["embeddings"])),
    "learned.roberta_positions": Op(_roberta_positions, _exact_scales([])),
    "learned.roberta": Op(_roberta, _roberta_scales),
    "learned.bart_embeddings": Op(_bart_embed, _exact_scales(["embeddings"])),
    "position_ids.prefill": Op(_pos_prefill, _exact_scales([])),
    "position_ids.decode": Op(_pos_decode, _exact_scales([])),
    "position_ids.left_pad": Op(_pos_left_pad, _exact_scales([])),
    "position_ids.packed": Op(_pos_packed, _exact_scales([])),
    "alibi.slopes": Op(_alibi_slopes, _alibi_slopes_scales, float32_floor=True, float32_outputs=("slopes",)),
    "alibi.bias": Op(_alibi_bias, _alibi_bias_scales, float32_floor=True),
    "t5.buckets": Op(_t5_buckets, _exact_scales([])),
    "t5.bias": Op(_t5_bias, _t5_bias_scales),
    "mrope.cos_sin": Op(*_mrope_op("mrope.cos_sin"), angle_based=True),
    "mrope.apply": Op(*_mrope_op("mrope.apply"), angle_based=True),
    "nope.apply": Op(_nope_apply, _exact_scales(["q", "k"])),
    "nope.layer_flags": Op(_nope_flags, _exact_scales([])),
    # Softmax is computed in float32 at every activation dtype (HF eager_attention_forward's
    # softmax(dtype=float32), flash / SDPA kernels alike): float64 activations get float32 error.
    "attention.probs": Op(_attn_probs, _attn_probs_scales, float32_floor=True),
}


def run(op: str, params, inputs: dict) -> Outputs:
    """Run reference operation ``op``; raises ``KeyError`` naming the known ops."""
    if op not in OPS:
        raise KeyError(f"unknown operation {op!r}; known: {sorted(OPS)}")
    return OPS[op].fn(params, inputs)


def scales(op: str, params, inputs: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return OPS[op].scales(params, inputs)

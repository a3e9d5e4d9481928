"""Reference *mutants*: each known divergence (spec ``divergences[].mutant``) as NumPy code.

``MUTANTS[name][op]`` has the signature of ``posenc.reference.ops.OPS[op].fn``:
``(params, inputs) -> outputs``.  The suite runs the mutants of the clauses a failing test
covers and reports which ones reproduce the adapter's output (diagnosis).  The kit's tests
prove every golden-backed mutant is caught by at least one case.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import alibi, attention, learned, nope, ops, position_ids, rope, rope_scaling, sinusoidal, t5

MUTANTS: dict[str, dict[str, Callable]] = {}


def _mutant(name: str, *op_names: str):
    def deco(fn):
        for op in op_names:
            MUTANTS.setdefault(name, {})[op] = (lambda op_: lambda p, x: fn(op_, p, x))(op)
        return fn
    return deco


def bf16_round(x) -> np.ndarray:
    """Round to bfloat16 as torch does (via float32, then nearest-even), returned as float64."""
    f = np.asarray(x, dtype=np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def _rope_outputs(op, p, x, cos, sin, rotary_dim=None, pairing=None):
    r = rotary_dim or p.pair_dim
    pr = pairing or p.pairing
    if op == "rope.cos_sin":
        return {"cos": cos, "sin": sin}
    return {n: rope.apply_with_cos_sin(x[n], cos, sin, r, pr) for n in ("q", "k")}


@_mutant("rope_pairing_swapped", "rope.apply", "rope.apply_with_cos_sin")
def rope_pairing_swapped(op, p, x):
    other = "interleaved" if p.pairing == "half" else "half"
    q = p.model_copy(update={"pairing": other})
    return ops.run(op, q, x)


@_mutant("rope_deinterleave_layout_kept", "rope.apply", "rope.apply_with_cos_sin")
def rope_deinterleave_layout_kept(op, p, x):
    if p.pairing != "deinterleave":
        return None
    return ops.run(op, p.model_copy(update={"pairing": "interleaved"}), x)


def _bf16_rope(op, p, x, round_angle: bool):
    seq_len = rope.seq_len_of(x["position_ids"]) if "position_ids" in x else None
    w, a = rope.inv_freq(p, seq_len)
    w = bf16_round(w)
    if op == "rope.inv_freq":
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    pos = np.asarray(x["position_ids"], np.float64)
    phi = bf16_round(bf16_round(pos)[..., None] * w) if round_angle else pos[..., None] * w
    return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


@_mutant("rope_bf16_angles", "rope.apply", "rope.cos_sin", "rope.inv_freq")
def rope_bf16_angles(op, p, x):
    return _bf16_rope(op, p, x, round_angle=True)


@_mutant("rope_bf16_inv_freq", "rope.apply", "rope.cos_sin", "rope.inv_freq")
def rope_bf16_inv_freq(op, p, x):
    return _bf16_rope(op, p, x, round_angle=False)


@_mutant("rope_bf16_positions", "rope.apply", "rope.cos_sin")
def rope_bf16_positions(op, p, x):
    """Positions built in bfloat16 (e.g. ``arange(T, dtype=t.dtype) + offset``); angles and
    cos/sin then exact: every position p >= 256 becomes a multiple of its bf16 spacing."""
    seq_len = rope.seq_len_of(x["position_ids"])
    w, a = rope.inv_freq(p, seq_len)
    phi = bf16_round(np.asarray(x["position_ids"], np.float64))[..., None] * w
    return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


@_mutant("rope_tail_rotated", "rope.apply")
def rope_tail_rotated(op, p, x):
    full = p.model_copy(update={"rotary_dim": None})
    return ops.run(op, full, x)


@_mutant("rope_exponent_head_dim", "rope.apply", "rope.inv_freq", "rope.cos_sin")
def rope_exponent_head_dim(op, p, x):
    if p.rope_type != "default":
        return None
    r = p.rdim
    w = p.rope_theta ** (-np.arange(0, r, 2, dtype=np.float64) / p.head_dim)
    a = rope.inv_freq(p)[1]
    if op == "rope.inv_freq":
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    phi = np.asarray(x["position_ids"], np.float64)[..., None] * w
    return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


@_mutant("rope_arange_positions", "rope.apply", "rope.cos_sin")
def rope_arange_positions(op, p, x):
    pid = np.asarray(x["position_ids"])
    return ops.run(op, p, {**x, "position_ids": position_ids.prefill(*pid.shape)})


@_mutant("rope_factor_ignored", "rope.apply", "rope.cos_sin", "rope.inv_freq")
def rope_factor_ignored(op, p, x):
    return ops.run(op, p.model_copy(update={"attention_factor": 1.0}), x)


@_mutant("sin_layout_swapped", "sinusoidal.table")
def sin_layout_swapped(op, p, x):
    if p.h_minus_1:
        return None  # a Vaswani divergence (the h-1 variants are [sin | cos] only)
    other = "concat" if p.layout == "interleaved" else "interleaved"
    return ops.run(op, p.model_copy(update={"layout": other}), x)


@_mutant("sin_divisor_h_minus_1", "sinusoidal.table")
def sin_divisor_h_minus_1(op, p, x):
    if p.h_minus_1:
        return None  # the reverse is DIV-SIN-T2T-VASWANI-DIVISOR
    D, h = p.dim, p.dim // 2
    w = p.base ** (-np.arange(h, dtype=np.float64) / max(h - 1, 1))
    phi = np.asarray(x["position_ids"], np.float64)[..., None] * w
    s, c = np.sin(phi), np.cos(phi)
    if p.layout == "interleaved":
        pe = np.stack([s, c], -1).reshape(*phi.shape[:-1], 2 * h)
    else:
        pe = np.concatenate([s, c], -1)
    if D % 2:
        pe = np.concatenate([pe, np.zeros(pe.shape[:-1] + (1,))], -1)
    return {"pe": pe}


def _fairseq_rows(p, x):
    return sinusoidal.fairseq_positions(x["input_ids"], p.padding_idx, int(x["cache_length"]))


@_mutant("sin_vaswani_divisor", "sinusoidal.table", "sinusoidal.fairseq")
def sin_vaswani_divisor(op, p, x):
    """The h-1 table (zero column, pad row) with Vaswani's frequencies base^(-2i/D)."""
    if not p.h_minus_1:
        return None
    sinusoidal.check_width(p)
    rows = np.asarray(x["position_ids"] if op == "sinusoidal.table" else _fairseq_rows(p, x))
    h = p.dim // 2
    phi = rows.astype(np.float64)[..., None] * p.base ** (-2.0 * np.arange(h) / p.dim)
    pe = np.concatenate([np.sin(phi), np.cos(phi), np.zeros(phi.shape[:-1] + (p.dim - 2 * h,))], -1)
    if p.variant == "fairseq":
        pe = np.where((rows == p.padding_idx)[..., None], 0.0, pe)
    return {"pe": pe}


@_mutant("sin_pad_row_kept", "sinusoidal.table", "sinusoidal.fairseq")
def sin_pad_row_kept(op, p, x):
    """fairseq's table without ``emb[padding_idx] = 0``: the pad row is t2t's sinusoid."""
    if p.variant != "fairseq":
        return None
    rows = x["position_ids"] if op == "sinusoidal.table" else _fairseq_rows(p, x)
    return {"pe": sinusoidal.table(rows, p.model_copy(update={"variant": "t2t", "padding_idx": None}))}


@_mutant("sin_fairseq_padding_ignored", "sinusoidal.fairseq_positions", "sinusoidal.fairseq")
def sin_fairseq_padding_ignored(op, p, x):
    """Sequential rows padding_idx + 1 + cache_length + t (HF's inputs_embeds path)."""
    ids = np.asarray(x["input_ids"])
    rows = position_ids.decode(*ids.shape, int(x["cache_length"])) + p.padding_idx + 1
    if op == "sinusoidal.fairseq_positions":
        return {"positions": rows}
    return {"pe": sinusoidal.table(rows, p)}


@_mutant("opt_no_offset", "learned.opt_rows", "learned.opt_embeddings")
def opt_no_offset(op, p, x):
    if op == "learned.opt_rows":
        return {"rows": np.asarray(x["positions"], np.int64)}
    rows = learned.opt_positions(x["attention_mask"], int(x["cache_length"]))
    t = np.asarray(x["table"], np.float64)
    return {"embeddings": t[rows]}  # numpy wraps -1 to the last row, as a careless port would


@_mutant("opt_arange_positions", "learned.opt_positions", "learned.opt_embeddings")
def opt_arange_positions(op, p, x):
    m = np.asarray(x["attention_mask"])
    cl = int(x["cache_length"])
    pos = position_ids.prefill(*m.shape)[:, cl:]
    if op == "learned.opt_positions":
        return {"positions": pos}
    return {"embeddings": learned.lookup(x["table"], learned.opt_rows(pos))}


@_mutant("lookup_clamped", "learned.lookup", "learned.opt_embeddings")
def lookup_clamped(op, p, x):
    """Rows clamped into [0, N-1]: equals the reference in range, reads the end row out of range."""
    t = np.asarray(x["table"], np.float64)
    if op == "learned.lookup":
        rows = np.asarray(x["rows"])
    else:
        rows = learned.opt_rows(learned.opt_positions(x["attention_mask"], int(x["cache_length"])))
    return {"embeddings": t[np.clip(rows, 0, t.shape[0] - 1)]}


@_mutant("bert_token_type_ignored", "learned.bert")
def bert_token_type_ignored(op, p, x):
    tt = np.zeros_like(np.asarray(x["token_type_embeddings"]))
    return ops.run(op, p, {**x, "token_type_embeddings": tt})


@_mutant("learned_positions_off_by_one", "learned.gpt2", "learned.bert")
def learned_positions_off_by_one(op, p, x):
    if x.get("position_ids") is not None:
        return ops.run(op, p, x)
    return ops.run(op, p, {**x, "cache_length": np.asarray(int(x["cache_length"]) + 1)})


@_mutant("pos_cache_off_by_one", "position_ids.decode", "position_ids.left_pad")
def pos_cache_off_by_one(op, p, x):
    out = ops.run(op, p, x)
    out["position_ids"] = out["position_ids"] + 1
    return out


@_mutant("pos_left_pad_ignored", "position_ids.left_pad")
def pos_left_pad_ignored(op, p, x):
    pos, _ = position_ids.left_pad(np.ones_like(np.asarray(x["attention_mask"])), int(x["cache_length"]))
    _, compared = position_ids.left_pad(x["attention_mask"], int(x["cache_length"]))
    return {"position_ids": pos, "position_ids.compared": compared}


@_mutant("pos_packed_no_restart", "position_ids.packed")
def pos_packed_no_restart(op, p, x):
    n = int(np.asarray(x["cu_seqlens"])[-1])
    return {"position_ids": position_ids.prefill(1, n)}


def _roberta_with_rows(op, p, x, rows):
    if op == "learned.roberta_positions":
        return {"positions": rows}
    if x.get("position_ids") is not None:
        return None  # explicit position_ids: the default rule is not exercised
    return ops.run(op, p, {**x, "position_ids": rows})


@_mutant("roberta_arange_positions", "learned.roberta_positions", "learned.roberta")
def roberta_arange_positions(op, p, x):
    ids = np.asarray(x["input_ids"])
    rows = position_ids.decode(*ids.shape, int(x["cache_length"])) + p.padding_idx + 1
    return _roberta_with_rows(op, p, x, rows)


@_mutant("roberta_as_bert", "learned.roberta_positions", "learned.roberta")
def roberta_as_bert(op, p, x):
    ids = np.asarray(x["input_ids"])
    return _roberta_with_rows(op, p, x, position_ids.decode(*ids.shape, int(x["cache_length"])))


def _bart_with_rows(p, x, rows):
    t = np.asarray(x["table"], np.float64)
    if rows.min() < 0 or rows.max() >= t.shape[0]:
        return None  # an implementation raises there
    return {"embeddings": t[rows]}


@_mutant("bart_opt_mask_rule", "learned.bart_embeddings")
def bart_opt_mask_rule(op, p, x):
    rows = learned.opt_rows(learned.opt_positions(x["attention_mask"], int(x["cache_length"])))
    return _bart_with_rows(p, x, rows)


@_mutant("bart_no_offset", "learned.bart_embeddings")
def bart_no_offset(op, p, x):
    ids = np.asarray(x["input_ids"])
    return _bart_with_rows(p, x, position_ids.decode(*ids.shape, int(x["cache_length"])))


def run(name: str, op: str, params, inputs):
    """Run mutant ``name`` for ``op``; ``None`` when the mutant has no form for that op."""
    fn = MUTANTS.get(name, {}).get(op)
    return None if fn is None else fn(params, inputs)


# ---- RoPE scaling (SCALE-*) -----------------------------------------------------------------
_ROPE_OPS = ("rope.apply", "rope.cos_sin", "rope.inv_freq", "rope.cos_sin_calls")


def _with_freq(op, p, x, freq):
    return ops.rope_outputs(op, p, x, freq)


@_mutant("scale_linear_exponent", *_ROPE_OPS)
def scale_linear_exponent(op, p, x):
    if p.rope_type != "linear":
        return None
    w = p.rope_theta ** (-np.arange(0, p.rdim, 2, dtype=np.float64) / (p.rdim * p.factor))
    return _with_freq(op, p, x, lambda L: (w, 1.0))


@_mutant("scale_dynamic_fixed_length", *_ROPE_OPS)
def scale_dynamic_fixed_length(op, p, x):
    if p.rope_type != "dynamic":
        return None
    L = int(p.factor * p.max_position_embeddings)
    return _with_freq(op, p, x, lambda _: (rope_scaling.dynamic(p, L), 1.0))


@_mutant("scale_dynamic_uniform_division", *_ROPE_OPS)
def scale_dynamic_uniform_division(op, p, x):
    if p.rope_type != "dynamic":
        return None
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / p.factor ** (p.rdim / (p.rdim - 2))
    return _with_freq(op, p, x, lambda _: (w, 1.0))


@_mutant("scale_dynamic_factor_ignored", *_ROPE_OPS)
def scale_dynamic_factor_ignored(op, p, x):
    if p.rope_type != "dynamic":
        return None
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), 1.0))


@_mutant("scale_dynamic_stale", "rope.cos_sin_calls")
def scale_dynamic_stale(op, p, x):
    if p.rope_type != "dynamic" or p.dynamic_policy == "grow_until_reset":
        return None
    return ops.run(op, p.model_copy(update={"dynamic_policy": "grow_until_reset"}), x)


@_mutant("scale_dynamic_no_reset", "rope.cos_sin_calls")
def scale_dynamic_no_reset(op, p, x):
    if p.rope_type != "dynamic" or p.dynamic_policy != "grow_until_reset":
        return None
    state = {"cached": p.max_position_embeddings, "theta": p.rope_theta}

    def freq(L):
        if L is not None and L > state["cached"]:
            state["theta"], state["cached"] = rope_scaling.dynamic_theta(p, L), L
        return rope_scaling.base_inv_freq(state["theta"], p.rdim), 1.0
    return _with_freq(op, p, x, freq)


def _yarn_af_mutant(op, p, x, af):
    w = rope_scaling.yarn(p)
    return _with_freq(op, p, x, lambda L: (w, af))


@_mutant("scale_yarn_mscale_ignored", *_ROPE_OPS)
def scale_yarn_mscale_ignored(op, p, x):
    if p.rope_type != "yarn" or not (p.mscale and p.mscale_all_dim) or p.attention_factor is not None:
        return None
    return _yarn_af_mutant(op, p, x, rope_scaling.get_mscale(rope_scaling.yarn_factor(p)))


@_mutant("scale_yarn_explicit_reapplied", *_ROPE_OPS)
def scale_yarn_explicit_reapplied(op, p, x):
    if p.rope_type != "yarn" or p.attention_factor is None:
        return None
    return _yarn_af_mutant(op, p, x, p.attention_factor * rope_scaling.get_mscale(rope_scaling.yarn_factor(p)))


@_mutant("scale_yarn_truncate_flipped", *_ROPE_OPS)
def scale_yarn_truncate_flipped(op, p, x):
    if p.rope_type != "yarn":
        return None
    flipped = p.model_copy(update={"truncate": not (p.truncate is None or p.truncate)})
    return _with_freq(op, p, x, lambda L: rope.inv_freq(flipped, L))


@_mutant("scale_llama3_ignored", *_ROPE_OPS)
def scale_llama3_ignored(op, p, x):
    if p.rope_type != "llama3":
        return None
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), 1.0))


@_mutant("scale_longrope_always_short", *_ROPE_OPS)
def scale_longrope_always_short(op, p, x):
    if p.rope_type != "longrope":
        return None
    return _with_freq(op, p, x, lambda L: rope.inv_freq(p, None))


# ---- behaviours of older transformers releases (named so a port of them is diagnosed) ----------


def _with_factor(op, p, x, factor):
    if factor == p.factor:
        return None
    return ops.run(op, p.model_copy(update={"factor": factor}), x)


@_mutant("scale_yarn_factor_override", *_ROPE_OPS)
def scale_yarn_factor_override(op, p, x):
    """transformers 4.51.3-4.55.4: factor := max_position_embeddings / original when both are set."""
    if p.rope_type != "yarn" or not (p.max_position_embeddings and p.original_max_position_embeddings):
        return None
    return _with_factor(op, p, x, p.max_position_embeddings / p.original_max_position_embeddings)


@_mutant("scale_yarn_range_max_position", *_ROPE_OPS)
def scale_yarn_range_max_position(op, p, x):
    """transformers <= 4.50.3: correction range computed with max_position_embeddings, not the original."""
    if (p.rope_type != "yarn" or not p.max_position_embeddings
            or p.max_position_embeddings == p.original_max_position_embeddings):
        return None
    q = p.model_copy(update={"original_max_position_embeddings": p.max_position_embeddings,
                             "factor": rope_scaling.yarn_factor(p)})
    return ops.run(op, q, x)


@_mutant("scale_longrope_forced_factor", *_ROPE_OPS)
def scale_longrope_forced_factor(op, p, x):
    """transformers 4.57.6: a top-level original_max_position_embeddings forces s = L_max / L_orig."""
    if p.rope_type != "longrope" or p.factor is None or not p.max_position_embeddings:
        return None
    return _with_factor(op, p, x, p.max_position_embeddings / p.original_max_position_embeddings)


@_mutant("scale_proportional_as_partial", *_ROPE_OPS)
def scale_proportional_as_partial(op, p, x):
    if p.rope_type != "proportional":
        return None
    partial = p.model_copy(update={"rope_type": "default", "factor": None})
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / (p.factor or 1.0)
    return _with_freq(op, partial, x, lambda L: (w, 1.0))


# ---- ALiBi (ALIBI-*) --------------------------------------------------------------------------
_ALIBI_OPS = ("alibi.slopes", "alibi.bias")


def _alibi_with_slopes(op, p, x, m):
    """The reference's outputs of ``op`` with slopes ``m`` in place of the spec's."""
    if op == "alibi.slopes":
        return {"slopes": np.asarray(m, np.float64)}
    out = ops.run(op, p, x)
    ref = alibi.slopes(p)
    shape = [1] * out["bias"].ndim
    shape[-3] = p.num_heads
    out["bias"] = out["bias"] / ref.reshape(shape) * np.asarray(m).reshape(shape)  # slopes are powers of 2^x
    return out


@_mutant("alibi_slopes_naive", *_ALIBI_OPS)
def alibi_slopes_naive(op, p, x):
    """2^(-B k / n) for every n, also where n is not a power of two."""
    n = p.num_heads
    if alibi.is_power_of_two(n):
        return None
    m = np.exp2(-p.alibi_bias_max * np.arange(1, n + 1, dtype=np.float64) / n)
    return _alibi_with_slopes(op, p, x, m)


@_mutant("alibi_sign_flipped", "alibi.bias")
def alibi_sign_flipped(op, p, x):
    out = ops.run(op, p, x)
    out["bias"] = -out["bias"]
    return out


@_mutant("alibi_causal_in_encoder", "alibi.bias")
def alibi_causal_in_encoder(op, p, x):
    """-m (i' - j) everywhere (no absolute value) where the symmetric form is specified."""
    if p.form != "symmetric":
        return None
    out = ops.run(op, p.model_copy(update={"form": "causal"}), x)
    _, compared = alibi.bias(p, int(x["query_length"]), int(x["key_length"]))
    return {"bias": out["bias"], "bias.compared": compared}


@_mutant("alibi_bloom_arange", "alibi.bias")
def alibi_bloom_arange(op, p, x):
    """BLOOM's bias with positions arange(Tk) instead of (cumsum(mask) - 1) * mask."""
    if p.form != "bloom":
        return None
    mask = np.asarray(x["attention_mask"])
    out = ops.run(op, p, {**x, "attention_mask": np.ones_like(mask)})
    out["bias.compared"] = ops.run(op, p, x)["bias.compared"]
    return out


# ---- T5 (T5-*) --------------------------------------------------------------------------------


def _t5_with_buckets(op, p, x, bucket_fn):
    if op == "t5.buckets":
        return {"buckets": bucket_fn(np.asarray(x["relative_position"]))}
    rel = t5.relative_positions(int(x["query_length"]), int(x["key_length"]), int(x["cache_length"]))
    b = bucket_fn(rel)
    table = np.asarray(x["table"], np.float64)
    if b.min() < 0 or b.max() >= table.shape[0]:
        return None  # the wrong buckets index past the table: an implementation raises there
    return {"bias": np.transpose(table[b], (2, 0, 1))}


@_mutant("t5_rel_sign_flipped", "t5.buckets", "t5.bias")
def t5_rel_sign_flipped(op, p, x):
    return _t5_with_buckets(op, p, x, lambda rel: t5.buckets(-rel, p))


@_mutant("t5_no_halving", "t5.buckets", "t5.bias")
def t5_no_halving(op, p, x):
    """Bidirectional buckets with the full num_buckets: sign offset num_buckets, ranges unhalved."""
    if not p.bidirectional:
        return None

    def buckets(rel):
        rel = rel.astype(np.int64)
        nb = p.num_buckets
        n = np.abs(rel)
        e = nb // 2
        safe = np.maximum(n, e).astype(np.float64)
        large = np.minimum(e + np.trunc(np.log(safe / e) / np.log(p.max_distance / e) * (nb - e)).astype(np.int64),
                           nb - 1)
        return (rel > 0).astype(np.int64) * nb + np.where(n < e, n, large)
    return _t5_with_buckets(op, p, x, buckets)


@_mutant("t5_cache_ignored", "t5.bias")
def t5_cache_ignored(op, p, x):
    return ops.run(op, p, {**x, "cache_length": np.asarray(0)})


# ---- M-RoPE (MROPE-*) and NoPE (NOPE-*) --------------------------------------------------------
_MROPE_OPS = ("mrope.cos_sin", "mrope.apply")


def _mrope_with_axes(op, p, x, axes):
    pos = np.asarray(x["position_ids"])
    ap = np.moveaxis(pos[np.asarray(axes)], 0, -1)
    return ops.mrope_outputs(op, p, x, ap)


@_mutant("mrope_section_order", *_MROPE_OPS)
def mrope_section_order(op, p, x):
    """Sections applied to the axes in reverse order (W, H, T): the T section takes the width."""
    return _mrope_with_axes(op, p, x, [2 - a for a in p.axes])


@_mutant("mrope_interleaved_as_contiguous", *_MROPE_OPS)
def mrope_interleaved_as_contiguous(op, p, x):
    """Qwen3-VL's sections laid out contiguously (Qwen2-VL's rule) where interleaving is specified."""
    if p.layout != "interleaved":
        return None
    return ops.mrope_outputs(op, p.model_copy(update={"layout": "contiguous"}), x)


@_mutant("mrope_temporal_only", *_MROPE_OPS)
def mrope_temporal_only(op, p, x):
    """Only the temporal axis used for every frequency (plain 1-D RoPE at the t position)."""
    return _mrope_with_axes(op, p, x, [0] * (p.head_dim // 2))


@_mutant("nope_flags_inverted", "nope.layer_flags")
def nope_flags_inverted(op, p, x):
    """HF's no_rope_layers read literally: 1 taken to mean NoPE (every flag inverted)."""
    return {"use_rope": 1 - nope.layer_flags(p)}


# ---- YaRN softmax scale (SCALE-YARN-SOFTMAX-SCALE) ---------------------------------------------


def _probs_with_scale(p, x, scale):
    return {"probs": attention.probs(x["q"], x["k"], p, scale=scale)}


@_mutant("scale_softmax_mscale_missing", "attention.probs")
def scale_softmax_mscale_missing(op, p, x):
    """The plain ``qk_head_dim ** -0.5``: the mscale correction dropped from the softmax scale."""
    return _probs_with_scale(p, x, p.qk_head_dim ** -0.5)


@_mutant("scale_softmax_mscale_not_squared", "attention.probs")
def scale_softmax_mscale_not_squared(op, p, x):
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim)``: the correction applied once."""
    m = rope_scaling.get_mscale(rope_scaling.yarn_factor(p.rope), p.rope.mscale_all_dim)
    return _probs_with_scale(p, x, p.qk_head_dim ** -0.5 * m)


@_mutant("scale_softmax_rope_dim", "attention.probs")
def scale_softmax_rope_dim(op, p, x):
    """The scale taken of the rope head dim (64) instead of qk_head_dim (192)."""
    return _probs_with_scale(p, x, rope_scaling.yarn_softmax_scale(p.rope, p.rope.head_dim))

"""The ``tensorflow`` and ``tensorflow-function`` adapters: the kit's own TensorFlow port.

Written from the spec's formulas and the kit's torch port (``adapters/torch_adapter.py``),
operation by operation, in native TensorFlow ops: ``_rotate`` follows its ``rotate``,
``_scaled_inv_freq`` its ``scaled_inv_freq`` and ``TorchRope._update``, ``_t5_buckets``,
``_alibi_slopes`` and ``k_attention_probs`` its ``t5_buckets``, ``alibi_slopes`` and
``attention_probs``, every other kernel the adapter method of the same name.  Layouts and
dtypes are those of ``adapters/base.py``.  There is one code path for the math: every
array computation is a *kernel*, a plain function of tensors (positional) and static Python
parameters (keywords: the spec's parameter models, dtypes, widths).  The two adapters differ
only in how a kernel runs (:meth:`TFAdapter.run`):

``tensorflow``            eagerly.
``tensorflow-function``   through ``tf.function`` (``reduce_retracing=True``), one function
                          per ``(kernel, static parameters)``, cached on the adapter.  Everything
                          that changes between calls -- positions, ``cache_length``,
                          ``seq_len``, ``batch``, query/key lengths, the dynamic-NTK state --
                          is passed as a tensor (Python ints become int64 scalars), never
                          baked into the graph as a trace-time constant; a kernel's static
                          parameters are part of the function's cache key.  So decode loops,
                          changing ``cache_length`` and dynamic-NTK grow/reset sequences run
                          through the same traced graph with correct, changing values.

Dtype policy (ROPE-PRECISION, SIN-PRECISION, as the torch port): frequencies are computed in
float64 and held in float32 (float64 for float64 activations); angles, cos/sin, the rotation,
sinusoids, ALiBi biases, LayerNorm and attention logits are computed in that compute dtype and
rounded once to the activation dtype.  TensorFlow runs every op used here in bfloat16 and
float16 on CPU (only gathers, slices, adds, casts and concatenations touch those dtypes), so all four
dtypes are supported and no op needs a cast around it.

State (SCALE-DYNAMIC-GROW): a prepared RoPE keeps ``(cached length, theta')`` as int64 /
float64 tensors on the Python object; each call passes them into the kernel and stores the
updated values the kernel returns (the kernel itself is pure, so eager and compiled runs agree).

Row range (LEARNED-ROW-RANGE): ``tf.gather`` raises on CPU but returns zeros on GPU.  Every
gather is preceded by a host-side check of the rows (computed by their own kernel when they are
derived, e.g. OPT's ``cumsum(mask) * mask + 1``) that raises :class:`PositionOutOfRange` before
any indexing, in both adapters and on every device; the gather kernel also asserts the range
inside the graph (``tf.debugging``), so no path can return zeros silently.  Hence
``range_probe_devices`` lists every device.

Devices: ``cpu``; ``cuda``, ``cuda:N``, ``gpu``, ``gpu:N`` all mean TensorFlow's ``/GPU:N``
(N defaults to 0).  Arrays are placed with ``tf.device``; an operation without a ``device``
argument runs on the device of its first tensor input.  :meth:`TFAdapter.device_of` reports
``cpu`` or ``cuda:N`` (the suite passes ``--device gpu[:N]`` on as ``cuda[:N]``).

Log noise: ``TF_CPP_MIN_LOG_LEVEL`` is set to ``1`` (hide TensorFlow's C++ INFO lines, such as
the CPU-feature banner; warnings and errors stay visible) only when the user has not set it and
tensorflow is not imported yet -- it has no effect after the import.  TensorFlow 2.21 writes its
first lines (oneDNN, the CUDA stub, cuInit) before absl's logging is initialised, and those
ignore the variable.

Graph rewrites: grappler may reorder multiplications (BERT's LayerNorm ``(x - mean) * rstd * w``
differs from the eager result by an ulp, well within tolerance) and rewrites a division by a
constant into a multiplication by its reciprocal, which moves T5's bucket boundaries; divisions
whose rounding matters go through :func:`exact_div`.
"""

from __future__ import annotations

import functools
import math
import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from posenc.spec.errors import DegenerateWidth, PositionOutOfRange  # noqa: E402

from .base import Adapter, roberta_from_bert  # noqa: E402

DTYPES = {"float64": tf.float64, "float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16,
          "int64": tf.int64, "int32": tf.int32, "bool": tf.bool}
F64, I64 = tf.float64, tf.int64
ROW_RANGE_TAG = "LEARNED-ROW-RANGE"


def compute_dtype(dtype: tf.DType) -> tf.DType:
    """At least float32: float64 activations keep float64, everything else uses float32."""
    return tf.float64 if dtype == tf.float64 else tf.float32


def tf_device(device: str) -> str:
    """TensorFlow's device name for ``cpu``, ``cuda[:N]`` or ``gpu[:N]``.

    Raises ``ValueError`` for any other spelling.
    """
    kind, _, index = device.partition(":")
    if kind == "cpu" and not index:
        return "/CPU:0"
    if kind in ("cuda", "gpu") and (not index or index.isdigit()):
        return f"/GPU:{int(index or 0)}"
    raise ValueError(f"unknown device {device!r}: use cpu, cuda[:N] or gpu[:N]")


# ---- kernels: pure functions of tensors (positional) and static parameters (keywords) ---------


def exact_div(x, c):
    """``x / c`` for a trace-time constant ``c != 0``, rounded as IEEE division in graphs too.

    Grappler's constant folding (``ConstantFolding::ReduceDivToReciprocalMul``,
    tensorflow/core/grappler/optimizers/constant_folding.cc) strength-reduces ``Div(x, const)``
    to ``Mul(x, 1 / const)`` inside a ``tf.function``, so ``log(8) / log(16)`` gives
    0.7499999999999999 instead of 0.75 and T5's bucket boundary at |relative position| 64 moves
    (bucket 13 instead of 14).  ``DivNoNan`` (``x / y``, 0 where ``y == 0``) is not rewritten.
    """
    x = tf.convert_to_tensor(x)
    return tf.math.divide_no_nan(x, tf.constant(c, x.dtype))


def _seq_len(position_ids):
    """``max(position_ids) + 1`` (0 for no positions), an int64 scalar tensor."""
    pos = tf.cast(position_ids, I64)
    return tf.where(tf.size(pos) > 0, tf.reduce_max(pos) + 1, tf.constant(0, I64))


def _base(theta, dim: int, n: int | None = None):
    """``theta ** (-2 i / dim)``, i = 0 .. n-1 (n = dim/2), float64; ``theta`` a float or f64 tensor."""
    i = tf.range(dim // 2 if n is None else n, dtype=F64)
    return tf.pow(tf.convert_to_tensor(theta, F64), -2.0 * i / dim)  # a float becomes f64 directly


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def _yarn_scale(p) -> float:
    return p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings


def attention_factor(p) -> float:
    """The cos/sin factor of ``p.rope_type`` (ROPE-ATTENTION-FACTOR, SCALE-YARN-ATTENTION-FACTOR,
    SCALE-LONGROPE-ATTENTION-FACTOR): a constant of the parameters."""
    if p.attention_factor is not None:
        return p.attention_factor
    if p.rope_type == "yarn":
        s = _yarn_scale(p)
        return _mscale(s, p.mscale) / _mscale(s, p.mscale_all_dim) if p.mscale and p.mscale_all_dim else _mscale(s)
    if p.rope_type == "longrope":
        s = _yarn_scale(p)
        return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(p.original_max_position_embeddings))
    return 1.0


def _dynamic_theta(p, length):
    """SCALE-DYNAMIC-NTK: ``theta * (factor * L / L_max - (factor - 1)) ** (d / (d - 2))``, L float64."""
    r, lmax = p.rdim, float(p.max_position_embeddings)
    return p.rope_theta * (exact_div(p.factor * length, lmax) - (p.factor - 1)) ** (r / (r - 2))


def _scaled_inv_freq(p, seq_len, cached, theta):
    """``(inv_freq float64 [pair_dim/2], cached', theta')`` for ``p.rope_type`` (SCALE-*).

    ``seq_len`` is the call's ``max(position_ids) + 1`` (int64 scalar); ``(cached, theta)`` is the
    grow-until-reset state (SCALE-DYNAMIC-GROW), returned unchanged by every other rope_type.
    """
    r, t = p.rdim, p.rope_type
    if t == "default":
        return _base(p.rope_theta, r), cached, theta
    if t == "linear":
        return _base(p.rope_theta, r) / p.factor, cached, theta
    if t == "dynamic":
        lmax = tf.constant(p.max_position_embeddings, I64)
        if p.dynamic_policy == "grow_until_reset":
            grow = seq_len > cached
            theta = tf.where(grow, _dynamic_theta(p, tf.cast(seq_len, F64)), theta)
            cached = tf.where(grow, seq_len, cached)
            reset = (seq_len < lmax) & (cached > lmax)
            theta = tf.where(reset, tf.constant(p.rope_theta, F64), theta)
            cached = tf.where(reset, lmax, cached)
            return _base(theta, r), cached, theta
        length = tf.cast(tf.maximum(seq_len, lmax), F64)  # per call (SCALE-DYNAMIC-PER-CALL)
        return _base(_dynamic_theta(p, length), r), cached, theta
    if t == "yarn":
        s, th = _yarn_scale(p), p.rope_theta

        def corr(beta):
            return r * math.log(p.original_max_position_embeddings / (beta * 2 * math.pi)) / (2 * math.log(th))
        low, high = corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)
        if p.truncate is None or p.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, r - 1)
        if low == high:
            high += 0.001
        ramp = tf.clip_by_value((tf.range(r // 2, dtype=F64) - low) / (high - low), 0.0, 1.0)
        w = _base(th, r)
        return w / s * ramp + w * (1 - ramp), cached, theta
    if t == "llama3":
        w = _base(p.rope_theta, r)
        L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
        wavelen = 2 * math.pi / w
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * w / p.factor + smooth * w
        return tf.where(wavelen < L / hi, w, tf.where(wavelen > L / lo, w / p.factor, blended)), cached, theta
    if t == "longrope":
        use_long = seq_len > p.original_max_position_embeddings
        ext = tf.where(use_long, tf.constant(p.long_factor, F64), tf.constant(p.short_factor, F64))
        return _base(p.rope_theta, r) / ext, cached, theta
    if t == "proportional":
        D = p.head_dim
        w = tf.concat([_base(p.rope_theta, D, r // 2), tf.zeros([D // 2 - r // 2], F64)], 0)
        return w / (p.factor or 1.0), cached, theta
    raise ValueError(f"unknown rope_type {t!r}")


def _rotate(x, cos, sin, rotary_dim: int, pairing: str):
    """Rotate the first ``rotary_dim`` dims of ``x [B, H, T, D]``; cos/sin ``[B, T, r/2]``.

    ``pairing``: ``half`` (i, i + r/2), ``interleaved`` (2i, 2i + 1), ``deinterleave`` (pairs
    (2i, 2i + 1) in, written to (i, i + r/2)) -- ROPE-PAIR-HALF / -INTERLEAVED / -DEINTERLEAVE.

    Computed in ``cos.dtype``, rounded once to ``x.dtype``; the tail is returned as is.
    """
    xr = tf.cast(x[..., :rotary_dim], cos.dtype)
    c, s = cos[:, None], sin[:, None]
    if pairing == "half":
        h = rotary_dim // 2
        x1, x2 = xr[..., :h], xr[..., h:]
        y = tf.concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    elif pairing == "interleaved":
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = tf.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
        y = tf.reshape(y, tf.concat([tf.shape(y)[:-2], [rotary_dim]], 0))
    elif pairing == "deinterleave":  # ROPE-PAIR-DEINTERLEAVE: pairs (2i, 2i + 1) in, written to (i, i + r/2)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = tf.concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    else:
        raise ValueError(f"unknown pairing {pairing!r}")
    return tf.concat([tf.cast(y, x.dtype), x[..., rotary_dim:]], axis=-1)


def _angles_cos_sin(position_ids, w, af: float, cd):
    phi = tf.cast(position_ids, cd)[..., None] * tf.cast(w, cd)
    return af * tf.cos(phi), af * tf.sin(phi)


def k_rope_inv_freq(seq_len, cached, theta, *, p, cd):
    """``(inv_freq [pair_dim/2] in cd, cached', theta')`` (the state is unchanged when seq_len is 0)."""
    w, cached, theta = _scaled_inv_freq(p, seq_len, cached, theta)
    return tf.cast(w, cd), cached, theta


def k_rope_cos_sin(position_ids, cached, theta, *, p, cd, dt, af):
    """ROPE-ANGLE: ``af * (cos, sin)`` ``[B, T, pair_dim/2]`` in ``dt``, plus the new state."""
    w, cached, theta = k_rope_inv_freq(_seq_len(position_ids), cached, theta, p=p, cd=cd)
    c, s = _angles_cos_sin(position_ids, w, af, cd)
    return tf.cast(c, dt), tf.cast(s, dt), w, cached, theta


def k_rope_apply(q, k, position_ids, cached, theta, *, p, cd, af):
    """ROPE-PAIR-*, ROPE-PARTIAL: rotated q, k in their dtype, plus the new state."""
    w, cached, theta = k_rope_inv_freq(_seq_len(position_ids), cached, theta, p=p, cd=cd)
    c, s = _angles_cos_sin(position_ids, w, af, cd)
    r, pr = p.pair_dim, p.pairing
    return _rotate(q, c, s, r, pr), _rotate(k, c, s, r, pr), w, cached, theta


def k_rotate_with_cos_sin(q, k, cos, sin, *, rotary_dim, pairing):
    """ROPE-PAIR-*: q, k ``[B, H, T, D]`` rotated by given half-width cos/sin ``[B, T, r/2]``,
    computed in the compute dtype of ``q``, rounded once to its dtype."""
    cd = compute_dtype(q.dtype)
    c, s = tf.cast(cos, cd), tf.cast(sin, cd)
    return _rotate(q, c, s, rotary_dim, pairing), _rotate(k, c, s, rotary_dim, pairing)


def k_mrope(position_ids, *, p, axes, dt):
    """MROPE-*: cos/sin ``[B, T, D/2]`` in the compute dtype; each frequency reads its axis' positions."""
    cd = compute_dtype(dt)
    D = p.head_dim
    w = tf.cast(tf.pow(tf.constant(p.rope_theta, F64), -(tf.range(0, D, 2, dtype=F64) / D)), cd)
    pos = tf.transpose(tf.gather(position_ids, axes), [1, 2, 0])  # [B, T, D/2]
    phi = tf.cast(pos, cd) * w
    return tf.cos(phi), tf.sin(phi)


def k_mrope_cos_sin(position_ids, *, p, axes, dt):
    """MROPE-*: half-width cos/sin ``[B, T, head_dim/2]`` in ``dt`` from position_ids ``[3, B, T]``."""
    c, s = k_mrope(position_ids, p=p, axes=axes, dt=dt)
    return tf.cast(c, dt), tf.cast(s, dt)


def k_mrope_apply(q, k, position_ids, *, p, axes, dt):
    """MROPE-*: q, k ``[B, H, T, D]`` rotated with half pairing over the whole head."""
    c, s = k_mrope(position_ids, p=p, axes=axes, dt=dt)
    D = p.head_dim
    return _rotate(q, c, s, D, "half"), _rotate(k, c, s, D, "half")


def k_sinusoidal(position_ids, *, p, dt):
    """SIN-VASWANI-* (and, for the other variants, the h - 1 divisor of SIN-T2T, -FAIRSEQ, -WHISPER)."""
    cd = compute_dtype(dt)
    D = p.dim
    if p.variant != "vaswani":
        h = D // 2
        w = tf.cast(tf.pow(tf.constant(p.base, F64), -tf.range(h, dtype=F64) / max(h - 1, 1)), cd)
        phi = tf.cast(position_ids, cd)[..., None] * w
        parts = [tf.sin(phi), tf.cos(phi)] + ([tf.zeros_like(phi[..., :1])] if D % 2 else [])
        pe = tf.concat(parts, axis=-1)
        if p.variant == "fairseq":
            pe = tf.where((position_ids == p.padding_idx)[..., None], tf.zeros_like(pe), pe)
        return tf.cast(pe, dt)
    j = tf.range(D, dtype=F64)
    if p.layout == "interleaved":
        expo = 2 * tf.floor(j / 2) / D
        is_sin = tf.range(D) % 2 == 0
    else:
        ns = (D + 1) // 2
        expo = tf.concat([2 * j[:ns] / D, 2 * j[: D - ns] / D], 0)
        is_sin = tf.range(D) < ns
    w = tf.cast(tf.pow(tf.constant(p.base, F64), -expo), cd)
    phi = tf.cast(position_ids, cd)[..., None] * w
    return tf.cast(tf.where(is_sin, tf.sin(phi), tf.cos(phi)), dt)


def k_padding_aware_positions(input_ids, cache_length, *, padding_idx):
    """SIN-FAIRSEQ-POSITIONS, LEARNED-ROBERTA-POSITIONS: ``(cumsum(mask) + C) * mask + padding_idx``."""
    m = tf.cast(input_ids != padding_idx, I64)
    return (tf.cumsum(m, axis=-1) + cache_length) * m + padding_idx


def k_arange_positions(batch, seq_len, start):
    """POS-PREFILL / POS-DECODE: ``start + arange(seq_len)`` broadcast to ``[batch, seq_len]``."""
    return tf.broadcast_to(start + tf.range(seq_len, dtype=I64)[None], tf.stack([batch, seq_len]))


def k_default_positions(input_ids, cache_length):
    """Learned embeddings' default positions ``cache_length + arange(T)``, ``[B, T]``."""
    s = tf.shape(input_ids, out_type=I64)
    return k_arange_positions(s[0], s[1], cache_length)


def k_zeros_like(x):
    """BERT's default token_type_ids: zeros shaped like ``input_ids``."""
    return tf.zeros_like(x)


def k_bart_rows(input_ids, cache_length):
    """LEARNED-BART-POSITIONS: rows ``cache_length + arange(T) + 2``; the mask is not read."""
    return k_default_positions(input_ids, cache_length) + 2


def k_opt_positions(attention_mask, cache_length):
    """LEARNED-OPT-POSITIONS: ``(cumsum(mask) * mask - 1)[:, cache_length:]``."""
    m = tf.cast(attention_mask, I64)
    return (tf.cumsum(m, axis=-1) * m - 1)[:, cache_length:]


def k_opt_rows(positions):
    """LEARNED-OPT-OFFSET: rows = positions + 2."""
    return tf.cast(positions, I64) + 2


def k_left_pad_positions(attention_mask, cache_length):
    """POS-LEFT-PAD: ``cumsum(mask) - 1``, 0 at padded slots, the last T columns."""
    m = tf.cast(attention_mask, I64)
    pos = tf.where(m == 0, tf.zeros_like(m), tf.cumsum(m, axis=-1) - 1)
    return pos[:, cache_length:]


def k_packed_positions(cu_seqlens):
    """POS-PACKED: positions restart at every ``cu_seqlens`` boundary, ``[1, total]``."""
    cu = tf.cast(cu_seqlens, I64)
    starts = tf.repeat(cu[:-1], cu[1:] - cu[:-1])
    return (tf.range(cu[-1], dtype=I64) - starts)[None]


def k_row_span(rows):
    """``[min, max]`` of a non-empty int tensor (the host-side range check reads it)."""
    rows = tf.cast(rows, I64)
    return tf.stack([tf.reduce_min(rows), tf.reduce_max(rows)])


def _gather(table, rows):
    """``table[rows]``, asserting ``0 <= rows < len(table)`` in the graph first (LEARNED-ROW-RANGE)."""
    rows = tf.cast(rows, I64)
    n = tf.shape(table, out_type=I64)[0]
    with tf.control_dependencies([
        tf.debugging.assert_non_negative(rows, message=f"{ROW_RANGE_TAG}: negative row"),
        tf.debugging.assert_less(rows, n, message=f"{ROW_RANGE_TAG}: row past the end of the table"),
    ]):
        return tf.gather(table, rows)


def k_lookup(table, rows):
    """LEARNED-ROW-RANGE: ``table [N, E]`` rows ``[...]`` -> ``[..., E]`` in the table's dtype."""
    return _gather(table, rows)


def k_gpt2(wte, wpe, input_ids, position_ids):
    """LEARNED-GPT2-*: ``wte[input_ids] + wpe[position_ids]`` in the activation dtype."""
    return _gather(wte, input_ids) + _gather(wpe, position_ids)


def k_bert(word, pos_table, tt_table, ln_w, ln_b, input_ids, token_type_ids, position_ids, *, eps):
    """LEARNED-BERT-*: word + token_type + position (activation dtype), then LayerNorm computed in
    the compute dtype and rounded once."""
    x = _gather(word, input_ids) + _gather(tt_table, token_type_ids)
    x = x + _gather(pos_table, position_ids)
    cd = compute_dtype(x.dtype)
    xc = tf.cast(x, cd)
    mean, var = tf.nn.moments(xc, axes=[-1], keepdims=True)
    y = (xc - mean) * tf.math.rsqrt(var + tf.constant(eps, cd)) * tf.cast(ln_w, cd) + tf.cast(ln_b, cd)
    return tf.cast(y, x.dtype)


def _alibi_slopes(p, cd):
    """ALIBI-SLOPES: ``2^(-e)`` from float64 exponents (c = 2^floor(log2 n) slopes, then every other
    slope of 2c), held in ``cd``."""
    n, B = p.num_heads, p.alibi_bias_max
    c = 1 << (n.bit_length() - 1)
    e = [B * k / c for k in range(1, c + 1)] + [B * (2 * j + 1) / (2 * c) for j in range(n - c)]
    return tf.cast(tf.pow(tf.constant(2.0, F64), -tf.constant(e, F64)), cd)


def k_alibi_slopes(*, p, cd):
    """ALIBI-SLOPES ``[H]`` in ``cd`` (float32, or float64 for float64 activations)."""
    return _alibi_slopes(p, cd)


def k_alibi_bias(query_length, key_length, *, p, dt):
    """ALIBI-CAUSAL / -SYMMETRIC / -MPT ``[H, Tq, Tk]``: queries are the last Tq keys."""
    cd = compute_dtype(dt)
    m = _alibi_slopes(p, cd)
    i = tf.range(query_length, dtype=I64) + (key_length - query_length)
    j = tf.range(key_length, dtype=I64)
    d = tf.cast(i[:, None] - j[None, :], cd)
    if p.form == "causal":
        out = -m[:, None, None] * d
    elif p.form == "symmetric":
        out = -m[:, None, None] * tf.abs(d)
    elif p.form == "mpt":
        row = tf.cast(j - (key_length - 1), cd)
        out = tf.broadcast_to(m[:, None, None] * row[None, None, :],
                              tf.stack([tf.constant(p.num_heads, I64), query_length, key_length]))
    else:
        raise ValueError(f"unknown ALiBi form {p.form!r}")
    return tf.cast(out, dt)


def k_alibi_bloom(attention_mask, query_length, *, p, dt):
    """ALIBI-BLOOM ``[B, H, Tq, Tk]``: slope times ``(cumsum(mask) - 1) * mask`` of each key."""
    cd = compute_dtype(dt)
    m = _alibi_slopes(p, cd)
    mask = tf.cast(attention_mask, I64)
    pos = (tf.cumsum(mask, axis=-1) - 1) * mask
    out = m[None, :, None, None] * tf.cast(pos, cd)[:, None, None, :]
    s = tf.shape(mask, out_type=I64)
    return tf.cast(tf.broadcast_to(out, tf.stack([s[0], p.num_heads, query_length, s[1]])), dt)


def _t5_buckets(relative_position, p):
    """T5-BUCKET-BIDIRECTIONAL / -CAUSAL: float64 log, never of 0, truncated toward zero."""
    rel = tf.cast(relative_position, I64)
    nb = p.num_buckets
    out = tf.zeros_like(rel)
    if p.bidirectional:
        nb //= 2
        out = out + tf.cast(rel > 0, I64) * nb
        n = tf.abs(rel)
    else:
        n = tf.maximum(-rel, 0)
    e = nb // 2
    safe = tf.cast(tf.maximum(n, e), F64)
    large = e + tf.cast(exact_div(tf.math.log(exact_div(safe, e)), math.log(p.max_distance / e)) * (nb - e), I64)
    large = tf.minimum(large, nb - 1)
    return out + tf.where(n < e, n, large)


def k_t5_buckets(relative_position, *, p):
    """T5-BUCKET-*: int64 buckets, the shape of ``relative_position`` (key minus query position)."""
    return _t5_buckets(relative_position, p)


def k_t5_bias_buckets(query_length, key_length, cache_length, *, p):
    """Buckets of ``key - (query + cache_length)``, ``[Tq, Tk]``."""
    ctx = tf.range(query_length, dtype=I64)[:, None] + cache_length
    mem = tf.range(key_length, dtype=I64)[None, :]
    return _t5_buckets(mem - ctx, p)


def k_t5_bias(table, buckets):
    """T5-BIAS: ``table[buckets]`` as ``[H, Tq, Tk]``."""
    return tf.transpose(_gather(table, buckets), [2, 0, 1])


def k_nope_layer_flags(*, p):
    """NOPE-LAYER-FLAGS: 1 where the layer uses RoPE, 0 where NoPE."""
    n = p.num_hidden_layers
    if p.no_rope_layers is not None:
        return tf.constant(p.no_rope_layers[:n], I64)
    i = tf.range(n, dtype=I64)
    return tf.cast((i + 1) % p.no_rope_layer_interval != 0, I64)


def k_attention_probs(q, k, *, scale):
    """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)``, k heads repeated to q's, computed in the
    compute dtype, rounded once to ``q.dtype``."""
    cd = compute_dtype(q.dtype)
    kk = tf.repeat(tf.cast(k, cd), tf.shape(q)[1] // tf.shape(k)[1], axis=1)  # shapes may be relaxed to None
    logits = tf.matmul(tf.cast(q, cd), kk, transpose_b=True) * tf.constant(scale, cd)
    return tf.cast(tf.nn.softmax(logits, axis=-1), q.dtype)


# ---- prepared operations ------------------------------------------------------------------------


class TFRope:
    """Prepared RoPE for one parameter set, dtype and device (ROPE-*, SCALE-*).

    ``dynamic`` and ``longrope`` recompute their frequencies in the kernel from each call's
    ``max(position_ids) + 1``; ``dynamic_policy='grow_until_reset'`` keeps transformers' state
    ``(cached, theta')`` across calls as tensors on this object (SCALE-DYNAMIC-GROW).
    """

    def __init__(self, adapter: "TFAdapter", params, dtype: tf.DType, device: str):
        self.a, self.p, self.dtype, self.device = adapter, params, dtype, device
        self.cd, self.af = compute_dtype(dtype), float(attention_factor(params))
        with tf.device(tf_device(device)):
            self._cached = tf.constant(params.max_position_embeddings or 0, I64)
            self._theta = tf.constant(params.rope_theta, F64)
        self._inv_freq, *_ = adapter.run(k_rope_inv_freq, 0, self._cached, self._theta, device=device,
                                         p=params, cd=self.cd)

    def inv_freq(self):
        """``(inv_freq [pair_dim/2] float32 (float64 for float64), attention_factor)`` of the last call."""
        return self._inv_freq, self.af

    def cos_sin(self, position_ids):
        c, s, self._inv_freq, self._cached, self._theta = self.a.run(
            k_rope_cos_sin, position_ids, self._cached, self._theta, p=self.p, cd=self.cd, dt=self.dtype, af=self.af)
        return c, s

    def apply(self, q, k, position_ids):
        q, k, self._inv_freq, self._cached, self._theta = self.a.run(
            k_rope_apply, q, k, position_ids, self._cached, self._theta, p=self.p, cd=self.cd, af=self.af)
        return q, k


def mrope_axes(params) -> tuple[int, ...]:
    """Axis (0 t, 1 h, 2 w) of each frequency (MROPE-SECTIONS contiguous / MROPE-INTERLEAVED)."""
    half, sec = params.head_dim // 2, params.mrope_section
    if params.layout == "contiguous":
        return tuple(a for a, n in enumerate(sec) for _ in range(n))
    return tuple(1 if k % 3 == 1 and k < 3 * sec[1] else 2 if k % 3 == 2 and k < 3 * sec[2] else 0
                 for k in range(half))


class TFMRope:
    """Prepared M-RoPE (MROPE-*): position_ids ``[3, B, T]``, half pairing over the whole head."""

    def __init__(self, adapter: "TFAdapter", params, dtype: tf.DType):
        self.a, self.p, self.dtype, self.axes = adapter, params, dtype, mrope_axes(params)

    def _check(self, position_ids):
        if position_ids.shape.rank != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {position_ids.shape.as_list()}")

    def cos_sin(self, position_ids):
        self._check(position_ids)
        return self.a.run(k_mrope_cos_sin, position_ids, p=self.p, axes=self.axes, dt=self.dtype)

    def apply(self, q, k, position_ids):
        self._check(position_ids)
        return self.a.run(k_mrope_apply, q, k, position_ids, p=self.p, axes=self.axes, dt=self.dtype)


# ---- the adapters -------------------------------------------------------------------------------


class TFAdapter(Adapter):
    """The kit's TensorFlow port; ``compiled`` runs every kernel through ``tf.function``."""

    name = "tensorflow"
    framework = "tensorflow"
    devices = ("cpu", "cuda", "gpu")
    range_probe_devices = ("cpu", "cuda", "gpu")  # rows are checked on the host before any gather
    notes = "kit's own TF port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype; eager"
    compiled = False

    def __init__(self):
        self.functions: dict = {}  # (kernel, static parameters) -> tf.function (compiled only)

    # ---- running kernels -----------------------------------------------------------------
    def function(self, kernel, **static):
        """The cached ``tf.function`` running ``kernel(*tensors, **static)``."""
        key = (kernel, tuple(sorted(static.items())))
        fn = self.functions.get(key)
        if fn is None:
            fn = self.functions[key] = tf.function(functools.partial(kernel, **static), reduce_retracing=True,
                                                  autograph=False)  # kernels branch on static values only
        return fn

    def run(self, kernel, *args, device: str | None = None, **static):
        """Run ``kernel`` on ``args`` (Python ints become int64 scalar tensors) with its static
        parameters: eagerly, or through :meth:`function`.  ``device`` (a kit name) defaults to the
        device of the first tensor argument."""
        where = tf_device(device) if device is not None else next(
            (a.device for a in args if isinstance(a, tf.Tensor)), None)
        if where is None:
            raise ValueError(f"{kernel.__name__}: no device given and no tensor argument to take it from")
        with tf.device(where):
            args = tuple(tf.constant(a, I64) if isinstance(a, int) and not isinstance(a, bool) else a for a in args)
            if self.compiled:
                return self.function(kernel, **static)(*args)
            return kernel(*args, **static)

    def check_rows(self, rows, num_rows: int, what: str = "row") -> None:
        """Raise :class:`PositionOutOfRange` unless ``0 <= rows < num_rows`` (host-side, before indexing)."""
        if rows.shape.num_elements() == 0:
            return
        lo, hi = (int(v) for v in self.run(k_row_span, rows).numpy())
        if lo < 0 or hi >= num_rows:
            raise PositionOutOfRange(lo, hi, num_rows, what)

    def _gather_checked(self, kernel, tables_rows: list, *args, **static):
        for table, rows in tables_rows:
            self.check_rows(rows, int(table.shape[0]))
        return self.run(kernel, *args, **static)

    # ---- environment and arrays ------------------------------------------------------------
    def versions(self):
        return {"tensorflow": tf.__version__}

    def device_available(self, device):
        try:
            name = tf_device(device)
        except ValueError:
            return False
        if name == "/CPU:0":
            return True
        return int(name.rsplit(":", 1)[1]) < len(tf.config.list_physical_devices("GPU"))

    def from_numpy(self, array, dtype, device):
        with tf.device(tf_device(device)):
            a = np.ascontiguousarray(array)
            if dtype == "bfloat16":  # via float32: golden values are exact in bfloat16
                return tf.cast(tf.constant(a.astype(np.float32)), tf.bfloat16)
            return tf.constant(a, DTYPES[dtype])

    def to_numpy(self, x):
        if x.dtype in (tf.bfloat16, tf.float16):
            x = tf.cast(x, tf.float32)
        return np.asarray(x.numpy())

    def dtype_of(self, x):
        return x.dtype.name

    def device_of(self, x):
        spec = tf.DeviceSpec.from_string(x.device)
        return "cpu" if spec.device_type == "CPU" else f"cuda:{spec.device_index or 0}"

    # ---- RoPE ------------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        return TFRope(self, params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        return self.run(k_rotate_with_cos_sin, q, k, cos, sin, rotary_dim=params.pair_dim, pairing=params.pairing)

    # ---- sinusoidal ------------------------------------------------------------------------
    def sinusoidal(self, position_ids, params, *, dtype, device):
        D, v = params.dim, params.variant
        if v == "whisper" and D % 2:
            raise DegenerateWidth("SIN-WHISPER", D, "Whisper's sinusoids need an even number of channels")
        if v in ("fairseq", "whisper") and D // 2 == 1:
            raise DegenerateWidth("SIN-WHISPER" if v == "whisper" else "SIN-FAIRSEQ-POSITIONS", D,
                                  f"h = D // 2 = 1 makes the {v} divisor h - 1 zero")
        return self.run(k_sinusoidal, position_ids, device=device, p=params, dt=DTYPES[dtype])

    def fairseq_positions(self, input_ids, params, cache_length):
        return self.run(k_padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: self.sinusoidal(
            self.fairseq_positions(input_ids, params, cache_length), params, dtype=dtype, device=device)

    # ---- learned ---------------------------------------------------------------------------
    def lookup(self, table, rows):
        return self._gather_checked(k_lookup, [(table, rows)], table, rows)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                position_ids = self.run(k_default_positions, input_ids, cache_length)
            return self._gather_checked(k_gpt2, [(wte, input_ids), (wpe, position_ids)],
                                        wte, wpe, input_ids, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            if token_type_ids is None:
                token_type_ids = self.run(k_zeros_like, input_ids)
            if position_ids is None:
                position_ids = self.run(k_default_positions, input_ids, cache_length)
            tabs = (w["word_embeddings"], w["position_embeddings"], w["token_type_embeddings"])
            return self._gather_checked(
                k_bert, [(tabs[0], input_ids), (tabs[2], token_type_ids), (tabs[1], position_ids)],
                *tabs, w["layer_norm_weight"], w["layer_norm_bias"], input_ids, token_type_ids, position_ids,
                eps=float(params.layer_norm_eps))
        return call

    def roberta_positions(self, input_ids, params, cache_length):
        return self.run(k_padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        return roberta_from_bert(self, params, weights, dtype=dtype, device=device)

    def bart_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda input_ids, attention_mask=None, cache_length=0: self.lookup(
            table, self.run(k_bart_rows, input_ids, cache_length))

    def opt_positions(self, attention_mask, cache_length):
        return self.run(k_opt_positions, attention_mask, cache_length)

    def opt_rows(self, positions):
        return self.run(k_opt_rows, positions)

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

    # ---- position ids ----------------------------------------------------------------------
    def position_ids(self, rule, *, device, **x):
        if rule in ("prefill", "decode"):
            start = x.get("cache_length", 0) if rule == "decode" else 0
            return self.run(k_arange_positions, x["batch"], x["seq_len"], start, device=device)
        if rule == "left_pad":
            return self.run(k_left_pad_positions, x["attention_mask"], x["cache_length"], device=device)
        if rule == "packed":
            return self.run(k_packed_positions, x["cu_seqlens"], device=device)
        raise ValueError(f"unknown position_ids rule {rule!r}")

    # ---- ALiBi -----------------------------------------------------------------------------
    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES ``[H]`` float32 (float64 for float64 activations)."""
        return self.run(k_alibi_slopes, device=device, p=params, cd=compute_dtype(DTYPES[dtype]))

    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        dt = DTYPES[dtype]
        if params.form == "bloom":
            if attention_mask is None:
                raise ValueError("ALIBI-BLOOM: the bloom form needs an attention_mask [B, Tk]")
            _check_lengths(query_length, int(attention_mask.shape[-1]))
            return self.run(k_alibi_bloom, attention_mask, query_length, device=device, p=params, dt=dt)
        _check_lengths(query_length, key_length)
        return self.run(k_alibi_bias, query_length, key_length, device=device, p=params, dt=dt)

    # ---- T5 --------------------------------------------------------------------------------
    def t5_buckets(self, relative_position, params):
        return self.run(k_t5_buckets, relative_position, p=params)

    def t5_bias(self, params, weights, *, dtype, device):
        table = weights["table"]
        if table.shape.rank != 2 or table.shape[0] != params.num_buckets:
            raise ValueError(f"T5-BIAS: table must be [num_buckets={params.num_buckets}, H], "
                             f"got {table.shape.as_list()}")

        def call(query_length, key_length, cache_length=0):
            b = self.run(k_t5_bias_buckets, query_length, key_length, cache_length, device=device, p=params)
            return self._gather_checked(k_t5_bias, [(table, b)], table, b)
        return call

    # ---- M-RoPE, NoPE, softmax scale -------------------------------------------------------
    def mrope(self, params, *, dtype, device):
        return TFMRope(self, params, DTYPES[dtype])

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: the layer's flag must be 0; q and k are returned untouched."""
        flags = self.nope_layer_flags(params, device="cpu").numpy().tolist()
        if not 0 <= layer_idx < len(flags) or flags[layer_idx] != 0:
            raise ValueError(f"layer {layer_idx} is not a NoPE layer (flags {flags})")
        return q, k

    def nope_layer_flags(self, params, *, device):
        return self.run(k_nope_layer_flags, device=device, p=params)

    def attention_probs(self, q, k, params):
        hq, hk = q.shape[1], k.shape[1]
        if hq % hk:
            raise ValueError(f"q heads {hq} are not a multiple of k heads {hk}")
        return self.run(k_attention_probs, q, k, scale=softmax_scale(params))


class TFFunctionAdapter(TFAdapter):
    """``tensorflow-function``: the same kernels, every one run through ``tf.function``."""

    name = "tensorflow-function"
    notes = "kit's own TF port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype; tf.function"
    compiled = True


def softmax_scale(params) -> float:
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` (s: factor, or L_max / L_orig)."""
    return params.qk_head_dim ** -0.5 * _mscale(_yarn_scale(params.rope), params.rope.mscale_all_dim) ** 2


def _check_lengths(query_length: int, key_length: int) -> None:
    if not 0 <= query_length <= key_length:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {query_length} and {key_length}")


ADAPTER = TFAdapter
FUNCTION_ADAPTER = TFFunctionAdapter

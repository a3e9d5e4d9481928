"""RoPE scaling (SCALE-*, ROPE-ATTENTION-FACTOR): the scaled ``inv_freq`` of every ``rope_type``,
the attention factor, and the YaRN softmax scale of ``attention_probs``
(SCALE-YARN-SOFTMAX-SCALE)."""

from __future__ import annotations

import math

from ._common import F64, I64, KernelRunner, compute_dtype, exact_div, tf


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
        if p.longrope_policy == "at_init":  # SCALE-LONGROPE-FACTORS at_init: fixed by the configuration
            use_long = tf.constant(p.max_position_embeddings > p.original_max_position_embeddings)
        else:
            use_long = seq_len > p.original_max_position_embeddings
        ext = tf.where(use_long, tf.constant(p.long_factor, F64), tf.constant(p.short_factor, F64))
        return _base(p.rope_theta, r) / ext, cached, theta
    if t == "proportional":
        D = p.head_dim
        w = tf.concat([_base(p.rope_theta, D, r // 2), tf.zeros([D // 2 - r // 2], F64)], 0)
        return w / (p.factor or 1.0), cached, theta
    raise ValueError(f"unknown rope_type {t!r}")


def softmax_scale(params) -> float:
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` (s: factor, or L_max / L_orig)."""
    return params.qk_head_dim ** -0.5 * _mscale(_yarn_scale(params.rope), params.rope.mscale_all_dim) ** 2


def k_attention_probs(q, k, *, scale):
    """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)``, k heads repeated to q's, computed in the
    compute dtype, rounded once to ``q.dtype``."""
    cd = compute_dtype(q.dtype)
    kk = tf.repeat(tf.cast(k, cd), tf.shape(q)[1] // tf.shape(k)[1], axis=1)  # shapes may be relaxed to None
    logits = tf.matmul(tf.cast(q, cd), kk, transpose_b=True) * tf.constant(scale, cd)
    return tf.cast(tf.nn.softmax(logits, axis=-1), q.dtype)


class Ops(KernelRunner):
    """Adapter methods of the rope_scaling family."""

    def attention_probs(self, q, k, params):
        hq, hk = q.shape[1], k.shape[1]
        if hq % hk:
            raise ValueError(f"q heads {hq} are not a multiple of k heads {hk}")
        return self.run(k_attention_probs, q, k, scale=softmax_scale(params))

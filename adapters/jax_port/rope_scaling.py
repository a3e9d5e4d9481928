"""RoPE scaling (SCALE-*): the rope_type rules of the inverse frequencies and the attention factor,
and the YaRN softmax scale of attention (SCALE-YARN-SOFTMAX-SCALE)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._common import HIGHEST, compute_dtype, kernel


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def attention_factor(p) -> float:
    """The cos/sin factor of ``p.rope_type`` (ROPE-ATTENTION-FACTOR, SCALE-YARN- / SCALE-LONGROPE-
    ATTENTION-FACTOR); it depends on the parameters only, never on positions."""
    if p.attention_factor is not None:
        return p.attention_factor
    if p.rope_type == "yarn":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
        return _mscale(s, p.mscale) / _mscale(s, p.mscale_all_dim) if p.mscale and p.mscale_all_dim else _mscale(s)
    if p.rope_type == "longrope":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
        return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(p.original_max_position_embeddings))
    return 1.0


def scaled_inv_freq(p, seq_len, theta):
    """float64 ``[pair_dim/2]`` frequencies of ``p.rope_type`` (SCALE-*), as in the torch port's
    ``scaled_inv_freq``.  ``seq_len`` (traced int: ``max(position_ids) + 1``, 0 before any call) drives
    dynamic (per-call policy) and longrope; ``theta`` (traced float64) is the grow policy's theta'."""
    r, t = p.rdim, p.rope_type

    def base(th, dim, n=None):
        i = jnp.arange(dim // 2 if n is None else n, dtype=jnp.float64)
        return jnp.asarray(th, jnp.float64) ** (-2 * i / dim)

    if t == "default":
        return base(p.rope_theta, r)
    if t == "linear":
        return base(p.rope_theta, r) / p.factor
    if t == "dynamic":
        if p.dynamic_policy == "grow_until_reset":
            return base(theta, r)
        lmax = p.max_position_embeddings
        L = jnp.maximum(jnp.asarray(seq_len, jnp.int64), lmax).astype(jnp.float64)
        return base(p.rope_theta * (p.factor * L / lmax - (p.factor - 1)) ** (r / (r - 2)), r)
    if t == "yarn":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings

        def corr(beta):
            L = p.original_max_position_embeddings
            return r * math.log(L / (beta * 2 * math.pi)) / (2 * math.log(p.rope_theta))
        low, high = corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)
        if p.truncate is None or p.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, r - 1)
        if low == high:
            high += 0.001
        ramp = jnp.clip((jnp.arange(r // 2, dtype=jnp.float64) - low) / (high - low), 0, 1)
        w = base(p.rope_theta, r)
        return w / s * ramp + w * (1 - ramp)
    if t == "llama3":
        w = base(p.rope_theta, r)
        L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
        wavelen = 2 * math.pi / w
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * w / p.factor + smooth * w
        return jnp.where(wavelen < L / hi, w, jnp.where(wavelen > L / lo, w / p.factor, blended))
    if t == "longrope":
        if p.longrope_policy == "at_init":  # SCALE-LONGROPE-FACTORS at_init: fixed by the configuration
            use_long = jnp.asarray(p.max_position_embeddings > p.original_max_position_embeddings)
        else:
            use_long = jnp.asarray(seq_len) > p.original_max_position_embeddings
        ext = jnp.where(use_long, jnp.asarray(p.long_factor, jnp.float64), jnp.asarray(p.short_factor, jnp.float64))
        return base(p.rope_theta, r) / ext
    if t == "proportional":
        D = p.head_dim
        w = jnp.concatenate([base(p.rope_theta, D, r // 2), jnp.zeros(D // 2 - r // 2, jnp.float64)])
        return w / (p.factor or 1.0)
    raise ValueError(f"unknown rope_type {t!r}")


@kernel("scale")
def attention_probs(q, k, scale):
    """SCALE-YARN-SOFTMAX-SCALE: row softmax of ``q k^T * scale`` (k heads repeated to q's), computed
    in the compute dtype with full-precision products, rounded once to ``q.dtype``."""
    hq, hk = q.shape[1], k.shape[1]
    cd = compute_dtype(q.dtype)
    kk = jnp.repeat(k.astype(cd), hq // hk, axis=1)
    logits = jnp.matmul(q.astype(cd), jnp.swapaxes(kk, -1, -2), precision=HIGHEST) * scale
    return jax.nn.softmax(logits, axis=-1).astype(q.dtype)


def softmax_scale(params) -> float:
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` (s: factor, or L_max / L_orig)."""
    p = params.rope
    s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
    return params.qk_head_dim ** -0.5 * _mscale(s, p.mscale_all_dim) ** 2


class Ops:
    """SCALE-YARN-SOFTMAX-SCALE operation of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def attention_probs(self, q, k, params):
        """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)`` over all keys, ``[B, Hq, Tq, Tk]``; the
        scale (a Python float) is applied in the compute dtype."""
        if q.shape[1] % k.shape[1]:
            raise ValueError(f"q heads {q.shape[1]} are not a multiple of k heads {k.shape[1]}")
        return self.run(attention_probs, q, k, scale=softmax_scale(params))

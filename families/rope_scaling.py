"""RoPE scaling (SCALE-*): the mutants of the scaled frequency rules (their golden cases are
:mod:`posenc.families.rope_scaling_cases`), and the attention.probs operation of
SCALE-YARN-SOFTMAX-SCALE.  The rules themselves are
:mod:`posenc.reference.rope_scaling`; the rope.* operations that reach them are the rope
family's (:mod:`posenc.families.rope`)."""

from __future__ import annotations

import numpy as np

from posenc.reference import attention, rope, rope_scaling
from posenc.spec.models import RopeParams

from . import mutant, reference
from ._common import run
from .rope import call_keys, rope_outputs


def _attn_probs(p, x):
    return {"probs": attention.probs(x["q"], x["k"], p)}


def _attn_probs_scales(p, x):
    return {"probs": attention.probs_error_scales(x["q"], x["k"], p)}


reference("attention.probs", scales=_attn_probs_scales)(_attn_probs)


# ---- RoPE scaling (SCALE-*) -----------------------------------------------------------------
_ROPE_OPS = ("rope.apply", "rope.cos_sin", "rope.inv_freq", "rope.cos_sin_calls")


def _with_freq(op, p, x, freq):
    return rope_outputs(op, p, x, freq)


@mutant("scale_linear_exponent", *_ROPE_OPS)
def scale_linear_exponent(op, p, x, dtype=None):
    if p.rope_type != "linear":
        return None
    w = p.rope_theta ** (-np.arange(0, p.rdim, 2, dtype=np.float64) / (p.rdim * p.factor))
    return _with_freq(op, p, x, lambda L: (w, 1.0))


@mutant("scale_dynamic_fixed_length", *_ROPE_OPS)
def scale_dynamic_fixed_length(op, p, x, dtype=None):
    if p.rope_type != "dynamic":
        return None
    L = int(p.factor * p.max_position_embeddings)
    return _with_freq(op, p, x, lambda _: (rope_scaling.dynamic(p, L), 1.0))


@mutant("scale_dynamic_uniform_division", *_ROPE_OPS)
def scale_dynamic_uniform_division(op, p, x, dtype=None):
    if p.rope_type != "dynamic":
        return None
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / p.factor ** (p.rdim / (p.rdim - 2))
    return _with_freq(op, p, x, lambda _: (w, 1.0))


@mutant("scale_dynamic_factor_ignored", *_ROPE_OPS)
def scale_dynamic_factor_ignored(op, p, x, dtype=None):
    if p.rope_type != "dynamic":
        return None
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), 1.0))


@mutant("scale_dynamic_stale", "rope.cos_sin_calls")
def scale_dynamic_stale(op, p, x, dtype=None):
    if p.rope_type != "dynamic" or p.dynamic_policy == "grow_until_reset":
        return None
    return run(op, p.model_copy(update={"dynamic_policy": "grow_until_reset"}), x)


@mutant("scale_dynamic_no_reset", "rope.cos_sin_calls")
def scale_dynamic_no_reset(op, p, x, dtype=None):
    if p.rope_type != "dynamic" or p.dynamic_policy != "grow_until_reset":
        return None
    state = {"cached": p.max_position_embeddings, "theta": p.rope_theta}

    def freq(L):
        if L is not None and L > state["cached"]:
            state["theta"], state["cached"] = rope_scaling.dynamic_theta(p, L), L
        return rope_scaling.base_inv_freq(state["theta"], p.rdim), 1.0
    return _with_freq(op, p, x, freq)


def _yarn_af_mutant(op, p, x, af, w=None):
    """The yarn rule's frequencies (or ``w``) with attention factor ``af``."""
    w = rope_scaling.yarn(p) if w is None else w
    return _with_freq(op, p, x, lambda L: (w, af))


@mutant("scale_yarn_mscale_ignored", *_ROPE_OPS)
def scale_yarn_mscale_ignored(op, p, x, dtype=None):
    if p.rope_type != "yarn" or not (p.mscale and p.mscale_all_dim) or p.attention_factor is not None:
        return None
    return _yarn_af_mutant(op, p, x, rope_scaling.get_mscale(rope_scaling.yarn_factor(p)))


@mutant("scale_yarn_explicit_reapplied", *_ROPE_OPS)
def scale_yarn_explicit_reapplied(op, p, x, dtype=None):
    if p.rope_type != "yarn" or p.attention_factor is None:
        return None
    return _yarn_af_mutant(op, p, x, p.attention_factor * rope_scaling.get_mscale(rope_scaling.yarn_factor(p)))


@mutant("scale_yarn_truncate_flipped", *_ROPE_OPS)
def scale_yarn_truncate_flipped(op, p, x, dtype=None):
    if p.rope_type != "yarn":
        return None
    flipped = p.model_copy(update={"truncate": not (p.truncate is None or p.truncate)})
    return _with_freq(op, p, x, lambda L: rope.inv_freq(flipped, L))


@mutant("scale_llama3_ignored", *_ROPE_OPS)
def scale_llama3_ignored(op, p, x, dtype=None):
    if p.rope_type != "llama3":
        return None
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), 1.0))


@mutant("scale_longrope_always_short", *_ROPE_OPS)
def scale_longrope_always_short(op, p, x, dtype=None):
    if p.rope_type != "longrope":
        return None
    return _with_freq(op, p, x, lambda L: rope.inv_freq(p, None))


# ---- behaviours of older transformers releases (named so a port of them is diagnosed) ----------


def _with_factor(op, p, x, factor):
    if factor == p.factor:
        return None
    return run(op, p.model_copy(update={"factor": factor}), x)


@mutant("scale_yarn_factor_override", *_ROPE_OPS)
def scale_yarn_factor_override(op, p, x, dtype=None):
    """transformers 4.51.3-4.55.4: factor := max_position_embeddings / original when both are set."""
    if p.rope_type != "yarn" or not (p.max_position_embeddings and p.original_max_position_embeddings):
        return None
    return _with_factor(op, p, x, p.max_position_embeddings / p.original_max_position_embeddings)


@mutant("scale_yarn_range_max_position", *_ROPE_OPS)
def scale_yarn_range_max_position(op, p, x, dtype=None):
    """transformers <= 4.50.3: correction range computed with max_position_embeddings, not the original."""
    if (p.rope_type != "yarn" or not p.max_position_embeddings
            or p.max_position_embeddings == p.original_max_position_embeddings):
        return None
    q = p.model_copy(update={"original_max_position_embeddings": p.max_position_embeddings,
                             "factor": rope_scaling.yarn_factor(p)})
    return run(op, q, x)


@mutant("scale_longrope_forced_factor", *_ROPE_OPS)
def scale_longrope_forced_factor(op, p, x, dtype=None):
    """transformers 4.57.6: a top-level original_max_position_embeddings forces s = L_max / L_orig."""
    if p.rope_type != "longrope" or p.factor is None or not p.max_position_embeddings:
        return None
    return _with_factor(op, p, x, p.max_position_embeddings / p.original_max_position_embeddings)


@mutant("scale_proportional_as_partial", *_ROPE_OPS)
def scale_proportional_as_partial(op, p, x, dtype=None):
    if p.rope_type != "proportional":
        return None
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / (p.factor or 1.0)
    if op != "rope.apply":
        # the frequencies in the operation's layout (pair_dim / 2): the partial rule's, then zeros
        padded = np.zeros(p.head_dim // 2)
        padded[: w.size] = w
        return _with_freq(op, p, x, lambda L: (padded, 1.0))
    partial = p.model_copy(update={"rope_type": "default", "factor": None})
    return _with_freq(op, partial, x, lambda L: (w, 1.0))


# ---- the divergence catalogue by bug kind (spec 0.4.0) ----------------------------------------


def _rule(p):
    """``seq_len -> (inv_freq, attention_factor)`` of the reference (stateless rope_types)."""
    return lambda L: rope.inv_freq(p, L)


def _scaled_w(p, k):
    """The reference frequencies with every inverse frequency divided by ``k`` once more."""
    return lambda L: (lambda w, a: (w / k, a))(*rope.inv_freq(p, L))


def _rope_factor(p) -> float:
    """The factor a rope_type divides (some of) its frequencies by; 1 where none applies."""
    if p.rope_type == "yarn":
        return rope_scaling.yarn_factor(p)
    if p.rope_type in ("linear", "proportional"):
        return p.factor or 1.0
    return 1.0


@mutant("scale_factor_twice", *_ROPE_OPS)
def scale_factor_twice(op, p, x, dtype=None):
    """The factor applied twice: inv_freq divided by it *and* positions divided by it again
    (linear: factor^2; yarn: the blended frequencies / s; proportional: / factor^2)."""
    if p.rope_type not in ("linear", "yarn", "proportional") or _rope_factor(p) == 1:
        return None
    return _with_freq(op, p, x, _scaled_w(p, _rope_factor(p)))


@mutant("scale_factor_dropped", *_ROPE_OPS)
def scale_factor_dropped(op, p, x, dtype=None):
    """The factor dropped (taken as 1): linear and proportional lose the division, yarn becomes
    plain RoPE (no blend, attention factor get_mscale(1) = 1 unless given explicitly)."""
    if p.rope_type not in ("linear", "yarn", "proportional") or _rope_factor(p) == 1:
        return None
    if p.rope_type == "proportional":
        return run(op, p.model_copy(update={"factor": None}), x)
    af = 1.0 if p.attention_factor is None else p.attention_factor
    return _with_freq(op, p, x, lambda L: (rope_scaling.base_inv_freq(p.rope_theta, p.rdim), af))


def _with_update(op, p, x, **update):
    q = p.model_copy(update=update)
    if q == p:
        return None
    return run(op, RopeParams(**q.model_dump()), x)


@mutant("scale_llama3_factor_defaulted", *_ROPE_OPS)
def scale_llama3_factor_defaulted(op, p, x, dtype=None):
    """The configured llama3 factor not forwarded: the default 8 (Llama 3.1's) used instead."""
    if p.rope_type != "llama3":
        return None
    return _with_update(op, p, x, factor=8.0)


@mutant("scale_llama3_constants_hardcoded", *_ROPE_OPS)
def scale_llama3_constants_hardcoded(op, p, x, dtype=None):
    """Meta's apply_scaling constants hard-coded: factor 8, low 1, high 4, original 8192."""
    if p.rope_type != "llama3":
        return None
    return _with_update(op, p, x, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                        original_max_position_embeddings=8192)


@mutant("scale_llama3_bounds_swapped", *_ROPE_OPS)
def scale_llama3_bounds_swapped(op, p, x, dtype=None):
    """The two wavelength bounds swapped: unchanged below L_orig / low_freq_factor, divided above
    L_orig / high_freq_factor (the first test wins, so the blended band disappears)."""
    if p.rope_type != "llama3":
        return None
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim)
    L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
    wavelen = 2 * np.pi / w
    with np.errstate(divide="ignore", invalid="ignore"):  # equal factors: no blended band
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * w / p.factor + smooth * w
    out = np.where(wavelen < L / lo, w, np.where(wavelen > L / hi, w / p.factor, blended))
    return _with_freq(op, p, x, lambda L_: (out, 1.0 if p.attention_factor is None else p.attention_factor))


@mutant("scale_yarn_betas_defaulted", *_ROPE_OPS)
def scale_yarn_betas_defaulted(op, p, x, dtype=None):
    """beta_fast / beta_slow not forwarded: the defaults 32 / 1 used instead of the configured ones."""
    if p.rope_type != "yarn" or (p.beta_fast in (None, 32.0) and p.beta_slow in (None, 1.0)):
        return None
    return _with_update(op, p, x, beta_fast=None, beta_slow=None)


@mutant("scale_yarn_betas_swapped", *_ROPE_OPS)
def scale_yarn_betas_swapped(op, p, x, dtype=None):
    """The correction range taken from beta_slow for the low dim and beta_fast for the high one."""
    if p.rope_type != "yarn":
        return None
    bf, bs = p.beta_fast or 32.0, p.beta_slow or 1.0
    if bf == bs:
        return None
    return _with_update(op, p, x, beta_fast=bs, beta_slow=bf)


@mutant("scale_yarn_blend_inverted", *_ROPE_OPS)
def scale_yarn_blend_inverted(op, p, x, dtype=None):
    """The blend weights exchanged: ``w/s * (1 - ramp) + w * ramp``, so the pairs below the
    correction band (high frequency) are interpolated and those above it extrapolated."""
    s = rope_scaling.yarn_factor(p) if p.rope_type == "yarn" else 1.0
    if s == 1:
        return None
    w, ramp = rope_scaling.base_inv_freq(p.rope_theta, p.rdim), rope_scaling.yarn_ramp(p)
    inverted = (w / s) * (1.0 - ramp) + w * ramp
    return _yarn_af_mutant(op, p, x, rope_scaling.yarn_attention_factor(p), inverted)


@mutant("scale_yarn_high_clamped_to_pairs", *_ROPE_OPS)
def scale_yarn_high_clamped_to_pairs(op, p, x, dtype=None):
    """The high correction dim clamped to ``d/2 - 1`` (the last pair's index), not ``d - 1``; the ramp
    over the pairs then as the rule computes it (``high += 0.001`` when the two dims meet)."""
    s = rope_scaling.yarn_factor(p) if p.rope_type == "yarn" else 1.0
    if s == 1:
        return None
    low, high = rope_scaling.yarn_correction_range(p)
    last = p.rdim // 2 - 1
    if high <= last:
        return None
    ramp = rope_scaling.yarn_ramp(p, (low, last))
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim)
    return _yarn_af_mutant(op, p, x, rope_scaling.yarn_attention_factor(p), (w / s) * ramp + w * (1.0 - ramp))


def _mscale_alone_factor(p) -> float:
    """The attention factor when each mscale key is used alone: get_mscale(s, mscale_all_dim) or
    get_mscale(s, mscale) when only that one is set, 1 when neither, the ratio when both."""
    s = rope_scaling.yarn_factor(p)
    if p.mscale and p.mscale_all_dim:
        return rope_scaling.get_mscale(s, p.mscale) / rope_scaling.get_mscale(s, p.mscale_all_dim)
    if p.mscale_all_dim:
        return rope_scaling.get_mscale(s, p.mscale_all_dim)
    return rope_scaling.get_mscale(s, p.mscale) if p.mscale else 1.0


@mutant("scale_yarn_mscale_alone", *_ROPE_OPS)
def scale_yarn_mscale_alone(op, p, x, dtype=None):
    """No explicit attention_factor: 1 where neither mscale key is set, get_mscale(s, m) of the one
    key set alone, the ratio where both are (the rule: get_mscale(s) unless both are set)."""
    if p.rope_type != "yarn" or p.attention_factor is not None:
        return None
    af = _mscale_alone_factor(p)
    if af == rope_scaling.yarn_attention_factor(p):
        return None
    return _yarn_af_mutant(op, p, x, af)


@mutant("scale_yarn_attention_factor_dropped", *_ROPE_OPS)
def scale_yarn_attention_factor_dropped(op, p, x, dtype=None):
    """An explicit attention_factor not forwarded: the computed get_mscale rule used instead."""
    if p.rope_type != "yarn" or p.attention_factor is None:
        return None
    return _with_update(op, p, x, attention_factor=None)


@mutant("scale_yarn_mscale_defaulted", *_ROPE_OPS)
def scale_yarn_mscale_defaulted(op, p, x, dtype=None):
    """The configured mscale not read (taken as 1) while mscale_all_dim is."""
    if (p.rope_type != "yarn" or p.attention_factor is not None or not (p.mscale and p.mscale_all_dim)
            or p.mscale == 1.0):
        return None
    return _with_update(op, p, x, mscale=1.0)


@mutant("scale_attention_factor_on_qk", "rope.apply")
def scale_attention_factor_on_qk(op, p, x, dtype=None):
    """The attention factor multiplies the whole q and k (pass-through dims included) instead of
    cos and sin; the same as the rule when every dim rotates, wrong with partial rotary."""
    if p.pair_dim == p.head_dim:
        return None
    af = rope.inv_freq(p, rope.seq_len_of(x["position_ids"]))[1]
    if af == 1:
        return None
    out = _with_freq(op, p, x, lambda L: (rope.inv_freq(p, L)[0], 1.0))
    return {n: v * af for n, v in out.items()}


@mutant("scale_longrope_at_init", *_ROPE_OPS)
def scale_longrope_at_init(op, p, x, dtype=None):
    """The factors chosen once from the configuration (long when max_position_embeddings >
    original) where the per-call policy is declared."""
    if p.rope_type != "longrope" or p.longrope_policy == "at_init" or p.max_position_embeddings is None:
        return None
    return run(op, p.model_copy(update={"longrope_policy": "at_init"}), x)


@mutant("scale_longrope_per_call", *_ROPE_OPS)
def scale_longrope_per_call(op, p, x, dtype=None):
    """The factors chosen per call by seq_len where the at-init policy is declared."""
    if p.rope_type != "longrope" or p.longrope_policy != "at_init":
        return None
    return run(op, p.model_copy(update={"longrope_policy": None}), x)


@mutant("scale_longrope_always_long", *_ROPE_OPS)
def scale_longrope_always_long(op, p, x, dtype=None):
    """The long factors at every length (the short ones never read)."""
    if p.rope_type != "longrope":
        return None
    w = rope_scaling.base_inv_freq(p.rope_theta, p.rdim) / np.asarray(p.long_factor, dtype=np.float64)
    af = rope_scaling.longrope_attention_factor(p)
    return _with_freq(op, p, x, lambda L: (w, af))


def _keyed_on_new_tokens(op, p, x):
    """The reference with the length taken as the call's token count T instead of
    max(position_ids) + 1 (the cache offset ignored)."""
    if op == "rope.inv_freq":
        return None
    if op == "rope.cos_sin_calls":
        out = {}
        for key in call_keys(x):
            k = key.rsplit(".", 1)[1]
            r = _keyed_on_new_tokens("rope.cos_sin", p, {"position_ids": x[key]})
            out[f"cos.{k}"], out[f"sin.{k}"] = r["cos"], r["sin"]
        return out
    T = int(np.asarray(x["position_ids"]).shape[-1])
    return rope_outputs(op, p, x, lambda _: rope.inv_freq(p, T))


@mutant("scale_dynamic_new_tokens", *_ROPE_OPS)
def scale_dynamic_new_tokens(op, p, x, dtype=None):
    """Dynamic NTK keyed on the number of new tokens of the call, not the total length."""
    if p.rope_type != "dynamic" or p.dynamic_policy == "grow_until_reset":
        return None
    return _keyed_on_new_tokens(op, p, x)


@mutant("scale_longrope_new_tokens", *_ROPE_OPS)
def scale_longrope_new_tokens(op, p, x, dtype=None):
    """LongRoPE's factors chosen by the number of new tokens of the call, not the total length."""
    if p.rope_type != "longrope" or p.longrope_policy == "at_init":
        return None
    return _keyed_on_new_tokens(op, p, x)


@mutant("scale_softmax_attention_factor_twice", "attention.probs")
def scale_softmax_attention_factor_twice(op, p, x, dtype=None):
    """The cos/sin attention factor folded into the softmax scale as well (it then enters the
    logits squared a second time)."""
    af = rope_scaling.yarn_attention_factor(p.rope)
    if af == 1:
        return None
    return _probs_with_scale(p, x, rope_scaling.yarn_softmax_scale(p.rope, p.qk_head_dim) * af ** 2)


# ---- YaRN softmax scale (SCALE-YARN-SOFTMAX-SCALE) ---------------------------------------------


def _probs_with_scale(p, x, scale):
    return {"probs": attention.probs(x["q"], x["k"], p, scale=scale)}


@mutant("scale_softmax_mscale_missing", "attention.probs")
def scale_softmax_mscale_missing(op, p, x, dtype=None):
    """The plain ``qk_head_dim ** -0.5``: the mscale correction dropped from the softmax scale."""
    return _probs_with_scale(p, x, p.qk_head_dim ** -0.5)


@mutant("scale_softmax_mscale_not_squared", "attention.probs")
def scale_softmax_mscale_not_squared(op, p, x, dtype=None):
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim)``: the correction applied once."""
    m = rope_scaling.get_mscale(rope_scaling.yarn_factor(p.rope), p.rope.mscale_all_dim)
    return _probs_with_scale(p, x, p.qk_head_dim ** -0.5 * m)


@mutant("scale_softmax_rope_dim", "attention.probs")
def scale_softmax_rope_dim(op, p, x, dtype=None):
    """The scale taken of the rope head dim (64) instead of qk_head_dim (192)."""
    return _probs_with_scale(p, x, rope_scaling.yarn_softmax_scale(p.rope, p.rope.head_dim))


# ---- golden cases: families/rope_scaling_cases.py ---------------------------------------------
from . import rope_scaling_cases  # noqa: E402,F401  (registers the family's cases)

"""RoPE scaling (SCALE-*): the rope_type rules of the inverse frequencies, and the YaRN softmax
scale of attention (SCALE-YARN-SOFTMAX-SCALE)."""

from __future__ import annotations

import math
from typing import Optional

import torch

from ._common import compute_dtype


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def _base(th, dim, device, n=None):
    """``th ** (-2 i / dim)`` float64 for ``i < dim // 2`` (``i < n`` when given)."""
    i = torch.arange(dim // 2 if n is None else n, dtype=torch.float64, device=device)
    return th ** (-2 * i / dim)


def _af(p) -> float:
    """``attention_factor``, 1 when unset (every rope_type but yarn and longrope)."""
    af = p.attention_factor
    return 1.0 if af is None else af


def _default(p, seq_len, device, th, theta):
    return _base(th, p.rdim, device), _af(p)


def _linear(p, seq_len, device, th, theta):
    return _base(th, p.rdim, device) / p.factor, _af(p)


def _dynamic(p, seq_len, device, th, theta):
    r = p.rdim
    if theta is None:
        lmax = p.max_position_embeddings
        L = lmax if seq_len is None else max(seq_len, lmax)
        th = th * (p.factor * L / lmax - (p.factor - 1)) ** (r / (r - 2))
    return _base(th, r, device), _af(p)


def _yarn_ramp(p, device, th):
    """YaRN's linear ramp ``[rotary_dim/2]`` between the beta_fast and beta_slow dims, in [0, 1]."""
    r = p.rdim

    def corr(beta):
        return r * math.log(p.original_max_position_embeddings / (beta * 2 * math.pi)) / (2 * math.log(th))
    low, high = corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)
    if p.truncate is None or p.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    if low == high:
        high += 0.001
    return ((torch.arange(r // 2, dtype=torch.float64, device=device) - low) / (high - low)).clamp(0, 1)


def _yarn(p, seq_len, device, th, theta):
    s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
    ramp = _yarn_ramp(p, device, th)
    w = _base(th, p.rdim, device)
    af = p.attention_factor
    if af is None:
        af = _mscale(s, p.mscale) / _mscale(s, p.mscale_all_dim) if p.mscale and p.mscale_all_dim else _mscale(s)
    return w / s * ramp + w * (1 - ramp), af


def _llama3(p, seq_len, device, th, theta):
    w = _base(th, p.rdim, device)
    L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
    wavelen = 2 * math.pi / w
    smooth = (L / wavelen - lo) / (hi - lo)
    blended = (1 - smooth) * w / p.factor + smooth * w
    out = torch.where(wavelen < L / hi, w, torch.where(wavelen > L / lo, w / p.factor, blended))
    return out, _af(p)


def _longrope(p, seq_len, device, th, theta):
    s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
    if p.longrope_policy == "at_init":  # one choice for every call, from the configuration
        use_long = p.max_position_embeddings > p.original_max_position_embeddings
    else:  # per_call (default): the call's seq_len
        use_long = seq_len is not None and seq_len > p.original_max_position_embeddings
    ext = torch.tensor(p.long_factor if use_long else p.short_factor, dtype=torch.float64, device=device)
    af = p.attention_factor
    if af is None:
        af = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(p.original_max_position_embeddings))
    return _base(th, p.rdim, device) / ext, af


def _proportional(p, seq_len, device, th, theta):
    r, D = p.rdim, p.head_dim
    w = torch.zeros(D // 2, dtype=torch.float64, device=device)
    w[: r // 2] = _base(th, D, device, r // 2)
    return w / (p.factor or 1.0), _af(p)


#: ``rope_type`` -> ``rule(p, seq_len, device, th, theta)``; ``th`` is the theta in use.
_RULES = {"default": _default, "linear": _linear, "dynamic": _dynamic, "yarn": _yarn,
          "llama3": _llama3, "longrope": _longrope, "proportional": _proportional}


def scaled_inv_freq(p, seq_len: Optional[int], device, theta: Optional[float] = None):
    """``(inv_freq float64 [pair_dim/2], attention_factor)`` for ``p.rope_type`` (SCALE-*).

    ``seq_len`` is ``max(position_ids) + 1`` of the call; ``theta`` overrides ``rope_theta``
    (the dynamic grow policy keeps its own theta').
    """
    t = p.rope_type
    th = p.rope_theta if theta is None else theta
    rule = _RULES.get(t)
    if rule is None:
        raise ValueError(f"unknown rope_type {t!r}")
    return rule(p, seq_len, device, th, theta)


def softmax_scale(params) -> float:
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` (s: factor, or L_max / L_orig)."""
    p = params.rope
    s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
    return params.qk_head_dim ** -0.5 * _mscale(s, p.mscale_all_dim) ** 2


def attention_probs(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Row softmax of ``q k^T * scale`` with k heads repeated to q's (query head h reads k head
    ``h // (Hq / Hk)``); computed in the compute dtype, rounded once to ``q.dtype``."""
    hq, hk = q.shape[1], k.shape[1]
    if hq % hk:
        raise ValueError(f"q heads {hq} are not a multiple of k heads {hk}")
    cd = compute_dtype(q.dtype)
    kk = k.to(cd).repeat_interleave(hq // hk, dim=1)
    logits = torch.matmul(q.to(cd), kk.transpose(-1, -2)) * scale
    return torch.softmax(logits, dim=-1).to(q.dtype)


class Ops:
    """SCALE-YARN-SOFTMAX-SCALE operations of the torch port."""

    # ---- YaRN softmax scale ----------------------------------------------------------------
    def attention_probs(self, q, k, params):
        """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)`` over all keys, ``[B, Hq, Tq, Tk]``.

        The scale ``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` is a Python float
        (float64); logits are computed in the compute dtype (float32, float64 for float64
        activations) and the probabilities rounded once to the activation dtype.
        """
        return attention_probs(q, k, softmax_scale(params))

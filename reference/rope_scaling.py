"""RoPE frequency scaling (``rope_type``), NumPy float64 reference (clauses SCALE-*).

Primary sources: HF transformers 5.24 ``modeling_rope_utils.py`` (``_compute_*_parameters``,
``dynamic_rope_update``); Chen et al., *Extending Context Window ... via Positional
Interpolation* (arXiv:2306.15595) for ``linear``; bloc97's NTK-aware scaling / HF
``dynamic``; Peng et al., *YaRN* (arXiv:2309.00071) sections 3.2-3.4; Meta llama-models
``models/llama3/model.py::apply_scaling`` for ``llama3``; Ding et al., *LongRoPE*
(arXiv:2402.13753) and microsoft/LongRoPE for ``longrope``; HF
``_compute_proportional_rope_parameters`` (Gemma) for ``proportional``.

Every function returns inverse frequencies ``[pair_dim/2]`` float64.  ``seq_len`` is
``max(position_ids) + 1`` of the current call (``dynamic`` and ``longrope`` depend on it).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from posenc.spec.models import RopeParams


def base_inv_freq(theta: float, dim: int, n: Optional[int] = None) -> np.ndarray:
    """``theta ** (-2i / dim)`` for i = 0 .. n-1 (n defaults to dim/2)."""
    i = np.arange(dim // 2 if n is None else n, dtype=np.float64)
    return theta ** (-2.0 * i / dim)


def linear(p: RopeParams) -> np.ndarray:
    """SCALE-LINEAR: ``inv_freq / factor`` (position interpolation)."""
    return base_inv_freq(p.rope_theta, p.rdim) / p.factor


def dynamic_theta(p: RopeParams, seq_len: Optional[int]) -> float:
    """SCALE-DYNAMIC-NTK: ``theta * (factor * L / L_max - (factor - 1)) ** (d / (d - 2))``,
    ``L = max(seq_len, L_max)``, d = rotary_dim.  Equals theta for ``seq_len <= L_max``."""
    lmax = p.max_position_embeddings
    L = lmax if seq_len is None else max(int(seq_len), lmax)
    d = p.rdim
    return p.rope_theta * (p.factor * L / lmax - (p.factor - 1)) ** (d / (d - 2))


def dynamic(p: RopeParams, seq_len: Optional[int]) -> np.ndarray:
    """SCALE-DYNAMIC-NTK / SCALE-DYNAMIC-PER-CALL: frequencies from the current call's theta'."""
    return base_inv_freq(dynamic_theta(p, seq_len), p.rdim)


class DynamicGrowState:
    """SCALE-DYNAMIC-GROW: transformers' update policy over a sequence of calls.

    theta' is recomputed when seq_len exceeds the largest length seen so far (initially
    max_position_embeddings) and reset to theta only when seq_len < max_position_embeddings
    after having grown; in between, the last grown theta' stays (a call at 6000 after one at
    8192, with max_position_embeddings 4096, still uses theta'(8192)).
    """

    def __init__(self, p: RopeParams):
        self.p = p
        self.cached = p.max_position_embeddings
        self.theta = p.rope_theta

    def inv_freq(self, seq_len: Optional[int]) -> np.ndarray:
        lmax = self.p.max_position_embeddings
        if seq_len is None:
            return base_inv_freq(self.theta, self.p.rdim)
        if seq_len > self.cached:
            self.theta, self.cached = dynamic_theta(self.p, seq_len), seq_len
        if seq_len < lmax and self.cached > lmax:
            self.theta, self.cached = self.p.rope_theta, lmax
        return base_inv_freq(self.theta, self.p.rdim)


def get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 * mscale * ln(scale) + 1`` (1 when scale <= 1)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_factor(p: RopeParams) -> float:
    """SCALE-YARN-FACTOR: ``factor``, or ``max_position_embeddings / original`` when absent."""
    return p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings


def yarn_correction_range(p: RopeParams) -> tuple[float, float]:
    """SCALE-YARN-RAMP: correction dims from beta_fast / beta_slow, floor/ceil when ``truncate``
    (default true), clamped to [0, d - 1].  ``corr(b) = d ln(L_orig / (2 pi b)) / (2 ln theta)``."""
    d, theta, L = p.rdim, p.rope_theta, p.original_max_position_embeddings

    def corr(beta):
        return d * math.log(L / (beta * 2 * math.pi)) / (2 * math.log(theta))

    low, high = corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)
    if p.truncate is None or p.truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, d - 1)


def yarn_ramp(p: RopeParams, bounds: Optional[tuple[float, float]] = None) -> np.ndarray:
    """SCALE-YARN-RAMP: the linear ramp over pair i between the correction dims (``bounds``: other
    dims, a mutant's), clipped to [0, 1] (high += 0.001 when low == high); 0 below the band, 1 above it."""
    low, high = yarn_correction_range(p) if bounds is None else bounds
    if low == high:
        high += 0.001
    return np.clip((np.arange(p.rdim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


def yarn(p: RopeParams) -> np.ndarray:
    """SCALE-YARN-RAMP: blend of interpolated (``/factor``) and extrapolated frequencies by
    :func:`yarn_ramp`: ``w/s * ramp + w * (1 - ramp)`` (high frequencies below the band kept)."""
    s = yarn_factor(p)
    w = base_inv_freq(p.rope_theta, p.rdim)
    ramp = yarn_ramp(p)
    return (w / s) * ramp + w * (1.0 - ramp)


def yarn_attention_factor(p: RopeParams) -> float:
    """SCALE-YARN-ATTENTION-FACTOR: explicit ``attention_factor``; else
    ``get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)`` when both are set; else ``get_mscale(s)``."""
    if p.attention_factor is not None:
        return p.attention_factor
    s = yarn_factor(p)
    if p.mscale and p.mscale_all_dim:
        return get_mscale(s, p.mscale) / get_mscale(s, p.mscale_all_dim)
    return get_mscale(s)


def yarn_softmax_scale(p: RopeParams, qk_head_dim: int) -> float:
    """SCALE-YARN-SOFTMAX-SCALE (DeepSeek): ``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2``.

    ``mscale_all_dim`` must be set (HF reads a missing key as 0, DeepSeek's reference as 1; the
    spec does not pick, see :class:`~posenc.spec.models.SoftmaxScaleParams`)."""
    if p.mscale_all_dim is None:
        raise ValueError("SCALE-YARN-SOFTMAX-SCALE needs mscale_all_dim")
    return qk_head_dim ** -0.5 * get_mscale(yarn_factor(p), p.mscale_all_dim) ** 2


def llama3(p: RopeParams) -> np.ndarray:
    """SCALE-LLAMA3: wavelengths below L_orig/high_freq_factor unchanged, above
    L_orig/low_freq_factor divided by factor, smooth blend in between (boundaries inclusive on
    the blended side; no blend where the two factors are equal: Llama 4 Scout's 1 and 1).
    Raises ``ValueError`` where they are equal and a wavelength falls exactly on the bound."""
    w = base_inv_freq(p.rope_theta, p.rdim)
    L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
    wavelen = 2 * math.pi / w
    if hi == lo and np.any(wavelen == L / lo):  # the empty band's one point: smooth is 0 / 0
        raise ValueError(f"SCALE-LLAMA3: low_freq_factor == high_freq_factor == {lo} and a wavelength is exactly "
                         f"L_orig / low = {L / lo}: the blend is 0 / 0")
    with np.errstate(divide="ignore", invalid="ignore"):  # hi == lo: no wavelength takes the blend
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * w / p.factor + smooth * w
    return np.where(wavelen < L / hi, w, np.where(wavelen > L / lo, w / p.factor, blended))


def llama3_blend_amplification(p) -> np.ndarray:
    """SCALE-LLAMA3's float32 blend, per frequency, in units of eps(float32) relative to the blended inverse
    frequency (added to the angle term's ``1 + e ln theta``): a float32 smooth factor s = (L / wavelength -
    low) / (high - low) loses R (3 + e ln theta) / (high - low) eps of it to rounding where R = L / wavelength
    is close to low, and the blend multiplies that by (1 - 1/factor) / ((1 - s) / factor + s).  Zero outside
    the blended band.  At theta 148, head 80, a frequency 0.05 % inside the band is 37 eps off in
    transformers' float32 computation (found by a generated case at position 2**20), where 1 + e ln theta
    allows 15 (spec 0.5.0).  An error scale of the rule (families/rope.py uses it), beside the rule it is of."""
    if p.rope_type != "llama3" or p.high_freq_factor == p.low_freq_factor:
        return 0.0
    w = base_inv_freq(p.rope_theta, p.rdim)
    lo, hi, f = p.low_freq_factor, p.high_freq_factor, p.factor
    r = p.original_max_position_embeddings * w / (2 * np.pi)  # L / wavelength
    s = (r - lo) / (hi - lo)
    e = 2.0 * np.arange(w.size) / p.rdim
    amp = r * (3 + e * np.log(max(p.rope_theta, np.e))) / (hi - lo) * abs(1 - 1 / f) / ((1 - s) / f + s)
    return np.where((r >= lo) & (r <= hi), amp, 0.0)


def longrope_factor(p: RopeParams) -> float:
    return p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings


def longrope_uses_long(p: RopeParams, seq_len: Optional[int]) -> bool:
    """SCALE-LONGROPE-FACTORS, the selection policy: ``per_call`` (default) takes the long factors
    when the call's seq_len > original_max_position_embeddings (``seq_len`` None: the short
    ones); ``at_init`` takes them for every call when max_position_embeddings >
    original_max_position_embeddings, whatever the length."""
    if p.longrope_policy == "at_init":
        return p.max_position_embeddings > p.original_max_position_embeddings
    return seq_len is not None and seq_len > p.original_max_position_embeddings


def longrope(p: RopeParams, seq_len: Optional[int]) -> np.ndarray:
    """SCALE-LONGROPE-FACTORS: ``1 / (ext_i * theta ** (2i/d))`` with ext = long_factor or
    short_factor as :func:`longrope_uses_long` selects."""
    long = longrope_uses_long(p, seq_len)
    ext = np.asarray(p.long_factor if long else p.short_factor, dtype=np.float64)
    return base_inv_freq(p.rope_theta, p.rdim) / ext


def longrope_attention_factor(p: RopeParams) -> float:
    """SCALE-LONGROPE-ATTENTION-FACTOR: explicit, else ``sqrt(1 + ln s / ln L_orig)`` for s > 1."""
    if p.attention_factor is not None:
        return p.attention_factor
    s = longrope_factor(p)
    return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(p.original_max_position_embeddings))


def proportional(p: RopeParams) -> np.ndarray:
    """SCALE-PROPORTIONAL: exponent over the full head_dim; the rotated share (rotary_dim/2
    frequencies) keeps ``theta ** (-2i / head_dim)``, the remaining head_dim/2 - rotary_dim/2
    frequencies are 0 (those pairs do not rotate); everything divided by ``factor`` (default 1)."""
    D = p.head_dim
    w = np.zeros(D // 2)
    w[: p.rdim // 2] = base_inv_freq(p.rope_theta, D, p.rdim // 2)
    return w / (p.factor or 1.0)

"""Attention probabilities under the YaRN softmax scale, NumPy float64 reference
(clause SCALE-YARN-SOFTMAX-SCALE).

Primary sources: DeepSeek-V3 ``inference/model.py::MLA.__init__`` (``softmax_scale =
qk_head_dim ** -0.5``, times ``mscale ** 2`` with ``mscale = 0.1 * mscale * ln(factor) + 1``
when the context is extended); HF transformers 5.24
``models/deepseek_v3/modeling_deepseek_v3.py::yarn_apply_mscale`` (``get_mscale(factor,
mscale_all_dim) ** 2``) and ``eager_attention_forward`` (``softmax(q k^T * scaling)`` in float32).

Why probabilities and not the logits or the scale alone: a softmax over one key is 1 whatever
the scale, and a scale is invisible to every check that normalises rows; the probabilities
over several keys are what a wrong scale changes (their temperature).
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import SoftmaxScaleParams

from .rope_scaling import yarn_softmax_scale


def softmax_scale(p: SoftmaxScaleParams) -> float:
    """SCALE-YARN-SOFTMAX-SCALE: ``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2``."""
    return yarn_softmax_scale(p.rope, p.qk_head_dim)


def expand_kv(q, k) -> np.ndarray:
    """k ``[B, Hk, Tk, D]`` repeated to q's ``Hq`` heads (query head h reads key head
    ``h // (Hq / Hk)``, HF ``repeat_kv``); ``Hq`` must be a multiple of ``Hk``."""
    hq, hk = np.shape(q)[1], np.shape(k)[1]
    if hq % hk:
        raise ValueError(f"q heads {hq} are not a multiple of k heads {hk}")
    return np.repeat(np.asarray(k, np.float64), hq // hk, axis=1)


def logits(q, k, scale: float) -> np.ndarray:
    """``q k^T * scale`` ``[B, Hq, Tq, Tk]`` in float64."""
    return np.einsum("bhqd,bhkd->bhqk", np.asarray(q, np.float64), expand_kv(q, k)) * scale


def softmax(x) -> np.ndarray:
    """Row softmax over the last axis (max-subtracted)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def probs(q, k, p: SoftmaxScaleParams, scale: float | None = None) -> np.ndarray:
    """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)`` over all keys, ``[B, Hq, Tq, Tk]``.

    q ``[B, Hq, Tq, qk_head_dim]`` and k ``[B, Hk, Tk, qk_head_dim]`` are already
    position-encoded; no mask (every query sees every key: the rule under test is the scale,
    not causality).  ``scale`` overrides the spec's (mutants).
    """
    for name, x in (("q", q), ("k", k)):
        if np.shape(x)[-1] != p.qk_head_dim:
            raise ValueError(f"{name} has width {np.shape(x)[-1]}, qk_head_dim is {p.qk_head_dim}")
    return softmax(logits(q, k, softmax_scale(p) if scale is None else scale))


def probs_error_scales(q, k, p: SoftmaxScaleParams) -> tuple[np.ndarray, np.ndarray]:
    """``(dtype term's scale, float32 term's scale)`` of ``probs``, each ``[B, Hq, Tq, Tk]`` (the
    operation's ``error_scales`` in spec/rope_scaling.yaml), with ``L_j = scale * sum_d |q_d k_jd|``,
    the magnitude whose rounding the logit j carries.

    * dtype term ``p_j (1 + L_j + max_j L_j)``: the rounding at the activation dtype of the output,
      of each logit and of the scale's product (``q * scale`` first, as real models do, or after
      the dot product).  A logit error ``dl`` moves ``p_j`` by ``p_j (dl_j - sum_i p_i dl_i)``, at
      most ``p_j (|dl_j| + max_i |dl_i|)``; the 1 is the output's own rounding.
    * float32 term ``p_j (L_j + max_j L_j) (n - 1) / 2`` with ``n`` = qk_head_dim, the length of
      each logit's dot product.  Summed in any order in float32 (a matmul's accumulator, whatever
      the inputs' dtype), ``n`` products carry at most ``(n - 1) u sum |q_d k_jd|`` of rounding,
      ``u = eps(float32) / 2`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
      section 3.1, the bound on a sum computed in any order); the tolerance's ``K_ANGLE
      eps(float32)`` multiplies it.  A dot product accumulated in float16 or bfloat16 is wrong by
      ``2**13`` (``2**16``) times more and fails at float32.
    """
    L = np.einsum("bhqd,bhkd->bhqk", np.abs(np.asarray(q, np.float64)), np.abs(expand_kv(q, k))) * softmax_scale(p)
    pr, spread = probs(q, k, p), L + L.max(axis=-1, keepdims=True)
    return pr * (1.0 + spread), pr * spread * (p.qk_head_dim - 1) / 2.0

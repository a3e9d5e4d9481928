"""The tolerance rule (README, "Tolerance rule").

Integers compare exactly.  A float output ``y`` of an implementation at dtype ``dt`` passes
against the float64 reference ``y_ref`` element-wise when

    |y - y_ref| <= K_DTYPE[dt] * eps_eff * dtype_scale  +  K_ANGLE * eps_float32 * angle_scale  +  tiny(dt)

* ``dtype_scale`` is the magnitude the operation may lose to rounding (for a rotation the
  pair norm ``|x_pair|`` times the attention factor; for a sum the sum of the summands'
  magnitudes); ``angle_scale`` is ``|phi_i| * (1 + e_i ln theta) * |x_pair|`` for angle-based
  encodings (0 elsewhere), where ``e_i = 2i/d`` is the frequency's exponent.  Both are computed
  by the reference (:func:`posenc.registry.reference_of`) and stored with the golden.
  The float32 term is also what an operation may lose to float32 arithmetic the spec allows at
  every dtype other than angles: ``attention.probs``'s dot products, summed in a float32
  accumulator in any order (``p_j (L_j + max_j L_j) (n - 1) / 2``, n the dot product's length;
  spec 0.5.0).  Each operation states both scales as formulas (its ``error_scales``).
* An operation that reduces over a long axis at the activation dtype's precision or better (a
  LayerNorm's mean and variance over the hidden size) states a third, **accumulation** term
  ``K_ACCUMULATION * eps_acc(dt) * accumulation_scale``, ``eps_acc`` = ``min(eps(dt), eps(float32))``:
  a sum of n terms in any order carries at most ``(n - 1) u`` of their magnitudes (``u = eps / 2``;
  Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1), summed in a
  float32 accumulator at float32 and below, in float64 at float64 -- so a float64 run that sums in
  float32 still fails, and a bf16 accumulator fails at float32 (spec 0.5.0).
* ``eps_eff`` is ``eps(dt)``, but never below ``eps(float32)`` for angle-based operations:
  the spec allows (and requires at least) float32 angles and cos/sin whatever the dtype.
* The angle term allows a float32 angle ``p * inv_freq``: a float32 ``theta ** -e_i`` rounds
  its exponent ``e_i`` too (a relative error amplified by ``ln theta``, hence the factor
  ``1 + e_i ln theta``), and the product is rounded once more.  An angle computed in bfloat16
  is wrong by ``eps(bf16) * |phi| = 2**16`` times more and fails, and so does a uniform
  relative angle error of a few float32 eps at the highest frequency.

* ``tiny(dt)`` is the spacing of ``dt``'s subnormals (float16 2^-24, bfloat16 2^-133): a value
  below it cannot be stored in ``dt`` (an ALiBi bias ``-2^-25`` is ``-0`` in float16).  Found by
  the generated cases (spec 0.4.0); it changes nothing above the subnormal range.  Every check that
  judges an output applies it as the golden comparison does (:func:`identical` for an output the spec
  states exactly, :func:`relative_floor` before taking a ratio).
* **Not checkable at this dtype** (spec 0.5.0).  Where an element's bound reaches twice its dtype scale
  -- the largest error a rotated pair or a cos / sin can have -- the rule allows any output of that
  magnitude there: the float32 angle term does so for a frequency's angles from ``K_ANGLE * eps(f32) *
  |phi_i| * (1 + e_i ln theta) >= 2`` on (the highest frequency from position ~2^22).  Such elements
  are still compared, and counted as "not checkable at this dtype" (:func:`not_checkable`; each
  test's count is in the report, the run's total in its summary); a case with no checkable element is
  reported unsupported, never passed.  Decision: long-context conformance does **not** require angles
  reduced in float64.  A float32 product ``p * inv_freq`` is what transformers, vLLM, Meta's reference
  and flash-attn compute, so the models were trained with it; at a position where it has lost the
  highest frequencies' angles no implementation can be held to the float64 value, and the lower
  frequencies (the ones long contexts are scaled for) stay checkable at 2^24 and beyond.

Calibration (tests/test_tolerance.py): HF transformers 5.24 (cos/sin cast to the activation
dtype before the multiply), Meta-style fp32 rotation and torchtune-style fp32 caches pass at
all four dtypes, including position 131071 at theta 500000, with the worst element at about a
third of the bound; a bf16-angle implementation fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

EPS = {
    "float64": float(np.finfo(np.float64).eps),
    "float32": float(np.finfo(np.float32).eps),
    "bfloat16": 2.0**-7,
    "float16": 2.0**-10,
}
K_DTYPE = {"float64": 16.0, "float32": 4.0, "bfloat16": 4.0, "float16": 4.0}
K_ANGLE = 4.0
#: The accumulation term's factor: its scale is the first-order worst case itself (Higham's
#: ``gamma_{n-1}``), so no margin is added.
K_ACCUMULATION = 1.0
#: The spacing of each dtype's subnormals: the representation limit of tiny values.
TINY = {
    "float64": float(np.finfo(np.float64).smallest_subnormal),
    "float32": float(np.finfo(np.float32).smallest_subnormal),
    "bfloat16": 2.0**-133,
    "float16": 2.0**-24,
}


def identical(actual, expected, dtype: str) -> np.ndarray:
    """Element-wise: ``actual`` is ``expected`` as the rule holds an output the spec states exactly (a
    pass-through, an identity, a gather: dtype and float32 terms 0, only ``tiny(dt)`` allowed, as the
    golden comparison allows it): equal, or within ``tiny(dt)`` -- a subnormal where the exact value is 0
    passes here exactly as it passes against a golden.  NaN never, an infinity only the same one."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore"):
        return (a == e) | (np.abs(a - e) <= TINY[dtype])


def relative_floor(dtype: str) -> float:
    """The smallest exact magnitude whose *relative* error a check may judge at ``dtype``: below it the
    ``tiny(dt)`` every element is allowed is more than 1 % of ``eps(dt)`` of it (a subnormal rounding is
    absolute, not relative), so a ratio to it says nothing the rule bounds (``100 tiny(dt) / eps(dt)``:
    100 times the smallest normal number)."""
    return 100 * TINY[dtype] / EPS[dtype]


def accumulation_eps(dtype: str) -> float:
    """``eps_acc``: the accumulator's precision a reduction at ``dtype`` may use (float32 at float32
    and below, float64 at float64)."""
    return min(EPS[dtype], EPS["float32"])


def bound(dtype: str, dtype_scale, angle_scale, angle_based: bool, accumulation_scale=0.0) -> np.ndarray:
    """The allowed absolute error per element (see the module docstring); the scales broadcast."""
    eps = EPS[dtype]
    if angle_based:
        eps = max(eps, EPS["float32"])
    return (K_DTYPE[dtype] * eps * np.asarray(dtype_scale) + K_ANGLE * EPS["float32"] * np.asarray(angle_scale)
            + K_ACCUMULATION * accumulation_eps(dtype) * np.asarray(accumulation_scale) + TINY[dtype])


@dataclass(frozen=True)
class Comparison:
    """Result of comparing one output; ``ratio`` is max(|err| / bound) (inf where bound = 0)."""

    ok: bool
    ratio: float
    n_bad: int
    n_total: int
    worst_index: Optional[tuple]
    worst_actual: Optional[float]
    worst_expected: Optional[float]
    message: str
    #: compared elements whose bound reaches twice their dtype scale -- the largest error a rotation (or a
    #: cos / sin) can make -- because of the float32 angle term: "not checkable at this dtype" (counted by
    #: the run, never a silent pass; :func:`not_checkable`)
    n_unchecked: int = 0


def not_checkable(dtype: str, dtype_scale, angle_scale, angle_based: bool, accumulation_scale=0.0) -> np.ndarray:
    """Element-wise: the rule's bound at ``dtype`` reaches ``2 * dtype_scale``, the largest error an output of
    that magnitude can have (a rotated pair or a cos / sin can be off by at most twice its magnitude), because
    of the float32 angle term: at such an element any output of the right magnitude passes, so the rule checks
    nothing there.  For the highest frequency of a RoPE at float32 angles that is from position ~2^22 on
    (``K_ANGLE * eps(float32) * p >= 2``).  Elements without an angle term (``angle_scale`` 0) or with
    ``dtype_scale`` 0 (exact elements) are always checkable."""
    if not angle_based:
        return np.zeros(np.broadcast(np.asarray(dtype_scale), np.asarray(angle_scale)).shape, bool)
    ds, an = np.asarray(dtype_scale, np.float64), np.asarray(angle_scale, np.float64)
    return (ds > 0) & (an > 0) & (bound(dtype, ds, an, angle_based, accumulation_scale) >= 2 * ds)


def compare(name: str, actual, expected, *, dtype: str, dtype_scale=None, angle_scale=None,
            angle_based: bool = False, compared=None, accumulation_scale=None) -> Comparison:
    """Compare one output array; integers exactly, floats by :func:`bound`.

    ``compared``: optional bool mask of the slots the clause specifies.  Shapes must match
    exactly (a transposed layout is a failure, not a broadcast).  NaN or inf in ``actual``
    where the reference is finite is always a failure; where the expected value is not finite (a
    mutant's or an inference model's outputs, compared as the golden), only the same value passes:
    NaN for NaN, an infinity for the same infinity (the diagnosis's rule for non-finite outputs).
    """
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return Comparison(False, float("inf"), -1, e.size, None, None, None,
                          f"{name}: shape {a.shape} != expected {e.shape}")
    mask = np.ones(e.shape, bool) if compared is None else np.broadcast_to(np.asarray(compared, bool), e.shape)
    if np.issubdtype(e.dtype, np.integer) or np.issubdtype(e.dtype, np.bool_):
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_)):
            return Comparison(False, float("inf"), -1, e.size, None, None, None,
                              f"{name}: expected integers, got {a.dtype}")
        bad = (a.astype(np.int64) != e.astype(np.int64)) & mask
        ratio_arr = np.where(bad, np.inf, 0.0)
    else:
        a64 = a.astype(np.float64)
        b = bound(dtype, 0.0 if dtype_scale is None else dtype_scale,
                  0.0 if angle_scale is None else angle_scale, angle_based,
                  0.0 if accumulation_scale is None else accumulation_scale)
        b = np.broadcast_to(b, e.shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a ratio past float64's range: inf
            err = np.abs(a64 - e)
            ratio_arr = np.where(err == 0, 0.0, err / b)
            same_non_finite = ~np.isfinite(e) & ((np.isnan(e) & np.isnan(a64)) | (e == a64))
        ratio_arr = np.where(np.isfinite(a64) & np.isfinite(e), ratio_arr, np.where(same_non_finite, 0.0, np.inf))
        ratio_arr = np.where(mask, ratio_arr, 0.0)
        bad = ratio_arr > 1.0
    n_bad = int(bad.sum())
    ratio = float(ratio_arr.max()) if ratio_arr.size else 0.0
    unchecked = 0
    if angle_based and dtype_scale is not None and angle_scale is not None and not np.issubdtype(e.dtype, np.integer):
        unchecked = int((np.broadcast_to(not_checkable(dtype, dtype_scale, angle_scale, True,
                                                       0.0 if accumulation_scale is None else accumulation_scale),
                                         e.shape) & mask).sum())
    if n_bad == 0:
        return Comparison(True, ratio, 0, int(mask.sum()), None, None, None, f"{name}: ok", unchecked)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio_arr)), e.shape))
    if np.issubdtype(e.dtype, np.integer) or np.issubdtype(e.dtype, np.bool_):
        msg = (f"{name}: {n_bad} of {int(mask.sum())} compared integers differ (integers compare exactly); "
               f"first at {list(idx)}: got {int(a[idx])}, expected {int(e[idx])}")
    else:
        exact = bool(b[idx] <= TINY[dtype])  # both scales 0 there: a copied (pass-through) or zero element
        msg = (f"{name}: {n_bad} of {int(mask.sum())} compared elements out of tolerance "
               f"({dtype}); worst at {list(idx)}: got {float(a[idx])!r}, expected {float(e[idx])!r}, "
               + (f"where the value is exact (a pass-through or zero element: only tiny({dtype}) = "
                  f"{TINY[dtype]:.3g} allowed)" if exact else f"|err|/bound = {ratio:.3g}"))
    return Comparison(False, ratio, n_bad, int(mask.sum()), idx, float(a[idx]), float(e[idx]), msg, unchecked)


#: The model tolerance rule's constants (spec family ``model``; below float64 a float64 twin's pairs
#: are judged with the float64 entry as well, spec/model.yaml).  Logits that a MODEL-* clause says
#: are equal may differ by ``K_LOGITS[dt] * eps_eff * scale``, ``scale`` the larger max |logit| of
#: the two rows compared and ``eps_eff`` ``eps(dt)``, never below float32's (a float64 model may
#: take its softmax in float32, as transformers' eager attention does).  Calibrated on the
#: unpatched models of the model matrix (every hf:* architecture, eager and sdpa, every scenario
#: that applies, its recorded divergences left out; ``python bench/calibrate_logits.py`` prints
#: the worst ratio per dtype): about 4x the worst seen.  The one calibrated constant of the spec (the
#: operation bounds above are derived): how far rounding moves a logit is the model's condition (its
#: weights, depth, norms, its kernels' reduction order for each length), not the encoding's, and no
#: adapter says it; the float64 twin's pairs, where rounding is float32's parts only, are the check
#: that does not depend on the run dtype's rounding (spec/model.yaml).
#: Recalibrated 2026-12-05 (torch 2.13.0, transformers 5.24.0, the 2-core CI machine): worst 6.8
#: (float64), 133.7 (float32: hf:t5 sdpa MODEL-DECODE, whose two sides are each ~3,900 eps x scale
#: from the same weights run in float64, where they agree exactly: rounding, not a bug), 9.0
#: (bfloat16: hf:t5), 5.3 (float16).
K_LOGITS = {"float64": 128.0, "float32": 512.0, "bfloat16": 32.0, "float16": 32.0}


def logits_eps(dtype: str) -> float:
    """``eps_eff`` of the model tolerance rule: ``eps(dtype)``, never below float32's."""
    return max(EPS[dtype], EPS["float32"])


def logits_bound(dtype: str, scale) -> np.ndarray:
    """The allowed |a - b| between two logit rows a MODEL-* clause says are equal, per row
    (``scale``: max |logit| of each row pair): ``K_LOGITS[dtype] * logits_eps(dtype) * scale``."""
    return K_LOGITS[dtype] * logits_eps(dtype) * np.asarray(scale, np.float64) + TINY[dtype]

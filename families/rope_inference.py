"""Inference models of the RoPE family (``rope.*``) and of M-RoPE (``mrope.*``, which registers
:func:`rotation_models` for its operations): what a wrong rotation *is* when no divergence reproduces it.

From the adapter's outputs the effective cos/sin of every call are recovered (given, or per pair
``z_out / z_in`` from q and k); the models are: a tensor returned unrotated, the other pairing, an
attention factor, the sin's sign (the rotation's direction), the positions used (estimated from the
angles, unwrapped across frequencies), a frequency ratio, another θ, a scaling not applied.
See :mod:`posenc.harness.inference` for how a candidate is judged.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from posenc import families
from posenc.families.mrope import mrope_outputs
from posenc.families.rope import call_keys, freq_provider, rope_outputs
from posenc.harness.checks import SHIFTS, Candidate, InferenceContext, Outputs, golden_section, sig, sig_at
from posenc.reference import mrope, rope
from posenc.reference.rounding import round_to_dtype
from posenc.spec.models import RopeParams
from posenc.spec.tolerance import EPS

from ._common import LOWER_HALF_DTYPES
from .rope_estimates import MAX_TURNS, _wrap, estimate_frequencies, estimate_positions, phase_slack  # noqa: F401 - re-exported

#: The RoPE family's operations (spec/rope.yaml).
ROPE_OPS = ("rope.inv_freq", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply", "rope.apply_with_cos_sin")


@dataclass
class _Call:
    """One call: its key ("" or ".<k>", rope.cos_sin_calls), positions ``[B, T]`` and the
    reference's frequencies ``[n]`` (None where not inputs), the reference's cos/sin ``c``, ``s``
    and the adapter's effective ones ``ce``, ``se`` (all ``[B, T, n]``)."""

    key: str
    pid: Optional[np.ndarray]
    w: Optional[np.ndarray]
    c: np.ndarray
    s: np.ndarray
    ce: np.ndarray = None
    se: np.ndarray = None
    known: Optional[np.ndarray] = None  # [B, T, n]: False where the input pair was 0 (its turn unknowable)

    def seen(self) -> np.ndarray:
        return np.ones(self.c.shape, bool) if self.known is None else self.known


def _geometry(ctx: InferenceContext) -> tuple[int, str]:
    """``(pair_dim, pairing)`` of the case's rotation (M-RoPE: rotary_dim, half pairs)."""
    p = ctx.p
    return (getattr(p, "rdim", p.head_dim), "half") if ctx.op.startswith("mrope") else (p.pair_dim, p.pairing)


def _sin_sign(ctx: InferenceContext) -> int:
    """-1 where the case's pairs turn by -phi (ROPE-ROTATION-NEGATIVE), else +1: the sign that
    turns the sin recovered from a rotation into the table's sin, and back."""
    return -1 if ctx.op.startswith("rope.") and getattr(ctx.p, "rotation", "positive") == "negative" else 1


def _reference_calls(ctx: InferenceContext) -> list[_Call]:
    """The reference's cos/sin (and frequencies, positions) of every call of the case."""
    op, p, x = ctx.op, ctx.p, ctx.x
    if op == "rope.apply_with_cos_sin":
        return [_Call("", None, None, np.asarray(x["cos"], float), np.asarray(x["sin"], float))]
    if op.startswith("mrope"):
        r = mrope_outputs("mrope.cos_sin", p, x)
        return [_Call("", None, mrope.inv_freq(p), r["cos"], r["sin"])]
    freq, seen = freq_provider(p), {}

    def recorded(n):  # one provider over the calls in order (a stateful policy sees the sequence)
        seen["w"], a = freq(n)
        return seen["w"], a
    calls = []
    # condensed positions (ROPE-CONDENSE): the angle is position * (inv_freq / c), so every model of the
    # angles reads the frequencies per position, inv_freq / c -- "the specified one" is the condensed angle
    c = getattr(p, "condense_ratio", None) or 1.0
    for key in call_keys(x) if op == "rope.cos_sin_calls" else ["position_ids"]:
        r = rope_outputs("rope.cos_sin", p, {"position_ids": np.asarray(x[key])}, recorded)
        calls.append(_Call(key[12:], np.asarray(x[key]), np.asarray(seen["w"], float) / c, r["cos"], r["sin"]))
    return calls


def _effective(ctx: InferenceContext, calls: list[_Call], tensors: list[str]) -> None:
    """The adapter's cos/sin: given outputs, or recovered from q/k (per pair ``z_out / z_in``)."""
    if not ctx.op.endswith("apply") and ctx.op != "rope.apply_with_cos_sin":
        for c in calls:
            c.ce, c.se = ctx.out["cos" + c.key].astype(float), ctx.out["sin" + c.key].astype(float)
        return
    (a, b), (oa, ob) = rope.pair_indices(*_geometry(ctx)), rope.output_indices(*_geometry(ctx))
    num, den = 0, 0
    for n in tensors:
        xi, y = np.asarray(ctx.x[n], float), ctx.out[n].astype(float)
        zi, zo = xi[..., a] + 1j * xi[..., b], y[..., oa] + 1j * y[..., ob]
        num = num + (zo * np.conj(zi)).sum(axis=1)  # over heads: [B, T, n]
        den = den + (np.abs(zi) ** 2).sum(axis=1)
    z = num / np.where(den == 0, 1.0, den)
    calls[0].ce, calls[0].se = z.real, _sin_sign(ctx) * z.imag  # the table's sin (ROPE-ROTATION-NEGATIVE)
    calls[0].known = np.broadcast_to(np.asarray(den) > 0, z.shape)


def _emit(ctx: InferenceContext, calls: list[_Call], cs: list[tuple[np.ndarray, np.ndarray]]) -> Outputs:
    """Outputs implied by cos/sin ``cs`` per call (for apply: the bad tensors rotated by them)."""
    if ctx.op in ("rope.cos_sin", "rope.cos_sin_calls", "mrope.cos_sin"):
        return {n + c.key: v for c, pair in zip(calls, cs) for n, v in zip(("cos", "sin"), pair)}
    rotation = "negative" if _sin_sign(ctx) < 0 else "positive"
    return {n: rope.apply_with_cos_sin(ctx.x[n], *cs[0], *_geometry(ctx), rotation) for n in ctx.bad}


def rotation_models(ctx: InferenceContext) -> list[Candidate]:
    """Every candidate of a rotation's output (RoPE's and M-RoPE's operations)."""
    p = ctx.p
    cands: list[Candidate] = []
    tensors = [n for n in ctx.bad if n in ("q", "k")]
    for sub in [[n] for n in tensors] + ([tensors] if len(tensors) == 2 else []):
        cands.append((f"{' and '.join(sub)} {'is' if len(sub) == 1 else 'are'} returned unrotated (the output "
                      "equals the input)", lambda sub=sub: {n: ctx.x[n] for n in sub}))
    for other in ("half", "interleaved") if tensors and ctx.op.startswith("rope") else ():
        if other != p.pairing:
            cands.append((f"{other} pairs applied where {p.pairing} pairs are specified",
                          lambda o=other: ctx.ref(p.model_copy(update={"pairing": o}))))
            cands += _other_pairing_scaled(ctx, tensors, other)
    if ctx.op == "rope.inv_freq":
        return cands + _inv_freq_models(ctx)
    calls = _reference_calls(ctx)
    _effective(ctx, calls, tensors)
    models = _rotation_models(ctx, calls)
    if len(tensors) == 1 and all(n in ctx.out for n in ("q", "k")):  # say which one is wrong
        right = "k" if tensors[0] == "q" else "q"
        models = [(f"{tensors[0]} only ({right} within tolerance): {text}", fn) for text, fn in models]
    return cands + models


def _other_pairing_scaled(ctx: InferenceContext, tensors: list[str], other: str) -> list[Candidate]:
    """The other pairing with cos and sin scaled as well (two bugs: their recovered cos/sin are no rotation
    per pair, so the magnitude model cannot see the scale): the least-squares factor of the rotated dims."""
    p = ctx.p
    ref = ctx.ref(p.model_copy(update={"pairing": other}))
    if all(np.array_equal(ref[n], ctx.g.outputs[n]) for n in tensors):
        return []  # the pairings agree on this case (one pair): nothing says which one was applied
    r = p.rdim
    num = sum(float((np.asarray(ctx.out[n], float)[..., :r] * ref[n][..., :r]).sum()) for n in tensors)
    den = sum(float((ref[n][..., :r] ** 2).sum()) for n in tensors)
    if den == 0 or abs(num / den - 1) <= 2e-3:
        return []
    f = num / den
    aref = float(rope.inv_freq(p)[1])
    said = sig_at(aref * f, ctx.dtype)

    def implied():
        out = {}
        for n in tensors:
            y = np.array(ref[n], float)
            y[..., :r] *= float(said) / aref
            out[n] = y
        return out
    return [(f"attention factor {said} where {sig(aref)} is specified; a second bug: {other} pairs applied where "
             f"{p.pairing} pairs are specified", implied)]


def _rotation_models(ctx: InferenceContext, calls: list[_Call]) -> list[Candidate]:
    """Models of the effective cos/sin: attention factor, sin sign, positions, frequencies, θ."""
    cands: list[Candidate] = []
    ae = np.concatenate([np.hypot(c.ce, c.se)[c.seen()] for c in calls])
    ar = np.concatenate([np.hypot(c.c, c.s)[c.seen()] for c in calls])
    if not ae.size:  # every input pair 0: no turn seen
        return cands
    amp, aref = float(np.median(ae)), float(np.median(ar))
    scale = amp / aref if aref > 0 else 1.0
    mag = ""
    said = sig_at(amp, ctx.dtype)  # no more digits than the dtype resolves (1.25, not bf16's 1.249); a magnitude
    # the dtype cannot tell from the specified one is no finding ("0.75 where 0.75 is specified": one bf16 pair)
    if aref > 0 and abs(scale - 1) > max(2e-3, EPS[ctx.dtype]) and np.std(ae) < 1e-2 * max(amp, 1e-30) and \
            float(said) != float(sig_at(aref, ctx.dtype)):
        ctx.found["attention_factor"] = float(said)
        mag = (f"attention factor {said} where {sig(aref)} is specified (cos and sin have magnitude "
               f"{said}{'; the factor is dropped?' if abs(amp - 1) < 1e-3 else ''})")
        if ctx.op == "rope.apply_with_cos_sin":
            mag = f"the given cos/sin are applied with magnitude {said}, not their own {sig(aref)} (rescaled?)"
        cands.append((mag, lambda: _emit(ctx, calls, [(c.c * scale, c.s * scale) for c in calls])))
    prefix = mag + "; " if mag else ""
    phe = [np.arctan2(c.se, c.ce) for c in calls]
    if mag:  # the magnitude holds on its own: said even where no model of the angles reproduces them
        ctx.facts += _catalogued_angles(ctx, calls, amp, mag)  # ... the angles of a named bug first
    ctx.facts += _per_pair_frequencies(ctx, calls, phe, amp if mag else None, prefix)
    if mag:
        ctx.facts.append((mag + "; the angles are wrong too, in a way no model reproduces (a second bug)",
                          lambda: _emit(ctx, calls, [(amp * np.cos(e), amp * np.sin(e)) for e in phe])))
    phr = [np.arctan2(c.s, c.c) for c in calls]
    seen = [c.seen() for c in calls]
    if all(np.abs(_wrap(e + r))[m].max(initial=0) < 0.05 for e, r, m in zip(phe, phr, seen)) and \
            any(np.abs(_wrap(e - r))[m].max(initial=0) > 0.05 for e, r, m in zip(phe, phr, seen)):
        turn = ("+φ where -φ is specified (ROPE-ROTATION-NEGATIVE: a standard rotate_half?)"
                if _sin_sign(ctx) < 0 and ctx.op != "rope.cos_sin" and ctx.op != "rope.cos_sin_calls"
                else "-φ where +φ is specified")
        cands.append((prefix + f"sin has the wrong sign: the rotation runs in the other direction (angle {turn})",
                      lambda: _emit(ctx, calls, [(c.c * scale, -c.s * scale) for c in calls])))
    if ctx.op.startswith("mrope"):  # [3, B, T] positions: the same shift on every axis, then on one axis
        cands += [(prefix + f"positions are the specified ones {k:+d} on every token and axis", lambda k=k: ctx.ref(
            inputs={**ctx.x, "position_ids": np.asarray(ctx.x["position_ids"]) + k})) for k in SHIFTS]
        cands += axis_shift_models(ctx, lambda a, k: prefix + f"the {MROPE_AXES[a]} axis's positions are the "
                                   f"specified ones {k:+d} (the other axes right)")
    if all(c.pid is not None and c.w is not None for c in calls):
        cands += _position_models(ctx, calls, phe, scale, prefix)
        cands += _theta_models(ctx, calls, phe, prefix)
        cands += _half_angle_orders(ctx, calls, scale, prefix)
        cands += _half_angle_models(ctx, calls, phe, phr, prefix)
    return cands


def _catalogued_angles(ctx: InferenceContext, calls: list[_Call], amp: float, mag: str) -> list[Candidate]:
    """Two bugs at once, one of them the magnitude ``mag`` said: the output's angles are a catalogued
    divergence's (its mutant's on the case, any magnitude), each a fact "<mag>; a second bug: the angles are
    DIV-...'s (<what it does>)" whose implied output is that mutant's angles at magnitude ``amp``.  A mutant that
    leaves the angles as specified (an attention-factor bug: that is ``mag`` itself) or has no form for the
    case says nothing.  (A litgpt trial: its YaRN blend inverted and its attention factor 1 where 1.139
    is specified, in one output.)"""
    facts: list[Candidate] = []
    ref = [np.arctan2(c.s, c.c) for c in calls]
    mutants, by_mutant = families.mutants(), {}
    for d in families.spec().current_divergences.values():  # each mutant's first divergence, as the spec lists them
        by_mutant.setdefault(d.mutant, d)
    for mutant, div in sorted((m, d) for m, d in by_mutant.items() if m):
        fn = mutants.get(mutant, {}).get(ctx.op)
        if fn is None:
            continue
        twin = [_Call(c.key, c.pid, c.w, c.c, c.s) for c in calls]
        try:
            out = fn(ctx.p, ctx.x, ctx.dtype)
            if out is None:
                continue
            _effective(replace(ctx, out={n: np.asarray(v) for n, v in out.items()}), twin,
                       [n for n in ctx.bad if n in out])
        except Exception:  # noqa: BLE001 - a mutant that cannot run this case says nothing of it
            continue
        if any(t.ce is None or t.ce.shape != c.c.shape for t, c in zip(twin, calls)):
            continue
        phm = [np.arctan2(t.se, t.ce) for t in twin]
        if all(np.abs(_wrap(m - r))[c.seen()].max(initial=0) < 1e-9 for m, r, c in zip(phm, ref, calls)):
            continue  # its angles are the specified ones
        what = re.split(r": |; | \(|\. ", div.description, maxsplit=1)[0].rstrip(".")
        facts.append((f"{mag}; a second bug: the angles are {div.id}'s ({what})",
                      lambda phm=phm: _emit(ctx, calls, [(amp * np.cos(e), amp * np.sin(e)) for e in phm])))
    return facts


def _per_pair_frequencies(ctx: InferenceContext, calls: list[_Call], phe, amp: Optional[float],
                          prefix: str) -> list[Candidate]:
    """The last word on frequencies no model or parameter fit gives: the positions are the specified ones
    and each pair turns at its own frequency, said per run of pairs as a ratio to the specified one ("the
    inverse frequencies are not the specified ones: pairs 0-1 × 0.3679, 2-3 × 1"; a litgpt trial's YaRN,
    its blend inverted and its correction band clamped to the pairs, had no other finding).  Implied:
    cos / sin of ``position · w'`` at the magnitude said (``amp``) or the specified one."""
    if not ctx.op.startswith("rope.") or not all(c.pid is not None and c.w is not None for c in calls):
        return []
    n = calls[0].w.shape[-1]
    pid = np.concatenate([c.pid.reshape(-1) for c in calls]).astype(float)
    if not (pid != 0).any() or math.gcd(*np.abs(pid).astype(np.int64).tolist()) != 1:
        return []  # positions with a common factor g (one far token): w is known only modulo 2π / g
    if any(not np.array_equal(c.w, calls[0].w) for c in calls):
        return []  # per-call frequencies (dynamic NTK, LongRoPE's switch): no one set to compare with
    w, res = estimate_frequencies(np.concatenate([x.reshape(-1, n) for x in phe]), pid)
    # the specified ones (never estimated: far positions alias the highest), with the sign the reference's
    # tables turn by (a negative rotation's tables included)
    c0 = next(c for c in calls if (c.pid != 0).any())
    phr, pw = np.arctan2(c0.s, c0.c), c0.pid[..., None].astype(float) * c0.w
    ref = c0.w * (1.0 if np.abs(_wrap(phr - pw)).max() <= np.abs(_wrap(phr + pw)).max() else -1.0)
    if res > 0.2 or not np.isfinite(w).all() or np.allclose(w, ref, rtol=1e-9, atol=0):
        return []
    runs: list[list] = []
    for i in range(n):  # every pair said: a "..." would let a finding of these pairs excuse other pairs' bugs
        said = sig(float(w[i] / ref[i]), 4) if ref[i] != 0 else f"{sig(float(w[i]), 4)} rad/position (0 specified)"
        if runs and runs[-1][2] == said:
            runs[-1][1] = i
        else:
            runs.append([i, i, said])
    text = ", ".join(f"{'pair' if a == b else 'pairs'} {a if a == b else f'{a}-{b}'} × {r}" for a, b, r in runs)
    sentence = prefix + f"the inverse frequencies are not the specified ones: {text}"

    def implied():
        cs = []
        for c in calls:
            ang = c.pid[..., None].astype(float) * w
            a = amp if amp is not None else np.hypot(c.c, c.s)
            cs.append((a * np.cos(ang), a * np.sin(ang)))
        return _emit(ctx, calls, cs)
    return [(sentence, implied)]


def _half_angle_orders(ctx: InferenceContext, calls: list[_Call], scale: float, prefix: str) -> list[Candidate]:
    """Angles computed in a half dtype in one of the orders real code has, each step rounded there
    (ROPE-PRECISION): the product of the rounded position and frequency; with a linear factor, that
    product divided by the factor (x-transformers' ``einsum(t, inv_freq) / interpolation_factor`` after
    ``.to(bf16)``), or the position divided first (position interpolation).  Reproduced exactly, they
    are said exactly, where the generic precision bound could not tell them from a wrong θ."""
    f = float(ctx.p.factor) if getattr(ctx.p, "rope_type", None) == "linear" and ctx.p.factor else None
    cands: list[Candidate] = []
    for h in LOWER_HALF_DTYPES.get(ctx.dtype, ()):
        def rnd(v, h=h):
            with np.errstate(over="ignore", invalid="ignore"):
                return round_to_dtype(v, h)
        orders = [("round(round(p) * round(inv_freq))", lambda P, w, rnd=rnd: rnd(rnd(P) * rnd(w)))]
        if f:  # base_inv_freq = inv_freq before the factor; a Python-float factor is not rounded (torch)
            orders += [("round(round(round(p) * round(base_inv_freq)) / factor)",
                        lambda P, w, rnd=rnd: rnd(rnd(rnd(P) * rnd(w * f)) / f)),
                       ("round(round(round(p) * round(base_inv_freq)) / round(factor))",
                        lambda P, w, rnd=rnd: rnd(rnd(rnd(P) * rnd(w * f)) / rnd(np.float64(f)))),
                       ("round(round(round(p) / factor) * round(base_inv_freq))",
                        lambda P, w, rnd=rnd: rnd(rnd(rnd(P) / f) * rnd(w * f)))]
        for desc, angle in orders:
            def implied(angle=angle):
                cs = []
                for c in calls:
                    a, phi = scale * np.hypot(c.c, c.s), angle(np.asarray(c.pid, np.float64)[..., None], c.w)
                    cs.append((a * np.cos(phi), a * np.sin(phi)))
                return _emit(ctx, calls, cs)
            cands.append((prefix + f"the angles computed in {h}, each step rounded: {desc} (the spec requires "
                          f"float32 angles at every dtype{f'; linear factor {sig(f)}' if f else ''})", implied))
    return cands


def _half_angle_models(ctx: InferenceContext, calls: list[_Call], phe, phr, prefix: str) -> list[Candidate]:
    """Angles that carry a half dtype's rounding and nothing else (ROPE-PRECISION): every seen phase
    within ``2 eps(h) |φ| + 4 eps(h)`` of the specified one -- the position, the frequency, the product
    and a division (a linear factor) each rounded once at ``u = eps(h) / 2``, and cos / sin rounded there
    too -- and beyond float32's ``4 eps(f32) |φ|`` at ten phases or more where that bound is below π/8,
    of both signs (at least a tenth each way: roundings go either way; a wrong θ, frequency or factor
    turns every angle the same way, by a fraction of |φ| this bound may hold where e_i is small).  The claim is checked
    here, on the phases; its implied output is the adapter's own (what the sentence says it is)."""
    f32 = EPS["float32"]
    # only at a half run's own dtype: in a float32 run a rotation done in half rounds the phases by about
    # as much, and is the generic precision finding's (computed in half and returned as float32)
    for h in (ctx.dtype,) if ctx.dtype in ("bfloat16", "float16") else ():
        within, signs = True, []
        for c, e, r in zip(calls, phe, phr):
            phi, seen = c.pid[..., None] * c.w, c.seen()
            d = _wrap(e - r)
            within &= bool((np.abs(d[seen]) <= 2 * EPS[h] * np.abs(phi[seen]) + 4 * EPS[h]).all())
            # beyond float32's allowance, where the half bound still says something (below π/8: past it a
            # wrapped phase of any value is within it, and of either sign)
            far = seen & (np.abs(d) > 4 * f32 * np.abs(phi) + 4 * max(EPS[ctx.dtype], f32)) & \
                (2 * EPS[h] * np.abs(phi) + 4 * EPS[h] < math.pi / 8)
            signs.append(np.sign(d[far] * np.where(phi[far] < 0, -1.0, 1.0)))
        signs = np.concatenate(signs)
        mixed = signs.size >= 10 and min((signs > 0).sum(), (signs < 0).sum()) >= 0.1 * signs.size
        if within and mixed:
            return [(prefix + f"the angles carry {h} rounding: every phase within 2 eps({h}) |φ| of the specified "
                     f"one (angles, inverse frequencies or positions computed or held in {h}; the spec requires "
                     f"float32 for them at every dtype)", lambda: {n: ctx.out[n] for n in ctx.bad})]
    return []


#: M-RoPE's position axes, in the order of ``position_ids``' first dimension (spec/mrope.yaml).
MROPE_AXES = ("temporal", "height", "width")


def axis_shift_models(ctx: InferenceContext, said: Callable[[int, int], str]) -> list[Candidate]:
    """One axis of ``[A, B, T]`` ``position_ids`` off by a constant, the other axes right (M-RoPE's
    temporal / height / width positions, axial coordinates): for each shift in :data:`SHIFTS` and
    each axis ``a``, the sentence ``said(a, k)`` and the reference at those positions."""
    pid = np.asarray(ctx.x["position_ids"])

    def shifted(a: int, k: int) -> np.ndarray:
        out = np.array(pid, copy=True)
        out[a] += k
        return out
    return [(said(a, k), lambda a=a, k=k: ctx.ref(inputs={**ctx.x, "position_ids": shifted(a, k)}))
            for k in SHIFTS for a in range(pid.shape[0])]


def _scaled(ctx: InferenceContext, **update):
    """The case's RoPE parameters updated, with the attention factor found (if any)."""
    af = ctx.found.get("attention_factor")
    return ctx.p.model_copy(update={**update, **({"attention_factor": af} if af else {})})


def _implied_positions(ctx: InferenceContext, calls: list[_Call], P: list[np.ndarray]) -> Outputs:
    """The reference at other positions (``P`` per call), with the attention factor found (if any)."""
    keys = ["position_ids" + c.key for c in calls]
    return ctx.ref(_scaled(ctx), {**ctx.x, **dict(zip(keys, P))})


def _position_models(ctx: InferenceContext, calls: list[_Call], phe, scale: float, prefix: str) -> list[Candidate]:
    def shifted(note: str = "") -> list[Candidate]:  # the best fit first (one bf16 token may fit +2 and +3 alike)
        def ratio(k):
            try:
                ok, r = ctx.fit(_implied_positions(ctx, calls, [c.pid + k for c in calls]))
            except Exception:  # noqa: BLE001 - a model that cannot be computed here does not fit
                return float("inf")
            return r if ok else float("inf")
        ranked = sorted(SHIFTS, key=lambda k: (ratio(k), SHIFTS.index(k)))
        return [(f"{prefix}positions are the specified ones {k:+d} on every token{note}",
                 lambda k=k: _implied_positions(ctx, calls, [c.pid + k for c in calls])) for k in ranked]
    p_max = 4 * max(float(np.abs(c.pid).max(initial=0)) for c in calls) + 64  # up to 4x the specified ones
    est = [estimate_positions(e, c.w, c.known, p_max) for e, c in zip(phe, calls)]
    P = [e[0] for e in est]
    if max(float(r.max()) for _, r in est) > 0.2:  # the frequencies differ too (they depend on the positions:
        return shifted(" (frequencies of the shifted positions)")  # dynamic, longrope)
    # a constant shift first: where few tokens and frequencies leave the angles ambiguous (a single low
    # frequency wraps: head_dim 4 at position 70000), the estimate may be another position the tolerance
    # cannot tell apart; the simplest model that reproduces the output is the one said
    cands: list[Candidate] = shifted()
    # then the positions of the first turn (P), the best fit of every turn (P tries more only past 0.2 rad: x 2 at 70000
    # was -20.78) and the nearest of those the tolerance cannot tell apart: named patterns (restart at 0, x k) first,
    # then per-row offsets, nearest first ("row 0: -43" hid a restart at 0), not the best fit's (any alias fits it)
    best, near = ([estimate_positions(e, c.w, c.known, p_max, c.pid, slack(c))[0] for e, c in zip(phe, calls)]
                  for slack in (lambda c: 0.0, lambda c: phase_slack(c.pid, c.w, getattr(ctx.p, "rope_theta", math.e), ctx.dtype)))
    said: dict[str, list] = {}
    for Q in (P, best, near):
        if all(np.abs(q - np.round(q)).max() < 0.1 for q in Q):
            Pi = [np.round(q).astype(np.int64) for q in Q]
            text = describe_positions([c.pid for c in calls], Pi, [c.key for c in calls])
            if any((q != c.pid).any() for q, c in zip(Pi, calls)) and not (Q is best and _per_token(text)):
                said.setdefault(text, Pi)
    order = [t for t in said if not _per_token(t)] + [t for t in reversed(said) if _per_token(t)]
    cands += [(prefix + t, lambda Pi=said[t]: _implied_positions(ctx, calls, Pi)) for t in order]
    pid = np.concatenate([c.pid.ravel() for c in calls]).astype(float)
    pe = np.concatenate([q.ravel() for q in P])
    nz = np.abs(pid) > 0
    if nz.any():
        ratio = pe[nz] / pid[nz]
        r = float(np.median(ratio))
        if abs(r) > 1e-6 and abs(r - 1) > 1e-4 and np.abs(ratio - r).max() < 2e-3 * abs(r):
            cands.append((prefix + _ratio_sentence(ctx.p, r),
                          lambda: _emit(ctx, calls, [_rotated(c, r, scale) for c in calls])))
    return cands


def _per_token(text: str) -> bool:  # a describe_positions sentence of per-row or per-token offsets
    return "off by a constant per row" in text or "positions used differ from the specified ones" in text


def _rotated(c: _Call, r: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The reference's cos/sin of call ``c`` with every angle times ``r``, magnitude times ``scale``."""
    a, phi = scale * np.hypot(c.c, c.s), c.pid[..., None] * c.w * r
    return a * np.cos(phi), a * np.sin(phi)


def _ratio_sentence(p, r: float) -> str:
    text = f"frequencies × {sig(r)} (every angle is {sig(r)} times the specified one)"
    f = getattr(p, "factor", None) if getattr(p, "rope_type", None) == "linear" else None
    if f and (abs(r * f - 1) < 1e-3 or abs(r - f) < 1e-3 * f):
        text += f": the linear factor {sig(f)} {'applied twice' if r < 1 else 'not applied'}?"
    elif abs(r - round(r)) < 1e-3 or abs(1 / r - round(1 / r)) < 1e-3:
        text += f": positions or frequencies scaled by {sig(r if r >= 1 else 1 / r)}?"
    return text


def describe_positions(pids: list[np.ndarray], used: list[np.ndarray], keys: list[str]) -> str:
    """One sentence comparing the positions used with the specified ones (ROPE-ANGLE, POS-*).

    ``pids``/``used``: per call, integer ``[B, T]``; ``keys``: the calls' suffixes ("" or ".<k>").
    """
    d = [u - p for u, p in zip(used, pids)]
    allv = np.concatenate([x.ravel() for x in d])
    if (allv == allv[0]).all():
        return f"positions are the specified ones {int(allv[0]):+d} on every token"
    p_all, u_all = np.concatenate([p.ravel() for p in pids]), np.concatenate([u.ravel() for u in used])
    nz = p_all != 0
    if nz.any() and (u_all[~nz] == 0).all() and (u_all[nz] % p_all[nz] == 0).all():
        r = u_all[nz] // p_all[nz]
        if (r == r[0]).all() and r[0] not in (0, 1):
            return (f"positions are the specified ones × {int(r[0])} on every token (the same angles as "
                    f"frequencies × {int(r[0])})")
    if len(d) > 1 and not d[0].any() and all((x == d[1].flat[0]).all() for x in d[1:]):
        return (f"positions are the specified ones {int(d[1].flat[0]):+d} on decode steps "
                f"(every call after the first; the first call is right)")
    B, T = pids[0].shape
    if all((u == np.arange(u.shape[-1])).all() for u in used):
        return (f"positions restart at 0 (positions 0..{T - 1} instead of "
                f"{', '.join(f'{int(p[b, 0])}..' for p in pids for b in range(p.shape[0]))})")
    if B > 1 and all((u == u[:1]).all() for u in used) and any((p != p[:1]).any() for p in pids):
        return "every batch row uses row 0's positions"
    if all((x == x[:, :1]).all() for x in d):
        per = ", ".join(f"row {b}{k}: {int(x[b, 0]):+d}" for x, k in zip(d, keys) for b in range(x.shape[0]))
        return f"positions are off by a constant per row ({per})"
    if all(not x[:, :-1].any() and (x[:, -1] == d[0][0, -1]).all() for x in d):
        return f"positions are the specified ones {int(d[0][0, -1]):+d} on the last token of every row"
    wrong = [(k, b, t, int(p[b, t]), int(u[b, t])) for p, u, k in zip(pids, used, keys)
             for b, t in zip(*np.nonzero(u != p))]
    lo, right = min(w[3] for w in wrong), [int(v) for p, u in zip(pids, used) for v in p[u == p]]
    head = f"only positions >= {lo} are off; " if right and max(right) < lo else ""
    shown = ", ".join(f"[{b}, {t}]{k} {pp} -> {uu}" for k, b, t, pp, uu in wrong[:4]) + ", ..." * (len(wrong) > 4)
    return f"{head}the positions used differ from the specified ones at {len(wrong)} tokens: {shown}"


def _theta_models(ctx: InferenceContext, calls: list[_Call], phe, prefix: str) -> list[Candidate]:
    """θ fit: for default-type RoPE ``w_i = θ' ** (-2i / rotary_dim)`` (ROPE-INV-FREQ); for a scaled
    type, its scaling at another θ (:func:`fit_theta`), or its scaling not applied."""
    p = ctx.p
    if not ctx.op.startswith("rope."):
        return []
    cands: list[Candidate] = []
    if p.rope_type != "default":  # a scaled type with plain θ frequencies
        plain = RopeParams(head_dim=p.head_dim, rotary_dim=p.rdim, rope_theta=p.rope_theta,
                           pairing=p.pairing, rotation=p.rotation, attention_factor=ctx.found.get("attention_factor") or p.attention_factor)
        cands.append((prefix + f"the rope_type {p.rope_type!r} scaling is not applied (plain θ "
                      f"{sig(p.rope_theta, 6)} frequencies)", lambda: ctx.ref(plain)))
    n = calls[0].w.shape[-1]
    pid = np.concatenate([c.pid.reshape(-1) for c in calls]).astype(float)
    if n < 2 or not (pid != 0).any():
        return cands
    w, res = estimate_frequencies(np.concatenate([x.reshape(-1, n) for x in phe]), pid)
    w = w * (getattr(p, "condense_ratio", None) or 1.0)  # per position -> inv_freq (ROPE-CONDENSE)
    if p.rope_type != "default" and res <= 0.2:
        w = np.where(np.abs(w) < 1e-9, 0.0, w)  # an unrotated pair's frequency, estimated to rounding
        seq = int(max(np.max(c.pid) for c in calls)) + 1
        theta = fit_theta(p, w, seq)
        return cands + ([] if theta is None else _theta_candidates(ctx, theta, prefix))
    if res > 0.2 or not (w > 0).all():
        return cands
    slope, icpt = np.polyfit(2.0 * np.arange(n) / p.rdim, np.log(w), 1)
    theta = math.exp(-slope)
    if abs(icpt) > 1e-3 or abs(theta / p.rope_theta - 1) < 1e-7:
        return []  # not a θ^(-2i/r) law with w_0 = 1, or θ itself (another model's business)
    return _theta_candidates(ctx, theta, prefix)


def fit_theta(p: RopeParams, w: np.ndarray, seq_len: Optional[int] = None) -> Optional[float]:
    """The θ at which ``p``'s own scaling (any rope_type) gives the frequencies ``w [n]``
    (:func:`posenc.reference.rope.inv_freq` at θ', ``seq_len`` for the per-call types), found by a
    scan of log θ' over θ / 10^4 .. θ · 10^4 refined by golden section; None when no θ' reproduces
    ``w`` (worst |log w - log w'| above 1e-3) or θ' is θ itself (another model's business)."""
    w = np.asarray(w, np.float64)
    if w.ndim != 1 or not np.isfinite(w).all() or not (w > 1e-12).any():
        return None
    live = w > 1e-12  # a frequency of 0 (proportional's unrotated pairs) is not a function of θ

    def resid(log_theta: float) -> float:
        try:
            wr, _ = rope.inv_freq(p.model_copy(update={"rope_theta": math.exp(log_theta)}), seq_len)
        except (ValueError, ArithmeticError):
            return math.inf
        wr = np.asarray(wr, np.float64)
        if wr.shape != w.shape or ((wr > 1e-12) != live).any():
            return math.inf
        return float(np.abs(np.log(w[live]) - np.log(wr[live])).max())

    centre = math.log(p.rope_theta)
    grid = np.linspace(centre - math.log(1e4), centre + math.log(1e4), 161)
    r = [resid(x) for x in grid]
    i = int(np.argmin(r))
    best = golden_section(resid, grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 60)
    theta = math.exp(best)
    if resid(best) > 1e-3 or abs(theta / p.rope_theta - 1) < 1e-7:
        return None
    return theta


def _theta_candidates(ctx: InferenceContext, theta: float, prefix: str = "") -> list[Candidate]:
    """The reference at θ ``theta`` (rounded first: the θ a config would hold), ROPE-INV-FREQ."""
    p, cands = ctx.p, []
    for guess in dict.fromkeys((float(sig(theta, 2)), float(sig(theta, 3)), theta)):
        q = _scaled(ctx, rope_theta=guess)
        cands.append((prefix + f"θ (rope_theta) {sig(guess, 6)} where {sig(p.rope_theta, 6)} is specified",
                      lambda q=q: ctx.ref(q)))
    return cands


def _inv_freq_models(ctx: InferenceContext) -> list[Candidate]:
    """inv_freq ``[n]``: a uniform ratio, or another θ (ROPE-INV-FREQ)."""
    w, wr = ctx.out["inv_freq"].astype(float), ctx.g.outputs["inv_freq"]
    cands: list[Candidate] = []
    r = w / wr
    if np.ptp(r) < 1e-5 * abs(r[0]):
        cands.append((_ratio_sentence(ctx.p, float(r[0])), lambda: {"inv_freq": wr * float(r[0])}))
    p = ctx.p
    if getattr(p, "rope_type", None) == "default" and len(w) > 1 and (w > 0).all():
        e = 2.0 * np.arange(len(w)) / p.rdim
        cands += _theta_candidates(ctx, math.exp(-np.polyfit(e, np.log(w), 1)[0]))
    elif isinstance(p, RopeParams) and len(w) > 1 and (w >= 0).all():  # a scaled type: its scaling at another θ
        theta = fit_theta(p, w)
        if theta is not None:
            cands += _theta_candidates(ctx, theta)
    return cands


@families.inference(*ROPE_OPS)
def rope_models(ctx: InferenceContext) -> list[Candidate]:
    """The models of a RoPE operation's wrong output (and, registered by M-RoPE, of an M-RoPE one)."""
    return rotation_models(ctx)


@families.inference_notes(*ROPE_OPS)
def partial_dims(ctx: InferenceContext, name: str, bad: np.ndarray) -> list[str]:
    """Where a partial rotation is wrong: only the pass-through dims, or only the rotated ones (ROPE-PARTIAL)."""
    if name not in ("q", "k") or not hasattr(ctx.p, "rdim"):
        return []
    dims = np.nonzero(bad.reshape(-1, bad.shape[-1]).any(0))[0]
    if len(dims) and dims.min() >= ctx.p.rdim:
        return [f"only the pass-through dims >= {ctx.p.rdim} (ROPE-PARTIAL)"]
    if len(dims) and dims.max() < ctx.p.rdim < bad.shape[-1]:
        return [f"only the rotated dims < {ctx.p.rdim}"]
    return []

"""The RoPE family's oracle-free checks (pairing probe, pass-through tail, pair norms, relative
positions, the half/interleaved permutation, decode equals prefill)."""

from __future__ import annotations

import dataclasses

import numpy as np

from posenc import families
from posenc.harness.checks import (
    ConformanceFailure,
    Golden,
    Unsupported,
    as_form_failure,
    assert_conforms,
    call_adapter,
    clauses_of,
    fail,
    invariant_clauses,
    load_golden,
    native,
    require_dtype,
    run_op,
    run_steps,
    step,
    step_forms,
)
from posenc.reference import rope
from posenc.spec.tolerance import EPS, bound, identical, relative_floor

from . import check, form_clauses
from .rope import freq_provider, rope_outputs, rope_scales

ROPE = ("rope.apply",)


def _rope(adapter, case, dtype, device, q, k, pid, params=None, clauses=()):
    """Run the adapter's prepared RoPE on NumPy inputs; returns float64 NumPy (q, k)."""
    p = params or case.params

    def go():  # contract-checked (type, dtype, device, shape) before any check reads the outputs
        out = run_op(adapter, "rope.apply", p, {"q": q, "k": k, "position_ids": pid}, dtype, device)
        return out["q"].astype(np.float64), out["k"].astype(np.float64)
    return call_adapter(adapter, case, dtype, clauses or case.clauses, go)


def _pairs(p):
    """(input pair indices, output pair indices) of the rotated pairs."""
    return rope.pair_indices(p.pair_dim, p.pairing), rope.output_indices(p.pair_dim, p.pairing)


@check("pairing_probe", invariant="pairing_probe", ops=ROPE)
def pairing_probe(request, adapter, device, dtype, case):
    """e_0 at position 1 lights index 1 (interleaved) or rotary_dim/2 (half, deinterleave), nothing else;
    e_1 lights {0, 1} (interleaved: e_1 is the second of pair 0), {0, rotary_dim/2} (deinterleave: the same
    pair, written de-interleaved) or {1, 1 + rotary_dim/2} (half: e_1 is the first of pair 1).  Both
    the q and the k output (the probe is given as both)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    x = np.zeros((1, 1, 1, p.head_dim))
    x[..., 0] = 1.0
    ys = _rope(adapter, case, dtype, device, x, x, np.ones((1, 1), np.int64), clauses=cl)
    expect = 1 if p.pairing == "interleaved" else p.pair_dim // 2
    w, a = rope.inv_freq(p, 2)
    if w[0] != 1.0:
        raise Unsupported(f"the probe needs inv_freq[0] == 1; rope_type {p.rope_type} scales it to {w[0]:.6g}")
    want = p.sin_sign * a * np.sin(1.0)  # -sin 1 where the pairs turn by -phi (ROPE-ROTATION-NEGATIVE)
    tol = 8 * max(EPS[dtype], EPS["float32"]) * a + 0.01 * a
    for name, y in zip(("q", "k"), (ys[0][0, 0, 0], ys[1][0, 0, 0])):
        lit = [int(i) for i in np.flatnonzero(~(np.abs(y) <= tol)) if i != 0]
        if lit == [expect] and np.sign(y[expect]) == np.sign(want):
            continue  # the pairing and the direction are right; the angle's value is the goldens' to judge
        if lit == [expect]:
            fail(cl, adapter, case, dtype,
                 f"{name}: e_0 at position 1 must light index {expect} with {want:.4f} (rotation {p.rotation}); got "
                 f"{y[expect]:.4f}: the pair turns the other way (DIV-ROPE-SIN-SIGN-FLIPPED"
                 f"{', ROPE-ROTATION-NEGATIVE' if p.rotation == 'negative' else ''})")
        if not lit:
            verdict = _unlit_verdict(y, a, dtype, tol)
        elif lit == [p.pair_dim // 2]:
            verdict = "index rotary_dim/2 is lit: this is half pairing"
        elif lit == [1]:
            verdict = "index 1 is lit: this is interleaved pairing"
        else:
            verdict = f"indices {lit} are lit"
        fail(cl, adapter, case, dtype,
             f"{name}: {p.pairing} pairing: e_0 at position 1 must light index {expect} with {want:.4f} "
             f"(and index 0 with {a * np.cos(1.0):.4f}); got "
             + ", ".join(f"[{i}] {y[i]:.4f}" for i in ([0] + lit)[:8]) + (" ..." if len(lit) > 7 else "")
             + f": {verdict}")
    _probe_e1(adapter, case, dtype, device, cl, tol)


def _unlit_verdict(y, a: float, dtype: str, tol: float) -> str:
    """What an e_0 probe output with no index but 0 above ``tol`` says: not rotated (every other
    index within one rounding of 0), or turned by an angle too small for the probe's threshold at
    ``dtype`` (a bf16 output holds 0.025 exactly enough: that is a rotation by about 1/40 rad)."""
    rest = np.abs(np.asarray(y, np.float64)).copy()
    rest[0] = 0.0
    j = int(np.argmax(rest))
    if rest[j] <= EPS[dtype] * a:
        return "nothing but index 0 is lit: e_0 was not rotated at position 1"
    angle = float(np.arcsin(min(rest[j] / a, 1.0)))
    return (f"e_0 turned by about {angle:.3g} rad where 1 rad is due (index {j} holds {y[j]:.4g}, under what the "
            f"probe reads as lit at {dtype}, {tol:.3g}): the angle at position 1 is wrong, not the pairing "
            "(the goldens say by how much)")


def _probe_e1(adapter, case, dtype, device, cl, tol):
    """The second probe of :func:`test_pairing_probe`: e_1 tells half from deinterleave."""
    p = case.params
    x = np.zeros((1, 1, 1, p.head_dim))
    x[..., 1] = 1.0
    pos = np.ones((1, 1), np.int64)
    ys = _rope(adapter, case, dtype, device, x, x, pos, clauses=cl)

    def lit_by(pairing):  # the reference's lit indices for each pairing, at the same threshold
        ref = rope.apply(x, x, pos, p.model_copy(update={"pairing": pairing}))[0][0, 0, 0]
        return [int(i) for i in np.flatnonzero(np.abs(ref) > tol)]

    want = lit_by(p.pairing)
    for name, y in zip(("q", "k"), (ys[0][0, 0, 0], ys[1][0, 0, 0])):
        lit = [int(i) for i in np.flatnonzero(~(np.abs(y) <= tol))]
        if lit != want:
            named = [k for k in ("half", "interleaved", "deinterleave") if k != p.pairing and lit_by(k) == lit]
            fail(cl, adapter, case, dtype, f"{name}: {p.pairing} pairing: e_1 at position 1 must light indices "
                 f"{want}; got {lit}" + (f": this is {named[0]} pairing" if named else ""))


@check("passthrough_tail", invariant="passthrough_tail", ops=ROPE)
def passthrough_tail(request, adapter, device, dtype, case):
    """Dims >= rotary_dim come back bit-identical (ROPE-PARTIAL), up to the ``tiny(dt)`` the tolerance rule
    allows every element, the golden comparison included (:func:`posenc.spec.tolerance.identical`)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    if p.rdim == p.head_dim:
        raise Unsupported("no pass-through tail: rotary_dim == head_dim")
    g = load_golden(case.id)
    yq, yk = _rope(adapter, case, dtype, device, g.inputs["q"], g.inputs["k"], g.inputs["position_ids"], clauses=cl)
    for name, y in (("q", yq), ("k", yk)):
        x = adapter.to_numpy(native(adapter, g.inputs[name], dtype, device)).astype(np.float64)
        bad = np.argwhere(~identical(y[..., p.rdim:], x[..., p.rdim:], dtype))  # exactly, up to tiny(dt)
        if bad.size:
            i = tuple(int(v) for v in bad[0])
            fail(cl, adapter, case, dtype, f"{name}[..., {p.rdim}:] must pass through bit-identical; {len(bad)} "
                 f"elements differ, first at {list(i[:-1]) + [i[-1] + p.rdim]}: {float(y[..., p.rdim:][i])} != "
                 f"{float(x[..., p.rdim:][i])}")


def systematic_norm_bound(dtype: str, n: int) -> float:
    """The most the mean relative pair-norm error ``mean(|y| / (af |x|)) - 1`` over ``n`` pairs may
    be at ``dtype``: an output carries at most three roundings at the activation dtype (cos/sin cast,
    product, sum), each biased by at most ``u = eps / 2`` (a directed rounding; round-to-nearest has
    none), and its random part over ``n`` pairs is within four standard deviations of ``3u / √n``.
    A uniform amplitude error (a rescaled cos/sin, an attention factor off by 2 %) is far within
    each element's bound at bfloat16 (about 3 % of |x_pair|) but not within this (a hostile review)."""
    u = max(EPS[dtype], EPS["float32"]) / 2
    return 3 * u + 4 * 3 * u / np.sqrt(max(n, 1))


@check("pair_norm", invariant="pair_norm", ops=ROPE)
def pair_norm(request, adapter, device, dtype, case):
    """|y_pair| == attention_factor * |x_pair| for every rotated pair, and on average within
    :func:`systematic_norm_bound` (a uniform amplitude error the element bound lets pass at half)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    g = load_golden(case.id)
    ys = _rope(adapter, case, dtype, device, g.inputs["q"], g.inputs["k"], g.inputs["position_ids"], clauses=cl)
    (a_idx, b_idx), (oa_idx, ob_idx) = _pairs(p)
    af = rope.inv_freq(p, rope.seq_len_of(g.inputs["position_ids"]))[1]
    for name, y in zip(("q", "k"), ys):
        x = g.inputs[name]
        nx = np.hypot(x[..., a_idx], x[..., b_idx]) * af
        ny = np.hypot(y[..., oa_idx], y[..., ob_idx])
        # | |y| - |y_ref| | <= |y - y_ref| <= the sum of the pair's two element bounds, each with its own
        # tiny(dt), as the golden comparison allows each element (a subnormal where the pair is 0 passes both)
        excess = np.abs(ny - nx) - 2 * bound(dtype, nx, 0.0, True)
        excess = np.where(np.isnan(excess), np.inf, excess)  # NaN outputs fail, and are the worst
        if not (excess <= 0).all():
            i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
            fail(cl, adapter, case, dtype, f"{name}: pair norms must equal attention_factor ({af:.6g}) x input "
                 f"norms; worst pair {list(i)}: |y| = {ny[i]:.6g}, expected {nx[i]:.6g} "
                 + (f"(ratio {ny[i] / nx[i]:.6g})" if nx[i] else "(the exact pair is 0)"))
        seen = nx > relative_floor(dtype)  # a ratio to a pair in the subnormal range: its rounding is absolute
        mean = float(np.mean(ny[seen] / nx[seen] - 1)) if seen.any() else 0.0
        if abs(mean) > systematic_norm_bound(dtype, int(seen.sum())):
            fail(cl, adapter, case, dtype, f"{name}: pair norms are attention_factor ({af:.6g}) x input norms x "
                 f"{1 + mean:.5g} on average over {int(seen.sum())} pairs: a systematic amplitude error beyond "
                 f"{dtype}'s rounding (at most {systematic_norm_bound(dtype, int(seen.sum())):.3g} on average; each "
                 f"pair is within its own bound)")


#: rope_types whose frequencies depend on the sequence length: a shift of every position changes
#: them, so <R(m)q, R(n)k> depends on m and n themselves (SCALE-DYNAMIC-NTK, SCALE-LONGROPE-FACTORS)
LENGTH_DEPENDENT = ("dynamic", "longrope")


def _relative_clauses(c):
    wanted = invariant_clauses("relative")
    return [x for x in c.clauses if x in wanted]


def _relative_cases(c):
    return c.op in ROPE and bool(_relative_clauses(c)) and c.params.rope_type not in LENGTH_DEPENDENT


@check("relative", invariant="relative", ops=ROPE, select=_relative_cases, clauses=_relative_clauses)
def relative(request, adapter, device, dtype, case):
    """<R(m)q, R(n)k> depends only on m - n: shift both positions by 1000 and by 65536 (not for the
    length-dependent rope_types, whose frequencies the shift changes)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)
    q, k = g.inputs["q"][:1, :1, :1], g.inputs["k"][:1, :1, :1]
    dots, tols = [], []
    for shift in (0, 1000, 65536):
        pm, pn = np.array([[5 + shift]]), np.array([[2 + shift]])
        # R(m)q from the q output of one call, R(n)k from the k output of another: q and k each
        # through their own slot (an implementation that leaves k unrotated, or rotates it by -phi,
        # fails here)
        yq, _ = _rope(adapter, case, dtype, device, q, k, pm, clauses=cl)
        _, yk = _rope(adapter, case, dtype, device, q, k, pn, clauses=cl)
        dots.append(float(np.sum(yq * yk)))
        bq = bound(dtype, *families.reference_of("rope.apply").scales(case.params, {"q": q, "k": k, "position_ids": pm})["q"], True)
        bk = bound(dtype, *families.reference_of("rope.apply").scales(case.params, {"q": q, "k": k, "position_ids": pn})["k"], True)
        # the bound from the reference's magnitudes (|R x| = attention_factor |x| pair by pair): an
        # output's NaN never makes the allowed difference NaN
        rq = np.abs(rope.apply(q, k, pm, case.params)[0])
        rk = np.abs(rope.apply(q, k, pn, case.params)[1])
        tols.append(float(np.sum(bq * (rk + bk) + rq * bk)))
    for d, t, s in zip(dots[1:], tols[1:], (1000, 65536)):
        if not abs(d - dots[0]) <= t + tols[0]:  # NaN outputs fail too
            fail(cl, adapter, case, dtype, f"<R(m)q, R(n)k> must depend only on m - n: (m, n) = (5, 2) gives "
                 f"{dots[0]:.6g}, shifted by {s} gives {d:.6g} (allowed difference {t + tols[0]:.3g})")


@check("permutation", invariant="permutation", ops=ROPE)
def permutation(request, adapter, device, dtype, case):
    """rope_half(x[P]) == rope_interleaved(x)[P] with P = [0, 2, ..., 1, 3, ...] (within rotary_dim)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    g = load_golden(case.id)
    r = p.pair_dim
    P = np.concatenate([np.arange(0, r, 2), np.arange(1, r, 2), np.arange(r, p.head_dim)])
    x, pid = g.inputs["q"], g.inputs["position_ids"]
    half = p.model_copy(update={"pairing": "half"})
    inter = p.model_copy(update={"pairing": "interleaved"})
    yh, _ = _rope(adapter, case, dtype, device, x[..., P], x[..., P], pid, half, clauses=cl)
    yi, _ = _rope(adapter, case, dtype, device, x, x, pid, inter, clauses=cl)
    sc, an = families.reference_of("rope.apply").scales(inter, {"q": x, "k": x, "position_ids": pid})["q"]
    excess = np.abs(yh - yi[..., P]) - 2 * bound(dtype, sc, an, True)[..., P]
    if not (excess <= 0).all():  # NaN outputs fail too
        i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
        fail(cl, adapter, case, dtype, f"half(x[P]) must equal interleaved(x)[P]; worst at {list(i)}: "
             f"{yh[i]:.6g} != {yi[..., P][i]:.6g}")


@check("cache_equals_prefill", invariant="cache_prefill", ops=ROPE)
def cache_equals_prefill(request, adapter, device, dtype, case):
    """Decoding one token at a time (one prepared operation, cache_length growing) equals the prefill;
    under dynamic NTK each decode call's inverse frequencies are the call's own (SCALE-DYNAMIC-PER-CALL,
    SCALE-DYNAMIC-GROW), so step t is compared with the reference's calls in the same order instead.
    The loop runs on rope.apply and again through every call form the adapter serves that the steps can be
    put in (each on its own prepared object: the state a form keeps between calls is its own -- an offset
    form at the cache's length, an in-place write, a packed buffer of one-token documents); a failure through
    a form, rope.apply's loop having passed, is the form's own (ROPE-CALL-FORM)."""
    require_dtype(adapter, dtype)
    cl_ids = clauses_of(request)
    g = load_golden(case.id)
    x = g.inputs
    steps = [{"q": x["q"][:, :, t:t + 1], "k": x["k"][:, :, t:t + 1], "position_ids": x["position_ids"][:, t:t + 1]}
             for t in range(x["position_ids"].shape[1])]
    for form in step_forms(adapter, "rope.apply", case.params, steps):
        clauses = cl_ids if form is None else form_clauses(form)
        try:
            outs = call_adapter(adapter, case, dtype, clauses, run_steps, adapter, "rope.apply", case.params, steps,
                                dtype, device, form)
        except Unsupported:
            if form is None:
                raise
            continue  # the form's own tests count it
        calls = _decode_calls(case.params) if case.params.rope_type == "dynamic" else None
        for t, (xt, out) in enumerate(zip(steps, outs)):
            want = dataclasses.replace(step(g, t, xt, {"q": 2, "k": 2}) if calls is None else calls(g, xt), form=form)
            what = f"decode step {t} of one prepared operation" + (f", through {form}" if form else "")
            try:
                assert_conforms(adapter, want, out, dtype, what, clauses)
            except ConformanceFailure as e:
                if form is None:
                    raise
                raise as_form_failure(e, form, "rope.apply", "the same decode steps") from None


def _decode_calls(p):
    """``fn(golden, step_inputs) -> Golden``: the reference's ``rope.apply`` on each decode step in
    turn, on one frequency provider for the outputs and one for the error scales (dynamic NTK's
    state, when it keeps one, sees the calls in order)."""
    out_freq, scale_freq = freq_provider(p), freq_provider(p)

    def call(g, xt):
        scales = rope_scales("rope.apply", p, xt, scale_freq)
        return Golden(g.case, xt, rope_outputs("rope.apply", p, xt, out_freq), {n: s[0] for n, s in scales.items()},
                      {n: s[1] for n, s in scales.items()}, g.angle_based)
    return call

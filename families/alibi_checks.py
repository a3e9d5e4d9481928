"""The ALiBi family's oracle-free checks: the bias equals the causal form up to a row constant
under softmax, power-of-two slopes are geometric, decoding one query at a time equals the prefill."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.families import Gen
from posenc.harness.checks import (
    Unsupported,
    assert_conforms,
    call_adapter,
    checked_outputs,
    clauses_of,
    fail,
    generate,
    invariant_clauses,
    load_golden,
    require_dtype,
    rows,
    run_op,
)
from posenc.reference import alibi
from posenc.spec.tolerance import EPS, bound

from . import check
from .alibi import slope_amplification


def _alibi_bias(adapter, case, dtype, device, cl, inputs) -> np.ndarray:
    """The adapter's ALiBi bias for NumPy ``inputs``, as float64 NumPy."""
    def go():  # contract-checked (type, dtype, device, shape) before any check reads the output
        return run_op(adapter, "alibi.bias", case.params, inputs, dtype, device)["bias"].astype(np.float64)
    return call_adapter(adapter, case, dtype, cl, go)


@check("alibi_row_constant", invariant="row_constant", ops=("alibi.bias",))
def alibi_row_constant(request, adapter, device, dtype, case):
    """softmax over the valid keys of (given scores + the adapter's bias) equals the one with the
    causal form -m (pos_i - pos_j): every causal form differs from it by a row constant."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)
    b = _alibi_bias(adapter, case, dtype, device, cl, g.inputs)
    x = {k: (int(v) if np.ndim(v) == 0 else v) for k, v in g.inputs.items()}
    ref, valid = alibi.causal_equivalent(case.params, **x)
    if b.shape != ref.shape:
        fail(cl, adapter, case, dtype, f"bias has shape {list(b.shape)}, expected {list(ref.shape)}")
    rows = valid.sum(-1) >= 2
    if not rows.any():
        raise Unsupported("case has no query row with two valid keys")
    scores = generate(case.id, "scores", Gen(b.shape))  # multiples of 1/64 in [-2, 2), exact in every dtype
    p_got = alibi.masked_softmax(scores + b, valid)
    p_ref = alibi.masked_softmax(scores + ref, valid)
    delta = np.where(valid, bound(dtype, g.dtype_scales["bias"], 0.0, True), 0.0).max(-1, keepdims=True)
    tol = p_ref * np.expm1(2 * delta) + 4 * EPS["float64"]
    excess = np.where(rows[..., None], np.abs(p_got - p_ref) - tol, 0.0)
    if not (excess <= 0).all():  # NaN outputs fail too
        i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
        diff = np.where(valid, b - ref, np.nan)[i[:-1]]
        spread = float(np.nanmax(diff) - np.nanmin(diff))
        fail(cl, adapter, case, dtype,
             f"softmax over the valid keys must equal the causal form's: worst at {list(i)}: probability "
             f"{p_got[i]:.6g}, expected {p_ref[i]:.6g}; bias minus -m (pos_i - pos_j) on that row spans "
             f"{spread:.6g} (a row-constant form spans ~0; a flipped sign spans 2 m (Tk - 1))")


@check("alibi_slopes_geometric", invariant="geometric", ops=("alibi.slopes",), select=lambda c: (
    c.op == "alibi.slopes" and bool(invariant_clauses("geometric") & set(c.clauses))
    and alibi.is_power_of_two(c.params.num_heads)), clauses=lambda c: sorted(invariant_clauses("geometric") & set(c.clauses)))
def alibi_slopes_geometric(request, adapter, device, dtype, case):
    """Power-of-two head counts: m_{k+1} = m_k * m_1 and m_1 = 2^(-alibi_bias_max / n)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    m = call_adapter(adapter, case, dtype, cl, lambda: checked_outputs(
        adapter, "alibi.slopes", adapter.alibi_slopes(p, dtype=dtype, device=device), dtype, device)["slopes"]
        ).astype(np.float64)
    n = p.num_heads
    if m.shape != (n,):
        fail(cl, adapter, case, dtype, f"slopes have shape {list(m.shape)}, expected [{n}]")
    amp = slope_amplification(p)
    first = 2.0 ** (-p.alibi_bias_max / n)
    tol0 = bound("float32", first * amp[0], 0.0, True)
    if not abs(m[0] - first) <= tol0:  # NaN fails too
        fail(cl, adapter, case, dtype,
             f"the first slope must be 2^(-{p.alibi_bias_max:g}/{n}) = {first!r}, got {m[0]!r}",
             _slope_matches(case, m, dtype))
    got, want = m[1:], m[:-1] * m[0]
    tol = bound("float32", want * (amp[1:] + amp[:-1] + amp[0]), 0.0, True)
    bad = np.flatnonzero(~(np.abs(got - want) <= tol))  # NaN fails too
    if bad.size:
        k = int(bad[0])
        fail(cl, adapter, case, dtype, f"slopes of a power-of-two head count must be geometric with ratio m_1 = "
             f"{m[0]!r}: m_{k + 2} = {got[k]!r}, m_{k + 1} * m_1 = {want[k]!r} ({bad.size} of {n - 1} ratios off)",
             _slope_matches(case, m, dtype))


def _slope_matches(case, slopes, dtype):
    """The known divergences whose mutant reproduces these slopes on the case's golden (the
    diagnosis of the golden test, e.g. DIV-ALIBI-SLOPES-COMPUTE-DTYPE for rounded slopes)."""
    from posenc.harness.checks import diagnose

    try:
        return diagnose(families.spec(), load_golden(case.id), {"slopes": slopes}, dtype)
    except Exception:  # noqa: BLE001 - a case without a golden: no diagnosis
        return ()


@check("bias_cache_equals_prefill", invariant="cache_prefill", ops=("alibi.bias",))
def alibi_cache_equals_prefill(request, adapter, device, dtype, case):
    """Decoding one query at a time (the key length grows) gives the prefill's rows."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)
    x = g.inputs
    tq = int(x["query_length"])
    off = int(x["key_length"]) - tq
    for t in range(tq):
        kl = off + t + 1
        xt = {"query_length": np.asarray(1), "key_length": np.asarray(kl)}
        out = {"bias": _alibi_bias(adapter, case, dtype, device, cl, xt)}
        assert_conforms(adapter, rows(g, t, kl, xt), out, dtype,
                        f"decode step {t}: one query over key_length {kl}", cl)

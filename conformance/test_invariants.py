"""Oracle-free checks, applied to the cases whose clauses declare the invariant.

These need no golden output, so they catch bugs a golden of the same wrong shape would miss,
and they exercise state: decode loops call one prepared operation several times.
"""

from __future__ import annotations

import numpy as np
import pytest

from posenc.adapters import Unsupported
from posenc.reference import alibi, ops, rope
from posenc.spec.models import RopeParams
from posenc.spec.tolerance import EPS, bound

from posenc.conformance.cases import Gen
from posenc.conformance.golden import Golden, generate
from posenc.conformance.runner import native_inputs
from posenc.conformance.suite import (
    assert_conforms, call_adapter, fail, invariant_clauses, load_golden, params, require_dtype, with_invariant,
)

ROPE = ("rope.apply",)


def _clauses(request) -> tuple[str, ...]:
    return tuple(request.node.get_closest_marker("clauses").args)


def _rope(adapter, case, dtype, device, q, k, pid, params=None, clauses=()):
    """Run the adapter's prepared RoPE on NumPy inputs; returns float64 NumPy (q, k)."""
    p = params or case.params

    def go():
        x = native_inputs(adapter, {"q": q, "k": k, "position_ids": pid}, dtype, device)
        yq, yk = adapter.rope(p, dtype=dtype, device=device).apply(x["q"], x["k"], x["position_ids"])
        return adapter.to_numpy(yq).astype(np.float64), adapter.to_numpy(yk).astype(np.float64)
    return call_adapter(adapter, case, dtype, clauses or case.clauses, go)


def _pairs(p):
    """(input pair indices, output pair indices) of the rotated pairs."""
    return rope.pair_indices(p.pair_dim, p.pairing), rope.output_indices(p.pair_dim, p.pairing)


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("pairing_probe", ROPE))
def test_pairing_probe(request, adapter, device, dtype, case):
    """e_0 at position 1 lights index 1 (interleaved) or rotary_dim/2 (half, deinterleave), nothing else;
    e_1 lights {0, 1} (interleaved: e_1 is the second of pair 0), {0, rotary_dim/2} (deinterleave: the same
    pair, written de-interleaved) or {1, 1 + rotary_dim/2} (half: e_1 is the first of pair 1)."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    p = case.params
    x = np.zeros((1, 1, 1, p.head_dim))
    x[..., 0] = 1.0
    y = _rope(adapter, case, dtype, device, x, x, np.ones((1, 1), np.int64), clauses=cl)[0][0, 0, 0]
    expect = 1 if p.pairing == "interleaved" else p.pair_dim // 2
    w, a = rope.inv_freq(p, 2)
    if w[0] != 1.0:
        raise Unsupported(f"the probe needs inv_freq[0] == 1; rope_type {p.rope_type} scales it to {w[0]:.6g}")
    want = a * np.sin(1.0)
    tol = 8 * max(EPS[dtype], EPS["float32"]) * a + 0.01 * a
    lit = [int(i) for i in np.flatnonzero(np.abs(y) > tol) if i != 0]
    if lit == [expect] and abs(y[expect] - want) <= tol:
        _probe_e1(adapter, case, dtype, device, cl, tol)
        return
    if not lit:
        verdict = "nothing but index 0 is lit: e_0 was not rotated at position 1"
    elif lit == [p.pair_dim // 2]:
        verdict = "index rotary_dim/2 is lit: this is half pairing"
    elif lit == [1]:
        verdict = "index 1 is lit: this is interleaved pairing"
    else:
        verdict = f"indices {lit} are lit"
    fail(cl, adapter, case, dtype,
         f"{p.pairing} pairing: e_0 at position 1 must light index {expect} with {want:.4f} "
         f"(and index 0 with {a * np.cos(1.0):.4f}); got {np.round(y[:max(lit + [expect]) + 1], 4).tolist()}: {verdict}")


def _probe_e1(adapter, case, dtype, device, cl, tol):
    """The second probe of :func:`test_pairing_probe`: e_1 tells half from deinterleave."""
    p = case.params
    x = np.zeros((1, 1, 1, p.head_dim))
    x[..., 1] = 1.0
    pos = np.ones((1, 1), np.int64)
    y = _rope(adapter, case, dtype, device, x, x, pos, clauses=cl)[0][0, 0, 0]
    lit = [int(i) for i in np.flatnonzero(~(np.abs(y) <= tol))]

    def lit_by(pairing):  # the reference's lit indices for each pairing, at the same threshold
        ref = rope.apply(x, x, pos, p.model_copy(update={"pairing": pairing}))[0][0, 0, 0]
        return [int(i) for i in np.flatnonzero(np.abs(ref) > tol)]

    want = lit_by(p.pairing)
    if lit != want:
        named = [k for k in ("half", "interleaved", "deinterleave") if k != p.pairing and lit_by(k) == lit]
        fail(cl, adapter, case, dtype, f"{p.pairing} pairing: e_1 at position 1 must light indices {want}; "
             f"got {lit}" + (f": this is {named[0]} pairing" if named else ""))


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("passthrough_tail", ROPE))
def test_passthrough_tail(request, adapter, device, dtype, case):
    """Dims >= rotary_dim come back bit-identical (ROPE-PARTIAL)."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    p = case.params
    if p.rdim == p.head_dim:
        raise Unsupported("no pass-through tail: rotary_dim == head_dim")
    g = load_golden(case.id)
    yq, yk = _rope(adapter, case, dtype, device, g.inputs["q"], g.inputs["k"], g.inputs["position_ids"], clauses=cl)
    for name, y in (("q", yq), ("k", yk)):
        x = adapter.to_numpy(adapter.from_numpy(g.inputs[name], dtype, device)).astype(np.float64)
        bad = np.argwhere(y[..., p.rdim:] != x[..., p.rdim:])
        if bad.size:
            i = tuple(int(v) for v in bad[0])
            fail(cl, adapter, case, dtype, f"{name}[..., {p.rdim}:] must pass through bit-identical; {len(bad)} "
                 f"elements differ, first at {list(i[:-1]) + [i[-1] + p.rdim]}: {float(y[..., p.rdim:][i])} != "
                 f"{float(x[..., p.rdim:][i])}")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("pair_norm", ROPE))
def test_pair_norm(request, adapter, device, dtype, case):
    """|y_pair| == attention_factor * |x_pair| for every rotated pair."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    p = case.params
    g = load_golden(case.id)
    yq, _ = _rope(adapter, case, dtype, device, g.inputs["q"], g.inputs["k"], g.inputs["position_ids"], clauses=cl)
    (a_idx, b_idx), (oa_idx, ob_idx) = _pairs(p)
    x = g.inputs["q"]
    af = rope.inv_freq(p, rope.seq_len_of(g.inputs["position_ids"]))[1]
    nx = np.hypot(x[..., a_idx], x[..., b_idx]) * af
    ny = np.hypot(yq[..., oa_idx], yq[..., ob_idx])
    excess = np.abs(ny - nx) - bound(dtype, 2 * nx, 0.0, True)
    if not (excess <= 0).all():  # NaN outputs fail too
        i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
        fail(cl, adapter, case, dtype, f"pair norms must equal attention_factor ({af:.6g}) x input "
             f"norms; worst pair {list(i)}: |y| = {ny[i]:.6g}, expected {nx[i]:.6g} "
             f"(ratio {ny[i] / nx[i] if nx[i] else float('inf'):.6g})")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("relative", ROPE))
def test_relative(request, adapter, device, dtype, case):
    """<R(m)q, R(n)k> depends only on m - n: shift both positions by 1000 and by 65536."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    g = load_golden(case.id)
    q, k = g.inputs["q"][:1, :1, :1], g.inputs["k"][:1, :1, :1]
    dots, tols = [], []
    for shift in (0, 1000, 65536):
        pm, pn = np.array([[5 + shift]]), np.array([[2 + shift]])
        yq, _ = _rope(adapter, case, dtype, device, q, q, pm, clauses=cl)
        yk, _ = _rope(adapter, case, dtype, device, k, k, pn, clauses=cl)
        dots.append(float(np.sum(yq * yk)))
        bq = bound(dtype, *ops.scales("rope.apply", case.params, {"q": q, "k": q, "position_ids": pm})["q"], True)
        bk = bound(dtype, *ops.scales("rope.apply", case.params, {"q": k, "k": k, "position_ids": pn})["q"], True)
        tols.append(float(np.sum(bq * (np.abs(yk) + bk) + np.abs(yq) * bk)))
    for d, t, s in zip(dots[1:], tols[1:], (1000, 65536)):
        if not abs(d - dots[0]) <= t + tols[0]:  # NaN outputs fail too
            fail(cl, adapter, case, dtype, f"<R(m)q, R(n)k> must depend only on m - n: (m, n) = (5, 2) gives "
                 f"{dots[0]:.6g}, shifted by {s} gives {d:.6g} (allowed difference {t + tols[0]:.3g})")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("permutation", ROPE))
def test_permutation(request, adapter, device, dtype, case):
    """rope_half(x[P]) == rope_interleaved(x)[P] with P = [0, 2, ..., 1, 3, ...] (within rotary_dim)."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    p = case.params
    g = load_golden(case.id)
    r = p.pair_dim
    P = np.concatenate([np.arange(0, r, 2), np.arange(1, r, 2), np.arange(r, p.head_dim)])
    x, pid = g.inputs["q"], g.inputs["position_ids"]
    half = p.model_copy(update={"pairing": "half"})
    inter = p.model_copy(update={"pairing": "interleaved"})
    yh, _ = _rope(adapter, case, dtype, device, x[..., P], x[..., P], pid, half, clauses=cl)
    yi, _ = _rope(adapter, case, dtype, device, x, x, pid, inter, clauses=cl)
    sc, an = ops.scales("rope.apply", inter, {"q": x, "k": x, "position_ids": pid})["q"]
    excess = np.abs(yh - yi[..., P]) - 2 * bound(dtype, sc, an, True)[..., P]
    if not (excess <= 0).all():  # NaN outputs fail too
        i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
        fail(cl, adapter, case, dtype, f"half(x[P]) must equal interleaved(x)[P]; worst at {list(i)}: "
             f"{yh[i]:.6g} != {yi[..., P][i]:.6g}")


def _step(g: Golden, t: int, inputs: dict, t_axis: dict) -> Golden:
    """Golden for decode step ``t``: the step's own inputs, outputs and scales sliced at ``t``."""
    def cut(d):
        return {n: np.take(v, [t], axis=t_axis[n]) for n, v in d.items() if n in t_axis}
    return Golden(g.case, inputs, cut(g.outputs), cut(g.dtype_scales), cut(g.angle_scales), g.angle_based)


CACHE_OPS = ("rope.apply", "learned.gpt2", "learned.opt_positions", "position_ids.decode")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("cache_prefill", CACHE_OPS))
def test_cache_equals_prefill(request, adapter, device, dtype, case):
    """Decoding one token at a time (one prepared operation, cache_length growing) equals the prefill."""
    require_dtype(adapter, dtype)
    cl_ids = _clauses(request)
    g = load_golden(case.id)
    x = g.inputs
    if case.op == "rope.apply":
        r = call_adapter(adapter, case, dtype, cl_ids, adapter.rope, case.params, dtype=dtype, device=device)
        for t in range(x["position_ids"].shape[1]):
            xt = {"q": x["q"][:, :, t:t + 1], "k": x["k"][:, :, t:t + 1], "position_ids": x["position_ids"][:, t:t + 1]}
            nx = native_inputs(adapter, xt, dtype, device)
            yq, yk = call_adapter(adapter, case, dtype, cl_ids, r.apply, nx["q"], nx["k"], nx["position_ids"])
            out = {"q": adapter.to_numpy(yq), "k": adapter.to_numpy(yk)}
            assert_conforms(adapter, _step(g, t, xt, {"q": 2, "k": 2}), out, dtype,
                            f"decode step {t} of one prepared operation", cl_ids)
        return
    if case.op == "learned.gpt2":
        if x.get("position_ids") is not None:
            raise Unsupported("explicit position_ids: no default positions to decode")
        nx = native_inputs(adapter, x, dtype, device)
        f = call_adapter(adapter, case, dtype, cl_ids, adapter.gpt2_embeddings, case.params,
                         {"wte": nx["wte"], "wpe": nx["wpe"]}, dtype=dtype, device=device)
        cl = int(x["cache_length"])
        for t in range(x["input_ids"].shape[1]):
            xt = {**x, "input_ids": x["input_ids"][:, t:t + 1], "cache_length": np.asarray(cl + t)}
            ni = native_inputs(adapter, {"i": xt["input_ids"]}, dtype, device)["i"]
            out = {"embeddings": adapter.to_numpy(call_adapter(adapter, case, dtype, cl_ids, f, ni, cache_length=cl + t))}
            assert_conforms(adapter, _step(g, t, xt, {"embeddings": 1}), out, dtype,
                            f"decode step {t} with cache_length {cl + t}", cl_ids)
        return
    cl = int(x["cache_length"])
    if case.op == "learned.opt_positions":
        m = x["attention_mask"]
        steps, name = range(m.shape[1] - cl), "positions"

        def call(t):
            return adapter.opt_positions(native_inputs(adapter, {"m": m[:, :cl + t + 1]}, dtype, device)["m"], cl + t)
    else:
        steps, name = range(int(x["seq_len"])), "position_ids"

        def call(t):
            return adapter.position_ids("decode", device=device, batch=int(x["batch"]), seq_len=1, cache_length=cl + t)
    for t in steps:
        got = adapter.to_numpy(call_adapter(adapter, case, dtype, cl_ids, call, t))
        want = g.outputs[name][:, t:t + 1]
        if got.shape != want.shape or not np.array_equal(got, want):
            fail(cl_ids, adapter, case, dtype, f"decode step {t} (cache_length {cl + t}): got {got.tolist()}, "
                 f"the prefill gives {want.tolist()}")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("left_pad", ("learned.opt_positions", "position_ids.left_pad")))
def test_left_pad_equals_unpadded(request, adapter, device, dtype, case):
    """A left-padded row equals the same row without padding, at its real tokens."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    g = load_golden(case.id)
    m = g.inputs["attention_mask"]
    checked = 0
    for b in range(m.shape[0]):
        real = m[b] == 1
        first = int(np.argmax(real))
        if first == 0 or not real[first:].all():
            continue  # only left-padded rows: padding before every real token
        outs = []
        for mask in (m[b:b + 1], m[b:b + 1, first:]):
            nm = native_inputs(adapter, {"m": mask}, dtype, device)["m"]
            if case.op == "learned.opt_positions":
                y = call_adapter(adapter, case, dtype, cl, adapter.opt_positions, nm, 0)
            else:
                y = call_adapter(adapter, case, dtype, cl, adapter.position_ids, "left_pad", device=device,
                                 attention_mask=nm, cache_length=0)
            outs.append(adapter.to_numpy(y))
        if not np.array_equal(outs[0][:, first:], outs[1]):
            fail(cl, adapter, case, dtype, f"row {b}: the left-padded positions {outs[0].tolist()} differ at the "
                 f"real tokens from the unpadded row's {outs[1].tolist()}")
        checked += 1
    if not checked:
        raise Unsupported("case has no left-padded row")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("row_range", ("learned.lookup", "learned.opt_embeddings", "learned.gpt2",
                                                               "learned.bart_embeddings")))
def test_row_range(request, adapter, device, dtype, case):
    """The last valid row works; one past the end and -1 raise (never clamp, never wrap)."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    if device.split(":")[0] not in adapter.range_probe_devices:
        raise Unsupported(f"out-of-range rows are not sent to {adapter.name!r} on {device} (an unchecked "
                          "gather there is a device-side assert); this clause is checked on cpu")
    def must_raise(what, fn, *args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except IndexError:
            return
        except Exception as e:  # noqa: BLE001
            fail(cl, adapter, case, dtype, f"{what}: expected an IndexError (PositionOutOfRange), got "
                 f"{type(e).__name__}: {e}")
        fail(cl, adapter, case, dtype, f"{what} returned a value instead of raising (clamped or wrapped: "
             f"shape {tuple(adapter.to_numpy(out).shape)})")

    g = load_golden(case.id)
    x = native_inputs(adapter, g.inputs, dtype, device)
    if case.op == "learned.gpt2":
        n = g.inputs["wpe"].shape[0]
        f = call_adapter(adapter, case, dtype, cl, adapter.gpt2_embeddings, case.params,
                         {"wte": x["wte"], "wpe": x["wpe"]}, dtype=dtype, device=device)
        ids = adapter.from_numpy(np.zeros((1, 2), np.int64), "int64", device)
        for bad in (n, -1):
            must_raise(f"position {bad} of a {n}-row wpe", f, ids,
                       position_ids=adapter.from_numpy(np.array([[0, bad]]), "int64", device))
        return
    table = g.inputs["table"]
    n = table.shape[0]
    if case.op == "learned.bart_embeddings":
        f = call_adapter(adapter, case, dtype, cl, adapter.bart_embeddings, case.params, {"table": x["table"]},
                         dtype=dtype, device=device)
        ids = adapter.from_numpy(np.zeros((1, 1), np.int64), "int64", device)
        last = adapter.to_numpy(call_adapter(adapter, case, dtype, cl, f, ids, cache_length=n - 3))
        if not np.array_equal(last[0, 0], adapter.to_numpy(adapter.from_numpy(table[n - 1], dtype, device))):
            fail(cl, adapter, case, dtype, f"cache_length {n - 3} must read the last valid row {n - 1} as is")
        must_raise(f"cache_length {n - 2} (row {n} of a {n}-row BART table)", f, ids, cache_length=n - 2)
        return

    if case.op == "learned.lookup":
        rows = adapter.from_numpy(np.array([[n - 1]]), "int64", device)
        last = adapter.to_numpy(call_adapter(adapter, case, dtype, cl, adapter.lookup, x["table"], rows))
        tab_last = adapter.to_numpy(adapter.from_numpy(table[n - 1], dtype, device))
        if not np.array_equal(last[0, 0], tab_last):
            fail(cl, adapter, case, dtype, f"the last valid row {n - 1} must be returned as is")
        for bad in (n, -1):
            must_raise(f"row {bad} of a {n}-row table", adapter.lookup, x["table"],
                       adapter.from_numpy(np.array([[0, bad]]), "int64", device))
        return
    f = call_adapter(adapter, case, dtype, cl, adapter.opt_embeddings, case.params, {"table": x["table"]},
                     dtype=dtype, device=device)
    mask = adapter.from_numpy(np.ones((1, n - 1), np.int64), "int64", device)  # rows 2 .. n: one past the end
    must_raise(f"{n - 1} real tokens (row {n} of a {n}-row OPT table)", f, mask, cache_length=n - 2)


# ---- ALiBi and T5 ------------------------------------------------------------------------------


def _alibi_bias(adapter, case, dtype, device, cl, inputs) -> np.ndarray:
    """The adapter's ALiBi bias for NumPy ``inputs``, as float64 NumPy."""
    def go():
        x = native_inputs(adapter, inputs, dtype, device)
        return adapter.to_numpy(adapter.alibi_bias(case.params, dtype=dtype, device=device, **x)).astype(np.float64)
    return call_adapter(adapter, case, dtype, cl, go)


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("row_constant", ("alibi.bias",)))
def test_alibi_row_constant(request, adapter, device, dtype, case):
    """softmax over the valid keys of (given scores + the adapter's bias) equals the one with the
    causal form -m (pos_i - pos_j): every causal form differs from it by a row constant."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
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


@pytest.mark.posenc
@pytest.mark.parametrize("case", params(
    lambda c: c.op == "alibi.slopes" and bool(invariant_clauses("geometric") & set(c.clauses))
    and alibi.is_power_of_two(c.params.num_heads), lambda c: sorted(invariant_clauses("geometric") & set(c.clauses))))
def test_alibi_slopes_geometric(request, adapter, device, dtype, case):
    """Power-of-two head counts: m_{k+1} = m_k * m_1 and m_1 = 2^(-alibi_bias_max / n)."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    p = case.params
    m = call_adapter(adapter, case, dtype, cl, lambda: adapter.to_numpy(
        adapter.alibi_slopes(p, dtype=dtype, device=device)).astype(np.float64))
    n = p.num_heads
    if m.shape != (n,):
        fail(cl, adapter, case, dtype, f"slopes have shape {list(m.shape)}, expected [{n}]")
    amp = ops.slope_amplification(p)
    first = 2.0 ** (-p.alibi_bias_max / n)
    tol0 = bound("float32", first * amp[0], 0.0, True)
    if not abs(m[0] - first) <= tol0:  # NaN fails too
        fail(cl, adapter, case, dtype, f"the first slope must be 2^(-{p.alibi_bias_max:g}/{n}) = {first!r}, got {m[0]!r}")
    got, want = m[1:], m[:-1] * m[0]
    tol = bound("float32", want * (amp[1:] + amp[:-1] + amp[0]), 0.0, True)
    bad = np.flatnonzero(~(np.abs(got - want) <= tol))  # NaN fails too
    if bad.size:
        k = int(bad[0])
        fail(cl, adapter, case, dtype, f"slopes of a power-of-two head count must be geometric with ratio m_1 = "
             f"{m[0]!r}: m_{k + 2} = {got[k]!r}, m_{k + 1} * m_1 = {want[k]!r} ({bad.size} of {n - 1} ratios off)")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("cache_prefill", ("alibi.bias", "t5.bias")))
def test_bias_cache_equals_prefill(request, adapter, device, dtype, case):
    """Decoding one query at a time (ALiBi: the key length grows; T5: cache_length grows, one
    prepared callable) gives the prefill's rows."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    g = load_golden(case.id)
    x = g.inputs
    tq = int(x["query_length"])
    if case.op == "t5.bias":
        tab = native_inputs(adapter, {"table": x["table"]}, dtype, device)["table"]
        f = call_adapter(adapter, case, dtype, cl, adapter.t5_bias, case.params, {"table": tab},
                         dtype=dtype, device=device)
        tk, c0 = int(x["key_length"]), int(x["cache_length"])
        for t in range(tq):
            xt = {**x, "query_length": np.asarray(1), "cache_length": np.asarray(c0 + t)}
            out = {"bias": adapter.to_numpy(call_adapter(adapter, case, dtype, cl, f, 1, tk, cache_length=c0 + t))}
            assert_conforms(adapter, _rows(g, t, tk, xt), out, dtype,
                            f"decode step {t} with cache_length {c0 + t} on one prepared callable", cl)
        return
    off = int(x["key_length"]) - tq
    for t in range(tq):
        kl = off + t + 1
        xt = {"query_length": np.asarray(1), "key_length": np.asarray(kl)}
        out = {"bias": _alibi_bias(adapter, case, dtype, device, cl, xt)}
        assert_conforms(adapter, _rows(g, t, kl, xt), out, dtype,
                        f"decode step {t}: one query over key_length {kl}", cl)


def _rows(g: Golden, t: int, tk: int, inputs: dict) -> Golden:
    """Golden of query row ``t`` over the first ``tk`` keys (outputs, masks and scales)."""
    def cut(d):
        return {n: np.asarray(v)[..., t:t + 1, :tk] for n, v in d.items()}
    return Golden(g.case, inputs, cut(g.outputs), cut(g.dtype_scales), cut(g.angle_scales), g.angle_based)


# ---- M-RoPE and NoPE ---------------------------------------------------------------------------


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("text_reduces", ("mrope.apply",)))
def test_mrope_text_reduces_to_rope(request, adapter, device, dtype, case):
    """Text tokens (t = h = w): the adapter's M-RoPE equals the SAME adapter's plain half-pairing
    RoPE (rotary_dim = head_dim, the same rope_theta) at those positions."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    p = case.params
    g = load_golden(case.id)
    pid3 = g.inputs["position_ids"]
    if not (np.array_equal(pid3[0], pid3[1]) and np.array_equal(pid3[0], pid3[2])):
        raise Unsupported("case has vision tokens (t, h, w differ)")
    rp = RopeParams(head_dim=p.head_dim, rope_theta=p.rope_theta, pairing="half")

    def go():
        x = native_inputs(adapter, {"q": g.inputs["q"], "k": g.inputs["k"], "position_ids": pid3}, dtype, device)
        x1 = native_inputs(adapter, {"position_ids": pid3[0]}, dtype, device)
        mq, mk = adapter.mrope(p, dtype=dtype, device=device).apply(x["q"], x["k"], x["position_ids"])
        rq, rk = adapter.rope(rp, dtype=dtype, device=device).apply(x["q"], x["k"], x1["position_ids"])
        return [adapter.to_numpy(t).astype(np.float64) for t in (mq, mk, rq, rk)]
    mq, mk, rq, rk = call_adapter(adapter, case, dtype, cl, go)
    for name, m, r in (("q", mq, rq), ("k", mk, rk)):
        sc, an = g.dtype_scales[name], g.angle_scales[name]
        excess = np.abs(m - r) - 2 * bound(dtype, sc, an, True)
        if not (excess <= 0).all():  # NaN outputs fail too
            i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
            fail(cl, adapter, case, dtype, f"text tokens (t = h = w): M-RoPE {name} must equal the adapter's own 1-D "
                 f"RoPE at those positions; worst at {list(i)}: {m[i]:.6g} != {r[i]:.6g} (position "
                 f"{int(pid3[0][i[0], i[2]])})")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("identity", ("nope.apply",)))
def test_nope_identity(request, adapter, device, dtype, case):
    """A NoPE layer returns q and k bit-identical, for the case's positions and shifted ones."""
    require_dtype(adapter, dtype)
    cl = _clauses(request)
    g = load_golden(case.id)
    for shift in (0, 1000, 131000):
        def go():
            x = native_inputs(adapter, {"q": g.inputs["q"], "k": g.inputs["k"],
                                        "position_ids": g.inputs["position_ids"] + shift}, dtype, device)
            yq, yk = adapter.nope_apply(x["q"], x["k"], x["position_ids"], int(g.inputs["layer_idx"]), case.params)
            return [(adapter.to_numpy(a), adapter.to_numpy(b)) for a, b in ((yq, x["q"]), (yk, x["k"]))]
        for name, (y, x) in zip(("q", "k"), call_adapter(adapter, case, dtype, cl, go)):
            if y.shape != x.shape or not np.array_equal(y, x):
                n = int(np.sum(y != x)) if y.shape == x.shape else -1
                fail(cl, adapter, case, dtype, f"positions shifted by {shift}: NoPE {name} must come back "
                     f"bit-identical; " + (f"{n} elements differ" if n >= 0 else f"shape {list(y.shape)} != {list(x.shape)}"))

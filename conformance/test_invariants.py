"""Oracle-free checks, applied to the cases whose clauses declare the invariant.

These need no golden output, so they catch bugs a golden of the same wrong shape would miss,
and they exercise state: decode loops call a prepared operation several times.
"""

from __future__ import annotations

import numpy as np
import pytest

from posenc.adapters import Unsupported
from posenc.reference import ops
from posenc.spec.tolerance import EPS, bound

from .runner import native_inputs, run_case
from .suite import assert_conforms, load_golden, require_dtype, with_invariant
from .golden import Golden

ROPE = ("rope.apply",)


def _rope(adapter, case, dtype, device, q, k, pid, params=None):
    p = params or case.params
    x = native_inputs(adapter, {"q": q, "k": k, "position_ids": pid}, dtype, device)
    r = adapter.rope(p, dtype=dtype, device=device)
    yq, yk = r.apply(x["q"], x["k"], x["position_ids"])
    return adapter.to_numpy(yq).astype(np.float64), adapter.to_numpy(yk).astype(np.float64)


def _pairs(p):
    h = p.rdim // 2
    i = np.arange(h)
    return (i, i + h) if p.pairing == "half" else (2 * i, 2 * i + 1)


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("pairing_probe", ROPE))
def test_pairing_probe(adapter, device, dtype, case):
    """e_0 at position 1 lights index 1 (interleaved) or rotary_dim/2 (half), nothing else."""
    require_dtype(adapter, dtype)
    p = case.params
    x = np.zeros((1, 1, 1, p.head_dim))
    x[..., 0] = 1.0
    y, _ = _rope(adapter, case, dtype, device, x, x, np.ones((1, 1), np.int64))
    y = y[0, 0, 0]
    expect = 1 if p.pairing == "interleaved" else p.rdim // 2
    lit = int(np.argmax(np.abs(y[1:]))) + 1
    a = p.attention_factor
    tol = 8 * max(EPS[dtype], EPS["float32"]) * a
    others = np.delete(np.abs(y), [0, expect])
    assert lit == expect and abs(y[expect] - a * np.sin(1.0)) <= tol + 0.01 * a and (others <= tol).all(), (
        f"{p.pairing} pairing: e_0 at position 1 must light index {expect} with {a * np.sin(1.0):.4f}; "
        f"got index {lit} (value {y[lit]:.4f}), other indices up to {others.max(initial=0):.3g} "
        f"-> this looks like {'half' if lit == p.rdim // 2 else 'interleaved' if lit == 1 else 'another'} pairing")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("passthrough_tail", ROPE))
def test_passthrough_tail(adapter, device, dtype, case):
    """Dims >= rotary_dim come back bit-identical (ROPE-PARTIAL)."""
    require_dtype(adapter, dtype)
    p = case.params
    if p.rdim == p.head_dim:
        pytest.skip("unsupported: no tail (rotary_dim == head_dim)")
    g = load_golden(case.id)
    yq, yk = _rope(adapter, case, dtype, device, g.inputs["q"], g.inputs["k"], g.inputs["position_ids"])
    for name, y in (("q", yq), ("k", yk)):
        x = adapter.to_numpy(adapter.from_numpy(g.inputs[name], dtype, device)).astype(np.float64)
        bad = np.argwhere(y[..., p.rdim:] != x[..., p.rdim:])
        assert bad.size == 0, (f"ROPE-PARTIAL: {name}[..., {p.rdim}:] must pass through unchanged; "
                               f"{len(bad)} elements differ, first at {bad[0].tolist()}")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("pair_norm", ROPE))
def test_pair_norm(adapter, device, dtype, case):
    """|y_pair| == attention_factor * |x_pair| for every rotated pair."""
    require_dtype(adapter, dtype)
    p = case.params
    g = load_golden(case.id)
    yq, _ = _rope(adapter, case, dtype, device, g.inputs["q"], g.inputs["k"], g.inputs["position_ids"])
    a_idx, b_idx = _pairs(p)
    x = g.inputs["q"]
    nx = np.hypot(x[..., a_idx], x[..., b_idx]) * p.attention_factor
    ny = np.hypot(yq[..., a_idx], yq[..., b_idx])
    tol = bound(dtype, 2 * nx, 0.0, True)
    worst = np.max(np.abs(ny - nx) - tol)
    assert worst <= 0, (f"pair norms not preserved (scaled by attention_factor {p.attention_factor}): "
                        f"max excess {worst:.3g}")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("relative", ROPE))
def test_relative(adapter, device, dtype, case):
    """<R(m)q, R(n)k> depends only on m - n: shift both positions by 1000 and by 65536."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    q = g.inputs["q"][:1, :1, :1]
    k = g.inputs["k"][:1, :1, :1]
    dots, tols = [], []
    for shift in (0, 1000, 65536):
        pm, pn = np.array([[5 + shift]]), np.array([[2 + shift]])
        yq, _ = _rope(adapter, case, dtype, device, q, q, pm)
        yk, _ = _rope(adapter, case, dtype, device, k, k, pn)
        dots.append(float(np.sum(yq * yk)))
        bq = bound(dtype, *ops.scales("rope.apply", case.params, {"q": q, "k": q, "position_ids": pm})["q"], True)
        bk = bound(dtype, *ops.scales("rope.apply", case.params, {"q": k, "k": k, "position_ids": pn})["q"], True)
        tols.append(float(np.sum(bq * (np.abs(yk) + bk) + np.abs(yq) * bk)))
    for d, t, s in zip(dots[1:], tols[1:], (1000, 65536)):
        assert abs(d - dots[0]) <= t + tols[0], (
            f"<R(m)q, R(n)k> changed under a shift of {s}: {dots[0]!r} -> {d!r} (allowed {t + tols[0]:.3g})")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("permutation", ROPE))
def test_permutation(adapter, device, dtype, case):
    """rope_half(x[P]) == rope_interleaved(x)[P] with P = [0, 2, ..., 1, 3, ...] (within rotary_dim)."""
    require_dtype(adapter, dtype)
    p = case.params
    g = load_golden(case.id)
    r = p.rdim
    P = np.concatenate([np.arange(0, r, 2), np.arange(1, r, 2), np.arange(r, p.head_dim)])
    x, pid = g.inputs["q"], g.inputs["position_ids"]
    half = p.model_copy(update={"pairing": "half"})
    inter = p.model_copy(update={"pairing": "interleaved"})
    yh, _ = _rope(adapter, case, dtype, device, x[..., P], x[..., P], pid, half)
    yi, _ = _rope(adapter, case, dtype, device, x, x, pid, inter)
    sc, an = ops.scales("rope.apply", inter, {"q": x, "k": x, "position_ids": pid})["q"]
    tol = 2 * bound(dtype, sc, an, True)[..., P]
    excess = np.abs(yh - yi[..., P]) - tol
    assert (excess <= 0).all(), (f"half(x[P]) != interleaved(x)[P]: worst at "
                                 f"{np.unravel_index(int(np.argmax(excess)), excess.shape)}")


def _slice_golden(g: Golden, t: int, outputs: dict, axis_T: dict) -> Golden:
    return Golden(g.case, g.inputs, {n: np.take(v, [t], axis=axis_T[n]) for n, v in outputs.items()},
                  {n: np.take(v, [t], axis=axis_T[n]) for n, v in g.dtype_scales.items() if n in axis_T},
                  {n: np.take(v, [t], axis=axis_T[n]) for n, v in g.angle_scales.items() if n in axis_T},
                  g.angle_based)


CACHE_OPS = ("rope.apply", "learned.gpt2", "learned.opt_positions", "position_ids.decode")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("cache_prefill", CACHE_OPS))
def test_cache_equals_prefill(adapter, device, dtype, case):
    """Decoding one token at a time (one prepared operation, cache_length growing) equals the prefill."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    x = g.inputs
    if case.op == "rope.apply":
        T = x["position_ids"].shape[1]
        r = adapter.rope(case.params, dtype=dtype, device=device)
        for t in range(T):
            nx = native_inputs(adapter, {"q": x["q"][:, :, t:t + 1], "k": x["k"][:, :, t:t + 1],
                                         "position_ids": x["position_ids"][:, t:t + 1]}, dtype, device)
            yq, yk = r.apply(nx["q"], nx["k"], nx["position_ids"])
            out = {"q": adapter.to_numpy(yq), "k": adapter.to_numpy(yk)}
            assert_conforms(adapter, _slice_golden(g, t, g.outputs, {"q": 2, "k": 2}), out, dtype,
                            f" (decode step {t})")
        return
    if case.op == "learned.gpt2":
        if x.get("position_ids") is not None:
            pytest.skip("unsupported: explicit position_ids (no default positions to decode)")
        nx = native_inputs(adapter, x, dtype, device)
        f = adapter.gpt2_embeddings(case.params, {"wte": nx["wte"], "wpe": nx["wpe"]}, dtype=dtype, device=device)
        ids = x["input_ids"]
        for t in range(ids.shape[1]):
            ni = native_inputs(adapter, {"i": ids[:, t:t + 1]}, dtype, device)["i"]
            out = {"embeddings": adapter.to_numpy(f(ni, cache_length=int(x["cache_length"]) + t))}
            assert_conforms(adapter, _slice_golden(g, t, g.outputs, {"embeddings": 1}), out, dtype,
                            f" (decode step {t}, cache_length {int(x['cache_length']) + t})")
        return
    cl = int(x["cache_length"])
    if case.op == "learned.opt_positions":
        m = x["attention_mask"]
        steps = range(m.shape[1] - cl)
        call = lambda t: adapter.opt_positions(  # noqa: E731
            native_inputs(adapter, {"m": m[:, :cl + t + 1]}, dtype, device)["m"], cl + t)
        name = "positions"
    else:
        steps = range(int(x["seq_len"]))
        call = lambda t: adapter.position_ids("decode", device=device, batch=int(x["batch"]),  # noqa: E731
                                              seq_len=1, cache_length=cl + t)
        name = "position_ids"
    for t in steps:
        got = adapter.to_numpy(call(t))
        want = g.outputs[name][:, t:t + 1]
        assert np.array_equal(got, want), f"decode step {t} (cache_length {cl + t}): got {got.tolist()}, prefill gives {want.tolist()}"


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("left_pad", ("learned.opt_positions", "position_ids.left_pad")))
def test_left_pad_equals_unpadded(adapter, device, dtype, case):
    """A left-padded row equals the same row without padding, at its real tokens."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    m = g.inputs["attention_mask"]
    checked = 0
    for b in range(m.shape[0]):
        real = m[b] == 1
        first = int(np.argmax(real))
        if first == 0 or not real[first:].all():
            continue  # only left-padded rows: padding before every real token
        padded = m[b:b + 1]
        unpadded = m[b:b + 1, first:]
        outs = []
        for mask in (padded, unpadded):
            nm = native_inputs(adapter, {"m": mask}, dtype, device)["m"]
            if case.op == "learned.opt_positions":
                outs.append(adapter.to_numpy(adapter.opt_positions(nm, 0)))
            else:
                outs.append(adapter.to_numpy(adapter.position_ids("left_pad", device=device, attention_mask=nm, cache_length=0)))
        assert np.array_equal(outs[0][:, first:], outs[1]), (
            f"row {b}: left-padded positions {outs[0].tolist()} at real tokens differ from unpadded {outs[1].tolist()}")
        checked += 1
    if not checked:
        raise Unsupported("case has no left-padded row")


@pytest.mark.posenc
@pytest.mark.parametrize("case", with_invariant("row_range", ("learned.lookup", "learned.opt_embeddings")))
def test_row_range(adapter, device, dtype, case):
    """The last valid row works; one past the end and -1 raise (never clamp, never wrap)."""
    require_dtype(adapter, dtype)
    if device.split(":")[0] not in adapter.range_probe_devices:
        raise Unsupported(f"out-of-range rows are not sent to {adapter.name!r} on {device} (an unchecked "
                          "gather there is a device-side assert); this clause is checked on cpu")
    g = load_golden(case.id)
    x = native_inputs(adapter, g.inputs, dtype, device)
    table = g.inputs["table"]
    n = table.shape[0]
    if case.op == "learned.lookup":
        last = adapter.to_numpy(adapter.lookup(x["table"], adapter.from_numpy(np.array([[n - 1]]), "int64", device)))
        tab_last = adapter.to_numpy(adapter.from_numpy(table[n - 1], dtype, device))
        assert np.array_equal(last[0, 0], tab_last), "LEARNED-ROW-RANGE: the last valid row must be returned as is"
        for bad in (n, -1):
            rows = adapter.from_numpy(np.array([[0, bad]]), "int64", device)
            with pytest.raises(IndexError):
                out = adapter.lookup(x["table"], rows)
                pytest.fail(f"LEARNED-ROW-RANGE: row {bad} of a {n}-row table returned a value instead of raising "
                            f"(row 1 equals row {n - 1}: {np.array_equal(adapter.to_numpy(out)[0, 1], tab_last)})")
        return
    f = adapter.opt_embeddings(case.params, {"table": x["table"]}, dtype=dtype, device=device)
    mask = np.ones((1, n - 1), np.int64)  # positions 0 .. n-2 -> rows 2 .. n: one past the end
    with pytest.raises(IndexError):
        f(adapter.from_numpy(mask, "int64", device), cache_length=n - 2)
        pytest.fail(f"LEARNED-ROW-RANGE: {n - 1} real tokens need row {n} of a {n}-row OPT table; no error was raised")

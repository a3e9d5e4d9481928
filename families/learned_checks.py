"""The learned family's oracle-free checks: decode equals prefill (GPT-2 default positions, OPT
positions), left padding equals no padding (OPT), and the row range (the last row works; one
past the end and -1 raise)."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import (
    Unsupported,
    assert_conforms,
    call_adapter,
    checked_outputs,
    clauses_of,
    exact_decode_steps,
    fail,
    left_pad_rows,
    load_golden,
    native,
    native_inputs,
    require_dtype,
    step,
)
from posenc.spec.errors import exception_text
from posenc.spec.tolerance import TINY, identical

from . import check


@check("cache_equals_prefill", invariant="cache_prefill", ops=("learned.gpt2",))
def gpt2_cache_equals_prefill(request, adapter, device, dtype, case):
    """GPT-2's default positions decoded one token at a time (cache_length growing) equal the prefill."""
    require_dtype(adapter, dtype)
    cl_ids = clauses_of(request)
    g = load_golden(case.id)
    x = g.inputs
    if x.get("position_ids") is not None:
        raise Unsupported("explicit position_ids: no default positions to decode")
    nx = native_inputs(adapter, x, dtype, device)
    f = call_adapter(adapter, case, dtype, cl_ids, adapter.gpt2_embeddings, case.params,
                     {"wte": nx["wte"], "wpe": nx["wpe"]}, dtype=dtype, device=device)
    cl = int(x["cache_length"])
    for t in range(x["input_ids"].shape[1]):
        xt = {**x, "input_ids": x["input_ids"][:, t:t + 1], "cache_length": np.asarray(cl + t)}
        ni = native_inputs(adapter, {"i": xt["input_ids"]}, dtype, device)["i"]
        out = call_adapter(adapter, case, dtype, cl_ids,
                           lambda: checked_outputs(adapter, case.op, f(ni, cache_length=cl + t), dtype, device))
        assert_conforms(adapter, step(g, t, xt, {"embeddings": 1}), out, dtype,
                        f"decode step {t} with cache_length {cl + t}", cl_ids)


@check("cache_equals_prefill", invariant="cache_prefill", ops=("learned.opt_positions",))
def opt_cache_equals_prefill(request, adapter, device, dtype, case):
    """OPT positions decoded one mask column at a time equal the prefill's."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    m, cl = g.inputs["attention_mask"], int(g.inputs["cache_length"])

    def call(t):
        return adapter.opt_positions(native_inputs(adapter, {"m": m[:, :cl + t + 1]}, dtype, device)["m"], cl + t)
    exact_decode_steps(adapter, case, dtype, device, clauses_of(request), g, "positions", range(m.shape[1] - cl), call,
                       lambda t: {"attention_mask": m[:, :cl + t + 1], "cache_length": np.asarray(cl + t)})


@check("left_pad_equals_unpadded", invariant="left_pad", ops=("learned.opt_positions",))
def opt_left_pad_equals_unpadded(request, adapter, device, dtype, case):
    """A left-padded row's OPT positions equal the same row's without padding, at its real tokens."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    left_pad_rows(adapter, case, dtype, device, cl, load_golden(case.id),
                  lambda nm: adapter.opt_positions(nm, 0))


def _row_range_matches(adapter, case, dtype, probe, got):
    """The LEARNED-ROW-RANGE divergences whose mutant, run on the out-of-range ``probe`` (``(op,
    params, inputs)`` in NumPy), returns what the adapter returned (NaN equals NaN): the
    diagnosis of an oracle-free probe, which no golden can hold."""
    from posenc.harness.checks import Match

    op, params, inputs = probe
    got = np.asarray(got, np.float64)
    found = []
    for d in families.spec().divergences.values():
        if "LEARNED-ROW-RANGE" not in d.violates or op not in families.mutants().get(d.mutant, ()):
            continue
        try:
            mut = families.run_mutant(d.mutant, op, params, inputs, dtype)
        except Exception:  # noqa: BLE001 - a mutant that raises there does not reproduce a value
            continue
        if mut is None:
            continue
        want = np.asarray(mut["embeddings"], np.float64)
        if want.shape != got.shape:
            continue
        # The tables hold multiples of 1/64 (exact in every dtype); a sum of two rows is rounded once.
        tol = (np.abs(want) * 2.0 ** -7 if dtype in ("bfloat16", "float16") else np.abs(want) * 1e-6) + 1e-12 + TINY[dtype]
        nan_ok = np.isnan(want) == np.isnan(got)
        close = np.where(np.isnan(want), True, np.abs(np.nan_to_num(got - want)) <= tol)
        if nan_ok.all() and close.all():
            found.append(Match(d.id, tuple(d.violates), d.description, 0.0))
    return found


def _must_raise(adapter, case, dtype, device, cl, what, fn, *args, probe=None, **kwargs):
    """``fn(*args, **kwargs)`` must raise IndexError; ``probe`` (op, params, NumPy inputs) names the
    known divergence whose mutant returns the same value when it does not."""
    try:
        out = fn(*args, **kwargs)
    except IndexError:
        return
    except Exception as e:  # noqa: BLE001
        fail(cl, adapter, case, dtype, f"{what}: expected an IndexError (PositionOutOfRange), got "
             f"{type(e).__name__}: {exception_text(e)}")
    got = _one(adapter, case, dtype, device, cl, out)
    matches = _row_range_matches(adapter, case, dtype, probe, got) if probe is not None else []
    detail = f"{what} returned a value instead of raising (clamped or wrapped: shape {tuple(got.shape)})"
    if probe is not None and not matches:
        detail += "\n  diagnosis: no known divergence reproduces this output"
    fail(cl, adapter, case, dtype, detail, matches)


def _one(adapter, case, dtype, device, cl, out) -> np.ndarray:
    """The single output of ``case.op`` as NumPy, contract-checked (a clause-named failure otherwise)."""
    return next(iter(call_adapter(adapter, case, dtype, cl, checked_outputs, adapter, case.op, out, dtype,
                                  device).values()))


def _gpt2_rows(adapter, case, dtype, device, cl, g, x):
    n = g.inputs["wpe"].shape[0]
    f = call_adapter(adapter, case, dtype, cl, adapter.gpt2_embeddings, case.params,
                     {"wte": x["wte"], "wpe": x["wpe"]}, dtype=dtype, device=device)
    ids = native(adapter, np.zeros((1, 2), np.int64), "int64", device)
    for bad in (n, -1):
        pos = np.array([[0, bad]], np.int64)
        probe = ("learned.gpt2", case.params, {"wte": _as_run(adapter, g.inputs["wte"], dtype, device),
                                                "wpe": _as_run(adapter, g.inputs["wpe"], dtype, device),
                                                "input_ids": np.zeros((1, 2), np.int64), "position_ids": pos,
                                                "cache_length": np.asarray(0)})
        _must_raise(adapter, case, dtype, device, cl, f"position {bad} of a {n}-row wpe", f, ids,
                    position_ids=native(adapter, pos, "int64", device), probe=probe)


def _as_run(adapter, table, dtype, device):
    """A NumPy table as the adapter holds it in ``dtype`` (float64), for the mutants of a probe."""
    return adapter.to_numpy(native(adapter, np.asarray(table), dtype, device)).astype(np.float64)


def _bart_rows(adapter, case, dtype, device, cl, g, x):
    table = g.inputs["table"]
    n = table.shape[0]
    f = call_adapter(adapter, case, dtype, cl, adapter.bart_embeddings, case.params, {"table": x["table"]},
                     dtype=dtype, device=device)
    ids = native(adapter, np.zeros((1, 1), np.int64), "int64", device)
    last = _one(adapter, case, dtype, device, cl, call_adapter(adapter, case, dtype, cl, f, ids, cache_length=n - 3))
    if not identical(last[0, 0], adapter.to_numpy(native(adapter, table[n - 1], dtype, device)), dtype).all():
        fail(cl, adapter, case, dtype, f"cache_length {n - 3} must read the last valid row {n - 1} as is")
    _must_raise(adapter, case, dtype, device, cl, f"cache_length {n - 2} (row {n} of a {n}-row BART table)", f, ids,
                cache_length=n - 2)


def _lookup_rows(adapter, case, dtype, device, cl, g, x):
    table = g.inputs["table"]
    n = table.shape[0]
    rows = native(adapter, np.array([[n - 1]]), "int64", device)
    last = _one(adapter, case, dtype, device, cl, call_adapter(adapter, case, dtype, cl, adapter.lookup, x["table"], rows))
    tab_last = adapter.to_numpy(native(adapter, table[n - 1], dtype, device))
    if not identical(last[0, 0], tab_last, dtype).all():  # as is, up to tiny(dt) (the golden's limit too)
        fail(cl, adapter, case, dtype, f"the last valid row {n - 1} must be returned as is")
    for bad in (n, -1):
        rows = np.array([[0, bad]], np.int64)
        probe = ("learned.lookup", case.params, {"table": _as_run(adapter, table, dtype, device), "rows": rows})
        _must_raise(adapter, case, dtype, device, cl, f"row {bad} of a {n}-row table", adapter.lookup, x["table"],
                    native(adapter, rows, "int64", device), probe=probe)


def _opt_rows(adapter, case, dtype, device, cl, g, x):
    n = g.inputs["table"].shape[0]
    f = call_adapter(adapter, case, dtype, cl, adapter.opt_embeddings, case.params, {"table": x["table"]},
                     dtype=dtype, device=device)
    mask = native(adapter, np.ones((1, n - 1), np.int64), "int64", device)  # rows 2 .. n: one past the end
    _must_raise(adapter, case, dtype, device, cl, f"{n - 1} real tokens (row {n} of a {n}-row OPT table)", f, mask,
                cache_length=n - 2)


_ROW_PROBES = {"learned.gpt2": _gpt2_rows, "learned.bart_embeddings": _bart_rows, "learned.lookup": _lookup_rows,
               "learned.opt_embeddings": _opt_rows}


@check("row_range", invariant="row_range", ops=("learned.lookup", "learned.opt_embeddings", "learned.gpt2",
                                                "learned.bart_embeddings"))
def row_range(request, adapter, device, dtype, case):
    """The last valid row works; one past the end and -1 raise (never clamp, never wrap)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    if device.split(":")[0] not in adapter.range_probe_devices:
        raise Unsupported(f"out-of-range rows are not sent to {adapter.name!r} on {device} (an unchecked "
                          "gather there is a device-side assert); this clause is checked on cpu")
    g = load_golden(case.id)
    x = native_inputs(adapter, g.inputs, dtype, device)
    _ROW_PROBES[case.op](adapter, case, dtype, device, cl, g, x)

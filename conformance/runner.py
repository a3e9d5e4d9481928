"""Run one golden case on an adapter, enforcing the adapter contract, and diagnose failures.

``run_case`` converts the case's inputs to native arrays (floats in the requested dtype,
integers as int64), calls the adapter operation as its declaration in the operation table says
(``operations`` of the family's spec file: ``call_op``), and checks every output's dtype, device
and shape before converting back to NumPy.  Contract violations raise ``AdapterError`` with a
message naming the operation and the output.  ``diagnose`` runs the registered mutants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from posenc import families
from posenc.adapters import Adapter, Unsupported
from posenc.reference import mutants
from posenc.spec import Spec
from posenc.spec.errors import AdapterError
from posenc.spec.shapes import call_suffixes, output_shapes
from posenc.spec.tolerance import Comparison, compare

from .golden import Golden



def native_inputs(adapter: Adapter, inputs: dict[str, np.ndarray], dtype: str, device: str) -> dict[str, Any]:
    """Floats become ``dtype`` arrays, integer arrays int64 arrays, 0-d integers Python ints."""
    out: dict[str, Any] = {}
    for name, a in inputs.items():
        a = np.asarray(a)
        if a.ndim == 0 and np.issubdtype(a.dtype, np.integer):
            out[name] = int(a)
        elif np.issubdtype(a.dtype, np.floating):
            out[name] = adapter.from_numpy(a, dtype, device)
        else:
            out[name] = adapter.from_numpy(a.astype(np.int64), "int64", device)
    return out


def _check(adapter: Adapter, op: str, name: str, x, kind: str, dtype: str, device: str) -> np.ndarray:
    try:
        got = adapter.dtype_of(x)
    except Exception as e:  # noqa: BLE001 - report what the adapter returned
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is not a native array ({type(x).__name__}): {e}")
    if kind == "float" and got != dtype:
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} has dtype {got}, requested {dtype} "
                           "(the output dtype must equal the requested dtype)")
    if kind == "float32+" and got not in ("float32", "float64"):
        raise AdapterError(f"{adapter.name}.{op}: {name!r} has dtype {got}; it must be float32 or float64 "
                           "(ROPE-PRECISION for inv_freq, ALIBI-SLOPES for slopes)")
    if kind == "int" and not (got.startswith("int") or got.startswith("uint")):
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} has dtype {got}, expected an integer dtype")
    try:
        dev = str(adapter.device_of(x))
    except Exception as e:  # noqa: BLE001
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} ({type(x).__name__}) has no device: {e}")
    same = dev == device if ":" in device else dev.split(":")[0] == device
    if not same:
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is on {dev}, requested {device}")
    a = adapter.to_numpy(x)
    if not isinstance(a, np.ndarray):
        raise AdapterError(f"{adapter.name}.{op}: to_numpy returned {type(a).__name__}")
    return a


def _argument(tok: str, x: dict[str, Any], env: dict[str, Any]):
    if tok in env:
        return env[tok]
    if tok.startswith("'"):
        return tok.strip("'")
    return x.get(tok)  # an absent optional input is passed as None


def _arguments(args: list[str], kwargs: list[str], x: dict[str, Any], env: dict[str, Any], named: set[str]):
    pos = [_argument(t, x, env) for t in args]
    kw = {}
    for t in kwargs:
        if t == "**inputs":
            kw.update({n: v for n, v in x.items() if n not in named})
        else:
            kw[t] = _argument(t, x, env)
    return pos, kw


def _returned(adapter: Adapter, op, result) -> dict[str, Any]:
    """The adapter's return value as ``{output: native}`` in the order of ``op.returns``."""
    if len(op.returns) == 1:
        return {op.returns[0]: result}
    if not isinstance(result, (tuple, list)) or len(result) != len(op.returns):
        got = f"{type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else type(result).__name__
        raise AdapterError(f"{adapter.name}.{op.name}: must return a tuple of {len(op.returns)} "
                           f"({', '.join(op.returns)}), got {got}")
    return dict(zip(op.returns, result))


def call_op(adapter: Adapter, op_name: str, params, x: dict[str, Any], dtype: str, device: str) -> dict[str, tuple[Any, str]]:
    """Call the adapter operation by its declaration in the operation table (the family's spec file).

    Returns ``{output: (native, kind)}``; a repeated call (``rope.cos_sin_calls``) gives
    ``<output>.<k>`` per call, all on one prepared object.
    """
    op = families.operation(op_name)
    method = getattr(adapter, op.method)  # Adapter.__getattr__: an undefined operation is unsupported
    weights = {i.name: x[i.name] for i in op.inputs if i.weight and i.name in x}
    env = {"params": params, "weights": weights, "dtype": dtype, "device": device}
    named = {t for t in op.args + op.kwargs + op.call_args + op.call_kwargs} | set(weights)
    args, kwargs = _arguments(op.args, op.kwargs, x, env, named)
    target = method(*args, **kwargs)
    if op.call is None:
        raw = _returned(adapter, op, target)
    else:
        if op.call == "()":
            fn = target
            if not callable(fn):
                raise AdapterError(f"{adapter.name}.{op.name}: {op.method}() must return a callable, "
                                   f"got {type(target).__name__}")
        else:  # a prepared object without the method: that operation is unsupported (documented)
            fn = getattr(target, op.call, None)
            if not callable(fn):
                raise Unsupported(f"adapter {adapter.name!r}: the prepared {op.method} operation has no {op.call}()")
        repeated = [i.name for i in op.inputs if i.repeated]
        if repeated:
            raw = {}
            for k in call_suffixes(x, repeated[0]):
                xs = {**x, **{n: x[f"{n}.{k}"] for n in repeated}}
                a, kw = _arguments(op.call_args, op.call_kwargs, xs, env, named)
                raw.update({f"{n}.{k}": v for n, v in _returned(adapter, op, fn(*a, **kw)).items()})
        else:
            a, kw = _arguments(op.call_args, op.call_kwargs, x, env, named)
            raw = _returned(adapter, op, fn(*a, **kw))
    kinds = {o.name: o.kind for o in op.outputs}
    return {n: (v, kinds[n.split(".")[0]]) for n, v in raw.items()}


def run_case(adapter: Adapter, golden: Golden, dtype: str, device: str,
             inputs: Optional[dict[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """Run a case (optionally with other inputs) and return NumPy outputs, contract-checked:
    dtype, device and the shape the operation table declares (a malformed output is an
    :class:`AdapterError`, never compared)."""
    case = golden.case
    numpy_inputs = golden.inputs if inputs is None else inputs
    x = native_inputs(adapter, numpy_inputs, dtype, device)
    raw = call_op(adapter, case.op, case.params, x, dtype, device)
    shapes = output_shapes(families.operation(case.op), case.params, numpy_inputs)
    out = {}
    for name, (val, kind) in raw.items():
        if kind == "scalar":
            if not isinstance(val, (int, float, np.floating, np.integer)):
                raise AdapterError(f"{adapter.name}.{case.op}: {name!r} must be a Python number, got {type(val).__name__}")
            out[name] = np.float64(val)
            continue
        out[name] = _check(adapter, case.op, name, val, kind, dtype, device)
        if name in shapes and tuple(out[name].shape) != shapes[name]:
            raise AdapterError(f"{adapter.name}.{case.op}: output {name!r} has shape {list(out[name].shape)}, "
                               f"the operation table says {list(shapes[name])}")
    return out


def compare_outputs(golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[Comparison]:
    """Compare every golden output (``*.compared`` masks applied) with ``outputs``."""
    res = []
    for name, ref in golden.outputs.items():
        if name.endswith(".compared"):
            continue
        if name not in outputs:
            res.append(Comparison(False, float("inf"), -1, ref.size, None, None, None, f"{name}: missing from the adapter's outputs"))
            continue
        # inv_freq and ALiBi slopes are float32+ whatever the activations
        dt = "float32" if name in families.operation(golden.case.op).float32_outputs else dtype
        res.append(compare(
            name, outputs[name], ref, dtype=dt, dtype_scale=golden.dtype_scales.get(name),
            angle_scale=golden.angle_scales.get(name), angle_based=golden.angle_based,
            compared=golden.outputs.get(f"{name}.compared")))
    return res


@dataclass(frozen=True)
class Match:
    divergence: str
    violates: tuple[str, ...]
    description: str
    ratio: float


def _same_non_finite(mut: dict[str, np.ndarray], outputs: dict[str, np.ndarray]):
    """``(mutant, outputs)`` with their non-finite elements zeroed where the adapter's output is
    non-finite exactly where the mutant's is (NaN for NaN, +inf for +inf, -inf for -inf); None
    where the patterns differ.  Outputs without non-finite mutant elements are passed unchanged,
    so a NaN the mutant does not produce still fails the comparison."""
    m_out, a_out = dict(mut), dict(outputs)
    for n, m in mut.items():
        if n not in outputs or not np.issubdtype(m.dtype, np.floating):
            continue
        bad = ~np.isfinite(m)
        if not bad.any():
            continue
        a = np.asarray(outputs[n])
        if a.shape != m.shape or not np.issubdtype(a.dtype, np.floating):
            return None
        a = a.astype(np.float64)
        if not np.array_equal(~np.isfinite(a), bad):
            return None
        inf = bad & ~np.isnan(m)
        if not (np.array_equal(np.isnan(a), np.isnan(m)) and np.array_equal(a[inf], m[inf])):
            return None
        m_out[n], a_out[n] = np.where(bad, 0.0, m), np.where(bad, 0.0, a)
    return m_out, a_out


def diagnose(spec: Spec, golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[Match]:
    """Known divergences whose mutant reproduces ``outputs`` within tolerance, best first.

    Considers every divergence that violates one of the case's clauses, or any clause of the
    same family, and has a mutant form for the case's operation.
    """
    fams = {c.split("-")[0] for c in golden.case.clauses}
    found = []
    for d in spec.current_divergences.values():
        if not (set(d.violates) & set(golden.case.clauses) or {v.split("-")[0] for v in d.violates} & fams):
            continue
        try:
            mut = mutants.run(d.mutant, golden.case.op, golden.case.params, golden.inputs, dtype)
        except Exception:  # noqa: BLE001 - a mutant that cannot run on this case does not match
            continue
        if mut is None:
            continue
        if any(np.shape(mut[n]) != golden.outputs[n].shape for n in mut if n in golden.outputs):
            continue  # a mutant of another shape (a form that does not apply to this case) cannot match
        same = all(np.array_equal(np.asarray(mut[n]), golden.outputs[n]) for n in mut if n in golden.outputs)
        if same:
            continue  # indistinguishable from the reference on this case
        mut = {n: np.asarray(v) for n, v in mut.items()}
        # A mutant that overflows gives inf/NaN: it matches only where the output's non-finite
        # elements are exactly the mutant's (same NaN / +inf / -inf pattern); the finite ones are
        # compared under the tolerance as usual.
        masked = _same_non_finite(mut, outputs)
        if masked is None:
            continue
        mut, outs = masked
        # A mutant may compute where the reference copies (e.g. a rotated tail): widen the
        # scales to the mutant's own magnitudes and to the row's largest angle term.
        ds = {n: np.maximum(v, np.abs(mut[n])) for n, v in golden.dtype_scales.items() if n in mut}
        an = {n: np.maximum(v, v.max(axis=-1, keepdims=True)) if v.ndim else v
              for n, v in golden.angle_scales.items() if n in mut}
        fake = Golden(golden.case, golden.inputs, mut, ds, an, golden.angle_based)
        cmp = compare_outputs(fake, outs, dtype)
        if all(c.ok for c in cmp):
            found.append(Match(d.id, tuple(d.violates), d.description, max(c.ratio for c in cmp)))
    return sorted(found, key=lambda m: m.ratio)

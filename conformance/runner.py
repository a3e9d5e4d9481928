"""Run one golden case on an adapter, enforcing the adapter contract, and diagnose failures.

``run_case`` converts the case's inputs to native arrays (floats in the requested dtype,
integers as int64), calls the adapter operation as its declaration in the operation table says
(``operations`` of the family's spec file: ``call_op``), and checks every output's dtype, device
and shape before converting back to NumPy.  Contract violations raise ``AdapterError`` with a
message naming the operation and the output.  ``diagnose`` runs the registered mutants.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from posenc import families
from posenc.adapters import Adapter, Unsupported
from posenc.reference import mutants
from posenc.spec import Spec
from posenc.spec.errors import AdapterError, exception_text
from posenc.spec.shapes import call_suffixes, output_shapes
from posenc.spec.tolerance import Comparison, compare

from .golden import Golden, computed
from .isolation import RemoteObject, is_remote, type_names



# ---- inputs: private copies, checked unchanged after the call ---------------------------------
#
# Every array an adapter receives is made by ``native`` from a fresh copy (``from_numpy`` may share
# memory with its argument -- ``torch.from_numpy`` at float64 does -- so nothing an adapter does
# reaches the kit's cached goldens) and is recorded with a snapshot of its value.
# ``check_inputs`` (after each adapter call in ``run_case``; the plugin calls it at the end of
# every conformance test for the checks that call adapters directly) fails when one changed.

_HANDED: list[tuple[Adapter, str, Any, Optional[np.ndarray]]] = []
_REMOTE = object()  # the snapshot of an input handed to an isolated adapter is kept in its worker


def native(adapter: Adapter, a: np.ndarray, dtype: str, device: str, name: str = "input"):
    """``adapter.from_numpy`` of a private copy of ``a``, recorded for :func:`check_inputs`."""
    if is_remote(adapter):  # the worker makes the copy and keeps the snapshot
        return _remote_natives(adapter, [(name, np.asarray(a), dtype)], device)[0]
    x = adapter.from_numpy(np.array(a, copy=True), dtype, device)
    try:
        snap = np.array(adapter.to_numpy(x), copy=True)
    except Exception:  # noqa: BLE001 - a broken to_numpy fails where the outputs are converted
        snap = None
    _HANDED.append((adapter, name, x, snap))
    return x


def _remote_natives(adapter, specs: list[tuple[str, np.ndarray, str]], device: str) -> list:
    handles = adapter.posenc_natives(specs, device)  # one round trip for all of them
    _HANDED.extend((adapter, name, x, _REMOTE) for (name, _, _), x in zip(specs, handles))
    return handles


def native_inputs(adapter: Adapter, inputs: dict[str, np.ndarray], dtype: str, device: str) -> dict[str, Any]:
    """Floats become ``dtype`` arrays, integer arrays int64 arrays, 0-d integers Python ints
    (each array a private copy: :func:`native`)."""
    out: dict[str, Any] = {}
    specs = []
    for name, a in inputs.items():
        a = np.asarray(a)
        if a.ndim == 0 and np.issubdtype(a.dtype, np.integer):
            out[name] = int(a)
            continue
        spec = (name, a, dtype) if np.issubdtype(a.dtype, np.floating) else \
            (name, a if a.dtype == np.int64 else a.astype(np.int64), "int64")
        if is_remote(adapter):
            out[name] = None  # keeps the inputs' order
            specs.append(spec)
        else:
            out[name] = native(adapter, *spec[1:], device, name)
    if specs:
        out.update(zip([sp[0] for sp in specs], _remote_natives(adapter, specs, device)))
    return out


def forget_inputs() -> None:
    """Drop the record of handed-out inputs (the plugin calls it before each test)."""
    _HANDED.clear()


def check_inputs(what: str = "") -> None:
    """Raise :class:`AdapterError` when an input handed out since the last check was modified
    (in place: the adapter wrote into the kit's array); the record is cleared either way."""
    handed = list(_HANDED)
    _HANDED.clear()
    remote: dict[int, tuple[Any, list]] = {}
    for adapter, name, x, snap in handed:
        if snap is _REMOTE:
            remote.setdefault(id(adapter), (adapter, []))[1].append(x)
            continue
        if snap is None:
            continue
        try:
            now = np.asarray(adapter.to_numpy(x))
        except Exception:  # noqa: BLE001 - reported where the outputs are converted
            continue
        changed = changed_elements(now, snap)
        if changed:
            _modified(adapter, what, name, changed, snap.size)
    for adapter, objs in remote.values():
        found = adapter.posenc_changed(objs)
        if found:
            _modified(adapter, what, *found)


def changed_elements(now: np.ndarray, snap: np.ndarray) -> int:
    """How many elements of an input differ from its snapshot (all of them when the shape did;
    NaN equals NaN): the unchanged-input check here and in the adapter's worker process."""
    if now.shape != snap.shape:
        return int(snap.size)
    same = now == snap
    if np.issubdtype(snap.dtype, np.floating):
        same |= np.isnan(now) & np.isnan(snap)
    return int(np.count_nonzero(~same))


def _modified(adapter, what: str, name: str, changed: int, size: int):
    raise AdapterError(
        f"{adapter.name}{'.' + what if what else ''}: the adapter modified its input {name!r} in place "
        f"({changed} of {size} elements changed); the kit hands every call private copies and checks them "
        "afterwards. A kernel that is in-place by design must be wrapped to work on a copy (e.g. "
        "`q = q.clone()` / `q.copy()` before the kernel) and return the result")


_NATIVE: "weakref.WeakKeyDictionary[Adapter, dict[str, type]]" = weakref.WeakKeyDictionary()


def _native_type(adapter: Adapter, device: str) -> list[str]:
    """The names of the type of the adapter's own arrays (what its ``from_numpy`` gives) and its
    bases, per adapter and device."""
    try:
        per_device = _NATIVE.setdefault(adapter, {})
    except TypeError:  # an adapter that cannot be weakly referenced: no cache
        per_device = {}
    if device not in per_device:
        per_device[device] = type_names(adapter.from_numpy(np.zeros(1, np.float32), "float32", device))
    return per_device[device]


def _is_native(x, native_type: list[str]) -> bool:
    """``x`` is of the adapter's array type, or shares a class of it other than ``object`` (a
    framework's variable or subclass of its tensor); by the types' names, so that it holds for an
    adapter in its worker process too."""
    shared = set(type_names(x)) & set(native_type)
    return bool(shared - {"builtins.object"})


class _Facts:
    """``dtype_of``, ``device_of`` and ``to_numpy`` of one output, asked in the contract's order;
    for an isolated adapter all three come in one request (each a value or what it raised)."""

    def __init__(self, adapter, x):
        self.adapter, self.x = adapter, x
        self.remote = adapter.posenc_facts(x) if is_remote(adapter) and isinstance(x, RemoteObject) else None

    def get(self, key: str):
        if self.remote is not None:
            kind, v = self.remote[key]
            if kind == "err":
                raise v
            return v
        fn = {"dtype": self.adapter.dtype_of, "device": self.adapter.device_of, "array": self.adapter.to_numpy}[key]
        return plain_array(self.adapter, fn(self.x)) if key == "array" else fn(self.x)


def plain_array(adapter, a):
    """``a`` if it is a plain ``numpy.ndarray`` of numbers (what ``to_numpy`` must return), else
    :class:`AdapterError`: a masked array or another subclass (its mask or extra state would be
    dropped or filled in silently), an object array (no values to compare).  Anything that is no
    array at all is reported by the output contract check."""
    if isinstance(a, np.ndarray) and (type(a) is not np.ndarray or a.dtype.hasobject):
        what = f"a {type(a).__module__}.{type(a).__qualname__}" if type(a) is not np.ndarray else "an object array"
        raise AdapterError(f"{adapter.name}: to_numpy returned {what}: it must return a plain numpy.ndarray of numbers")
    return a


def _check(adapter: Adapter, op: str, name: str, x, kind: str, dtype: str, device: str) -> np.ndarray:
    want = _native_type(adapter, device)
    if not _is_native(x, want):
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is a {type_names(x)[0]}, "
                           f"not the adapter's native array type ({want[0]}, what its "
                           "from_numpy returns): return framework arrays, the kit converts them with to_numpy")
    facts = _Facts(adapter, x)
    try:
        got = facts.get("dtype")
    except Exception as e:  # noqa: BLE001 - report what the adapter returned
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is not a native array ({type_names(x)[0]}): {exception_text(e)}")
    if kind == "float" and got != dtype:
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} has dtype {got}, requested {dtype} "
                           "(the output dtype must equal the requested dtype)")
    if kind == "float32+" and got not in ("float32", "float64"):
        raise AdapterError(f"{adapter.name}.{op}: {name!r} has dtype {got}; it must be float32 or float64 "
                           "(ROPE-PRECISION for inv_freq, ALIBI-SLOPES for slopes)")
    if kind == "int" and not (got.startswith("int") or got.startswith("uint")):
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} has dtype {got}, expected an integer dtype")
    try:
        dev = str(facts.get("device"))
    except Exception as e:  # noqa: BLE001
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} ({type_names(x)[0]}) has no device: {exception_text(e)}")
    same = dev == device if ":" in device else dev.split(":")[0] == device
    if not same:
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is on {dev}, requested {device}")
    a = facts.get("array")
    if not isinstance(a, np.ndarray):
        raise AdapterError(f"{adapter.name}.{op}: to_numpy returned {type_names(a)[0].rsplit('.', 1)[-1]}")
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


def checked_outputs(adapter: Adapter, op_name: str, result, dtype: str, device: str) -> dict[str, np.ndarray]:
    """What an operation (or its prepared callable) returned, as ``{output: NumPy}`` after the
    contract checks of :func:`run_op` but the shape (native array type, dtype, device; the tuple's
    arity): for the checks that call a prepared object step by step.  :class:`AdapterError` otherwise."""
    op = families.operation(op_name)
    kinds = {o.name: o.kind for o in op.outputs}
    out = {}
    for name, val in _returned(adapter, op, result).items():
        out[name] = (np.float64(val) if kinds[name] == "scalar" else
                     _check(adapter, op_name, name, val, kinds[name], dtype, device))
    return out


def run_case(adapter: Adapter, golden: Golden, dtype: str, device: str,
             inputs: Optional[dict[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """Run a case (optionally with other inputs) and return NumPy outputs, contract-checked:
    dtype, device and the shape the operation table declares (a malformed output is an
    :class:`AdapterError`, never compared)."""
    case = golden.case
    return run_op(adapter, case.op, case.params, golden.inputs if inputs is None else inputs, dtype, device)


@dataclass(frozen=True)
class Call:
    """One :func:`run_op` call an oracle-free check made: the operation, its parameters, the
    kit's NumPy inputs and the adapter's contract-checked NumPy outputs."""
    op: str
    params: Any
    inputs: dict
    outputs: dict


_CALLS: contextvars.ContextVar[Optional[list[Call]]] = contextvars.ContextVar("posenc_calls", default=None)


@contextlib.contextmanager
def recording():
    """Record every :func:`run_op` call made inside the block (yields the list of :class:`Call`):
    an oracle-free check's failure is then diagnosed on its own calls (:func:`diagnose_calls`)."""
    calls: list[Call] = []
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


def run_op(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], dtype: str,
           device: str) -> dict[str, np.ndarray]:
    """Call operation ``op`` with ``params`` on NumPy ``inputs`` (private copies, checked unchanged
    afterwards) and return its outputs as NumPy, contract-checked: native array type, dtype, device
    and the shape the operation table declares.  The one entry point of golden, generated and
    invariant checks alike; a malformed output is an :class:`AdapterError`, never compared.
    Inside :func:`recording` the call is recorded."""
    out = _run_op(adapter, op, params, inputs, dtype, device)
    record(op, params, inputs, out)
    return out


def record(op: str, params, inputs: dict, outputs: dict) -> None:
    """Inside :func:`recording`, record one call of ``op`` (the kit's NumPy ``inputs`` in the
    operation table's names, the adapter's contract-checked NumPy ``outputs``): :func:`run_op`
    does it for every call; a check that calls a prepared object step by step does it for each
    step it can state as an operation call.  Outside, nothing."""
    calls = _CALLS.get()
    if calls is not None:  # copies: an in-process adapter's outputs may share a buffer it writes again
        calls.append(Call(op, params.model_copy(deep=True), {n: np.array(v, copy=True) for n, v in inputs.items()},
                          {n: np.array(v, copy=True) for n, v in outputs.items()}))


def _run_op(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], dtype: str,
            device: str) -> dict[str, np.ndarray]:
    if is_remote(adapter):  # the whole of this function runs in the adapter's worker process: one round trip
        return adapter.posenc_run_op(op, params, inputs, dtype, device)
    x = native_inputs(adapter, inputs, dtype, device)
    raw = call_op(adapter, op, params.model_copy(deep=True), x, dtype, device)  # the case's own params stay the kit's
    check_inputs(op)
    shapes = output_shapes(families.operation(op), params, inputs)
    out = {}
    for name, (val, kind) in raw.items():
        if kind == "scalar":
            if not isinstance(val, (int, float, np.floating, np.integer)):
                raise AdapterError(f"{adapter.name}.{op}: {name!r} must be a Python number, got {type(val).__name__}")
            out[name] = np.float64(val)
            continue
        out[name] = _check(adapter, op, name, val, kind, dtype, device)
        if name in shapes and tuple(out[name].shape) != shapes[name]:
            raise AdapterError(f"{adapter.name}.{op}: output {name!r} has shape {list(out[name].shape)}, "
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


def _candidates(spec: Spec, case) -> list:
    """The divergences a diagnosis of ``case`` considers: every one whose mutant has a form for
    the case's operation, whatever clause it violates (a precision bug of the RoPE angles shows
    in a SCALE-* case, or in a multi-call ``rope.cos_sin_calls`` case, as well)."""
    forms = families.mutants()
    return [d for d in spec.current_divergences.values() if case.op in forms.get(d.mutant, {})]


def diagnose(spec: Spec, golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[Match]:
    """Known divergences whose mutant reproduces ``outputs`` within tolerance, best first.

    Considers every divergence whose mutant has a form for the case's operation.
    """
    found = []
    for d in _candidates(spec, golden.case):
        try:
            m = _match(d, golden, outputs, dtype)
        except Exception:  # noqa: BLE001 - the diagnosis never raises: a mutant that cannot judge does not match
            continue
        if m is not None:
            found.append(m)
    return sorted(found, key=lambda m: m.ratio)


@dataclass(frozen=True)
class CallsDiagnosis:
    """:func:`diagnose_calls`' verdict: ``goldens`` (the reference on each call), ``wrong`` (the
    indices of the calls whose outputs are out of tolerance of the reference), ``first_bad`` (the
    out-of-tolerance messages of the first of them), ``matches`` (the divergences reproducing
    every call, best first)."""
    goldens: tuple
    wrong: tuple[int, ...]
    first_bad: tuple[str, ...]
    matches: tuple[Match, ...]


def diagnose_calls(spec: Spec, case, calls: list[Call], dtype: str) -> Optional[CallsDiagnosis]:
    """Diagnose an oracle-free check's failure on the operation calls it made (``calls``,
    recorded by :func:`recording`): the reference's golden of each call, which calls are out of
    its tolerance, and the known divergences whose mutant reproduces the outputs of *every*
    call (each within tolerance, as :func:`diagnose`) and differs from the reference on at least
    one.  None when there is nothing to judge (no call, or the reference cannot compute one).
    Never raises."""
    try:
        goldens = tuple(computed(dataclasses.replace(case, op=c.op, params=c.params, inputs={}), c.inputs)
                        for c in calls)
        bad = [[x.message for x in compare_outputs(g, c.outputs, dtype) if not x.ok] for g, c in zip(goldens, calls)]
    except Exception:  # noqa: BLE001 - a call the reference cannot judge: no diagnosis
        return None
    wrong = tuple(i for i, b in enumerate(bad) if b)
    if not goldens:
        return None
    found = []
    candidates = {d.id: d for g in goldens for d in _candidates(spec, g.case)} if wrong else {}
    for d in candidates.values():
        ratios, differs = [], False
        for g, c in zip(goldens, calls):
            try:  # where the mutant has no form for a call's operation, the call must be the reference's
                r = _reproduction(d, g, c.outputs, dtype, reference_where_no_form=True)
            except Exception:  # noqa: BLE001 - a mutant that cannot judge does not match
                r = None
            if r is None:
                break
            ratios.append(r[0])
            differs = differs or r[1]
        else:
            if differs:
                found.append(Match(d.id, tuple(d.violates), d.description, max(ratios)))
    return CallsDiagnosis(goldens, wrong, tuple(bad[wrong[0]]) if wrong else (),
                          tuple(sorted(found, key=lambda m: m.ratio)))


def mutant_outputs(d, golden: Golden, dtype: str) -> Optional[dict[str, np.ndarray]]:
    """What divergence ``d``'s mutant gives on ``golden``'s case, or None where it has no form
    for that case (or raises there)."""
    try:
        out = mutants.run(d.mutant, golden.case.op, golden.case.params, golden.inputs, dtype)
    except Exception:  # noqa: BLE001 - a mutant that cannot run on this case
        return None
    return None if out is None else {n: np.asarray(v) for n, v in out.items()}


def separating_case(spec: Spec, a: str, b: str, goldens: list[Golden], dtype: str) -> Optional[str]:
    """The first of ``goldens`` on which divergences ``a`` and ``b`` can be told apart: one's
    mutant output is caught there (out of tolerance of the reference) and not reproduced by the
    other's mutant; None when no golden tells them apart."""
    da, db = spec.divergences[a], spec.divergences[b]
    for g in goldens:
        for x, y in ((da, db), (db, da)):
            out = caught_outputs(x, g, dtype)
            if out is not None and _match(y, g, out, dtype) is None:
                return g.case.id
    return None


def caught_outputs(d, golden: Golden, dtype: str) -> Optional[dict[str, np.ndarray]]:
    """``d``'s mutant outputs on ``golden`` when the golden catches them (a form of the golden's
    shapes, out of the reference's tolerance somewhere); None otherwise."""
    out = mutant_outputs(d, golden, dtype)
    if out is None or any(np.shape(out.get(n)) != v.shape for n, v in golden.outputs.items()
                          if not n.endswith(".compared")):
        return None
    try:
        caught = not all(c.ok for c in compare_outputs(golden, out, dtype))
    except Exception:  # noqa: BLE001 - an output the comparison cannot judge says nothing
        return None
    return out if caught else None


def _match(d, golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> Optional[Match]:
    """``d``'s match when its mutant reproduces ``outputs`` on this case within tolerance, else None."""
    r = _reproduction(d, golden, outputs, dtype, differing=True)
    if r is None:  # not reproduced, or indistinguishable from the reference on this case
        return None
    return Match(d.id, tuple(d.violates), d.description, r[0])


def _reproduction(d, golden: Golden, outputs: dict[str, np.ndarray], dtype: str, differing: bool = False,
                  reference_where_no_form: bool = False) -> Optional[tuple[float, bool]]:
    """``(max |err|/bound, differs)`` when ``d``'s mutant reproduces ``outputs`` on this case
    within tolerance (``differs``: the mutant's outputs are not the reference's), else None;
    ``differing``: None as well when the mutant's outputs are the reference's;
    ``reference_where_no_form``: a mutant without a form for the case's operation gives the
    reference's outputs there (as :class:`~posenc.adapters.reference_adapter.MutantAdapter` does)."""
    mut = mutant_outputs(d, golden, dtype)
    if mut is None and reference_where_no_form:
        mut = {n: v for n, v in golden.outputs.items() if not n.endswith(".compared")}
    if mut is None:
        return None
    if any(np.shape(mut[n]) != golden.outputs[n].shape for n in mut if n in golden.outputs):
        return None  # a mutant of another shape (a form that does not apply to this case) cannot match
    differs = not all(np.array_equal(np.asarray(mut[n]), golden.outputs[n]) for n in mut if n in golden.outputs)
    if differing and not differs:
        return None
    # A mutant that overflows gives inf/NaN: it matches only where the output's non-finite
    # elements are exactly the mutant's (same NaN / +inf / -inf pattern); the finite ones are
    # compared under the tolerance as usual.
    masked = _same_non_finite(mut, outputs)
    if masked is None:
        return None
    mut, outs = masked
    # A mutant may compute where the reference copies (e.g. a rotated tail): widen the scales to
    # the mutant's own magnitudes and to the row's largest angle term -- only at the elements where
    # the mutant's output is not the reference's.  Where they are equal the reference's tolerance
    # stands, so an error there (a pass-through tail off by one ulp) is never explained by a
    # divergence that changes other elements.
    def differing(n):
        return np.asarray(mut[n]) != np.asarray(golden.outputs[n]) if n in golden.outputs else True

    ds = {n: np.where(differing(n), np.maximum(v, np.abs(mut[n])), v)
          for n, v in golden.dtype_scales.items() if n in mut}
    an = {n: np.where(differing(n), np.maximum(v, v.max(axis=-1, keepdims=True)), v) if np.ndim(v) else v
          for n, v in golden.angle_scales.items() if n in mut}
    fake = Golden(golden.case, golden.inputs, mut, ds, an, golden.angle_based)
    cmp = compare_outputs(fake, outs, dtype)
    if all(c.ok for c in cmp):
        return max(c.ratio for c in cmp), differs
    return None

"""Run one golden case on an adapter, enforcing the adapter contract, and compare its outputs.

``run_case`` converts the case's inputs to native arrays (floats in the requested dtype,
integers as int64), calls the adapter operation as its declaration in the operation table says
(``operations`` of the family's spec file: ``call_op``), and checks every output's dtype, device
and shape before converting back to NumPy.  Contract violations raise ``AdapterError`` with a
message naming the operation and the output.  :mod:`posenc.harness.diagnosis` names what a wrong output is.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from typing import TYPE_CHECKING

from posenc import registry
from posenc.spec.errors import AdapterError, Unsupported, exception_text
from posenc.spec.shapes import call_suffixes, output_shapes, table_dtype, table_policy
from posenc.spec.tolerance import Comparison, compare

from posenc.harness.buffers import changed_elements, guarded, modified_input
from posenc.harness.golden import Golden
from posenc.harness.remote import RemoteHandle, is_remote, type_names

if TYPE_CHECKING:  # the adapter contract, for the annotations only (the harness sits below the adapters)
    from posenc.adapters import Adapter


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


def native_inputs(adapter: Adapter, inputs: dict[str, np.ndarray], dtype: str, device: str,
                  int32: tuple[str, ...] = (), tables: tuple[str, ...] = ()) -> dict[str, Any]:
    """Floats become ``dtype`` arrays (the inputs named in ``tables``, an operation's ``table`` inputs, the
    adapter's :func:`table_dtype`), integer arrays int64 arrays (int32 for the inputs named in ``int32``:
    an operation's ``int32`` inputs), 0-d integers Python ints (each array a private copy: :func:`native`)."""
    out: dict[str, Any] = {}
    specs = []
    for name, a in inputs.items():
        a = np.asarray(a)
        if a.ndim == 0 and np.issubdtype(a.dtype, np.integer):
            out[name] = int(a)
            continue
        it = "int32" if name in int32 else "int64"
        ft = table_dtype(adapter, dtype) if name in tables else dtype
        spec = (name, a, ft) if np.issubdtype(a.dtype, np.floating) else \
            (name, a if a.dtype == it else a.astype(it), it)
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
            modified_input(adapter, what, name, changed, snap.size)
    for adapter, objs in remote.values():
        found = adapter.posenc_changed(objs)
        if found:
            modified_input(adapter, what, *found)


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
        self.remote = adapter.posenc_facts(x) if is_remote(adapter) and isinstance(x, RemoteHandle) else None

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
    if kind == "table" and got != table_dtype(adapter, dtype):
        hint = ("declare table_dtype = 'float32' for float32 tables beside bfloat16 / float16 q and k"
                if got == "float32" and table_policy(adapter) == "activation" else
                f"return the tables in {table_dtype(adapter, dtype)}")
        raise AdapterError(f"{adapter.name}.{op}: table {name!r} has dtype {got}; at {dtype} the adapter's table "
                           f"policy (table_dtype {table_policy(adapter)!r}) gives {table_dtype(adapter, dtype)} "
                           f"(ROPE-TABLE-DTYPE: {hint})")
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
    """The adapter's return value as ``{output: native}`` in the order of ``op.returns`` (an in-place call's
    own return value, where it returns none, is not read: its outputs are the inputs it ``writes``)."""
    if not op.returns:
        return {}
    if len(op.returns) == 1:
        return {op.returns[0]: result}
    if not isinstance(result, (tuple, list)) or len(result) != len(op.returns):
        got = f"{type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else type(result).__name__
        raise AdapterError(f"{adapter.name}.{op.name}: must return a tuple of {len(op.returns)} "
                           f"({', '.join(op.returns)}), got {got}")
    return dict(zip(op.returns, result))


def _environment(op, params, x: dict[str, Any], dtype: str, device: str) -> tuple[dict, set]:
    """``(env, named)``: what an operation's argument tokens read besides its inputs, and the inputs it names."""
    weights = {i.name: x[i.name] for i in op.inputs if i.weight and i.name in x}
    env = {"params": params, "weights": weights, "dtype": dtype, "device": device}
    return env, {t for t in op.args + op.kwargs + op.call_args + op.call_kwargs} | set(weights)


def _prepare(adapter: Adapter, op, x: dict[str, Any], env: dict[str, Any], named: set[str]):
    """The adapter's ``op.method`` called with the operation's ``args`` / ``kwargs`` (read from ``x`` and ``env``,
    :func:`_environment`): the result, or the prepared object whose ``op.call`` the calls make.  An undefined
    operation is unsupported (``Adapter.__getattr__``)."""
    args, kwargs = _arguments(op.args, op.kwargs, x, env, named)
    return getattr(adapter, op.method)(*args, **kwargs)


def call_op(adapter: Adapter, op_name: str, params, x: dict[str, Any], dtype: str, device: str,
            prepared=None) -> dict[str, tuple[Any, str]]:
    """Call the adapter operation by its declaration in the operation table (the family's spec file).

    Returns ``{output: (native, kind)}``; a repeated call (``rope.cos_sin_calls``) gives
    ``<output>.<k>`` per call, all on one prepared object.  ``prepared``: the object a previous call's
    ``op.method`` gave (a decode step on the same prepared operation: :func:`run_steps`), not made again.
    """
    op = registry.operation(op_name)
    env, named = _environment(op, params, x, dtype, device)
    target = _prepare(adapter, op, x, env, named) if prepared is None else prepared
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
                if op.form_of is not None and op.name in tuple(getattr(adapter, "call_forms", ()) or ()):
                    raise AdapterError(f"{adapter.name}.{op.name}: the adapter declares call form {op.name} "
                                       f"(call_forms) but its prepared {op.method} object "
                                       f"({type(target).__name__}) has no {op.call}() method")
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
    raw.update({n: x[n] for n in op.writes})  # written in place: the views the kit handed
    kinds = {o.name: o.kind for o in op.outputs}
    return {n: (v, kinds[n.split(".")[0]]) for n, v in raw.items()}


def checked_outputs(adapter: Adapter, op_name: str, result, dtype: str, device: str) -> dict[str, np.ndarray]:
    """What an operation (or its prepared callable) returned, as ``{output: NumPy}`` after the
    contract checks of :func:`run_op` but the shape (native array type, dtype, device; the tuple's
    arity): for the checks that call a prepared object step by step.  :class:`AdapterError` otherwise."""
    op = registry.operation(op_name)
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


def run_in_form(adapter: Adapter, golden: Golden, form_op: str, dtype: str, device: str) -> dict[str, np.ndarray]:
    """Run ``golden``'s case through call form operation ``form_op`` (spec ``form_of``): its inputs put in
    the form, the outputs put back in the primary's layout, for the primary's golden to judge.
    ``Unsupported`` where the case cannot be put in the form."""
    from posenc.registry.forms import form_of
    f = form_of(form_op)
    if f is None or f.primary != golden.case.op:
        raise KeyError(f"{form_op!r} is not a registered call form of {golden.case.op}")
    served = tuple(getattr(adapter, "call_forms", ()) or ())
    if form_op not in served:
        raise Unsupported(f"adapter {adapter.name!r} does not serve call form {form_op} (its call_forms: "
                          f"{', '.join(served) or 'none'})")
    x = f.to_form(golden.case.params, golden.inputs)
    if isinstance(x, str):
        raise Unsupported(f"case {golden.case.id} has no {form_op} form: {x}")
    out = run_op(adapter, form_op, golden.case.params, x, dtype, device)
    return f.outputs_to_primary(golden.case.params, x, out, golden.inputs)


@dataclass(frozen=True)
class Call:
    """One :func:`run_op` call an oracle-free check made: the operation, its parameters, the
    kit's NumPy inputs and the adapter's contract-checked NumPy outputs (and the form it went through)."""
    op: str
    params: Any
    inputs: dict
    outputs: dict
    #: the call form (spec ``form_of``) the call went through (its outputs put back in ``op``'s layout), or None
    form: Optional[str] = None


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


_ROUTE: contextvars.ContextVar[Optional[tuple[str, list]]] = contextvars.ContextVar("posenc_form_route", default=None)


@contextlib.contextmanager
def through_form(form_op: Optional[str]):
    """Inside the block, :func:`run_op` calls of call form ``form_op``'s primary operation go through
    ``form_op`` wherever the call's inputs can be put in it and the adapter serves it there (the others, and a
    call the form reports unsupported, as they are): an oracle-free check runs through a form the adapter
    serves.  Yields the list of the operations run through the form (empty: no call was).  None: no routing."""
    routed: list[str] = []
    token = _ROUTE.set((form_op, routed) if form_op else None)
    try:
        yield routed
    finally:
        _ROUTE.reset(token)


def _routed(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], dtype: str, device: str):
    """``(outputs, form)``: the outputs of ``op`` run through the call form :func:`through_form` set, in ``op``'s
    layout; None where no form is set for ``op``, the inputs have no such form or the adapter reports it
    unsupported."""
    from posenc.registry.forms import form_of
    route = _ROUTE.get()
    f = form_of(route[0]) if route else None
    if f is None or f.primary != op:
        return None
    x = f.to_form(params, inputs)
    if isinstance(x, str):
        return None
    token = _ROUTE.set(None)
    try:
        out = _run_op(adapter, f.op, params, x, dtype, device)
        check_shapes(adapter, f.op, params, x, out)
    except Unsupported:  # the check is the implementation's: made on the primary (the form's own tests count it)
        return None
    finally:
        _ROUTE.reset(token)
    route[1].append(f.op)
    return f.outputs_to_primary(params, x, out, inputs), f.op


def run_steps(adapter: Adapter, op: str, params, steps: list[dict[str, np.ndarray]], dtype: str, device: str,
              form: Optional[str] = None) -> list[dict[str, np.ndarray]]:
    """Call operation ``op`` on each of ``steps`` (NumPy inputs) in turn on ONE prepared object (its
    ``op.method`` called once: a decode loop, whose state -- a cache, dynamic NTK's frequencies -- carries from
    step to step), through call form ``form`` where given (every step put in the form; in-place and strided
    forms in guarded buffers, as :func:`run_op` hands them); each step's outputs as NumPy in ``op``'s layout,
    contract-checked as :func:`run_op` checks them and recorded (with the form).  ``Unsupported`` where a step
    has no such form.  An isolated adapter runs the whole loop in its worker process."""
    from posenc.registry.forms import form_of
    f = form_of(form) if form else None
    xs = steps
    if f is not None:
        xs = [f.to_form(params, x) for x in steps]
        why = next((x for x in xs if isinstance(x, str)), None)
        if why is not None:
            raise Unsupported(f"a step has no {form} form: {why}")
    use = form or op
    outs = adapter.posenc_run_steps(use, params, xs, dtype, device) if is_remote(adapter) else \
        run_steps_unshaped(adapter, use, params, xs, dtype, device)
    result = []
    for x, xp, out in zip(xs, steps, outs):
        check_shapes(adapter, use, params, x, out)
        out = out if f is None else f.outputs_to_primary(params, x, out, xp)
        record(op, params, xp, out, form)
        result.append(out)
    return result


def run_steps_unshaped(adapter: Adapter, op: str, params, steps: list[dict[str, np.ndarray]], dtype: str,
                       device: str) -> list[dict[str, np.ndarray]]:
    """:func:`run_op_unshaped` of each of ``steps`` on one prepared object (``op.method`` called once, with the
    first step's inputs for its arguments): what :func:`run_steps` runs where the adapter is."""
    decl = registry.operation(op)
    if decl.call in (None, "()") or not steps:
        raise KeyError(f"{op} has no prepared object to call step by step")
    prepared = _prepare(adapter, decl, steps[0], *_environment(decl, params.model_copy(deep=True), steps[0], dtype, device))
    return [run_op_unshaped(adapter, op, params, x, dtype, device, prepared) for x in steps]


def step_forms(adapter: Adapter, op: str, params, steps: list[dict[str, np.ndarray]]) -> list[Optional[str]]:
    """``op`` itself (None) and every call form of it the adapter serves (``call_forms``) that each of ``steps``
    can be put in: the forms a decode loop runs through, each on its own prepared object."""
    from posenc.registry.forms import forms_of
    served = set(getattr(adapter, "call_forms", ()) or ())
    return [None] + [f.op for f in forms_of(op) if f.op in served
                     and all(f.why_not(params, {n: x.get(n) for n in x}) is None for x in steps)]


def run_op(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], dtype: str,
           device: str) -> dict[str, np.ndarray]:
    """Call operation ``op`` with ``params`` on NumPy ``inputs`` (private copies, checked unchanged
    afterwards) and return its outputs as NumPy, contract-checked: native array type, dtype, device
    and the shape the operation table declares.  The one entry point of golden, generated and
    invariant checks alike; a malformed output is an :class:`AdapterError`, never compared.
    Inside :func:`through_form`, through that call form where the inputs have one.
    Inside :func:`recording` the call is recorded (as ``op``'s, in its layout)."""
    out, form = _routed(adapter, op, params, inputs, dtype, device) or (None, None)
    if out is None:
        out = _run_op(adapter, op, params, inputs, dtype, device)
        check_shapes(adapter, op, params, inputs, out)
    record(op, params, inputs, out, form)
    return out


class OutputShapeError(AdapterError):
    """An output of another shape than the operation table's: never compared with the reference.
    Carries the call (``op``, ``params``, NumPy ``inputs``) and the adapter's contract-checked NumPy
    ``outputs``, so that a divergence whose bug changes a shape (a rotary width rounded up gives a
    longer inv_freq) can still be named (:func:`posenc.harness.diagnosis.diagnose_shapes`)."""

    def __init__(self, msg: str, op: str, params, inputs: dict, outputs: dict):
        super().__init__(msg)
        self.op, self.params, self.inputs, self.outputs = op, params, inputs, outputs


def check_shapes(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    """:class:`OutputShapeError` naming the first output whose shape is not the operation table's."""
    shapes = output_shapes(registry.operation(op), params, inputs)
    for name, val in out.items():
        if name in shapes and tuple(np.shape(val)) != shapes[name]:
            raise OutputShapeError(f"{adapter.name}.{op}: output {name!r} has shape {list(np.shape(val))}, "
                                   f"the operation table says {list(shapes[name])}", op, params, inputs, out)


def record(op: str, params, inputs: dict, outputs: dict, form: Optional[str] = None) -> None:
    """Inside :func:`recording`, record one call of ``op`` (the kit's NumPy ``inputs`` in the
    operation table's names, the adapter's contract-checked NumPy ``outputs``, in ``op``'s layout where
    the call went through call form ``form``): :func:`run_op` and :func:`run_steps` do it for every call; a
    check that calls a prepared object step by step otherwise does it for each step it can state as an
    operation call.  Outside, nothing."""
    calls = _CALLS.get()
    if calls is not None:  # copies: an in-process adapter's outputs may share a buffer it writes again
        calls.append(Call(op, params.model_copy(deep=True), {n: np.array(v, copy=True) for n, v in inputs.items()},
                          {n: np.array(v, copy=True) for n, v in outputs.items()}, form))


def _run_op(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], dtype: str,
            device: str) -> dict[str, np.ndarray]:
    if is_remote(adapter):  # the whole of this function runs in the adapter's worker process: one round trip
        return adapter.posenc_run_op(op, params, inputs, dtype, device)
    return run_op_unshaped(adapter, op, params, inputs, dtype, device)


def run_op_unshaped(adapter: Adapter, op: str, params, inputs: dict[str, np.ndarray], dtype: str,
                    device: str, prepared=None) -> dict[str, np.ndarray]:
    """:func:`run_op` on an adapter of this process, every check but the outputs' shapes (which the
    caller's :func:`check_shapes` judges: the adapter's worker process runs this, and the outputs come
    back whatever their shapes); ``prepared``: see :func:`call_op`."""
    decl = registry.operation(op)
    int32 = tuple(i.name for i in decl.inputs if i.kind == "int32")
    tables = tuple(i.name for i in decl.inputs if i.kind == "table")
    held = set(decl.writes) | set(decl.views)
    x = native_inputs(adapter, {n: v for n, v in inputs.items() if n not in held}, dtype, device, int32, tables)
    guards = {n: guarded(adapter, inputs[n], dtype, device) for n in inputs if n in held}
    x.update({n: g.view for n, g in guards.items()})
    raw = call_op(adapter, op, params.model_copy(deep=True), x, dtype, device, prepared)  # the case's params stay the kit's
    check_inputs(op)
    for n, g in guards.items():
        g.check(adapter, op, n, written=n in decl.writes)
        if n in decl.writes:  # what the buffer holds, not the view object handed (a kernel may rebind that: q.set_(...))
            raw[n] = (g.buffer[g.inner], raw[n][1])
    out = {}
    for name, (val, kind) in raw.items():
        if kind == "scalar":
            if not isinstance(val, (int, float, np.floating, np.integer)):
                raise AdapterError(f"{adapter.name}.{op}: {name!r} must be a Python number, got {type(val).__name__}")
            out[name] = np.float64(val)
            continue
        out[name] = _check(adapter, op, name, val, kind, dtype, device)
    return out


#: Elements judged "not checkable at this dtype" by the comparisons of the current test (read and reset by
#: the plugin around each test: :func:`take_not_checkable`).
_NOT_CHECKABLE = [0]


def note_not_checkable(case_id: str, cmps, dtype: str) -> None:
    """Count the compared elements whose bound reaches the largest error they can have
    (``spec.tolerance.not_checkable``); a case none of whose elements is checkable is ``Unsupported``, never
    a pass."""
    n, total = sum(c.n_unchecked for c in cmps), sum(c.n_total for c in cmps if c.n_total > 0)
    _NOT_CHECKABLE[0] += n
    if n and n == total:
        raise Unsupported(f"not checkable at {dtype}: every one of the {total} compared elements of {case_id} has a "
                          "bound (the float32 angle term at its positions) reaching twice its magnitude, the largest "
                          "error a rotation can make: any output of that magnitude would pass")


def take_not_checkable() -> int:
    """The "not checkable at this dtype" elements counted since the last call (and reset)."""
    n, _NOT_CHECKABLE[0] = _NOT_CHECKABLE[0], 0
    return n


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
        dt = "float32" if name in registry.operation(golden.case.op).float32_outputs else dtype
        res.append(compare(
            name, outputs[name], ref, dtype=dt, dtype_scale=golden.dtype_scales.get(name),
            angle_scale=golden.angle_scales.get(name), angle_based=golden.angle_based,
            compared=golden.outputs.get(f"{name}.compared"), accumulation_scale=golden.accumulation_scales.get(name)))
    return res

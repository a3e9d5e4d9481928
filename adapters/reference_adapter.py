"""Adapters generated from the operation table: the reference, and a divergence's mutant.

:class:`ReferenceAdapter` implements *every* declared operation (of the kit's families and of
any registered one) by inverting its calling convention (``spec/<family>.yaml``
``operations``): it collects the arguments the kit passes into the operation's named inputs,
runs the registered reference binding in float64 and returns the outputs in the requested
dtype.  A prepared operation (``call: apply``) returns an object with one method per operation
sharing the adapter method; a factory (``call: "()"``) returns a callable.  Subclasses override
:meth:`ReferenceAdapter.compute`; methods a subclass defines itself take precedence (the
``numpy`` adapter keeps hand-written ones for the kit's families, with the dynamic-NTK state).

:class:`MutantAdapter` computes a divergence's mutant instead of the reference wherever the
mutant has a form: the adapter a conformance run must fail, with that divergence named.
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

import ml_dtypes
import numpy as np

from posenc import families
from posenc.spec.errors import UsageError

from .base import Adapter

_FLOATS = ("float64", "float32", "float16", "bfloat16")
NP_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
             "bfloat16": ml_dtypes.bfloat16, "int64": np.int64, "bool": np.bool_}


class ReferenceAdapter(Adapter):
    """Every operation of the operation table, computed by the registered reference (NumPy)."""

    name = "reference"
    framework = "numpy"
    notes = "float64 reference, rounded once to the requested dtype"

    def versions(self):
        return {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}

    def from_numpy(self, array, dtype, device):
        return np.asarray(array).astype(NP_DTYPES[dtype])

    def to_numpy(self, x):
        x = np.asarray(x)
        return x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x

    def dtype_of(self, x):
        return str(np.asarray(x).dtype)

    def compute(self, op: str, params, inputs: dict[str, Any], dtype: Optional[str], state=None) -> dict[str, np.ndarray]:
        """The outputs of ``op`` for NumPy ``inputs`` (float64 arrays, int64 arrays, ints);
        ``state``: the prepared object's (see :class:`posenc.families.Reference`)."""
        ref = families.reference_of(op)
        return ref.fn(params, inputs) if state is None else ref.fn(params, inputs, state)

    def __getattribute__(self, name: str):
        if name.startswith("_") or name in _OWN:
            return object.__getattribute__(self, name)
        for klass in type(self).__mro__:  # a method a subclass wrote itself wins
            if klass is ReferenceAdapter:
                break
            if name in klass.__dict__:
                return object.__getattribute__(self, name)
        ops = _by_method().get(name)
        if ops:
            return lambda *a, **kw: _Call(self, ops).method(*a, **kw)
        return object.__getattribute__(self, name)


def _by_method() -> dict[str, list]:
    """Adapter method -> the operations declared with it (cached per loaded spec)."""
    spec = families.spec()
    if _CACHE.get("spec") is not spec:
        table: dict[str, list] = {}
        for o in spec.operations.values():
            table.setdefault(o.method, []).append(o)
        _CACHE.update(spec=spec, table=table)
    return _CACHE["table"]


_CACHE: dict = {}
_OWN = frozenset(n for n in ReferenceAdapter.__dict__ if not n.startswith("__")) | {
    "name", "framework", "devices", "dtypes", "notes", "range_probe_devices", "device_available", "device_of"}


def _collect(tokens: list[str], values: list, x: dict, env: dict) -> None:
    for tok, v in zip(tokens, values):
        if tok in ("dtype", "device", "params"):
            env[tok] = v
        elif tok == "weights":
            x.update(v or {})
        elif not tok.startswith("'"):
            x[tok] = v


class _Call:
    """One call of a generated method: the ops sharing the adapter method, narrowed by literals."""

    def __init__(self, adapter: ReferenceAdapter, ops):
        self.adapter, self.ops = adapter, ops

    def method(self, *args, **kwargs):
        ops = [o for o in self.ops if all(a == t.strip("'") for t, a in zip(o.args, args) if t.startswith("'"))]
        op = ops[0]
        x, env = {}, {}
        _collect(op.args, list(args), x, env)
        _collect([t for t in op.kwargs if t != "**inputs"], [kwargs.pop(t, None) for t in op.kwargs if t != "**inputs"],
                 x, env)
        x.update(kwargs)  # **inputs
        if op.call is None:
            return self._run(op, x, env)
        if op.call == "()":
            return lambda *a, **kw: self._finish(op, x, env, a, kw)
        by_call = {}
        for o in ops:  # a repeated-call operation is the same method called again
            if o.call and not any(i.repeated for i in o.inputs):
                by_call.setdefault(o.call, o)
        make = next((families.reference_of(o.name).state for o in by_call.values()
                     if families.reference_of(o.name).state), None)
        env["state"] = make(env.get("params")) if make else None
        return _Prepared(by_call, self, x, env)

    def _finish(self, op, x, env, args, kwargs):
        x = dict(x)
        _collect(op.call_args, list(args), x, env)
        defaults = {i.name: i.default for i in op.inputs}
        _collect(op.call_kwargs, [kwargs.get(t, defaults.get(t)) for t in op.call_kwargs], x, env)
        return self._run(op, x, env)

    def _run(self, op, x, env):
        dtype = env.get("dtype") or next((str(v.dtype) for v in x.values() if isinstance(v, np.ndarray)
                                          and str(v.dtype) in _FLOATS), "float64")
        inputs = {}
        for name, v in x.items():
            if v is None:
                continue
            a = np.asarray(v)
            inputs[name] = a.astype(np.float64) if str(a.dtype) in _FLOATS else (int(a) if a.ndim == 0 else a.astype(np.int64))
        out = self.adapter.compute(op.name, env.get("params"), inputs, dtype, env.get("state"))
        kinds = {o.name: o.kind for o in op.outputs}
        vals = [_as_kind(out[n], kinds[n], dtype) for n in op.returns]
        return vals[0] if len(vals) == 1 else tuple(vals)


class _Prepared:
    """A prepared object: one method per operation that shares the adapter method."""

    def __init__(self, by_call: dict, call: _Call, x: dict, env: dict):
        self._by_call, self._call, self._x, self._env = by_call, call, x, env

    def __getattr__(self, name: str):
        op = self._by_call.get(name)
        if op is None:
            raise AttributeError(name)
        return lambda *a, **kw: self._call._finish(op, self._x, self._env, a, kw)


def _as_kind(value, kind: str, dtype: str):
    if kind == "scalar":
        return float(value)
    a = np.asarray(value)
    if kind == "float":
        return a.astype(NP_DTYPES[dtype])
    if kind == "float32+":
        return a.astype(np.float64)
    return a.astype(np.int64)


class MutantAdapter(ReferenceAdapter):
    """The reference with one divergence's mutant substituted wherever it has a form."""

    def __init__(self, divergence: str):
        divs = families.spec().divergences
        d = divs.get(divergence.upper())
        if d is None:
            near = difflib.get_close_matches(divergence.upper(), divs, n=3)
            raise UsageError(f"MutantAdapter: unknown divergence {divergence!r}"
                             + (f"; did you mean {', '.join(near)}?" if near else "; `posenc spec list` lists them"))
        self.divergence, self.mutant = d.id, d.mutant
        self.name = f"mutant-{d.id.lower()}"

    def compute(self, op, params, inputs, dtype, state=None):
        fn = families.mutants().get(self.mutant, {}).get(op)
        out = None if fn is None else fn(params, inputs, dtype)
        return super().compute(op, params, inputs, dtype, state) if out is None else out

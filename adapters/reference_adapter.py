"""Adapters generated from the operation table: the reference, and a divergence's mutant.

:class:`ReferenceAdapter` implements *every* declared operation (of the kit's families and of
any registered one) by inverting its calling convention (``spec/<family>.yaml``
``operations``): it collects the arguments the kit passes into the operation's named inputs,
runs the registered reference binding in float64 and returns the outputs in the requested
dtype.  A prepared operation (``call: apply``) returns an object with one method per operation
sharing the adapter method; a factory (``call: "()"``) returns a callable.  The methods are
real methods of the class, generated when an instance is made (so a subclass may override one
and call ``super()``); subclasses may also override :meth:`ReferenceAdapter.compute`.

:class:`MutantAdapter` computes a divergence's mutant instead of the reference wherever the
mutant has a form: the adapter a conformance run must fail, with that divergence named.  A
mutant of a call sequence (``rope.cos_sin_calls``) is replayed over the calls made so far on the
prepared object.
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

import ml_dtypes
import numpy as np

from posenc import registry
from posenc.spec.errors import UsageError
from posenc.spec.shapes import table_dtype

from .base import Adapter

_FLOATS = ("float64", "float32", "float16", "bfloat16")
NP_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
             "bfloat16": ml_dtypes.bfloat16, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


_by_method = registry.operations_by_method


def _generated(method: str):
    def call(self, *args, **kwargs):
        return _Call(self, _by_method()[method]).method(*args, **kwargs)
    call.__name__ = call.__qualname__ = method
    call.__doc__ = f"{method}: generated from the operation table ({', '.join(o.name for o in _by_method()[method])})."
    call._posenc_generated = True
    return call


class ReferenceAdapter(Adapter):
    """Every operation of the operation table, computed by the registered reference (NumPy)."""

    name = "reference"
    framework = "numpy"
    notes = "float64 reference, rounded once to the requested dtype"

    def __init__(self):
        for method in _by_method():  # families registered since the last instance get theirs too
            if not getattr(ReferenceAdapter.__dict__.get(method), "_posenc_generated", False):
                setattr(ReferenceAdapter, method, _generated(method))

    def versions(self):
        return {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}

    @property
    def call_forms(self) -> tuple[str, ...]:
        """Every registered call form: each is an operation of the table, inverted like the others."""
        return tuple(o.name for o in registry.spec().operations.values() if o.form_of is not None)

    def from_numpy(self, array, dtype, device):
        return np.asarray(array).astype(NP_DTYPES[dtype])

    def to_numpy(self, x):
        x = np.asarray(x)
        return x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x

    def dtype_of(self, x):
        return str(np.asarray(x).dtype)

    def compute(self, op: str, params, inputs: dict[str, Any], dtype: Optional[str], state=None) -> dict[str, np.ndarray]:
        """The outputs of ``op`` for NumPy ``inputs`` (float64 arrays, int64 arrays, ints);
        ``state``: the prepared object's (see :class:`posenc.families.Reference`), made from the prepared
        parameters: a subclass that passes other ``params`` with it (a planted bug: ``attention_factor``
        1.25) gets a state made from those, not its changes silently dropped."""
        ref = registry.reference_of(op)
        made_for = _STATE_PARAMS.get(id(state)) if state is not None else None
        if made_for is not None and made_for[0] is state and made_for[1] != params and ref.state:
            state = ref.state(params)
        return ref.fn(params, inputs) if state is None else ref.fn(params, inputs, state)

    def replays(self, op: str) -> bool:
        """Whether a call sequence (``op`` has ``repeated`` inputs) is computed over the calls so far."""
        return False


def _collect(tokens: list[str], values: list, x: dict, env: dict) -> None:
    for tok, v in zip(tokens, values):
        if tok in ("dtype", "device", "params"):
            env[tok] = v
        elif tok == "weights":
            x.update(v or {})
        elif not tok.startswith("'"):
            x[tok] = v


def _literals_match(op, args, kwargs) -> bool:
    """The op's literal arguments (``'decode'``) are among the call's, by position or as a keyword value."""
    for i, tok in enumerate(op.args):
        if tok.startswith("'"):
            lit = tok.strip("'")
            given = ([args[i]] if i < len(args) else []) + list(kwargs.values())
            if not any(isinstance(v, str) and v == lit for v in given):
                return False
    return True


class _Call:
    """One call of a generated method: the ops sharing the adapter method, narrowed by literals."""

    def __init__(self, adapter: ReferenceAdapter, ops):
        self.adapter, self.ops = adapter, ops

    def method(self, *args, **kwargs):
        ops = [o for o in self.ops if _literals_match(o, args, kwargs)]
        if not ops:
            raise ValueError(f"{self.ops[0].method}: no operation of the table matches the arguments {args} "
                             f"(declared: {', '.join(o.name for o in self.ops)})")
        op = ops[0]
        lits = {t.strip("'") for t in op.args if t.startswith("'")}
        kwargs = {k: v for k, v in kwargs.items() if not (isinstance(v, str) and v in lits)}
        x, env = {}, {}
        _collect(op.args, list(args), x, env)
        named = [t for t in op.kwargs if t != "**inputs"]
        _collect(named, [kwargs.pop(t, None) for t in named], x, env)
        if "**inputs" in op.kwargs:
            x.update(kwargs)
        elif kwargs:
            raise TypeError(f"{op.method}() got unexpected keyword argument(s) {', '.join(kwargs)}")
        if op.call is None:
            return self._run(op, x, env)
        if op.call == "()":
            return lambda *a, **kw: self._finish(op, x, env, a, kw)
        return _Prepared(ops, self, x, env)

    def _finish(self, op, x, env, args, kwargs):
        x = dict(x)
        defaults = {i.name: i.default for i in op.inputs}
        _collect(op.call_args, list(args), x, env)
        _collect(op.call_kwargs, [kwargs.get(t, defaults.get(t)) for t in op.call_kwargs], x, env)
        return self._run(op, x, env)

    def _run(self, op, x, env, select: str = ""):
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
        for n in op.writes:  # an in-place operation: its outputs written into the arrays it was handed
            x[n][...] = _as_kind(out[n + select], kinds[n], dtype, self.adapter)
        vals = [_as_kind(out[n + select], kinds[n], dtype, self.adapter) for n in op.returns]
        return None if not vals else vals[0] if len(vals) == 1 else tuple(vals)


#: id(state) -> (state, the parameters it was made from), for :meth:`ReferenceAdapter.compute`, the latest
#: ``_STATES_KEPT`` prepared objects' (a check uses its prepared object at once); the state is held so that
#: its id is not reused while the entry lives
_STATE_PARAMS: dict = {}
_STATES_KEPT = 64


class _Prepared:
    """A prepared object: one method per operation that shares the adapter method; its state
    (the reference's ``state`` hook) and the calls made so far live here."""

    def __init__(self, ops, call: _Call, x: dict, env: dict):
        self._single = {}
        self._sequence = {}
        for o in ops:
            if o.call and any(i.repeated for i in o.inputs):
                self._sequence.setdefault(o.call, o)
            elif o.call:  # several: call forms that share the call (rope.apply's strided views, int32 positions)
                self._single.setdefault(o.call, []).append(o)
        self._call, self._x, self._history = call, x, {}
        make = next((registry.reference_of(o.name).state for os_ in self._single.values() for o in os_
                     if registry.reference_of(o.name).state), None)
        self._env = {**env, "state": make(env.get("params")) if make else None}
        if self._env["state"] is not None:  # what it was made from (ReferenceAdapter.compute)
            _STATE_PARAMS[id(self._env["state"])] = (self._env["state"], env.get("params"))
            while len(_STATE_PARAMS) > _STATES_KEPT:
                del _STATE_PARAMS[next(iter(_STATE_PARAMS))]

    def __getattr__(self, name: str):
        ops = self._single.get(name)
        if ops is None:
            raise AttributeError(name)
        seq = self._sequence.get(name)
        if seq is not None and self._call.adapter.replays(seq.name):
            return lambda *a, **kw: self._replay(seq, name, a, kw)
        return lambda *a, **kw: self._call._finish(_handed(ops, a, kw), self._x, self._env, a, kw)

    def _replay(self, seq, name, args, kwargs):
        calls = self._history.setdefault(name, [])
        calls.append(dict(zip(seq.call_args, args), **kwargs))
        x = dict(self._x)
        for k, c in enumerate(calls):
            x.update({f"{n}.{k}": v for n, v in c.items()})
        return self._call._run(seq, x, {**self._env, "state": None}, select=f".{len(calls) - 1}")


def _handed(ops, args, kwargs):
    """Of the operations sharing one call, the one the arguments were handed for: a call form whose ``views``
    inputs are all strided views or whose ``int32`` inputs are all int32 arrays, else the first (the primary):
    a mutant of the strided form runs only on strided views."""
    def fits(o) -> bool:
        got = dict(zip(o.call_args, args), **kwargs)
        views = [got.get(n) for n in o.views]
        ints = [got.get(i.name) for i in o.inputs if i.kind == "int32"]
        if not views and not ints:
            return False
        return all(isinstance(v, np.ndarray) and not v.flags.c_contiguous for v in views) and \
            all(isinstance(v, np.ndarray) and v.dtype == np.int32 for v in ints)
    return next((o for o in ops if fits(o)), ops[0])


def _as_kind(value, kind: str, dtype: str, adapter=None):
    if kind == "scalar":
        return float(value)
    a = np.asarray(value)
    if kind == "float":
        return a.astype(NP_DTYPES[dtype])
    if kind == "table":  # the adapter's table policy (ROPE-TABLE-DTYPE)
        return a.astype(NP_DTYPES[table_dtype(adapter, dtype)])
    if kind == "float32+":
        return a.astype(np.float64)
    return a.astype(np.int64)


class MutantAdapter(ReferenceAdapter):
    """The reference with one divergence's mutant substituted wherever it has a form."""

    def __init__(self, divergence: str):
        divs = registry.spec().divergences
        d = divs.get(divergence.upper())
        if d is None:
            near = difflib.get_close_matches(divergence.upper(), divs, n=3)
            raise UsageError(f"MutantAdapter: unknown divergence {divergence!r}"
                             + (f"; did you mean {', '.join(near)}?" if near else "; `posenc spec list` lists them"))
        super().__init__()
        self.divergence, self.mutant = d.id, d.mutant
        self.name = f"mutant-{d.id.lower()}"

    def replays(self, op):
        return self._mutant(op) is not None

    def _mutant(self, op):
        """``fn(params, inputs, dtype)`` of the mutant for ``op``: its own form, else, for a call form of an
        operation the mutant has a form of, the primary's run on the inputs put back in the primary (the
        bug a kernel has whatever its calling convention)."""
        forms = registry.mutants().get(self.mutant, {})
        if op in forms:
            return forms[op]
        from posenc.registry.forms import form_of
        f = form_of(op)
        prim = forms.get(f.primary) if f is not None else None
        if prim is None:
            return None

        def through(params, inputs, dtype):
            xp = f.to_primary(params, inputs)
            out = prim(params, xp, dtype)
            return None if out is None else f.outputs_to_form(params, xp, dict(out))
        return through

    def compute(self, op, params, inputs, dtype, state=None):
        fn = self._mutant(op)
        out = None if fn is None else fn(params, inputs, dtype)
        return super().compute(op, params, inputs, dtype, state) if out is None else out

"""Symbolic shapes of the operation table (``spec/<family>.yaml`` ``operations``).

An input's ``shape`` (``[B, Hq, T, D]``, ``[*R]``) *binds* symbols to the dimensions of the
array the kit passes; an output's ``shape`` is a small Python expression over those symbols,
the scalar inputs (``cache_length``), the inputs' values (``cu_seqlens[-1]``) and the
parameters' fields and properties (``pair_dim // 2``, ``form == 'bloom'``), evaluated without
``eval``: only names, numbers, strings, lists, ``+ - * //``, subscripts, comparisons and
``a if cond else b`` are allowed.
"""

from __future__ import annotations

import ast
import functools
import operator
from typing import Any, Mapping

import numpy as np

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge}


class ShapeError(ValueError):
    """A shape expression that cannot be evaluated (unknown name, forbidden syntax)."""


def bind(declared: str, shape: tuple[int, ...], env: dict[str, Any]) -> None:
    """Bind the symbols of ``declared`` (``[B, T]`` or ``[*R]``) to ``shape``; first binding wins."""
    node = _parse(declared).body
    if not isinstance(node, ast.List):
        raise ShapeError(f"input shape {declared!r} is not a list of symbols")
    if len(node.elts) == 1 and isinstance(node.elts[0], ast.Starred):
        env.setdefault(node.elts[0].value.id, tuple(shape))
        return
    if len(node.elts) != len(shape):
        return  # a wrong input rank: nothing to bind (the reference or the adapter will say so)
    for elt, n in zip(node.elts, shape):
        if isinstance(elt, ast.Name):
            env.setdefault(elt.id, int(n))


@functools.lru_cache(maxsize=None)
def _parse(expr: str) -> ast.Expression:
    """The parsed shape expression (the operation table has few; every call evaluates one)."""
    return ast.parse(expr, mode="eval")


def evaluate(expr: str, env: Mapping[str, Any], params=None) -> tuple[int, ...]:
    """The shape ``expr`` denotes; names come from ``env``, then from ``params``' attributes."""
    def name(n: str):
        if n in env:
            return env[n]
        if params is not None and hasattr(params, n):
            return getattr(params, n)
        raise ShapeError(f"shape {expr!r}: unknown name {n!r}")

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)):
            return node.value
        if isinstance(node, ast.Name):
            return name(node.id)
        if isinstance(node, ast.List):
            out: list = []
            for e in node.elts:
                out.extend(ev(e.value)) if isinstance(e, ast.Starred) else out.append(ev(e))
            return tuple(out)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            a, b = ev(node.left), ev(node.right)
            if isinstance(a, tuple) or isinstance(b, tuple):
                raise ShapeError(f"shape {expr!r}: arithmetic on a list of dimensions")
            return _BIN[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Subscript):
            return np.asarray(ev(node.value))[ev(node.slice)].item()
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            return _CMP[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        raise ShapeError(f"shape {expr!r}: {type(node).__name__} is not allowed")

    try:
        out = ev(parse(expr))
    except (ArithmeticError, IndexError, TypeError, ValueError) as e:
        if isinstance(e, ShapeError):
            raise
        raise ShapeError(f"shape {expr!r}: {type(e).__name__}: {e}") from None
    if not isinstance(out, tuple) or len(out) > MAX_RANK or not all(isinstance(d, (int, np.integer)) for d in out):
        raise ShapeError(f"shape {expr!r} does not denote a list of at most {MAX_RANK} integer dimensions")
    return tuple(int(d) for d in out)


MAX_RANK = 16
_ALLOWED = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.List, ast.Starred, ast.BinOp, ast.UnaryOp,
            ast.USub, ast.Subscript, ast.Compare, ast.IfExp, *_BIN, *_CMP)


@functools.lru_cache(maxsize=None)  # few distinct expressions, evaluated on every call
def parse(expr: str) -> ast.expr:
    """Parse a shape expression, allowing only the syntax :func:`evaluate` knows (``ShapeError``)."""
    try:
        tree = _parse(expr)
    except SyntaxError as e:
        raise ShapeError(f"shape {expr!r}: {e.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ShapeError(f"shape {expr!r}: {type(node).__name__} is not allowed")
    return tree.body


def call_suffixes(inputs: Mapping[str, Any], name: str) -> list[str]:
    """The call indices of a repeated input, in call order: ``name.0``, ``name.1``, ... -> ``['0', '1']``."""
    prefix = name + "."
    return sorted((k[len(prefix):] for k in inputs if k.startswith(prefix) and k[len(prefix):].isdigit()), key=int)


def _env(op, inputs: Mapping[str, Any], suffix: str = "") -> dict[str, Any]:
    env: dict[str, Any] = {}
    for decl in op.inputs:
        key = decl.name + suffix if decl.repeated else decl.name
        if key not in inputs or inputs[key] is None:
            continue
        value = inputs[key]
        if decl.kind == "scalar":
            env[decl.name] = int(np.asarray(value))
        else:
            if decl.shape:
                bind(decl.shape, tuple(np.shape(value)), env)
            env.setdefault(decl.name, value)
    return env


def output_shapes(op, params, inputs: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """``{output: shape}`` that operation ``op`` (a :class:`~posenc.spec.models.Operation`) must
    return for these inputs (NumPy arrays or anything with a shape; scalars as ints); the
    outputs of a repeated call are keyed ``<name>.<k>``, as in the goldens."""
    calls = sorted({k for d in op.inputs if d.repeated for k in call_suffixes(inputs, d.name)}, key=int)
    out = {}
    for o in op.outputs:
        if o.kind == "scalar":
            continue
        for suffix in ([f".{k}" for k in calls] if o.repeated else [""]):
            out[o.name + suffix] = evaluate(o.shape, _env(op, inputs, suffix), params)
    return out


#: The cos/sin table policies an adapter may declare (``table_dtype``; ROPE-TABLE-DTYPE).
TABLE_POLICIES = ("activation", "float32")


def table_policy(adapter) -> str:
    """The adapter's ``table_dtype`` (``activation`` when it declares none): ROPE-TABLE-DTYPE."""
    return getattr(adapter, "table_dtype", None) or "activation"


def table_dtype(adapter, dtype: str) -> str:
    """The dtype of the cos/sin tables (operation inputs and outputs of kind ``table``) an adapter gets
    and gives at activation dtype ``dtype`` (ROPE-TABLE-DTYPE): float32 at bfloat16 and float16 where its
    ``table_dtype`` is ``float32`` (FlashInfer, TransformerEngine, torchtune), else ``dtype``."""
    return "float32" if table_policy(adapter) == "float32" and dtype in ("bfloat16", "float16") else dtype

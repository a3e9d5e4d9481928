"""The generator author's façade: what a family's ``<family>_generated`` module draws cases with.

A generator (``@posenc.families.generator(op)``) is ``fn(draw) -> Case``: it draws parameters from
the spec's declared domains (:func:`field`, :func:`size`: ``parameters:`` of the family files),
shapes from small sets (:func:`shape`: compiled adapters see few distinct shapes), positions
anywhere in range (:func:`positions`: near powers of two, above 65504, near a table's end), masks
(:func:`mask`), float inputs materialised from the example's seed (:func:`values`, :func:`ids`),
and returns :func:`case`.  The harness runs every drawn case through the same comparison and
diagnosis as a golden one (:mod:`posenc.harness.generation`).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
from hypothesis import strategies as st

from posenc import registry
from posenc.registry.cases import Case, Gen
from posenc.spec.models import PARAM_MODELS
from posenc.spec.ranges import domain

#: The largest position a RoPE-style generated case draws for most rows (the goldens go to 131071).
MAX_POSITION = 2 ** 17
#: The largest position a row of "far" positions reaches (``positions(..., far=LONG_POSITION)``): long-context
#: models (Llama 4 Scout: 10M tokens); rows start near 2**20, 2**24 or anywhere between.
LONG_POSITION = 2 ** 24 + 8
#: Batch sizes 2**k + 1 and a head count of 73, as kernel test suites use them (a block's tail, a grid that
#: does not divide): drawn by the operations that rotate q and k.
KERNEL_BATCHES = (5, 9)
KERNEL_HEADS = (73,)


def field(draw, model: str, name: str, *, lo: Optional[float] = None, hi: Optional[float] = None):
    """One value of ``model.name`` from its declared domain (optionally narrowed to [lo, hi]).

    Enum / bool fields: one of ``values``; numeric fields: uniform or log-uniform in ``range``
    (integers when the model field is an int, a multiple of ``multiple_of`` when declared).
    """
    rng = domain(registry.spec(), model, name)
    if rng.values is not None and rng.range is None:
        return draw(st.sampled_from(rng.values))
    a, b = rng.range
    a, b = max(a, lo) if lo is not None else a, min(b, hi) if hi is not None else b
    ann = str(PARAM_MODELS[model].model_fields[name].annotation)
    integer = "int" in ann and "float" not in ann
    if rng.scale == "log" and a > 0:
        v = math.exp(draw(st.floats(math.log(a), math.log(b))))
    else:
        v = draw(st.floats(a, b))
    if not integer:
        return float(v)
    m = rng.multiple_of or 1
    v = int(round(min(max(v, a), b) / m)) * m
    lo_i = int(math.ceil(a / m)) * m
    return int(min(max(v, lo_i), int(b // m) * m))


#: The sizes a generated width or table length takes (filtered by the field's declared domain):
#: few, so that compiled and shape-specialising adapters (jax, jit, tf.function) reuse their
#: compilations across examples, yet odd, even, tiny, power-of-two and not.
#: 80, 92, 112, 160 and 192 are the odd head sizes kernels special-case (vLLM, FlashInfer, SGLang fall back to
#: another kernel outside 64 / 128 / 256).
SIZES = (1, 2, 3, 4, 6, 8, 10, 16, 24, 64, 80, 92, 96, 112, 128, 160, 192, 256, 1024)


def size(draw, model: str, name: str, *, lo: Optional[float] = None, hi: Optional[float] = None) -> int:
    """A size for ``model.name`` from :data:`SIZES`, within its declared range (and [lo, hi])."""
    rng = domain(registry.spec(), model, name)
    a, b = rng.range
    a, b = max(a, lo) if lo is not None else a, min(b, hi) if hi is not None else b
    m = rng.multiple_of or 1
    ok = [v for v in SIZES if a <= v <= b and v % m == 0]
    return draw(st.sampled_from(ok)) if ok else field(draw, model, name, lo=lo, hi=hi)


def shape(draw, *dims: tuple[int, ...]) -> tuple[int, ...]:
    """One size per dimension, each from its small tuple of choices (bounded distinct shapes)."""
    return tuple(draw(st.sampled_from(d)) for d in dims)


def positions(draw, batch: int, length: int, high: int, *, monotonic: bool = False, far: int = 0) -> np.ndarray:
    """int64 ``[batch, length]`` positions in ``[0, high)``: from 0, after a cache, scattered, near
    a power of two, above 65504 (when ``high`` allows), or at the end of the range; with ``far`` (above
    ``high``) also rows of consecutive positions beyond ``high`` up to ``far``: near 2**20, near 2**24 or
    log-uniform between.  Each row is drawn on its own (rows never share positions by construction)."""
    kinds = ["arange", "cache", "near_pow2", "end"] + ([] if monotonic else ["scattered"])
    if high > 65504 + length:
        kinds.append("above_f16")
    if far > high + length:
        kinds.append("far")
    rows = []
    for _ in range(batch):
        kind = draw(st.sampled_from(kinds))
        span = max(high - length, 0)
        if kind == "arange":
            start = 0
        elif kind == "cache":
            start = draw(st.integers(1, max(span, 1))) if span else 0
        elif kind == "near_pow2":
            k = draw(st.integers(1, max(1, int(math.log2(max(high, 2))))))
            start = min(max(2 ** k - draw(st.integers(0, length)), 0), span)
        elif kind == "above_f16":
            start = draw(st.integers(65505, high - length))
        elif kind == "end":
            start = span
        elif kind == "far":
            anchor = draw(st.sampled_from([2**20, 2**24, 0]))
            if anchor == 0:
                anchor = int(math.exp(draw(st.floats(math.log(high), math.log(far - length)))))
            start = min(max(anchor - draw(st.integers(0, length)), high), far - length)
        else:
            rows.append([draw(st.integers(0, high - 1)) for _ in range(length)])
            continue
        rows.append(list(range(start, start + length)))
    return np.asarray(rows, dtype=np.int64)


def mask(draw, batch: int, length: int) -> np.ndarray:
    """int64 0/1 ``[batch, length]`` attention mask, each row full, left-padded, right-padded or
    with holes, with at least one real token."""
    rows = []
    for _ in range(batch):
        kind = draw(st.sampled_from(["full", "left", "right", "holes"]))
        n = draw(st.integers(0, length - 1))
        if kind == "full" or length == 1:
            row = [1] * length
        elif kind == "left":
            row = [0] * n + [1] * (length - n)
        elif kind == "right":
            row = [1] * (length - n) + [0] * n
        else:
            row = [draw(st.integers(0, 1)) for _ in range(length)]
            row[draw(st.integers(0, length - 1))] = 1
        rows.append(row)
    return np.asarray(rows, dtype=np.int64)


def values(shape_: tuple[int, ...], scale: float = 1.0, offset: float = 0.0) -> Gen:
    """A float input materialised from the example's seed (exact in bf16/f16 for power-of-two scale)."""
    return Gen(tuple(int(s) for s in shape_), scale=scale, offset=offset)


def ids(shape_: tuple[int, ...], high: int) -> Gen:
    return Gen(tuple(int(s) for s in shape_), kind="ids", high=int(high))


def case(op: str, params, inputs: dict[str, Any], clauses, note: str = "") -> Case:
    """A generated case of ``op``: ``clauses``, then those its parameters exercise (the clause rule of
    ``op``'s namespace, :func:`posenc.registry.exercised`), kept where the operation serves them."""
    served = registry.operation(op).clauses
    cl = tuple(dict.fromkeys(c for c in (*clauses, *registry.exercised(params, op)) if c in served))
    return Case(f"gen-{op}", op, cl or (served[0],), params, inputs, note)


__all__ = ["field", "size", "shape", "positions", "mask", "values", "ids", "case", "domain", "Case", "Gen",
           "MAX_POSITION", "LONG_POSITION", "KERNEL_BATCHES", "KERNEL_HEADS", "SIZES"]

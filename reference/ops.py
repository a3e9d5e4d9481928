"""Deprecated: the operations' reference bindings by name are :func:`posenc.registry.reference_of` and
:func:`posenc.registry.operation`.  Kept for one release (spec 0.4.x); importing it warns.

Every operation is declared in its family's spec file (``operations``: calling convention,
inputs, outputs with their shapes, clauses) and its reference binding ``fn(params, inputs) ->
{output: ndarray}`` and error scales ``scales(params, inputs) -> {output: (dtype_scale,
angle_scale)}`` are registered by the family's module (``posenc.families.<family>``, see
:mod:`posenc.families`).  ``OPS[op]`` combines the two as before: ``fn``, ``scales``,
``angle_based``, ``float32_floor``, ``float32_outputs`` and ``eps_floor_float32``.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import numpy as np

from posenc import registry as _families

warnings.warn("posenc.reference.ops is deprecated: use reference_of(op), run_reference(op, ...) and operation(op) "
              "of posenc.families (a family's modules) or posenc.registry", DeprecationWarning, stacklevel=2)

Outputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class Op:
    """One operation: reference function, error scales and the tolerance flags of its declaration."""

    fn: Callable
    scales: Callable
    angle_based: bool = False
    float32_floor: bool = False
    float32_outputs: tuple[str, ...] = ()

    @property
    def eps_floor_float32(self) -> bool:
        return self.angle_based or self.float32_floor


class _Ops(Mapping):
    def __getitem__(self, op: str) -> Op:
        ref, decl = _families.reference_of(op), _families.operation(op)
        return Op(ref.fn, ref.scales, decl.angle_based, decl.float32_floor, decl.float32_outputs)

    def __iter__(self):
        return iter(_families.spec().operations)

    def __len__(self) -> int:
        return len(_families.spec().operations)


OPS: Mapping[str, Op] = _Ops()


def run(op: str, params, inputs: dict):
    """Run reference operation ``op``; raises ``KeyError`` naming the known ops."""
    return _families.reference_of(op).fn(params, inputs)


def scales(op: str, params, inputs: dict):
    return _families.reference_of(op).scales(params, inputs)


#: Helpers that moved to their family's module.
_MOVED = {"freq_provider": "rope", "call_keys": "rope", "rope_outputs": "rope", "rope_scales": "rope",
          "exponent_amplification": "rope", "slope_amplification": "alibi", "mrope_outputs": "mrope"}


def __getattr__(name: str):
    if name in _MOVED:
        return getattr(importlib.import_module(f"posenc.families.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

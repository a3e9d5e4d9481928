"""Hostile adapters for the generated-case tests.

``Memorising``: returns the golden outputs whenever its inputs equal a golden case's (it has
read the kit's golden files), and a subtly wrong answer (the other pairing, positions + 1,
table rows + 1, ...) -- the mutant of a catalogued divergence -- otherwise.  It passes every
golden test; only generated cases can catch it.

``NoInterleaved``: the reference, but raises Unsupported for interleaved pairing (an adapter
that supports part of an operation).  ``NothingRope``: unsupported for every rope.apply.
"""

from __future__ import annotations

import numpy as np

from posenc.adapters import Unsupported
from posenc.adapters.reference_adapter import MutantAdapter, ReferenceAdapter
from posenc.harness import golden


def _key(op, inputs):
    """The inputs as the adapter sees them at float32 (what it would have stored)."""
    return (op, tuple(sorted((k, golden.sha256_array(np.asarray(v, np.float32) if np.asarray(v).dtype.kind == "f"
                                                      else np.asarray(v))) for k, v in inputs.items())))


def _golden_index():
    m = golden.read_manifest()
    return {_key(c.op, golden.load(c, manifest=m).inputs) for c in golden.family_cases()[1]}


class Memorising(MutantAdapter):
    """The reference on golden inputs, the other pairing (DIV-ROPE-PAIRING-SWAPPED) elsewhere."""

    def __init__(self):
        super().__init__("DIV-ROPE-PAIRING-SWAPPED")
        self.name = "memorising"
        self._known = _golden_index()

    def compute(self, op, params, inputs, dtype, state=None):
        if _key(op, inputs) in self._known:
            return ReferenceAdapter.compute(self, op, params, inputs, dtype, state)
        return super().compute(op, params, inputs, dtype, state)


class NoInterleaved(ReferenceAdapter):
    name = "no-interleaved"

    def compute(self, op, params, inputs, dtype, state=None):
        if op.startswith("rope.") and getattr(params, "pairing", "half") != "half":
            raise Unsupported(f"pairing {params.pairing} is not implemented")
        return super().compute(op, params, inputs, dtype, state)


class NothingRope(ReferenceAdapter):
    name = "nothing-rope"

    def compute(self, op, params, inputs, dtype, state=None):
        if op == "rope.apply" or op in self.call_forms:  # nor any call form of it
            raise Unsupported("this adapter has no RoPE")
        return super().compute(op, params, inputs, dtype, state)


MEMORISING = Memorising

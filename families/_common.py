"""Helpers the kit's family modules share (not a family: discovery goes by the spec's files)."""

from __future__ import annotations

import numpy as np

from . import ReferenceOutputs, reference_of

Outputs = dict[str, np.ndarray]

#: The half dtypes a run at each dtype may have computed in (the precision findings' candidates: a
#: float32 run computing in float16 or bfloat16, a float16 run in bfloat16, a bfloat16 run in itself).
LOWER_HALF_DTYPES = {"float32": ("float16", "bfloat16"), "float16": ("float16", "bfloat16"),
                     "bfloat16": ("bfloat16",)}


def scalar(inputs, name) -> int:
    """A scalar input (0-d array or int) as a Python int."""
    return int(np.asarray(inputs[name]))


def optional(inputs, name):
    return inputs.get(name)


def exact_scales(names):
    """Error scales of outputs that must match exactly in every dtype (gathers, copies)."""
    def f(p, x):
        return {n: (np.float64(0), np.float64(0)) for n in names}
    return f


def run(op: str, params, inputs) -> Outputs:
    """The reference outputs of ``op`` (for mutants that perturb a parameter or an input), with the
    scales of that run (:class:`~posenc.registry.outputs.ReferenceOutputs`: the diagnosis's bound on
    a mutant's elements uses them)."""
    ref = reference_of(op)
    return ReferenceOutputs(ref.fn(params, inputs), lambda: ref.scales(params, inputs))



"""Helpers the kit's family modules share (not a family: discovery goes by the spec's files)."""

from __future__ import annotations

import numpy as np

from posenc.reference.rounding import bf16_round

from . import reference_of

Outputs = dict[str, np.ndarray]


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
    """The reference outputs of ``op`` (for mutants that perturb a parameter or an input)."""
    return reference_of(op).fn(params, inputs)


def round_to_dtype(x, dtype) -> np.ndarray:
    """``x`` rounded to the activation dtype (bfloat16 as torch rounds it, float16 by a NumPy
    cast: integers above 2048 lose their last bits, values above 65504 become inf), float64."""
    x = np.asarray(x, np.float64)
    if dtype == "bfloat16":
        return bf16_round(x)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float64)
    if dtype == "float32":
        return x.astype(np.float32).astype(np.float64)
    return x

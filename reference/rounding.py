"""Rounding helpers of the precision mutants (NumPy, float64 in and out)."""

from __future__ import annotations

import numpy as np


def bf16_round(x) -> np.ndarray:
    """Round to bfloat16 as torch does (via float32, then nearest-even), returned as float64."""
    f = np.asarray(x, dtype=np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def round_to_dtype(x, dtype) -> np.ndarray:
    """``x`` rounded to the activation dtype (bfloat16 as torch rounds it, float16 by a NumPy
    cast: integers above 2048 lose their last bits, values above 65504 become inf), float64."""
    x = np.asarray(x, np.float64)
    if dtype == "bfloat16":
        return bf16_round(x)
    if dtype == "float16":
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(np.float16).astype(np.float64)
    if dtype == "float32":
        return x.astype(np.float32).astype(np.float64)
    return x

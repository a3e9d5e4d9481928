"""Rounding helpers of the precision mutants (NumPy, float64 in and out)."""

from __future__ import annotations

import numpy as np


def bf16_round(x) -> np.ndarray:
    """Round to bfloat16 as torch does (via float32, then nearest-even), returned as float64."""
    f = np.asarray(x, dtype=np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)

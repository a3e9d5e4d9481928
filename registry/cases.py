"""Golden cases: the types a family registers its cases with (:func:`posenc.registry.add_cases`).

Each case: ``id``, operation, primary clause IDs, parameters and inputs.  Inputs are either
literal arrays or *generated* from the manifest seed by the stream-stable rule in
:mod:`posenc.harness.golden` (for weight tables and big tensors).  The cases themselves live
with their family (``posenc.families.<family>``); :func:`posenc.registry.all_cases` lists every
registered family's, in registration order.

Shapes are real model shapes where they matter (GPT-2 small wpe 1024 x 768, BERT-base 512 x 768
with 2 token types, OPT-125m 2050 x 768, Llama-3-8B heads, GPT-NeoX-20B, GPT-J-6B), and B, H,
T, D are distinct (q and k head counts differ, as in GQA) so that a transposed layout cannot
pass.  Vocabulary tables are small: only the position tables are under test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel


@dataclass(frozen=True)
class Gen:
    """A generated input: ``values`` are ``offset + scale * (byte - 128) / 64`` (exact in bf16
    and f16 for power-of-two ``scale``); ``ids`` are ``z mod high``."""

    shape: tuple[int, ...]
    kind: str = "values"
    scale: float = 1.0
    offset: float = 0.0
    high: int = 0

    def describe(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "shape": list(self.shape)}
        if self.kind == "values":
            d.update(scale=self.scale, offset=self.offset)
        else:
            d.update(high=self.high)
        return d


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    clauses: tuple[str, ...]
    params: BaseModel
    inputs: dict[str, Any] = field(default_factory=dict)  # name -> np.ndarray | Gen | int
    note: str = ""

    @property
    def test_id(self) -> str:
        return f"{self.id}@{'+'.join(self.clauses)}"


def pos(*rows) -> np.ndarray:
    """int64 position rows, e.g. ``pos([0, 1, 2], [7, 8, 9])``."""
    return np.asarray(rows, dtype=np.int64)


def arange_x(shape) -> np.ndarray:
    """0, 1, 2, ... in ``shape`` (hand-checkable inputs)."""
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)

"""A made-up family registered from outside the kit: spec, parameter model, reference, mutant,
golden case and check, in one module (tests/test_families.py installs it by entry point)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from posenc import families
from posenc.conformance.cases import Case, pos

HERE = Path(__file__).resolve().parent


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    dim: int = Field(gt=0)
    slope: float = 0.5


families.register_family("toy", HERE / "toy.yaml", modules=[__name__], check_modules=[__name__],
                         golden_dir=Path(os.environ.get("POSENC_TOY_GOLDEN", HERE / "golden")),
                         params_models=[ToyParams])


def _ramp(p, positions):
    return p.slope * np.asarray(positions, np.float64)[..., None] * np.arange(1, p.dim + 1)


def _scales(p, x):
    pe = np.abs(_ramp(p, x["position_ids"]))
    return {"pe": (pe, 0 * pe)}


@families.reference("toy.ramp", scales=_scales)
def ramp(p, x):
    return {"pe": _ramp(p, x["position_ids"])}


@families.mutant("toy_off_by_one", "toy.ramp")
def toy_off_by_one(op, p, x, dtype=None):
    return {"pe": _ramp(p, np.asarray(x["position_ids"]) + 1)}


families.add_cases(Case("toy-ramp-tiny", "toy.ramp", ("TOY-RAMP",), ToyParams(dim=4),
                        {"position_ids": pos([0, 1, 5], [7, 2, 3])}, "pe[0, 2] = [2.5, 5, 7.5, 10]"))


@families.check("toy_ramp_linear", invariant="ramp_linear", ops=("toy.ramp",))
def toy_ramp_linear(request, adapter, device, dtype, case):
    """Doubling every position doubles pe."""
    from posenc.conformance.checks import clauses_of
    from posenc.conformance.suite import call_adapter, fail, load_golden, require_dtype
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)

    def at(positions):
        x = adapter.from_numpy(positions, "int64", device)
        return adapter.to_numpy(adapter.toy_ramp(x, case.params, dtype=dtype, device=device)).astype(np.float64)
    one, two = call_adapter(adapter, case, dtype, cl, lambda: (at(g.inputs["position_ids"]),
                                                               at(2 * g.inputs["position_ids"])))
    if not np.allclose(two, 2 * one, rtol=1e-2):
        fail(cl, adapter, case, dtype, f"pe(2p) must equal 2 pe(p): {two[0, 0].tolist()} vs {(2 * one)[0, 0].tolist()}")

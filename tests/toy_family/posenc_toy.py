"""A made-up family registered from outside the kit: spec, parameter model, reference, mutant,
golden case, check and inference model, in one module, written against the public façades only
(``posenc.families``, ``posenc.harness.checks``; tests/test_families.py installs it by entry point and
runs it with deprecation warnings as errors).  ``tests/toy_family_0_4/`` keeps the same family as it
was written for spec 0.4.0 (its deprecated imports still work, with warnings)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from posenc import families
from posenc.families import Case, pos
from posenc.harness.checks import (Candidate, InferenceContext, call_adapter, clauses_of, fail, load_golden,
                                   require_dtype, run_op, sig)

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
    """Doubling every position doubles pe.  The adapter is called through ``run_op`` (private copies in,
    the outputs contract-checked, every call recorded: a failure is diagnosed on these calls)."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    g = load_golden(case.id)

    def at(positions):
        return run_op(adapter, "toy.ramp", case.params, {"position_ids": positions}, dtype, device)["pe"]
    one, two = call_adapter(adapter, case, dtype, cl, lambda: (at(g.inputs["position_ids"]),
                                                               at(2 * g.inputs["position_ids"])))
    one, two = one.astype(np.float64), two.astype(np.float64)
    if not np.allclose(two, 2 * one, rtol=1e-2):
        fail(cl, adapter, case, dtype, f"pe(2p) must equal 2 pe(p): {two[0, 0].tolist()} vs {(2 * one)[0, 0].tolist()}")


@families.inference("toy.ramp")
def toy_slope(ctx: InferenceContext) -> list[Candidate]:
    """A ramp of another slope: the slope fitted from the output (least squares over every element)."""
    ramp1 = _ramp(ctx.p.model_copy(update={"slope": 1.0}), ctx.x["position_ids"])
    got = ctx.out["pe"].astype(np.float64)
    slope = float((ramp1 * got).sum() / max((ramp1 * ramp1).sum(), 1e-300))
    fitted = ctx.p.model_copy(update={"slope": slope})
    return [(f"the ramp's slope is {sig(slope)} where {sig(ctx.p.slope)} is specified (TOY-RAMP)",
             lambda: ctx.ref(fitted))]

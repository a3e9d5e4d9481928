"""Broken adapters whose bugs show only in generated cases: every golden case has an integer θ, while
the generated cases draw θ from a continuous domain, so a bug that fires on a non-integer θ passes
every golden test and fails generated ones.  Loaded by path, like a user adapter."""

from __future__ import annotations

from posenc.adapters import forms_unsupported
from posenc.adapters.reference_adapter import ReferenceAdapter
from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchRope


def fractional(p) -> bool:
    """Whether ``p``'s θ is not an integer (no golden case's is)."""
    return float(p.rope_theta) != int(p.rope_theta)


class _ShiftedRope(TorchRope):
    def _cos_sin(self, position_ids):  # three positions late on every token
        return super()._cos_sin(position_ids + 3)


class FractionalThetaPath(TorchAdapter):
    """A float θ selects a path of the library that counts positions from 3 (a prefix of three tokens
    it assumes: no divergence of the spec reproduces it; the inference says "+3 on every token"), and
    its fused apply_with_cos_sin kernel takes the other pairing on that path
    (DIV-ROPE-PAIRING-SWAPPED, named)."""

    name = "broken-fractional-theta-path"

    def rope(self, params, *, dtype, device):
        forms_unsupported(params, "this library (written before spec 0.5.0's forms)")
        return (_ShiftedRope if fractional(params) else TorchRope)(params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        if fractional(params):
            params = params.model_copy(update={"pairing": "interleaved" if params.pairing == "half" else "half"})
        return super().rope_apply_with_cos_sin(q, k, cos, sin, params)


class ShiftedEverywhere(TorchAdapter):
    """Every RoPE position three late, golden cases included (no divergence names +3: inferred)."""

    name = "broken-shifted-everywhere"

    def rope(self, params, *, dtype, device):
        return _ShiftedRope(params, DTYPES[dtype], device)


class TorchFloat32Only(TorchAdapter):
    """The kit's torch port, declared for float32 only."""

    name = "torch-float32-only"
    dtypes = ("float32",)


class _TwoFailuresRope(TorchRope):
    def apply(self, q, k, position_ids):
        if self.p.rdim < self.p.head_dim:
            raise RuntimeError("partial rotary: no kernel for it")
        q2, k2 = super().apply(q, k, position_ids)
        return q2 * 1.5, k2 * 1.5


class TwoFailures(TorchAdapter):
    """Two different failures in one generated test: an exception on a partial rotary, every other
    output 1.5 times too large.  Hypothesis would report both as an ExceptionGroup; the suite reports
    the first, shrunk, with its clause and diagnosis."""
    name = "broken-two-failures"

    def rope(self, params, *, dtype, device):
        return _TwoFailuresRope(params, DTYPES[dtype], device)


class _ShiftedScaledRope(_ShiftedRope):
    def apply(self, q, k, position_ids):
        q2, k2 = super().apply(q, k, position_ids)
        return q2 * 1.25, k2 * 1.25


class ShiftedAndScaled(TorchAdapter):
    """:class:`ShiftedEverywhere`'s bug and a second one (cos and sin × 1.25): a finding of the first
    never excuses it (the inference states both)."""

    name = "broken-shifted-and-scaled"

    def rope(self, params, *, dtype, device):
        return _ShiftedScaledRope(params, DTYPES[dtype], device)


class FactorOfDefault(ReferenceAdapter):
    """The reference with attention factor 1.25 wherever rope_type is default (hostile review: read off
    bfloat16 outputs it is 1.249 to four digits; the kit says 1.25 at every dtype)."""

    name = "broken-factor-of-default"

    def compute(self, op, params, inputs, dtype, state=None):
        if op == "rope.apply" and params.rope_type == "default":
            return super().compute(op, params.model_copy(update={"attention_factor": 1.25}), inputs, dtype, None)
        return super().compute(op, params, inputs, dtype, state)

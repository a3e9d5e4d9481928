"""The NoPE family's oracle-free check: a NoPE layer returns q and k bit-identical."""

from __future__ import annotations

from posenc.harness.checks import clauses_of, identical_qk, load_golden, require_dtype

from . import check


@check("nope_identity", invariant="identity", ops=("nope.apply",))
def nope_identity(request, adapter, device, dtype, case):
    """A NoPE layer returns q and k bit-identical, for the case's positions and shifted ones."""
    require_dtype(adapter, dtype)
    identical_qk(adapter, case, dtype, device, clauses_of(request), load_golden(case.id), "nope.apply", "NoPE")

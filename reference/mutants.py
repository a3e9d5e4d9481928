"""Deprecated: the mutants by name are :func:`posenc.registry.mutants` (``[name][op]``) and
``posenc.registry.MUTANT_NAMES``.  Kept for one release (spec 0.4.x); importing it warns.

Each divergence's mutant (spec ``divergences[].mutant``) is registered by its family's module
with :func:`posenc.families.mutant`: ``fn(op, params, inputs, dtype)``.  ``MUTANTS[name][op]``
is ``(params, inputs, dtype=None) -> outputs``; :func:`run` runs one.
"""

from __future__ import annotations

import warnings

from posenc import registry as _families

warnings.warn("posenc.reference.mutants is deprecated: use run_mutant(name, op, ...) and mutants() of "
              "posenc.families (a family's modules) or posenc.registry", DeprecationWarning, stacklevel=2)

from .rounding import bf16_round  # noqa: F401  (re-exported)


def run(name: str, op: str, params, inputs, dtype=None):
    """Run mutant ``name`` for ``op``; ``None`` when the mutant has no form for that op."""
    fn = _families.mutants().get(name, {}).get(op)
    return None if fn is None else fn(params, inputs, dtype)


def __getattr__(name: str):
    if name == "MUTANTS":
        return _families.mutants()
    _families.load_modules()
    if name in _families.MUTANT_NAMES:  # the mutant functions by name, as before
        return _families.MUTANT_NAMES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

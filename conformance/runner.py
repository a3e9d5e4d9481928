"""Deprecated: ``posenc.conformance.runner`` moved to the harness, :mod:`posenc.harness.runner` (the
diagnosis: :mod:`posenc.harness.diagnosis`); a family's checks import what they need from the check
author's façade, :mod:`posenc.harness.checks`.  Kept for one release (spec 0.4.x): every name it had
still resolves; importing it warns."""

from __future__ import annotations

import warnings

from posenc.harness import runner as _moved
from posenc.harness import diagnosis as _diagnosis

warnings.warn("posenc.conformance.runner is deprecated: import from posenc.harness.checks (the check author's façade) "
              "or posenc.harness.runner", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    for module in (_moved, _diagnosis):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Deprecated: the case types moved to :mod:`posenc.families` (``Case``, ``Gen``, ``pos``, ``arange_x``;
defined in :mod:`posenc.registry.cases`), the registered cases to :func:`posenc.registry.all_cases`.
Kept for one release (spec 0.4.x); importing it warns."""

from __future__ import annotations

import warnings

from posenc import registry
from posenc.registry.cases import Case, Gen, arange_x, pos  # noqa: F401 - re-exported

warnings.warn("posenc.conformance.cases is deprecated: import Case, Gen, pos and arange_x from posenc.families "
              "(and the registered cases from posenc.registry.all_cases)", DeprecationWarning, stacklevel=2)


def all_cases() -> list[Case]:
    """Every registered family's golden cases (:func:`posenc.registry.all_cases`)."""
    return registry.all_cases()


def by_id() -> dict[str, Case]:
    return {c.id: c for c in registry.all_cases()}


def __getattr__(name: str):
    if name == "CASES":  # the registered cases, loaded on first use
        return registry.all_cases()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Named exceptions shared by the spec, the reference and the adapters.

Imports flow one way (``spec`` <- ``reference`` <- ``conformance`` and ``spec`` <-
``adapters`` <- ``conformance``), so every error a user can meet is defined here.
"""

from __future__ import annotations


class PosencError(Exception):
    """Base class of every error the kit raises on purpose."""


class SpecError(PosencError, ValueError):
    """A spec YAML file, parameter set or HF config is malformed.

    The message names the file (when there is one) and the field path, e.g.
    ``spec/rope.yaml: clauses.3.id: String should match pattern ...``.
    """


class PositionOutOfRange(PosencError, IndexError):
    """A position or table row lies outside ``[0, num_rows)`` (clause LEARNED-ROW-RANGE).

    Raised *before* indexing: never clamp to the last row, never wrap a negative row.
    Subclasses ``IndexError`` so that code catching the built-in error also catches it.
    """

    def __init__(self, rows_min: int, rows_max: int, num_rows: int, what: str = "row"):
        self.rows_min, self.rows_max, self.num_rows = int(rows_min), int(rows_max), int(num_rows)
        super().__init__(
            f"LEARNED-ROW-RANGE: {what} indices span [{self.rows_min}, {self.rows_max}] but the "
            f"table has {self.num_rows} rows (valid rows are 0..{self.num_rows - 1})"
        )


class GoldenError(PosencError):
    """A golden file is missing, tampered with (sha256 mismatch) or stale."""


class AdapterError(PosencError):
    """An adapter broke the adapter contract (wrong shape, dtype, device or type)."""


class UsageError(PosencError):
    """The user asked for something the kit cannot do here (unknown adapter, absent device)."""

"""Named exceptions shared by every room of the kit.

The spec is the bottom room (docs/architecture.md: every other room imports it, it imports none),
so every error a user can meet is defined here -- :class:`Unsupported` too, the one exception an
adapter raises to report a case it cannot express (re-exported by :mod:`posenc.adapters`).
"""

from __future__ import annotations


class Unsupported(Exception):
    """The adapter cannot express this case; ``reason`` says why.  Reported as a skip (counted, with
    the reason), never as a pass; any other exception an adapter raises is a failure."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class PosencError(Exception):
    """Base class of every error the kit raises on purpose."""


class SpecError(PosencError, ValueError):
    """A spec YAML file, parameter set or HF config is malformed.

    The message names the file (when there is one) and the field path, e.g.
    ``spec/rope.yaml: clauses.3.id: String should match pattern ...``.
    """


class DegenerateWidth(SpecError):
    """A sinusoid width the clause cannot build (clauses SIN-FAIRSEQ-POSITIONS, SIN-WHISPER).

    fairseq's and Whisper's h - 1 divisor is 0 at D = 2 (h = 1): fairseq / HF raise
    ZeroDivisionError and OpenAI's Whisper returns NaN; the spec makes it this named error,
    never NaN.  Whisper also requires an even width (odd D).  tensor2tensor (SIN-T2T) clamps
    the divisor to 1 instead and is not affected.
    """

    def __init__(self, clause: str, dim: int, why: str):
        self.clause, self.dim = clause, int(dim)
        super().__init__(f"{clause}: width D = {self.dim} is degenerate: {why}")


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


class KitError(GoldenError):
    """The kit's own code failed while judging a run (a kit bug, never the adapter's failure: reported
    as a kit error, as a broken golden is)."""


class AdapterError(PosencError):
    """An adapter broke the adapter contract (wrong shape, dtype, device or type)."""


class UsageError(PosencError):
    """The user asked for something the kit cannot do here (unknown adapter, absent device)."""


#: The most characters of an exception's text a message quotes (its start and its end): an adapter that
#: raises with 50 MB of text gets a few KB in every failure, not 50 MB each.
EXCEPTION_TEXT_LIMIT = 4000


def exception_text(e: BaseException) -> str:
    """``str(e)``, clipped to :data:`EXCEPTION_TEXT_LIMIT` characters (the start and the end, the number
    cut said between), or a note naming its type when its ``__str__`` itself raises (anything, even
    ``SystemExit``): an adapter's exception must never escape the report that describes it."""
    try:
        text = str(e)
    except BaseException:  # noqa: BLE001 - a hostile __str__ (SystemExit, KeyboardInterrupt ...)
        return f"<{type(e).__name__} whose str() raised>"
    if len(text) <= EXCEPTION_TEXT_LIMIT:
        return text
    head, tail = EXCEPTION_TEXT_LIMIT * 3 // 4, EXCEPTION_TEXT_LIMIT // 4
    return f"{text[:head]} [... {len(text) - head - tail} characters cut ...] {text[-tail:]}"


def printable(text: str) -> str:
    """``text`` with each character that is not printable (ESC, a newline, a bidi control, a line separator
    ...) written as its Python escape: text quoted from a file or an argument cannot colour a terminal,
    clear it, reverse a line or forge a line of a report."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)

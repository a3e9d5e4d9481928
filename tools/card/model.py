"""What a card holds: its parameters with their provenance, the clauses that apply and their status,
the figures of each positional component (:class:`Card` and its parts), and the card's slug.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from posenc.harness.failure_plots import EXTRA  # the extra that installs matplotlib and Sphinx
from posenc.spec.errors import PosencError
from posenc.tools.card.text import _slug

MATPLOTLIB_MISSING = f"matplotlib is not installed: pip install '{EXTRA}'"


class MissingExtra(PosencError):
    """An optional dependency (an extra of the package) is not installed."""


@dataclass
class Param:
    """One spec parameter: its value, where it came from, and the clauses that define it."""

    name: str
    value: Any
    provenance: str
    defined_by: tuple[str, ...] = ()


@dataclass
class ClauseInfo:
    """One clause that applies: why, its sources (papers first), each implementation's status
    (``None``: no conformance matrix available)."""

    id: str
    title: str
    why: str
    sources: tuple[str, ...] = ()
    statuses: Optional[list] = None


@dataclass
class PairRow:
    """One RoPE pair (frequency index ``index``): inverse frequency and wavelength (2 pi / inv_freq,
    tokens) without and with the rope_type's scaling."""

    index: int
    inv_freq: float
    wavelength: float
    scaled_inv_freq: float
    scaled_wavelength: float


@dataclass
class TurnCount:
    """How many pairs never complete a turn (wavelength > length) within ``length`` tokens."""

    label: str
    length: int
    unscaled: int
    scaled: int
    unscaled_pairs: tuple[int, ...]
    scaled_pairs: tuple[int, ...]


@dataclass
class EndAngle:
    """The angle (radians) at position ``position`` (the last of a context) of the fastest
    (pair 0) and slowest (last rotating) pair, without and with scaling."""

    label: str
    position: int
    fastest_unscaled: float
    slowest_unscaled: float
    fastest_scaled: float
    slowest_scaled: float


@dataclass
class YarnRamp:
    """SCALE-YARN-RAMP in pair indices: the ramp is 0 (pairs kept, extrapolated) up to ``low``
    and 1 (pairs divided by the factor, interpolated) from ``high``; ``raw_low`` / ``raw_high``
    are the correction dims before truncation."""

    beta_fast: float
    beta_slow: float
    truncate: bool
    low: float
    high: float
    raw_low: float
    raw_high: float
    kept: tuple[int, ...]
    blended: tuple[int, ...]
    divided: tuple[int, ...]
    factor: float


@dataclass
class Llama3Band:
    """SCALE-LLAMA3 in pair indices: wavelengths below ``high_freq_wavelen`` kept, above
    ``low_freq_wavelen`` divided by the factor, the smoothing band in between."""

    low_freq_wavelen: float
    high_freq_wavelen: float
    kept: tuple[int, ...]
    band: tuple[int, ...]
    divided: tuple[int, ...]
    factor: float


@dataclass
class RopeFigures:
    rope_type: str
    rotary_dim: int
    pairs: list[PairRow]
    scaled: bool
    seq_len: Optional[int]
    attention_factor: float
    context: Optional[int]
    context_source: str
    original_context: Optional[int]
    turns: list[TurnCount]
    end_angles: list[EndAngle]
    yarn: Optional[YarnRamp] = None
    llama3: Optional[Llama3Band] = None
    #: scaled RoPE: the context the scaling reaches, ``max(factor x original, context)`` (dynamic:
    #: factor x max_position_embeddings), where it is larger than the context and the original
    extended_context: Optional[int] = None
    extended_source: str = ""


@dataclass
class LearnedTable:
    """A learned table: rows x dim parameters; ``positions``: the positions it covers (the
    reference's position -> row rule, rows within the table)."""

    name: str
    rows: int
    dim: int
    parameters: int
    positions: Optional[int]
    note: str = ""


@dataclass
class BucketRange:
    """A T5 bucket and the relative positions (key - query) it holds; ``None`` bounds are open
    (the bucket continues to -inf / +inf); ``lo is None and hi is None and not used``: never read."""

    bucket: int
    lo: Optional[int]
    hi: Optional[int]
    used: bool
    kind: str  # "exact" | "log" | "unused"


@dataclass
class Component:
    """One parameter set of the model (``rope``, ``rope.full_attention``, ``embeddings``, ...)."""

    key: str
    family: str
    params_model: str
    params: Any
    parameters: list[Param]
    clauses: list[ClauseInfo]
    rope: Optional[RopeFigures] = None
    tables: list[LearnedTable] = field(default_factory=list)
    slopes: Optional[list[float]] = None
    buckets: Optional[list[BucketRange]] = None
    notes: list[str] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return _slug(self.key)


@dataclass
class PlotSpec:
    filename: str
    title: str
    component: str
    kind: str  # wavelengths | inv_freq | alibi_slopes | t5_buckets




"""``posenc card``: a positional-encoding card of one model.

A card gathers what a reviewer asks of a model's positions: the family and every spec parameter
with its provenance (the config key it was read from, the library default, the registry's
source), the clauses that apply (with their papers) and each wrapped implementation's status on
them (:func:`posenc.conformance.matrix_status.clause_status`), and the figures: learned tables'
parameter counts, the wavelength of every RoPE pair against the context, the pairs that never
complete a turn, the YaRN ramp and the llama3 band in pair indices, the angle reached at the end
of the context with and without scaling, the ALiBi slopes, the T5 bucket map.  Every figure is
computed by the kit's float64 reference (:mod:`posenc.reference`), so the card shows what the
spec says, not a second derivation.

Sources (:func:`build_card`): a Hugging Face ``config.json`` (read by the config import,
:mod:`posenc.spec.hf_config`, which records the provenance), a registry model name
(``spec/registry/models.yaml``: the entry's parameters and sources), or ``hf:<model_type>``
(the transformers config class's defaults, through the same import).

Output: Markdown (:meth:`Card.to_markdown`), reStructuredText for the site
(:meth:`Card.to_rst`) and PNG plots (:meth:`Card.write_plots`; matplotlib, the ``[docs]`` extra).

Every string from outside the kit (the config's name, model_type, keys, values, the provenance
and notes built from them, registry text, the path) is plain text in both outputs: one line,
every character that could start Markdown markup or raw HTML backslash-escaped, every ASCII
punctuation character backslash-escaped in RST (no directive, role, reference or link can be
made of it); the card's file names are slugs (``[a-z0-9.-]``, at most :data:`MAX_SLUG` characters).

Scaled RoPE (yarn, llama3, longrope, dynamic) gets its turn counts and end angles at the context,
the original context and the extended context (factor x original, or the context where larger;
dynamic: factor x max_position_embeddings), each labelled.  A context read from the config may be
an integral float (``128.0``); a fraction or a non-number is an error naming the key, never a
fallback to the class default.  Sizes a card computes over are bounded (:data:`MAX_HEAD_DIM`,
:data:`MAX_HEADS`, :data:`MAX_T5`, :data:`MAX_TABLE_ROWS`, :data:`MAX_LENGTH`: an error naming
the field), and a table of more than :data:`MAX_ROWS` rows is summarised (first and last rows and
the rows at each boundary).

``posenc card`` (:func:`main`) writes into ``--out DIR`` (default ``posenc-card-<name>``) only where
DIR is new, empty or a previous card's output (it holds :data:`OUT_MARKER`, which every card output
gets); an existing other folder or a file is an error.  Without matplotlib the card is still made,
in both formats: the Markdown or the HTML page without plots, with a note (and a warning on stderr)
that plots need ``pip install 'posenc-conformance[docs]'``; :meth:`Card.write_plots` itself raises
:class:`MissingExtra`.  The HTML page also needs Sphinx (the same extra): without it, an error.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from posenc.spec.errors import PosencError, SpecError

from .failure_plots import EXTRA  # the extra that installs matplotlib and Sphinx

MATPLOTLIB_MISSING = f"matplotlib is not installed: pip install '{EXTRA}'"


class MissingExtra(PosencError):
    """An optional dependency (an extra of the package) is not installed."""


# ---------------------------------------------------------------------------------------------
# the card's data
# ---------------------------------------------------------------------------------------------


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


@dataclass
class Card:
    """A positional-encoding card (see the module docstring).  ``name``: a file-safe slug."""

    name: str
    title: str
    source: str
    kind: str  # "config" | "registry" | "hf-defaults"
    model_type: Optional[str]
    rule: str
    components: list[Component]
    notes: list[str]
    matrix_available: bool
    sources: list[str] = field(default_factory=list)
    model_scenarios: list[tuple[str, str, Any]] = field(default_factory=list)
    #: set by :meth:`without_plots`: the card has no plots, and this note says why
    plot_note: Optional[str] = None

    def without_plots(self, note: str) -> "Card":
        """This card without its plots (no image referenced, nothing to draw), ``note`` said in
        their place: the text card where matplotlib is not installed."""
        import dataclasses
        return dataclasses.replace(self, plot_note=note)

    # -- plots -------------------------------------------------------------------------------
    def plots(self) -> list[PlotSpec]:
        """The plots this card has (what :meth:`write_plots` writes), in order."""
        out = []
        if self.plot_note is not None:
            return out
        for c in self.components:
            base = f"{self.name}-{c.slug}"
            if c.rope is not None:
                out.append(PlotSpec(f"{base}-wavelengths.png", f"{c.key}: wavelength per pair", c.key, "wavelengths"))
                if c.rope.scaled:
                    out.append(PlotSpec(f"{base}-inv-freq.png", f"{c.key}: inverse frequencies, scaled and unscaled",
                                        c.key, "inv_freq"))
            if c.slopes is not None:
                out.append(PlotSpec(f"{base}-alibi-slopes.png", f"{c.key}: ALiBi slope per head", c.key,
                                    "alibi_slopes"))
            if c.buckets is not None:
                out.append(PlotSpec(f"{base}-t5-buckets.png", f"{c.key}: T5 bucket by relative position", c.key,
                                    "t5_buckets"))
        return out

    def write_plots(self, directory: Union[str, Path]) -> list[Path]:
        """Write the card's PNG plots into ``directory`` (created); their paths.  Raises
        :class:`MissingExtra` when matplotlib (the ``[docs]`` extra) is not installed."""
        specs = self.plots()
        if not specs:
            return []
        plt = _pyplot()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        comps = {c.key: c for c in self.components}
        written = []
        for s in specs:
            fig = _draw(plt, s, comps[s.component], self)
            path = directory / s.filename
            fig.savefig(path, dpi=100)
            plt.close(fig)
            written.append(path)
        return written

    # -- text --------------------------------------------------------------------------------
    def blocks(self, plot_prefix: str = "") -> list[tuple]:
        return _blocks(self, plot_prefix)

    def to_markdown(self, plot_prefix: str = "") -> str:
        """The card in Markdown; plots referenced as ``plot_prefix + filename``."""
        return _render_md(self.blocks(plot_prefix))

    def to_rst(self, plot_prefix: str = "") -> str:
        """The card in reStructuredText (a Sphinx page): list-tables, ``.. image::``."""
        return _render_rst(self.blocks(plot_prefix))


# ---------------------------------------------------------------------------------------------
# building a card
# ---------------------------------------------------------------------------------------------


#: a slug (the card's file names) is cut at this many characters
MAX_SLUG = 80


def _slug(text: str) -> str:
    """A file-safe name: lower-case ASCII letters, digits, ``.`` and ``-`` only (no ``/``, no
    leading dot, no ``..`` alone), at most :data:`MAX_SLUG` characters."""
    s = re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-.")
    s = re.sub(r"\.{2,}", ".", s)[:MAX_SLUG].strip("-.")
    return s or "model"


@lru_cache(maxsize=1)
def _spec():
    from posenc.spec import load_spec
    return load_spec()


def _clause_sources(clause) -> tuple[str, ...]:
    order = {"paper": 0}
    out = []
    for s in sorted(clause.sources, key=lambda s: order.get(s.kind, 1)):
        where = f", {s.location}" if s.location else ""
        out.append(f"{s.citation}{where} [{s.provenance}]")
    return tuple(out)


def _param_clauses(name: str, clause_ids) -> tuple[str, ...]:
    spec = _spec()
    return tuple(cid for cid in clause_ids if cid in spec.clauses
                 and any(p.name == name for p in spec.clauses[cid].parameters))


def _clause_infos(pairs: list[tuple[str, str]]) -> list[ClauseInfo]:
    from .matrix_status import clause_status
    spec = _spec()
    out, seen = [], set()
    for cid, why in pairs:
        if cid in seen or cid not in spec.clauses:
            continue
        seen.add(cid)
        c = spec.clauses[cid]
        out.append(ClauseInfo(cid, c.title, why, _clause_sources(c), clause_status(cid)))
    return out


_SCALE_CLAUSES = {
    "linear": (("SCALE-LINEAR", "rope_type linear"),),
    "dynamic": (("SCALE-DYNAMIC-NTK", "rope_type dynamic"),),
    "yarn": (("SCALE-YARN-RAMP", "rope_type yarn"), ("SCALE-YARN-FACTOR", "rope_type yarn"),
             ("SCALE-YARN-ATTENTION-FACTOR", "rope_type yarn")),
    "llama3": (("SCALE-LLAMA3", "rope_type llama3"),),
    "longrope": (("SCALE-LONGROPE-FACTORS", "rope_type longrope"),
                 ("SCALE-LONGROPE-ATTENTION-FACTOR", "rope_type longrope")),
    "proportional": (("SCALE-PROPORTIONAL", "rope_type proportional"),),
}


def _rope_clauses(p) -> list[tuple[str, str]]:
    cl = [("ROPE-INV-FREQ", "every RoPE set"), ("ROPE-ANGLE", "every RoPE set"),
          ("ROPE-PRECISION", "every RoPE set"), (f"ROPE-PAIR-{p.pairing.upper()}", f"pairing {p.pairing}")]
    if p.rdim < p.head_dim:
        cl.append(("ROPE-PARTIAL", f"rotary_dim {p.rdim} < head_dim {p.head_dim}"))
    if p.rotation == "negative":
        cl.append(("ROPE-ROTATION-NEGATIVE", "rotation negative"))
    if p.attention_factor is not None or p.rope_type in ("yarn", "longrope"):
        cl.append(("ROPE-ATTENTION-FACTOR", "an attention factor other than 1 may apply"))
    cl += list(_SCALE_CLAUSES.get(p.rope_type, ()))
    if p.rope_type == "dynamic":
        cl.append(("SCALE-DYNAMIC-GROW", "dynamic_policy grow_until_reset") if p.dynamic_policy == "grow_until_reset"
                  else ("SCALE-DYNAMIC-PER-CALL", "dynamic_policy per_call (default)"))
    return cl


def _clauses_of(p) -> list[tuple[str, str]]:
    """``(clause, why)`` of the clauses that apply to a parameter model."""
    name = type(p).__name__
    if name == "RopeParams":
        return _rope_clauses(p)
    if name == "MRopeParams":
        cl = [({"contiguous": "MROPE-SECTIONS", "interleaved": "MROPE-INTERLEAVED",
                "hw_alternating": "MROPE-HW-ALTERNATING"}[p.layout], f"layout {p.layout}"),
              ("MROPE-TEXT-REDUCES", "text tokens (equal positions on the three axes)")]
        if p.pairing == "interleaved":
            cl.append(("MROPE-PAIR-INTERLEAVED", "pairing interleaved"))
        if p.rdim < p.head_dim:
            cl.append(("MROPE-PARTIAL", f"rotary_dim {p.rdim} < head_dim {p.head_dim}"))
        if p.rope_type != "default":
            cl += [("MROPE-ROPE-TYPE", f"rope_type {p.rope_type}"), ("MROPE-ATTENTION-SCALING", "scaled rope_type")]
            cl += list(_SCALE_CLAUSES.get(p.rope_type, ()))
        return cl + [("ROPE-INV-FREQ", "the frequencies of MRopeParams.rope")]
    if name in ("GPT2EmbeddingParams",):
        return [("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-GPT2-SUM", "GPT-2 embeddings"),
                ("LEARNED-GPT2-POSITIONS", "GPT-2 default positions")]
    if name == "BertEmbeddingParams":
        return [("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-BERT-SUM", "BERT embeddings"),
                ("LEARNED-BERT-TOKEN-TYPE", "token type table"), ("LEARNED-BERT-POSITIONS", "BERT default positions")]
    if name == "RobertaEmbeddingParams":
        return [("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-BERT-SUM", "BERT's sum and LayerNorm"),
                ("LEARNED-BERT-TOKEN-TYPE", "token type table"),
                ("LEARNED-ROBERTA-POSITIONS", "padding-aware rows")]
    if name == "OPTEmbeddingParams":
        return [("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-OPT-POSITIONS", "positions from the mask"),
                ("LEARNED-OPT-OFFSET", "row = position + 2")]
    if name == "BartEmbeddingParams":
        return [("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-BART-POSITIONS", "row = position + 2")]
    if name == "LookupParams":
        return [("LEARNED-ROW-RANGE", "learned table")]
    if name == "AlibiParams":
        cl = [("ALIBI-SLOPES", f"{p.num_heads} heads"), (f"ALIBI-{p.form.upper()}", f"form {p.form}")]
        if p.form in ("causal", "mpt", "bloom"):
            cl.append(("ALIBI-ROW-CONSTANT", "a causal form"))
        return cl
    if name == "T5Params":
        return [("T5-BUCKET-BIDIRECTIONAL" if p.bidirectional else "T5-BUCKET-CAUSAL",
                 "bidirectional (encoder)" if p.bidirectional else "causal (decoder)"), ("T5-BIAS", "the bias table")]
    if name == "SinusoidalParams":
        main = {"vaswani": f"SIN-VASWANI-{p.layout.upper()}", "t2t": "SIN-T2T", "fairseq": "SIN-FAIRSEQ-POSITIONS",
                "whisper": "SIN-WHISPER"}[p.variant]
        cl = [(main, f"variant {p.variant}")]
        if p.variant == "fairseq":
            cl.append(("SIN-T2T", "the fairseq table is the t2t table"))
        return cl + [("SIN-PRECISION", "every sinusoid table")]
    if name == "NopeParams":
        return [("NOPE-LAYER-FLAGS", "per-layer RoPE flags"), ("NOPE-IDENTITY", "the layers without RoPE")]
    if name == "QueryScaleParams":
        return [("QSCALE-MISTRAL" if p.form == "mistral" else "QSCALE-LLAMA4", f"form {p.form}"),
                ("QSCALE-POSITIONS", "the scale's positions")]
    if name == "AxialRopeParams":
        cl = [("AXIAL-FREQUENCIES-ALTERNATING" if p.frequencies == "alternating" else "AXIAL-FREQUENCIES",
               f"frequencies {p.frequencies}"),
              ({"split": "AXIAL-SPLIT", "blocks": "AXIAL-BLOCKS", "interleaved": "AXIAL-INTERLEAVED",
                "alternate": "AXIAL-ALTERNATE"}[p.layout], f"layout {p.layout}"), ("AXIAL-RELATIVE", "2-D RoPE")]
        if p.order != tuple(range(p.num_axes)):
            cl.append(("AXIAL-AXIS-ORDER", f"axis order {p.order}"))
        if p.rdim < p.head_dim:
            cl.append(("AXIAL-PARTIAL", "partial rotary"))
        if p.coordinates == "centred":
            cl.append(("AXIAL-COORDINATES-CENTRED", "centred coordinates"))
        return cl
    return []


_FAMILY = {"RopeParams": "rope", "MRopeParams": "mrope", "AxialRopeParams": "axial", "AlibiParams": "alibi",
           "T5Params": "t5", "SinusoidalParams": "sinusoidal", "NopeParams": "nope", "QueryScaleParams": "query_scale",
           "GPT2EmbeddingParams": "learned", "BertEmbeddingParams": "learned", "OPTEmbeddingParams": "learned",
           "RobertaEmbeddingParams": "learned", "BartEmbeddingParams": "learned", "LookupParams": "learned"}


# -- figures, all from posenc.reference -----------------------------------------------------------


def _unscaled(p):
    """The same RoPE without its scaling (proportional keeps its pair layout, factor 1)."""
    from posenc.spec.models import RopeParams
    keep = {"head_dim": p.head_dim, "rotary_dim": p.rotary_dim, "rope_theta": p.rope_theta, "pairing": p.pairing,
            "rotation": p.rotation}
    if p.rope_type == "proportional":
        keep["rope_type"] = "proportional"
    return RopeParams(**keep)


def _wavelengths(inv: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(inv > 0, 2 * math.pi / np.where(inv > 0, inv, 1.0), np.inf)


def _extended(p, context: Optional[int], original: Optional[int]) -> tuple[Optional[int], str]:
    """The context a scaled RoPE reaches: ``max(factor x original, context)`` for yarn, llama3
    and longrope (the config's max_position_embeddings where it is the larger), factor x
    max_position_embeddings for dynamic; ``(None, why)`` where neither is known (linear: no
    original context in its parameters)."""
    f = getattr(p, "factor", None)
    mpe = getattr(p, "max_position_embeddings", None)
    def times(x, n):  # an int, or the float itself where it is beyond any bound (no overflow)
        y = float(x) * float(n)
        return int(round(y)) if math.isfinite(y) and y < 1e30 else y

    if p.rope_type == "dynamic" and f and mpe:
        return times(f, mpe), f"factor {f:g} x max_position_embeddings {mpe:,}"
    if p.rope_type in ("yarn", "llama3", "longrope") and original:
        cands = []
        if f:
            cands.append((times(f, original), f"factor {f:g} x original {original:,}"))
        for n, src in ((context, "the context"), (mpe, "max_position_embeddings")):
            if n:
                cands.append((n, src))
        n, src = max(cands, key=lambda c: c[0]) if cands else (None, "")
        return n, src
    if p.rope_type == "linear":
        return None, "linear scaling states no original context: the extended context is not derived"
    return None, ""


def _rope_figures(p, context: Optional[int], context_source: str) -> RopeFigures:
    from posenc.reference import rope as rref
    from posenc.reference import rope_scaling as rs
    base = _unscaled(p)
    scaled = p.rope_type not in ("default",) and not (p.rope_type == "proportional" and not p.factor)
    original = getattr(p, "original_max_position_embeddings", None)
    extended, ext_src = _extended(p, context, original) if scaled else (None, "")
    seq_len = None
    if p.rope_type == "dynamic":  # the frequencies at the longest length the card considers
        seq_len = max(context or 0, extended or 0)
    elif p.rope_type == "longrope":
        seq_len = context or p.max_position_embeddings or p.original_max_position_embeddings
    inv0, _ = rref.inv_freq(base, seq_len)
    inv1, af = rref.inv_freq(p, seq_len)
    wl0, wl1 = _wavelengths(inv0), _wavelengths(inv1)
    pairs = [PairRow(i, float(inv0[i]), float(wl0[i]), float(inv1[i]), float(wl1[i])) for i in range(len(inv0))]
    lengths = []
    if context:
        lengths.append(("context (= original)" if context == original else "context", context))
    if original and original != context:
        lengths.append(("original context", original))
    if extended and extended not in (context, original):
        lengths.append(("extended context", extended))
    turns = [TurnCount(label, n, int(np.sum(wl0 > n)), int(np.sum(wl1 > n)),
                       tuple(int(i) for i in np.nonzero(wl0 > n)[0]), tuple(int(i) for i in np.nonzero(wl1 > n)[0]))
             for label, n in lengths]
    rotating = [i for i in range(len(inv0)) if inv0[i] > 0] or [0]
    slow = rotating[-1]
    ends = []
    for label, n in lengths:
        pos = np.asarray([[n - 1]], dtype=np.int64)
        a0 = rref.angles(pos, base)[0, 0]  # ROPE-ANGLE: position x inv_freq
        if p.rope_type == "dynamic":  # at the card's seq_len (the call's longest position), not at n
            pos = np.asarray([[n - 1, seq_len - 1]], dtype=np.int64)
        a1 = rref.angles(pos, p)[0, 0]
        ends.append(EndAngle(label, n - 1, float(a0[0]), float(a0[slow]), float(a1[0]), float(a1[slow])))
    fig = RopeFigures(p.rope_type, p.rdim, pairs, scaled, seq_len, float(af), context, context_source, original,
                      turns, ends, extended_context=extended, extended_source=ext_src)
    if p.rope_type == "yarn":
        low, high = rs.yarn_correction_range(p)
        raw_low, raw_high = rs.yarn_correction_range(p.model_copy(update={"truncate": False}))
        idx = np.arange(len(inv0))
        hi = high + 0.001 if low == high else high  # the reference's own guard (rope_scaling.yarn)
        kept = tuple(int(i) for i in idx[idx <= low])
        divided = tuple(int(i) for i in idx[idx >= hi])
        blended = tuple(int(i) for i in idx if low < i < hi)
        fig.yarn = YarnRamp(p.beta_fast or 32.0, p.beta_slow or 1.0, p.truncate is None or p.truncate, low, high,
                            raw_low, raw_high, kept, blended, divided, rs.yarn_factor(p))
    if p.rope_type == "llama3":
        L = p.original_max_position_embeddings
        low_wl, high_wl = L / p.low_freq_factor, L / p.high_freq_factor  # SCALE-LLAMA3's bounds
        kept = tuple(int(i) for i in np.nonzero(wl0 < high_wl)[0])
        divided = tuple(int(i) for i in np.nonzero(wl0 > low_wl)[0])
        band = tuple(int(i) for i in np.nonzero((wl0 >= high_wl) & (wl0 <= low_wl))[0])
        fig.llama3 = Llama3Band(low_wl, high_wl, kept, band, divided, p.factor)
    return fig


def _learned_tables(p) -> list[LearnedTable]:
    from posenc.reference import learned, position_ids as posref
    name = type(p).__name__

    def covered(rows_of, n):  # positions 0..n-1 whose row (the reference's rule) lies in the table
        return int(np.sum(np.asarray(rows_of(n)).reshape(-1) < n))

    if name == "GPT2EmbeddingParams":
        n, d = p.n_positions, p.n_embd
        return [LearnedTable("wpe", n, d, n * d, covered(lambda k: posref.decode(1, k, 0), n),
                             "row = position (LEARNED-GPT2-POSITIONS)")]
    if name == "BertEmbeddingParams":
        n, d = p.max_position_embeddings, p.hidden_size
        return [LearnedTable("position_embeddings", n, d, n * d, covered(lambda k: posref.decode(1, k, 0), n),
                             "row = position"),
                LearnedTable("token_type_embeddings", p.type_vocab_size, d, p.type_vocab_size * d, None,
                             "not positional; summed with it (LEARNED-BERT-SUM)")]
    if name == "RobertaEmbeddingParams":
        n, d = p.max_position_embeddings, p.hidden_size
        ids = lambda k: learned.roberta_positions(np.full((1, k), p.padding_idx + 1), p.padding_idx)  # noqa: E731
        return [LearnedTable("position_embeddings", n, d, n * d, covered(ids, n),
                             f"rows start at padding_idx + 1 = {p.padding_idx + 1}; row {p.padding_idx} is the pad's"),
                LearnedTable("token_type_embeddings", p.type_vocab_size, d, p.type_vocab_size * d, None, "not positional")]
    if name == "OPTEmbeddingParams":
        n, d = p.num_rows, p.hidden_size
        return [LearnedTable("embed_positions", n, d, n * d,
                             covered(lambda k: learned.opt_rows(np.arange(k)), n),
                             f"max_position_embeddings {p.max_position_embeddings} + an offset of "
                             f"{learned.OPT_OFFSET} rows (row = position + {learned.OPT_OFFSET}, LEARNED-OPT-OFFSET)")]
    if name == "BartEmbeddingParams":
        n, d = p.num_rows, p.hidden_size
        return [LearnedTable("embed_positions", n, d, n * d, covered(lambda k: learned.bart_rows(1, k), n),
                             f"max_position_embeddings {p.max_position_embeddings} + an offset of "
                             f"{learned.BART_OFFSET} rows (LEARNED-BART-POSITIONS)")]
    if name == "LookupParams":
        return [LearnedTable("table", p.num_rows, p.dim, p.num_rows * p.dim, p.num_rows, "row = position")]
    return []


def _t5_buckets(p) -> list[BucketRange]:
    from posenc.reference import t5
    R = 4 * p.max_distance
    rel = np.arange(-R, R + 1)
    b = t5.buckets(rel, p)
    nb = p.num_buckets // 2 if p.bidirectional else p.num_buckets
    exact = nb // 2
    order = np.argsort(b, kind="stable")  # one pass: each bucket's smallest and largest relative position
    bs, rs_ = b[order], rel[order]
    ks, starts = np.unique(bs, return_index=True)
    spans = dict(zip(ks.tolist(), zip(np.minimum.reduceat(rs_, starts).tolist(),
                                      np.maximum.reduceat(rs_, starts).tolist())))
    out = []
    for k in range(p.num_buckets):
        if k not in spans:
            out.append(BucketRange(k, None, None, False, "unused"))
            continue
        lo, hi = int(spans[k][0]), int(spans[k][1])
        kind = "exact" if (k % nb if p.bidirectional else k) < exact else "log"
        out.append(BucketRange(k, None if lo == -R else lo, None if hi == R else hi, True, kind))
    return out


# -- provenance -------------------------------------------------------------------------------------

_ALIASES = {"rope_theta": ("rope_theta", "rotary_emb_base"), "head_dim": ("head_dim", "qk_rope_head_dim"),
            "max_position_embeddings": ("max_position_embeddings", "n_positions")}
_ROPE_DICT_FIELDS = {"rope_theta", "rope_type", "factor", "original_max_position_embeddings", "attention_factor",
                     "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate", "low_freq_factor",
                     "high_freq_factor", "short_factor", "long_factor"}


def _rope_provenance(name: str, value, label: str, cfg: dict, rope_dict: dict, rope_key: str, prov: dict,
                     source: str, prefix: str) -> str:
    if f"{label}{name}" in prov:
        return prov[f"{label}{name}"]
    if name == "rope_type":
        for k in ("rope_type", "type"):
            if rope_dict.get(k) is not None:
                return f"config: {prefix}{rope_key}.{k}"
        return prov.get("rope_parameters", "no rope_type in the config: default")
    if name in _ROPE_DICT_FIELDS and name in rope_dict:
        return f"config: {prefix}{rope_key}.{name}"
    for k in _ALIASES.get(name, (name,)):
        if cfg.get(k) is not None:
            if name == "original_max_position_embeddings" and rope_dict.get(name) is None:
                return f"config: {prefix}{k} (top level; transformers' standardize_rope_params reads it first)"
            return f"config: {prefix}{k}"
    if name == "original_max_position_embeddings":
        return (f"not stated: max_position_embeddings ({prov.get('max_position_embeddings', 'config')}), as "
                f"transformers' standardize_rope_params fills it")
    if name == "head_dim":
        hid = next((k for k in ("hidden_size", "n_embd", "d_model") if k in cfg), None)
        heads = next((k for k in ("num_attention_heads", "n_head", "n_heads") if k in cfg), None)
        if hid and heads:
            return f"config: {prefix}{hid} / {prefix}{heads}"
        return prov.get("head_dim", f"the import rule ({source})")
    if name == "rotary_dim":
        for k in ("rotary_dim", "partial_rotary_factor", "rotary_pct"):
            if cfg.get(k) is not None or rope_dict.get(k) is not None:
                return f"head_dim x config: {prefix}{k}" if k != "rotary_dim" else f"config: {prefix}{k}"
        return prov.get(f"{label}partial_rotary_factor", f"head_dim x the model's partial_rotary_factor ({source})")
    if name == "dynamic_policy":
        return "grow_until_reset: what transformers' dynamic_rope_update does (the import's rule)"
    if name in _ROPE_DICT_FIELDS and "rope_parameters" in prov:
        return prov["rope_parameters"]
    return f"the import rule ({source})"


def _rope_dict_of(cfg: dict, layer: str) -> tuple[dict, str]:
    key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    d = cfg.get(key) or {}
    if layer != "all_layers" and isinstance(d.get(layer), dict):
        return d[layer], f"{key}.{layer}"
    return (d if isinstance(d, dict) else {}), key


def _fields(p) -> list[tuple[str, Any]]:
    out = []
    for k, v in p.model_dump(mode="json").items():
        if v is None:
            continue
        if isinstance(v, list) and len(v) > 8:
            v = f"[{', '.join(f'{x:.4g}' for x in v[:4])}, ... ({len(v)} entries)]"
        out.append((k, v))
    return out


def _length(v, field: str) -> Optional[int]:
    """A context length read from a config: an int, or a float with an integral value (JSON writes
    ``128.0``; the config import's pydantic models take it as 128); ``None`` for null.  Anything
    else (a fraction, a string, a bool, <= 0) is :class:`SpecError` naming ``field``: the card
    never falls back to a default when the config states the key."""
    if v is None:
        return None
    if isinstance(v, float) and not isinstance(v, bool) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        what = "a fractional number" if isinstance(v, float) and math.isfinite(v) else type(v).__name__
        raise SpecError(f"config.json: {field}: expected a positive integer (a context length), got {what} {v!r} "
                        f"(the config import refuses a fractional length where the rope type reads it)")
    return v


def _context_of(cfg: dict, row: Optional[dict], prov: dict, prefix: str) -> tuple[Optional[int], str]:
    for k in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = _length(cfg.get(k), f"{prefix}{k}")
        if v is not None:
            return v, f"config: {prefix}{k}"
    cls = (row or {}).get("config_class", "the config class")
    try:
        v = _length(((row or {}).get("defaults") or {}).get("max_position_embeddings"), "max_position_embeddings")
    except SpecError:
        v = None  # the table's default, not the config's: no card error for it
    if v is not None:
        return v, f"max_position_embeddings: {cls} default"
    return None, "no max_position_embeddings in the config"


def _config_name(path: Path, config: dict) -> tuple[str, str]:
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return _slug(named.split("/")[-1]), named
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return _slug(stem), stem


def _rewrite(e: SpecError, label: str) -> SpecError:
    """The import's ``config.json: field: ...`` with the file it was."""
    msg = str(e)
    if msg.startswith("config.json: "):
        return SpecError(f"{label}: {msg.removeprefix('config.json: ')}")
    if msg.startswith("config.json"):
        return SpecError(f"{label}{msg.removeprefix('config.json')}")
    return SpecError(msg if label in msg else f"{label}: {msg}")


#: bounds on what a card computes in proportion to a parameter (a config may say anything)
MAX_HEAD_DIM = 65536
MAX_HEADS = 65536
MAX_T5 = 65536
MAX_TABLE_ROWS = 1 << 22
MAX_LENGTH = 1 << 53  # positions exact in float64
#: tables (per pair, per head, per bucket) longer than this are summarised
MAX_ROWS = 256
_EDGE_ROWS = 8


def _where(parameters: list[Param], name: str, fallback: Optional[str] = None) -> str:
    """The config field a parameter came from (its provenance ``config: <key>``), else its name."""
    prov = next((p.provenance for p in parameters if p.name == name), "")
    if prov.startswith("config: "):
        return prov.removeprefix("config: ").split(" (")[0]
    return fallback or name


def _check_bounds(p, parameters: list[Param], context: Optional[int], context_source: str) -> None:
    """:class:`SpecError` naming the field where a figure would be computed over an absurd size."""
    name = type(p).__name__
    checks = []  # (field, parameter, value, limit, why)
    rope = p.rope if name == "MRopeParams" else p if name == "RopeParams" else None
    if rope is not None:
        checks.append((_where(parameters, "head_dim"), "head_dim", rope.head_dim, MAX_HEAD_DIM,
                       "the card computes every frequency pair"))
        ctx = context or getattr(p, "max_position_embeddings", None)
        cfield = context_source.removeprefix("config: ") if context_source.startswith("config: ") else \
            "max_position_embeddings"
        checks.append((cfield, "context", ctx, MAX_LENGTH, "positions beyond 2^53 are not exact in float64"))
        orig = getattr(rope, "original_max_position_embeddings", None)
        checks.append((_where(parameters, "original_max_position_embeddings"), "original_max_position_embeddings",
                       orig, MAX_LENGTH, "positions beyond 2^53 are not exact in float64"))
        if rope.rope_type != "default" and (ctx or 0) <= MAX_LENGTH and (orig or 0) <= MAX_LENGTH:
            ext, src = _extended(rope, ctx, orig)
            checks.append((_where(parameters, "factor"), f"the extended context ({src})", ext, MAX_LENGTH,
                           "positions beyond 2^53 are not exact in float64"))
    elif name == "AlibiParams":
        checks.append((_where(parameters, "num_heads"), "num_heads", p.num_heads, MAX_HEADS, "one slope per head"))
    elif name == "T5Params":
        checks.append((_where(parameters, "num_buckets"), "num_buckets", p.num_buckets, MAX_T5, "one row per bucket"))
        checks.append((_where(parameters, "max_distance"), "max_distance", p.max_distance, MAX_T5,
                       "the bucket map is computed over 8 x max_distance relative positions"))
    elif name == "GPT2EmbeddingParams":
        checks.append((_where(parameters, "n_positions"), "n_positions", p.n_positions, MAX_TABLE_ROWS,
                       "the card maps every position to its row"))
    elif name in ("BertEmbeddingParams", "RobertaEmbeddingParams", "OPTEmbeddingParams", "BartEmbeddingParams"):
        checks.append((_where(parameters, "max_position_embeddings"), "max_position_embeddings",
                       p.max_position_embeddings, MAX_TABLE_ROWS, "the card maps every position to its row"))
    for fld, what, value, limit, why in checks:
        if value is not None and value > limit:
            shown = f"{value:,}" if value < 1e21 else f"{value:.4g}"
            raise SpecError(f"config.json: {fld}: {what} {shown} is beyond the card's bound of {limit:,} ({why}); "
                            f"no card is made")


def _summarise(rows: list[list], marks=()) -> tuple[list[list], bool]:
    """A table of more than :data:`MAX_ROWS` rows as its first and last :data:`_EDGE_ROWS` rows and
    the rows at ``marks`` (indices: the boundaries), each gap one row saying how many rows it
    leaves out; ``(rows, summarised)``."""
    n = len(rows)
    if n <= MAX_ROWS:
        return rows, False
    keep = set(range(_EDGE_ROWS)) | set(range(n - _EDGE_ROWS, n)) | {int(i) for i in marks if 0 <= i < n}
    out, prev = [], -1
    width = len(rows[0])
    for i in sorted(keep):
        if i > prev + 1:
            out.append(["…", f"{i - prev - 1:,} rows left out"] + [""] * (width - 2))
        out.append(rows[i])
        prev = i
    return out, True


def _edges(flags) -> set[int]:
    """The indices on both sides of every change in a sequence."""
    flags = list(flags)
    out = set()
    for i in range(1, len(flags)):
        if flags[i] != flags[i - 1]:
            out |= {i - 1, i}
    return out


def _component(key: str, p, parameters: list[Param], notes=(), context=None, context_source="") -> Component:
    name = type(p).__name__
    fam = _FAMILY.get(name, name)
    clause_pairs = _clauses_of(p)
    ids = [c for c, _ in clause_pairs]
    for prm in parameters:
        prm.defined_by = _param_clauses(prm.name, list(dict.fromkeys(ids)))
    _check_bounds(p, parameters, context, context_source)
    comp = Component(key, fam, name, p, parameters, _clause_infos(clause_pairs), notes=list(notes))
    if name in ("RopeParams", "MRopeParams"):
        csrc = context_source if context or not p.max_position_embeddings else "params: max_position_embeddings"
        comp.rope = _rope_figures(p if name == "RopeParams" else p.rope, context or p.max_position_embeddings, csrc)
    if name == "MRopeParams":
        comp.notes.append("figures of MRopeParams.rope: every axis shares these frequencies (MROPE-*)")
    elif name == "AlibiParams":
        from posenc.reference import alibi
        comp.slopes = [float(x) for x in alibi.slopes(p)]
    elif name == "T5Params":
        comp.buckets = _t5_buckets(p)
    elif name == "NopeParams":
        off = [i for i, f in enumerate(p.no_rope_layers or ()) if not f]
        comp.notes.append(f"layers without RoPE: {_spans(off) or 'none'} of {p.num_hidden_layers}")
    comp.tables = _learned_tables(p)
    if fam == "sinusoidal":
        comp.notes.append("a computed table: no learned parameters")
    return comp


def _name_fields(e: SpecError, config: dict) -> SpecError:
    """The import's ``config.json (<model_type>, <set>): : <message>`` (a check over several fields
    has no field of its own) with the config key of the first parameter the message names, e.g.
    ``relative_attention_max_distance: max_distance 8 must exceed ...``; the empty field dropped
    where none is named."""
    from posenc.spec import hf_config as hc
    m = re.match(r"^(config\.json \(([^,()]+), ([^()]+)\)): (.*)$", str(e), re.S)
    if not m:
        return e
    head, model_type, set_name, rest = m.groups()
    rule = (hc.FAMILY_RULES.get(model_type) or {}).get(set_name)

    def key_for(text: str) -> Optional[str]:
        hits = []
        for fname, fr in (rule.fields.items() if rule is not None else ()):
            mm = re.search(rf"(?<![A-Za-z0-9_]){re.escape(fname)}(?![A-Za-z0-9_])", text)
            if mm:
                hits.append((mm.start(), fname, fr))
        if not hits:
            return None
        fr = min(hits, key=lambda h: h[0])[2]
        return next((k for k in fr.keys if hc._lookup(config, k) is not None), fr.keys[0])

    parts = []
    for piece in rest.split("; "):
        if piece.startswith(": ") or piece == ":":
            text = piece[2:]
            k = key_for(text)
            parts.append(f"{k}: {text}" if k else text)
        else:
            parts.append(piece)
    return SpecError(f"{head}: {'; '.join(parts)}")


def _from_config(config: dict, label: str, kind: str, name: str, title: str) -> Card:
    try:
        return _from_config_(config, label, kind, name, title)
    except SpecError as e:  # the card's own checks say config.json: too
        raise _rewrite(e, label) from None


def _from_config_(config: dict, label: str, kind: str, name: str, title: str) -> Card:
    from posenc.spec import hf_config as hc
    try:
        model_type = config.get("model_type")
        components_imp = hc.component_imports(config)
        imported = hc.rope_import(config) if components_imp is None and hc.is_rope_import(config) else None
        found = hc.params_from_hf_config(config)
    except SpecError as e:
        raise _rewrite(_name_fields(e, config), label) from None
    comps: list[Component] = []
    notes: list[str] = []
    rule = ""
    imports = {}
    if components_imp is not None:
        imports = {f"{a}.": imp for a, imp in components_imp.items()}
        rule = "; ".join(sorted({imp.source for imp in components_imp.values()}))
        notes.append(str((hc.table_row(config) or {}).get("components_evidence", "")))
    elif imported is not None:
        imports = {"": imported}
        rule = imported.source
    for prefix, imp in imports.items():
        sub = config.get(prefix.rstrip(".")) if prefix else config
        cfg = (sub.get(imp.where) if imp.where else sub) or {}
        cprefix = f"{prefix}{imp.where}." if imp.where else prefix
        row = hc.hf_model_types().get(imp.model_type)
        context, csrc = _context_of(cfg, row, imp.provenance, cprefix)
        multi = set(imp.sets) != {"all_layers"}
        for lt, p in imp.sets.items():
            key = f"{prefix}rope" + (f".{lt}" if multi else "")
            if p is None:
                why = imp.provenance.get(f"sets.{lt}", "no RoPE on these layers")
                ci = _clause_infos([("LAYERS-NO-ROPE", why)])
                comps.append(Component(key, "none", "None", None, [], ci, notes=[why]))
                continue
            label_ = f"{lt}." if multi else ""
            rope_dict, rope_key = _rope_dict_of(cfg, lt)
            params = [Param(k, v, _rope_provenance(k, v, label_, cfg, rope_dict, rope_key, imp.provenance, imp.source,
                                                   cprefix)) for k, v in _fields(p)]
            comp = _component(key, p, params, context=context, context_source=csrc)
            if multi:
                layers = imp.layers(lt)
                comp.notes.append(f"layer type {lt}" + (f": layers {_spans(layers)}" if layers else ""))
                comp.clauses = _clause_infos([("LAYERS-SETS", "one RoPE set per layer type")]) + comp.clauses
            comps.append(comp)
        if imp.nope is not None:
            comps.append(_component(f"{prefix}nope", imp.nope, [Param(k, v, imp.provenance.get("nope", "config"))
                                                                   for k, v in _fields(imp.nope)]))
        if imp.query_scale is not None:
            comps.append(_component(f"{prefix}query_scale", imp.query_scale,
                                    [Param(k, v, imp.provenance.get("query_scale", "config"))
                                     for k, v in _fields(imp.query_scale)]))
        used = {"nope", "query_scale"} | {k for k in imp.provenance if k.startswith("sets.")}
        names = {f for st in imp.sets.values() if st is not None for f, _ in _fields(st)} | {"partial_rotary_factor"}
        for k, v in imp.provenance.items():
            base = k.split(".", 1)[1] if k.split(".", 1)[0] in imp.sets and "." in k else k
            if k not in used and base not in names:
                notes.append(f"{prefix}{k}: {v}")
    if not imports:
        rules = hc.FAMILY_RULES.get(model_type) or {}
        extra = hc.axial_provenance(config) if "axial" in found else {}
        mrule = hc.MROPE_RULES.get(model_type)
        rule = "; ".join(sorted({r.source for r in rules.values()})) or (mrule.source if mrule else "") or \
            (hc.table_row(config) or {}).get("config_class", "")
        for key, p in found.items():
            fr = rules.get(key)
            params = []
            for k, v in _fields(p):
                if fr is not None and k in fr.fields:
                    f = fr.fields[k]
                    hit = next((kk for kk in f.keys if hc._lookup(config, kk) is not None), None)
                    prov = f"config: {hit}" if hit else f"{f.default!r}: library default ({fr.source})"
                elif fr is not None and k in fr.fixed:
                    prov = f"fixed by the model code ({fr.source})"
                elif k in extra:
                    prov = str(extra[k])
                else:
                    where = "text_config." if isinstance(config.get("text_config"), dict) and \
                        k in config["text_config"] else ""
                    src = config.get("text_config") if where else config
                    prov = f"config: {where}{k}" if isinstance(src, dict) and src.get(k) is not None else \
                        f"not in the config: the import rule's default ({rule})"
                params.append(Param(k, v, prov))
            ctx, csrc = (None, "")
            if type(p).__name__ == "MRopeParams":
                tc = isinstance(config.get("text_config"), dict)
                text = config["text_config"] if tc else config
                ctx = _length(text.get("max_position_embeddings"),
                              ("text_config." if tc else "") + "max_position_embeddings")
                csrc = f"config: {'text_config.' if tc else ''}max_position_embeddings"
                if ctx is None:
                    ctx = mrule.max_position_default if mrule else None
                    csrc = "max_position_embeddings: the config class default"
            comps.append(_component(key, p, params, context=ctx, context_source=csrc))
        for k, v in extra.items():
            if k not in dict(_fields(found.get("axial"))) if found.get("axial") is not None else True:
                notes.append(f"{k}: {v}")
    return _finish(Card(name, title, label, kind, model_type, rule, comps, notes, _matrix_available()))


def _matrix_available() -> bool:
    from .matrix_status import matrix_available
    return matrix_available()


def _finish(card: Card) -> Card:
    """Add the model-level scenarios (MODEL-*) of the model type from the model matrix."""
    from .matrix_status import clause_status
    if card.model_type:
        impl = f"hf:{card.model_type}"
        for cid, c in sorted(_spec().clauses.items()):
            if not cid.startswith("MODEL-") or c.superseded_by:
                continue
            st = clause_status(cid)
            for s in st or ():
                if s.implementation == impl:
                    card.model_scenarios.append((cid, c.title, s))
    return card


def _registry_provenance(key: str, value, sources) -> str:
    """Where a registry entry's value comes from.  The registry gives sources per entry, not per
    field: a source is credited with a field only where its location names the field (the key as
    a word) or states its value (a number of 3 or more significant characters or a word, as a
    whole token); otherwise the value is the entry's, its sources listed without any of them
    being credited with this field (llama-3.1-8b's ``pairing: half`` is the HF-converted layout,
    which Meta's own interleaved code, its only source, does not state)."""
    words = {key}
    if isinstance(value, bool):
        pass
    elif isinstance(value, (int, float)):
        for form in {str(value), f"{value:g}", str(int(value)) if float(value).is_integer() else str(value)}:
            if len(form.lstrip("-").replace(".", "")) >= 3:
                words.add(form)
    elif isinstance(value, str) and len(value) >= 3:
        words.add(value)
    pats = [re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(w)}(?![A-Za-z0-9_]|\.\d)") for w in words]
    match = [s for s in sources if s.location and any(pt.search(s.location) for pt in pats)]
    if match:
        return "registry: " + "; ".join(f"{s.citation} [{s.provenance}]" for s in match)
    listed = "; ".join(f"{s.citation} [{s.provenance}]" for s in sources) or "none"
    return f"registry entry (no source names this field; the entry's sources: {listed})"


def _from_registry(name: str) -> Card:
    from posenc.spec.models import PARAM_MODELS
    from posenc.spec.registry import load
    e = load()[name]
    try:
        p = PARAM_MODELS[e.params_model](**e.values)
    except Exception as exc:  # noqa: BLE001 - validated by load(); said plainly all the same
        raise SpecError(f"registry entry {name}: {exc}") from None
    srcs = [f"{s.citation}" + (f" ({s.location})" if s.location else "") + f" [{s.provenance}]" for s in e.sources]
    params = []
    for k, v in _fields(p):
        if k in e.values:
            prov = _registry_provenance(k, v, e.sources)
        else:
            prov = f"not in the registry entry: the {e.params_model} default"
        params.append(Param(k, v, prov))
    key = {"RopeParams": "rope", "MRopeParams": "mrope", "AlibiParams": "alibi", "SinusoidalParams": "positions",
           "NopeParams": "nope"}.get(e.params_model, "embeddings" if _FAMILY.get(e.params_model) == "learned"
                                     else _FAMILY.get(e.params_model, "params"))
    if e.params_model == "T5Params":
        key = "encoder" if p.bidirectional else "decoder"
    ctx = getattr(p, "max_position_embeddings", None) if e.params_model in ("RopeParams", "MRopeParams") else None
    csrc = "registry: max_position_embeddings" if ctx else ""
    if e.params_model in ("RopeParams", "MRopeParams") and not ctx:
        csrc = "the registry entry gives no max_position_embeddings"
    comp = _component(key, p, params, context=ctx, context_source=csrc)
    card = Card(name, e.title, f"registry:{name}", "registry", None, f"spec/registry/models.yaml ({e.params_model})",
                [comp], [], _matrix_available(), sources=srcs)
    return card


def _resolve(source) -> tuple[str, Any]:
    """``("config", Path)``, ``("registry", name)``, ``("hf", model_type)`` or ``("dict", dict)``."""
    if isinstance(source, dict):
        return "dict", source
    text = str(source)
    path = Path(source)
    if path.is_file():
        return "config", path
    if text.startswith("hf:") and len(text) > 3:
        return "hf", text[3:]
    if text.startswith("registry:"):
        text = text.removeprefix("registry:")
    from posenc.spec.registry import load
    if text in load():
        return "registry", text
    if path.exists():
        raise SpecError(f"{path}: not a file (a config.json is expected)")
    known = ", ".join(sorted(load()))
    raise SpecError(f"{path}: no such file, and not a registry model name (known: {known}) or hf:<model_type>")


def build_card(source) -> Card:
    """The card of ``source``: a ``config.json`` path, a config dict, a registry model name
    (``spec/registry/models.yaml``, optionally ``registry:<name>``) or ``hf:<model_type>`` (the
    transformers config class's defaults).  Raises :class:`SpecError` naming the file and field."""
    kind, what = _resolve(source)
    if kind == "registry":
        return _from_registry(what)
    if kind == "hf":
        return _from_config({"model_type": what}, f"hf:{what}", "hf-defaults", _slug(f"hf-{what}"),
                            f"{what} (transformers config class defaults)")
    if kind == "dict":
        name = _slug(str(what.get("_name_or_path") or what.get("model_type") or "model").split("/")[-1])
        return _from_config(what, "config.json", "config", name, name)
    from posenc.spec.hf_config import read_config
    config = read_config(what)  # SpecError names the file
    name, title = _config_name(what, config)
    return _from_config(config, str(what), "config", name, title)


def registry_cards() -> list[Card]:
    """The cards of the registry's named models (``spec/registry/models.yaml``) whose
    parameters make a card; an entry that does not is left out."""
    from posenc.spec.registry import load
    out = []
    for name in load():
        try:
            out.append(_from_registry(name))
        except (PosencError, ValueError):
            continue
    return out


# ---------------------------------------------------------------------------------------------
# text: one block list, rendered as Markdown or reStructuredText
# ---------------------------------------------------------------------------------------------


def _spans(idx) -> str:
    idx = sorted(int(i) for i in idx)
    if not idx:
        return ""
    out, start, prev = [], idx[0], idx[0]
    for i in idx[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(out)


def _num(x) -> str:
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, float):
        if math.isinf(x):
            return "inf"
        if x == int(x) and abs(x) < 1e15:
            return f"{int(x):,}" if abs(x) >= 10000 else str(int(x))
        return f"{x:.6g}"
    return str(x)


def _status_line(statuses) -> str:
    if statuses is None:
        return "no conformance matrix available"
    if not statuses:
        return "no implementation in the matrix"
    groups: dict[str, list[str]] = {}
    for s in statuses:
        extra = []
        if s.divergences:
            extra.append(", ".join(s.divergences))
        if s.note:
            extra.append(s.note)
        groups.setdefault(s.status, []).append(s.implementation + (f" ({'; '.join(extra)})" if extra else ""))
    return "; ".join(f"**{k}**: {', '.join(v)}" for k, v in groups.items())


def _blocks(card: Card, prefix: str) -> list[tuple]:
    B: list[tuple] = []
    H = lambda lvl, t: B.append(("h", lvl, t))  # noqa: E731
    P = lambda t: B.append(("p", t))  # noqa: E731
    T = lambda head, rows: B.append(("table", head, rows))  # noqa: E731
    L = lambda items: B.append(("list", items))  # noqa: E731
    plots = {(s.component, s.kind): s for s in card.plots()}
    img = lambda c, k: B.append(("img", prefix + plots[(c, k)].filename, plots[(c, k)].title)) \
        if (c, k) in plots else None  # noqa: E731

    H(1, f"Positional-encoding card: {_u(card.title)}")
    H(2, "Summary")
    fams = ", ".join(dict.fromkeys(c.family for c in card.components)) or "none"
    rows = [["source", _u(card.source)], ["model_type", _u(card.model_type) if card.model_type else "-"],
            ["families", _u(fams)], ["import rule", _u(card.rule) if card.rule else "-"],
            ["parameter sets", _u(", ".join(c.key for c in card.components)) if card.components else "-"]]
    T(["", ""], rows)
    if card.sources:
        P("Registry sources:")
        L([_u(x) for x in card.sources])
    if card.plot_note:
        P(_u(card.plot_note))
    for c in card.components:
        H(2, f"{_u(c.key)}: {_u(c.family)} ({_u(c.params_model)})")
        for n in c.notes:
            P(_u(n))
        if c.parameters:
            H(3, "Parameters")
            T(["parameter", "value", "provenance", "defined by"],
              [[f"`{p.name}`" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", p.name) else _u(p.name), _u(_num(p.value)),
                _u(p.provenance), ", ".join(p.defined_by) or "-"] for p in c.parameters])
        H(3, "Clauses")
        if c.clauses:
            T(["clause", "title", "applies because", "sources"],
              [[ci.id, ci.title, _u(ci.why), "; ".join(ci.sources)] for ci in c.clauses])
        else:
            P("No clause of the spec covers this set.")
        _figure_blocks(c, H, P, T, L, img)
        H(3, "Implementations")
        if not card.matrix_available:
            P("No conformance matrix is available (docs/conformance-matrix.json is not in this installation): "
              "no implementation status.")
        else:
            P("From the committed conformance matrix (docs/conformance-matrix.json), per clause:")
            T(["clause", "status"], [[ci.id, _status_line(ci.statuses)] for ci in c.clauses])
    if card.model_scenarios:
        H(2, "Model scenarios")
        P(f"hf:{_u(card.model_type)} in the model matrix (docs/model-matrix.json):")
        T(["scenario", "title", "status", "dtypes"],
          [[cid, title, s.status + (f" ({s.note})" if s.note else "") +
            (f"; {', '.join(s.divergences)}" if s.divergences else ""),
            ", ".join(f"{k} {v}" for k, v in s.dtypes.items())] for cid, title, s in card.model_scenarios])
    if card.notes:
        H(2, "Notes")
        L([_u(n) for n in card.notes if n])
    return B


def _figure_blocks(c: Component, H, P, T, L, img) -> None:
    if c.tables:
        H(3, "Learned tables")
        T(["table", "rows", "dim", "parameters", "positions covered", "note"],
          [[t.name, f"{t.rows:,}", f"{t.dim:,}", f"{t.parameters:,}", "-" if t.positions is None else f"{t.positions:,}",
            t.note] for t in c.tables])
        P(f"Positional parameters: {sum(t.parameters for t in c.tables if t.positions is not None):,}.")
    r = c.rope
    if r is not None:
        H(3, "Wavelengths")
        ctx = f"context {r.context:,} tokens ({_u(r.context_source)})" if r.context else \
            f"context unknown ({_u(r.context_source)})"
        ext = ""
        if r.extended_context:
            ext = f"; extended context {r.extended_context:,} ({_u(r.extended_source)})"
        elif r.extended_source:
            ext = f"; {_u(r.extended_source)}"
        P(f"Wavelength = 2π / inv_freq in tokens, for each of the {len(r.pairs)} pairs (reference "
          f"`posenc.reference.rope.inv_freq`); {ctx}" + (f"; original context {r.original_context:,}"
                                                         if r.original_context else "") + ext + "." +
          (f" Scaled: rope_type {r.rope_type}" + (f" at seq_len {r.seq_len:,}" if r.seq_len else "") +
           f", attention factor {r.attention_factor:.6g}." if r.scaled else ""))
        if r.turns:
            T(["within", "tokens", "pairs never completing a turn (unscaled)", "pairs (scaled)"],
              [[t.label, f"{t.length:,}", f"{t.unscaled} (pairs {_spans(t.unscaled_pairs) or 'none'})",
                f"{t.scaled} (pairs {_spans(t.scaled_pairs) or 'none'})"] for t in r.turns])
        img(c.key, "wavelengths")
        head = ["pair", "inv_freq", "wavelength"] + (["scaled inv_freq", "scaled wavelength", "scaled / unscaled"]
                                                     if r.scaled else [])
        rows = []
        for pr in r.pairs:
            row = [str(pr.index), f"{pr.inv_freq:.6g}", _num(pr.wavelength)]
            if r.scaled:
                ratio = pr.scaled_inv_freq / pr.inv_freq if pr.inv_freq else float("nan")
                row += [f"{pr.scaled_inv_freq:.6g}", _num(pr.scaled_wavelength), f"{ratio:.6g}"]
            rows.append(row)
        rows, short = _summarise(rows, _pair_marks(r))
        if short:
            P(f"{len(r.pairs):,} pairs: the table shows the first and last {_EDGE_ROWS} and the pairs on each side "
              f"of every boundary (turns within a context, the YaRN ramp, the llama3 band).")
        T(head, rows)
        if r.scaled:
            img(c.key, "inv_freq")
        if r.yarn is not None:
            y = r.yarn
            H(3, "YaRN ramp")
            P(f"SCALE-YARN-RAMP: correction dims from beta_fast {y.beta_fast:g} and beta_slow {y.beta_slow:g}: "
              f"{y.raw_low:.4f} and {y.raw_high:.4f}" + (f", truncated to {_num(y.low)} and {_num(y.high)}"
                                                           if y.truncate else " (truncate false)") +
              f" (reference `rope_scaling.yarn_correction_range`). Factor {y.factor:g}.")
            T(["ramp", "pairs", "frequencies"],
              [["0", _spans(y.kept) or "none", "kept (extrapolation)"],
               ["0 < ramp < 1", _spans(y.blended) or "none", "blended"],
               ["1", _spans(y.divided) or "none", f"divided by {y.factor:g} (interpolation)"]])
        if r.llama3 is not None:
            b = r.llama3
            H(3, "llama3 smoothing band")
            P(f"SCALE-LLAMA3: high_freq_wavelen = original / high_freq_factor = {_num(b.high_freq_wavelen)}, "
              f"low_freq_wavelen = original / low_freq_factor = {_num(b.low_freq_wavelen)} tokens.")
            T(["wavelength", "pairs", "frequencies"],
              [[f"< {_num(b.high_freq_wavelen)}", _spans(b.kept) or "none", "kept"],
               [f"{_num(b.high_freq_wavelen)} .. {_num(b.low_freq_wavelen)}", _spans(b.band) or "none",
                "smoothed blend"],
               [f"> {_num(b.low_freq_wavelen)}", _spans(b.divided) or "none", f"divided by {b.factor:g}"]])
        if r.end_angles:
            H(3, "Angle at the end of the context")
            P("position x inv_freq (ROPE-ANGLE, reference `rope.angles`), radians; pair 0 is the fastest, the "
              "last rotating pair the slowest.")
            head = ["at", "position", "fastest (unscaled)", "slowest (unscaled)"] + \
                (["fastest (scaled)", "slowest (scaled)"] if r.scaled else [])
            rows = []
            for a in r.end_angles:
                row = [a.label, f"{a.position:,}", f"{a.fastest_unscaled:.6g}",
                       f"{a.slowest_unscaled:.6g} ({a.slowest_unscaled / (2 * math.pi):.4g} turns)"]
                if r.scaled:
                    row += [f"{a.fastest_scaled:.6g}",
                            f"{a.slowest_scaled:.6g} ({a.slowest_scaled / (2 * math.pi):.4g} turns)"]
                rows.append(row)
            T(head, rows)
    if c.slopes is not None:
        H(3, "ALiBi slopes")
        P("ALIBI-SLOPES, reference `alibi.slopes`: one slope per head.")
        n = len(c.slopes)
        pow2 = 1 << (n.bit_length() - 1) if n else 0  # the heads past the largest power of two interleave
        rows, short = _summarise([[str(h), f"{s:.8g}", f"{math.log2(s):.6g}"] for h, s in enumerate(c.slopes)],
                                 {pow2 - 1, pow2})
        if short:
            P(f"{n:,} heads: the table shows the first and last {_EDGE_ROWS} and the heads around {pow2:,}.")
        T(["head", "slope", "log2"], rows)
        img(c.key, "alibi_slopes")
    if c.buckets is not None:
        H(3, "T5 buckets")
        P("Relative position = key - query; reference `t5.buckets`. Open ends continue to infinity.")
        rows = []
        for b in c.buckets:
            if not b.used:
                rows.append([str(b.bucket), "never used", b.kind])
                continue
            lo = "-inf" if b.lo is None else str(b.lo)
            hi = "+inf" if b.hi is None else str(b.hi)
            rows.append([str(b.bucket), lo if lo == hi else f"{lo} .. {hi}", b.kind])
        rows, short = _summarise(rows, _edges(b.kind for b in c.buckets))
        if short:
            P(f"{len(c.buckets):,} buckets: the table shows the first and last {_EDGE_ROWS} and the buckets on "
              f"each side of every change of kind.")
        T(["bucket", "relative positions", "kind"], rows)
        img(c.key, "t5_buckets")


# -- escaping: text from outside the kit (the config, the registry, a path) is marked with _u() when
# a block is built and escaped by each renderer; the kit's own text keeps its light markup

_U0, _U1 = "\ue000", "\ue001"  # private-use brackets around outside text
_UNTRUSTED = re.compile(f"{_U0}([^{_U1}]*){_U1}")
#: every character str.splitlines() (and so docutils) breaks a line at, and other control characters
_BREAKS = re.compile("[\r\n\t\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ufeff]")
#: outside text is cut at this many characters (a card is not the place for a megabyte of name)
MAX_TEXT = 2000
_MD_SPECIAL = frozenset("\\`*_[]<>|#~&!{}")
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _plain(x) -> str:
    """One line of plain text: line breaks and tabs as spaces, control characters and the markers
    dropped, cut at :data:`MAX_TEXT` characters."""
    s = _CONTROLS.sub("", _BREAKS.sub(" ", str(x).replace(_U0, "").replace(_U1, "")))
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT] + "…"


def _u(x) -> str:
    """Outside text (from the config, the registry or the command line), marked for escaping."""
    return f"{_U0}{_plain(x)}{_U1}"


def _segments(x) -> list[tuple[bool, str]]:
    """``(outside, text)`` pieces of a block's text."""
    s, out, pos = str(x), [], 0
    for m in _UNTRUSTED.finditer(s):
        if m.start() > pos:
            out.append((False, s[pos:m.start()]))
        out.append((True, m.group(1)))
        pos = m.end()
    if pos < len(s):
        out.append((False, s[pos:]))
    return out


def _md_escape(s: str) -> str:
    """Outside text as literal Markdown (CommonMark / GFM): every character that can start markup,
    raw HTML, an autolink or a table cell boundary backslash-escaped (CommonMark escapes any ASCII
    punctuation)."""
    s = _plain(s)
    out = []
    for i, ch in enumerate(s):
        # an underscore between two letters or digits can neither open nor close emphasis
        # (CommonMark's flanking rules): n_positions stays readable
        inert = ch == "_" and 0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()
        out.append("\\" + ch if ch in _MD_SPECIAL and not inert else ch)
    return "".join(out)


def _md_text(x, cell: bool = False) -> str:
    out = []
    for outside, t in _segments(x):
        if outside:
            out.append(_md_escape(t))
        else:
            t = _BREAKS.sub(" ", t)
            out.append(t.replace("|", "\\|") if cell else t)
    s = "".join(out)
    segs = _segments(x)
    m = re.match(r"\s*([-+=]|\d{1,9}[.)])", s)
    if m and segs and segs[0][0]:  # outside text opening a block: no list item or setext rule
        mark = m.group(1)
        s = s[:m.start(1)] + (mark[:-1] + "\\" + mark[-1] if mark[0].isdigit() else "\\" + mark) + s[m.end(1):]
    return s


def _pair_marks(r: RopeFigures) -> set[int]:
    """The pairs on each side of a boundary: where a pair stops completing a turn within each
    length (unscaled, scaled), the YaRN ramp's ends, the llama3 band's ends."""
    out: set[int] = set()
    for t in r.turns:
        for idx in (t.unscaled_pairs, t.scaled_pairs):
            out |= {idx[0] - 1, idx[0]} if idx else set()
    if r.yarn is not None:
        for grp in (r.yarn.kept, r.yarn.blended, r.yarn.divided):
            out |= {grp[0], grp[-1]} if grp else set()
    if r.llama3 is not None:
        for grp in (r.llama3.kept, r.llama3.band, r.llama3.divided):
            out |= {grp[0], grp[-1]} if grp else set()
    return out


def _md_cell(x) -> str:
    return _md_text(x, cell=True)


def _md_url(path: str) -> str:
    from urllib.parse import quote
    return quote(_plain(path), safe="/:._-~")


def _render_md(blocks) -> str:
    out = []
    for b in blocks:
        if b[0] == "h":
            out.append("#" * b[1] + " " + _md_text(b[2]))
        elif b[0] == "p":
            out.append(_md_text(b[1]))
        elif b[0] == "list":
            out.append("\n".join(f"- {_md_cell(x)}" for x in b[1]))
        elif b[0] == "img":
            out.append(f"![{_md_escape(b[2])}]({_md_url(b[1])})")
        elif b[0] == "table":
            head, rows = b[1], b[2]
            lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(_md_cell(x) for x in r) + " |" for r in rows]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def rst_escape(text: str) -> str:
    """``text`` as literal reStructuredText: every ASCII punctuation character backslash-escaped, so no
    inline markup, role, reference, substitution, URI or directive can start (whitespace as given).
    Also the spec site's escaping (:mod:`posenc.conformance.docs_site`)."""
    return "".join("\\" + ch if ch in _PUNCT else ch for ch in text)


def _rst_escape(s: str) -> str:
    """Outside text as literal reStructuredText, one line: :func:`rst_escape` of :func:`_plain`."""
    return rst_escape(_plain(s))


def _rst_trusted(x: str) -> str:
    """The kit's own Markdown-ish inline text as RST: ``**bold**`` kept, `code` as ``code``, stray
    ``*`` and trailing-underscore words (RST references) escaped."""
    parts = re.split(r"(\*\*[^*]+\*\*|`[^`]+`)", _BREAKS.sub(" ", str(x)))
    out = []
    for part in parts:
        if part.startswith("**") and part.endswith("**") and len(part) > 4:
            out.append(part)
        elif part.startswith("`") and part.endswith("`") and len(part) > 2:
            out.append(f"`{part}`")
        else:
            part = part.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|")
            out.append(re.sub(r"(\w)_(?=\W|$)", r"\1\\_", part))
    return "".join(out)


def _rst_inline(x) -> str:
    return "".join(_rst_escape(t) if outside else _rst_trusted(t) for outside, t in _segments(x))


def _rst_cell(x) -> str:
    s = _rst_inline(x).strip()
    if not s:
        return "\\ "
    if s in ("-", "*", "+") or re.match(r"^[-*+] |^\d+\. ", s):  # not a nested list
        return "\\" + s
    return s


def _width(s: str) -> int:
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def _render_rst(blocks) -> str:
    marks = {1: "=", 2: "-", 3: "~", 4: "^"}
    out = []
    for b in blocks:
        if b[0] == "h":
            t = _rst_inline(b[2]).strip() or "\\ "
            out.append(f"{t}\n{marks.get(b[1], '^') * max(_width(t), 4)}")
        elif b[0] == "p":
            out.append(_rst_inline(b[1]).strip() or "\\ ")
        elif b[0] == "list":
            out.append("\n".join(f"* {_rst_cell(x)}" for x in b[1]))
        elif b[0] == "img":
            out.append(f".. image:: {_plain(b[1]).replace(' ', '%20')}\n   :alt: {_plain(b[2])}")
        elif b[0] == "table":
            head, rows = b[1], b[2]
            lines = [".. list-table::", "   :header-rows: 1", ""]
            for r in [head] + rows:
                cells = [_rst_cell(x) for x in r]
                lines.append(f"   * - {cells[0]}")
                lines += [f"     - {x}" for x in cells[1:]]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------------------------


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtra(MATPLOTLIB_MISSING) from None
    return plt


def _draw(plt, s: PlotSpec, c: Component, card: Card):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if s.kind == "wavelengths":
        r = c.rope
        idx = [p.index for p in r.pairs]
        ax.plot(idx, [p.wavelength for p in r.pairs], "o-", ms=3, label="unscaled")
        if r.scaled:
            ax.plot(idx, [p.scaled_wavelength for p in r.pairs], "s-", ms=3, label=f"{r.rope_type}")
        if r.context:
            ax.axhline(r.context, color="red", ls="--", label=f"context {r.context:,}")
        if r.original_context and r.original_context != r.context:
            ax.axhline(r.original_context, color="orange", ls=":", label=f"original context {r.original_context:,}")
        ax.set_yscale("log")
        ax.set_xlabel("pair index i")
        ax.set_ylabel("wavelength 2π / inv_freq (tokens)")
    elif s.kind == "inv_freq":
        r = c.rope
        idx = [p.index for p in r.pairs]
        ax.plot(idx, [p.inv_freq for p in r.pairs], "o-", ms=3, label="unscaled")
        ax.plot(idx, [p.scaled_inv_freq for p in r.pairs], "s-", ms=3, label=r.rope_type)
        if r.yarn is not None:
            for x in (r.yarn.low, r.yarn.high):
                ax.axvline(x, color="grey", ls=":")
        if r.llama3 is not None and r.llama3.band:
            ax.axvspan(min(r.llama3.band), max(r.llama3.band), color="grey", alpha=0.2, label="smoothing band")
        ax.set_yscale("log")
        ax.set_xlabel("pair index i")
        ax.set_ylabel("inverse frequency (rad / token)")
    elif s.kind == "alibi_slopes":
        ax.bar(range(len(c.slopes)), c.slopes)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("head")
        ax.set_ylabel("slope")
    elif s.kind == "t5_buckets":
        from posenc.reference import t5
        p = c.params
        rel = np.arange(-2 * p.max_distance, 2 * p.max_distance + 1)
        ax.step(rel, t5.buckets(rel, p), where="mid")
        ax.axvline(p.max_distance, color="grey", ls=":")
        ax.axvline(-p.max_distance, color="grey", ls=":")
        ax.set_xlabel("relative position (key - query)")
        ax.set_ylabel("bucket")
    # outside text as plain text: no mathtext ($...$ would be parsed, and may fail to parse)
    ax.set_title(_plain(f"{card.title}: {s.title}").replace("$", "\\$"), fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


#: the file a card's output folder carries: ``--out`` writes into a folder that has it (a previous
#: card's), a new or an empty one, and refuses any other
OUT_MARKER = ".posenc-card"


def _check_out(directory: Path) -> None:
    """:class:`SpecError` where ``directory`` may not receive a card (see :data:`OUT_MARKER`)."""
    if directory.is_symlink() and not directory.exists():
        raise SpecError(f"{directory}: a broken symbolic link, not a folder")
    if not directory.exists():
        for parent in directory.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise SpecError(f"{directory}: cannot create the folder: {parent} is not a folder")
                break
        return
    if not directory.is_dir():
        raise SpecError(f"{directory}: exists and is not a folder (--out names the folder the card is written into)")
    if not (directory / OUT_MARKER).is_file() and any(directory.iterdir()):
        raise SpecError(f"{directory}: the folder exists, is not empty and is not a previous card's output (it has no "
                        f"{OUT_MARKER}): refusing to overwrite its files; name a new or an empty folder")


def _mark(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / OUT_MARKER).write_text("written by posenc card: a later posenc card may overwrite this folder\n",
                                        encoding="utf-8")


def _plots_or_note(card: Card) -> Card:
    """``card``, or, without matplotlib, the card without plots saying so (and a warning on stderr)."""
    if not card.plots():
        return card
    try:
        _pyplot()
    except MissingExtra:
        print(f"warning: no plots: {MATPLOTLIB_MISSING}", file=sys.stderr)
        return card.without_plots(f"Plots left out: {MATPLOTLIB_MISSING}.")
    return card


def main(a) -> int:
    """``posenc card CONFIG [--format md|html] [--out DIR]``: 0, or 2 with ``error: ...``."""
    fmt = getattr(a, "fmt", "md") or "md"
    out = getattr(a, "out", None)
    try:
        card = build_card(a.config)
        directory = Path(out) if out is not None else Path(f"posenc-card-{card.name}")
        _check_out(directory)
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    card = _plots_or_note(card)
    try:
        if fmt == "html":
            try:
                from .docs_site import build_card_page
            except ImportError as e:
                print(f"error: --format html needs the site generator (posenc.conformance.docs_site.build_card_page), "
                      f"which is not available: {e}", file=sys.stderr)
                return 2
            result = build_card_page(card, directory)
            _mark(directory)
            if result is not None:
                print(result)
            return 0
        if out is None:
            if card.write_plots(directory):
                _mark(directory)
            sys.stdout.write(card.to_markdown(plot_prefix=f"{directory.as_posix()}/"))
            return 0
        plots = card.write_plots(directory)
        _mark(directory)
        md = directory / f"{card.name}.md"
        md.write_text(card.to_markdown(), encoding="utf-8")
        print(f"wrote {md} and {len(plots)} plot(s) in {directory}")
        return 0
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        print(f"error: cannot write{where}: {e.strerror or e}", file=sys.stderr)
        return 2

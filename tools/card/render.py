"""A card as text: its blocks (headings, paragraphs, lists, tables, images) rendered as Markdown and
reStructuredText, every string from outside the kit plain text (escaped, one line).
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from posenc.tools.card.model import Component, PlotSpec, RopeFigures
from posenc.tools.card.plots import _draw, _pyplot
from posenc.tools.out_files import write_replacing
from posenc.tools.card.text import _BREAKS, _U0, _U1, _UNTRUSTED, _num, _plain, _spans


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
            P("No conformance matrix is available (docs/conformance-matrix.json of the kit's checkout; an installed "
              "wheel carries none, $POSENC_MATRICES names a folder that has it): no implementation status.")
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
    """A component's figures: its learned tables, RoPE's wavelengths and scaling, ALiBi's slopes, T5's buckets
    (``H``, ``P``, ``T``, ``L``, ``img``: add a heading, paragraph, table, list, image)."""
    if c.tables:
        H(3, "Learned tables")
        T(["table", "rows", "dim", "parameters", "positions covered", "note"],
          [[t.name, f"{t.rows:,}", f"{t.dim:,}", f"{t.parameters:,}", "-" if t.positions is None else f"{t.positions:,}",
            t.note] for t in c.tables])
        P(f"Positional parameters: {sum(t.parameters for t in c.tables if t.positions is not None):,}.")
    r = c.rope
    if r is not None:
        _rope_blocks(c, r, H, P, T, img)
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


def _rope_blocks(c: Component, r: RopeFigures, H, P, T, img) -> None:
    """RoPE's figures: the context, turns within it, the pairs' wavelengths (scaled and not), the YaRN ramp,
    the llama3 band, the angles at the end of the context."""
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
    _pair_table(r, P, T)
    if r.scaled:
        img(c.key, "inv_freq")
    _scaling_blocks(r, H, P, T)
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


def _pair_table(r: RopeFigures, P, T) -> None:
    """Every pair's inverse frequency and wavelength (scaled and not), summarised above MAX_ROWS pairs."""
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


def _scaling_blocks(r: RopeFigures, H, P, T) -> None:
    """Where a scaling puts each pair: YaRN's ramp (kept, blended, divided), llama3's smoothing band."""
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


_MD_SPECIAL = frozenset("\\`*_[]<>|#~&!{}$@")  # $: math (GitHub, GitLab, Jupyter); @: an e-mail autolink

_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


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
    # GFM's extended autolinks (a bare scheme://, www.): the colon or the dot escaped, no link is made
    return _AUTOLINK.sub(lambda m: m.group(1) + "\\" + m.group(2), "".join(out))


_AUTOLINK = re.compile(r"(?i)(\b(?:https?|ftp|mailto|xmpp)|\bwww)([:.])")


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
    Also the spec site's escaping (:mod:`posenc.tools.docs_site`)."""
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


#: tables (per pair, per head, per bucket) longer than this are summarised
MAX_ROWS = 256


_EDGE_ROWS = 8


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
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=100)
            plt.close(fig)
            write_replacing(path, png.getvalue())  # a link at path is replaced, never written through
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

"""Pictures of failures (``pytest conformance --adapter NAME --plot-dir DIR``).

Per failing case, one PNG with a row per output out of tolerance and two panels:

* **by position**: ``|error| / bound`` per position (the output's position axis: ``T``, ``Tq``,
  ``query_length``, ``seq_len``, ...), the maximum over every other axis;
* **by pair / head / feature**: the same per index of the output's *feature* axis -- the head axis
  of an attention bias or probabilities (``[H, Tq, Tk]``, ``[B, Hq, Tq, Tk]``), else the last
  axis: the RoPE pair ``i`` of ``cos`` / ``sin`` / ``inv_freq`` (width ``pair_dim // 2``), the
  channel ``d`` of ``q`` / ``k`` (``[B, H, T, D]``: with half pairing channels ``d`` and
  ``d + D/2`` are pair ``d mod D/2``, with interleaved pairing ``2i`` and ``2i + 1`` are pair ``i``;
  the plot does not fold them), the feature of an embedding table (``[B, T, E]``).

Both on a log axis with the bound drawn at 1; with a diagnosis, the closest matching divergence's
mutant is overlaid as ``|mutant - reference| / bound`` (the same reductions), so the reader sees
whether the failure follows the mutant.  ``|error| / bound`` is the tolerance rule's ratio
(:func:`posenc.spec.tolerance.compare`): 0 where the output is exact, infinite at a non-finite
output of a finite reference and at a differing integer, 0 outside a ``.compared`` mask.

The reductions (:func:`ratio_array`, :func:`axes_of`, :func:`series`) are plain NumPy and are
what the plot draws; matplotlib (the ``[docs]`` extra) is imported only to draw
(:func:`require_matplotlib` says what to install when it is missing).  No pyplot: each figure is
a :class:`matplotlib.figure.Figure` on an Agg canvas, so nothing depends on a GUI backend.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

#: The extra that installs matplotlib.
EXTRA = "posenc-conformance[docs]"

_POSITION = ("T", "Tq", "query_length", "seq_len", "S - cache_length", "cu_seqlens[-1]", "S", "Tk", "key_length")
_HEAD = ("H", "Hq", "Hk", "num_heads")
_KEY_POSITION = ("Tk", "key_length", "S")


class PlotsUnavailable(RuntimeError):
    """matplotlib (the ``[docs]`` extra) is not installed."""


def require_matplotlib() -> None:
    """Import what drawing needs, or raise :class:`PlotsUnavailable` naming the extra to install."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as e:
        raise PlotsUnavailable(
            f"--plot-dir needs matplotlib, which is not installed ({e}): pip install '{EXTRA}'") from None


# ---- the reductions -------------------------------------------------------------------------


def ratio_array(reference, actual, bound, compared=None) -> np.ndarray:
    """``|actual - reference| / bound`` element-wise, as the tolerance rule reads it: 0 where the
    two are equal (a zero bound too), inf where ``actual`` is non-finite and ``reference`` finite,
    0 outside ``compared``; integers: inf where they differ, else 0."""
    e = np.asarray(reference)
    a = np.asarray(actual)
    mask = np.ones(e.shape, bool) if compared is None else np.broadcast_to(np.asarray(compared, bool), e.shape)
    if np.issubdtype(e.dtype, np.integer) or np.issubdtype(e.dtype, np.bool_):
        r = np.where(a.astype(np.int64) != e.astype(np.int64), np.inf, 0.0)
    else:
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            err = np.abs(a64 - e64)
            r = np.where(err == 0, 0.0, err / np.broadcast_to(np.asarray(bound, np.float64), e.shape))
        r = np.where(np.isfinite(a64) | ~np.isfinite(e64), r, np.inf)
        r = np.where(np.isnan(r), np.inf, r)  # inf - inf: a non-finite output where the reference's differs
    return np.where(mask, r, 0.0)


def _split_top(text: str) -> list[str]:
    """``"B, Hq, T, D"`` -> ``["B", "Hq", "T", "D"]``; commas inside brackets stay."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _branches(shape: str) -> list[list[str]]:
    """The axis lists of a shape expression (both sides of ``X if cond else Y``)."""
    lists = re.findall(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]", shape.split(" if ")[0]) + \
        ([re.findall(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]", shape.split(" else ", 1)[1])[0]]
         if " else " in shape else [])
    return [_split_top(x) for x in lists]


@dataclass(frozen=True)
class Axes:
    """Which axis of an output is its position axis and which its pair / head / feature axis
    (None where it has none), with the feature axis's label."""

    position: Optional[int]
    feature: Optional[int]
    feature_label: str
    position_label: str = "position"


def axes_of(shape: str, ndim: int, name: str = "") -> Axes:
    """The axes :func:`series` reduces to, from the operation table's symbolic ``shape`` of an
    output of rank ``ndim`` (a conditional shape: the side of that rank; ``*R``: that many
    leading row axes, the first of them the position axis)."""
    tokens: list[str] = []
    for b in _branches(shape or ""):
        star = [t for t in b if t.startswith("*")]
        if star and ndim >= len(b) - 1:
            i = b.index(star[0])
            tokens = b[:i] + [star[0]] * (ndim - len(b) + 1) + b[i + 1:]
            break
        if len(b) == ndim:
            tokens = b
            break
    if not tokens:  # an expression this does not read: the first axis is not known, the last is the feature
        return Axes(None, ndim - 1 if ndim else None, "last axis index")
    position = next((i for i, t in enumerate(tokens) if t in _POSITION or t.startswith("*")), None)
    head = next((i for i, t in enumerate(tokens) if t in _HEAD), None)
    last = ndim - 1
    if head is not None and (tokens[last] in _KEY_POSITION or len(tokens) == 1):
        return Axes(position, head, f"head ({tokens[head]})", _position_label(tokens, position))
    if last == position or ndim == 0:
        return Axes(position, None, "", _position_label(tokens, position))
    t = tokens[last]
    label = ("pair i" if "// 2" in t else f"channel d (last axis, {t}; a pair is d, d+{t}/2 or 2i, 2i+1)"
             if t == "D" else f"feature ({t})")
    return Axes(position, last, label, _position_label(tokens, position))


def _position_label(tokens, position) -> str:
    if position is None:
        return "position"
    t = tokens[position]
    return "row (position)" if t.startswith("*") else f"position ({t})"


def reduce_to(ratio: np.ndarray, axis: Optional[int]) -> Optional[np.ndarray]:
    """The maximum of ``ratio`` over every axis but ``axis`` (None: no such axis)."""
    if axis is None:
        return None
    r = np.asarray(ratio, np.float64)
    return np.moveaxis(r, axis, 0).reshape(r.shape[axis], -1).max(axis=1) if r.size else np.zeros(r.shape[axis])


@dataclass(frozen=True)
class Series:
    """What one output's row of the plot draws: per position and per feature index, the adapter's
    ``|error| / bound`` and (with a mutant) the mutant's ``|mutant - reference| / bound``."""

    output: str
    axes: Axes
    by_position: Optional[np.ndarray]
    by_feature: Optional[np.ndarray]
    mutant_by_position: Optional[np.ndarray] = None
    mutant_by_feature: Optional[np.ndarray] = None
    worst: float = 0.0


def series(output: str, shape: str, reference, actual, bound, mutant=None, compared=None) -> Series:
    """The reduced series of one output (see the module docstring); ``mutant``: the divergence's
    mutant output on the same case, or None."""
    ratio = ratio_array(reference, actual, bound, compared)
    ax = axes_of(shape, ratio.ndim, output)
    m = None
    if mutant is not None and np.shape(mutant) == ratio.shape:
        m = ratio_array(reference, mutant, bound, compared)
    return Series(output, ax, reduce_to(ratio, ax.position), reduce_to(ratio, ax.feature),
                  reduce_to(m, ax.position) if m is not None else None,
                  reduce_to(m, ax.feature) if m is not None else None,
                  float(ratio.max()) if ratio.size else 0.0)


# ---- from a golden and the adapter's outputs --------------------------------------------------


@dataclass
class PlotData:
    """What a failure carries for its picture: the golden (reference, scales, case), the adapter's
    outputs and the activation dtype (set by :func:`posenc.harness.failure.fail`)."""

    golden: Any
    outputs: dict
    dtype: str


def _declared_shape(op, name: str) -> str:
    base = name.split(".", 1)[0]
    for o in op.outputs:
        if o.name in (name, base):
            return o.shape
    return ""


def golden_series(data: PlotData, divergence: Optional[str] = None) -> list[Series]:
    """:func:`series` of every output of ``data`` out of tolerance, with ``divergence``'s mutant."""
    from posenc import registry

    from posenc.harness.diagnosis import mutant_outputs
    from posenc.harness.runner import compare_outputs
    g, outputs, dtype = data.golden, data.outputs, data.dtype
    op = registry.operation(g.case.op)
    names = [n for n in g.outputs if not n.endswith(".compared")]  # compare_outputs' order
    bad = {n for n, c in zip(names, compare_outputs(g, outputs, dtype)) if not c.ok}
    mut = None
    if divergence is not None:
        d = registry.spec().divergences.get(divergence)
        mut = mutant_outputs(d, g, dtype) if d is not None else None
    out = []
    for name, ref in g.outputs.items():
        if name.endswith(".compared") or name not in bad or name not in outputs:
            continue
        dt = "float32" if name in op.float32_outputs else dtype
        b = g.bound(name, dt)
        if np.shape(outputs[name]) != ref.shape:
            continue
        out.append(series(name, _declared_shape(op, name), ref, outputs[name], b,
                          None if mut is None else mut.get(name), g.outputs.get(f"{name}.compared")))
    return out


# ---- drawing ------------------------------------------------------------------------------------


def plot_name(test_id: str, nodeid: str) -> str:
    """A safe, unique file name for a test's plot: the test ID with everything but letters,
    digits, ``.``, ``_`` and ``-`` replaced by ``_`` (at most 120 characters) and 10 hex digits of
    the node ID's hash (two IDs that sanitize alike, or tests of two modules, never collide)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", test_id).strip("._") or "test"
    return f"{safe[:120]}-{hashlib.sha1(nodeid.encode()).hexdigest()[:10]}.png"


_FLOOR = 1e-3  # the log axis starts here: exact elements (ratio 0) are drawn on it


def _drawable(y: np.ndarray, cap: float) -> np.ndarray:
    y = np.asarray(y, np.float64)
    return np.clip(np.where(np.isfinite(y), y, cap), _FLOOR, None)


def draw(path, title: str, rows: Sequence[Series], divergence: Optional[str] = None) -> Path:
    """Write the PNG of ``rows`` (one per output) to ``path``; returns the path."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = list(rows)[:6] or []
    fig = Figure(figsize=(12, 3.2 * max(1, len(rows)) + 0.8))
    FigureCanvasAgg(fig)
    fig.suptitle(title, fontsize=9)
    finite = [float(v) for s in rows for a in (s.by_position, s.by_feature, s.mutant_by_position,
                                                s.mutant_by_feature) if a is not None
              for v in np.asarray(a).ravel() if math.isfinite(v)]
    cap = max([10.0, *finite]) * 10  # a non-finite ratio is drawn above every finite one
    for r, s in enumerate(rows):
        for c, (y, ym, label) in enumerate(((s.by_position, s.mutant_by_position, s.axes.position_label),
                                            (s.by_feature, s.mutant_by_feature, s.axes.feature_label))):
            ax = fig.add_subplot(max(1, len(rows)), 2, 2 * r + c + 1)
            if y is None:
                ax.text(0.5, 0.5, f"{s.output}: no {'position' if c == 0 else 'pair / head / feature'} axis",
                        ha="center", va="center", transform=ax.transAxes, fontsize=8)
                ax.set_axis_off()
                continue
            x = np.arange(len(y))
            dots = len(x) <= 48  # markers where they can be told apart (a single position is a dot)
            ax.plot(x, _drawable(y, cap), drawstyle="steps-mid", marker="o" if dots else None, markersize=3,
                    color="tab:red",
                    label="adapter |err| / bound")
            if ym is not None:
                ax.plot(x, _drawable(ym, cap), drawstyle="steps-mid", marker="x" if dots else None, markersize=4,
                        color="tab:blue",
                        linestyle="--", alpha=0.8, label=f"{divergence or 'mutant'} mutant |mutant - ref| / bound")
            inf = ~np.isfinite(np.asarray(y, np.float64))
            if inf.any():
                ax.plot(x[inf], np.full(int(inf.sum()), cap), "kx", label="non-finite / integer mismatch")
            ax.axhline(1.0, color="black", linewidth=0.8, label="bound (1)")
            ax.set_yscale("log")
            ax.set_ylim(_FLOOR / 2, cap * 2)
            ax.set_xlabel(label, fontsize=8)
            ax.set_ylabel(f"{s.output}: max |err| / bound", fontsize=8)
            ax.tick_params(labelsize=7)
            if r == 0:
                ax.legend(fontsize=7, loc="best")
    n = max(1, len(rows))
    top = 1 - 0.8 / (3.2 * n + 0.8)  # the title's two lines (fixed margins: tight_layout draws twice)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.45 / (3.2 * n + 0.8), top=top - 0.02, hspace=0.35,
                        wspace=0.18)
    path = Path(path)
    fig.savefig(path, format="png", dpi=80)
    return path


def plot_failure(path, data: PlotData, *, test_id: str, clauses: Sequence[str] = (),
                 divergence: Optional[str] = None) -> Optional[Path]:
    """Draw a failing case's picture to ``path``: title test ID, case, dtype, clauses and the
    closest divergence (``divergence``, its mutant overlaid); None when no output has values to
    draw (every bad output had another shape)."""
    rows = golden_series(data, divergence)
    if not rows:
        return None
    title = (f"{test_id}\ncase {data.golden.case.id} ({data.golden.case.op}), {data.dtype}; "
             f"clause {', '.join(clauses) or '-'}; "
             f"divergence {divergence or 'none known reproduces it'}")
    return draw(path, title, rows, divergence)

"""A card's PNG plots (matplotlib, the ``[docs]`` extra): wavelengths, inverse frequencies, ALiBi
slopes, T5 buckets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from posenc.tools.card.model import MATPLOTLIB_MISSING, Component, MissingExtra, PlotSpec
from posenc.tools.card.text import _plain

if TYPE_CHECKING:
    from posenc.tools.card.render import Card


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

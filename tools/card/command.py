"""``posenc card CONFIG [--format md|html] [--out DIR]``: writes only where DIR is new, empty or a
previous card's output (it holds :data:`OUT_MARKER`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from posenc.spec.errors import PosencError, SpecError
from posenc.tools.card.build import build_card
from posenc.tools.card.model import MATPLOTLIB_MISSING, MissingExtra
from posenc.tools.card.plots import _pyplot
from posenc.tools.card.render import Card
from posenc.tools.out_files import is_regular, write_replacing

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
    marker = directory / OUT_MARKER
    if os.path.lexists(marker) and not is_regular(marker):
        raise SpecError(f"{marker}: not a regular file (a symbolic link or a special file): refusing to write "
                        f"into {directory}; remove it, or name a new or an empty folder")
    if not is_regular(marker) and any(directory.iterdir()):
        raise SpecError(f"{directory}: the folder exists, is not empty and is not a previous card's output (it has no "
                        f"{OUT_MARKER}): refusing to overwrite its files; name a new or an empty folder")


def _mark(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    # a new regular file renamed onto the marker: never through a link; readable by all, whatever the umask
    write_replacing(directory / OUT_MARKER, b"written by posenc card: a later posenc card may overwrite this folder\n")


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
                from posenc.tools.sphinx_build import build_card_page
            except ImportError as e:
                print(f"error: --format html needs the site generator (posenc.tools.sphinx_build.build_card_page), "
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
        write_replacing(md, card.to_markdown().encode("utf-8"))
        print(f"wrote {md} and {len(plots)} plot(s) in {directory}")
        return 0
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        print(f"error: cannot write{where}: {e.strerror or e}", file=sys.stderr)
        return 2

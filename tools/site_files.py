"""The files of a built site: which ones the build wrote (its manifest, :data:`MARKER`), keeping every
other file of an existing site folder across a rebuild, and world-readable permissions.

``posenc docs build --out DIR`` owns only what it wrote: :data:`MARKER` lists every path of the site
(one per line, relative, ``/``-separated) under a first line :data:`HEADER`.  A rebuild replaces those
paths and keeps every other one (a ``.git`` of a ``gh-pages`` checkout, a ``CNAME``, a note), moved
into the new site; one the new site would itself write is an error, and nothing is replaced.  A marker
of an older build (its header only, no list) owns the top-level entries such a build wrote:
``index.html`` and the version folders.  The built site is world-readable: folders 0755, files 0644,
whatever the umask (and ``tempfile.mkdtemp``'s 0700).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from posenc.tools.sphinx_build import DocsError, make_readable  # noqa: F401 - make_readable: re-exported

#: the file that marks a folder as a site ``posenc docs build`` wrote, and lists what it wrote
MARKER = ".posenc-site"
HEADER = "written by posenc docs build; it owns (replaces, removes) only the paths listed below"
_LEGACY_TOP = re.compile(r"index\.html|\d+\.\d+\.\d+")


def is_site(folder: Path) -> bool:
    """Whether ``folder`` holds a site marker (a regular file, not a link)."""
    m = folder / MARKER
    return m.is_file() and not m.is_symlink()


def _walk(root: Path) -> list[str]:
    """Every path under ``root`` (files, folders, links: not followed), relative, ``/``-separated, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        out += [(rel / n).as_posix() for n in dirnames + filenames]
    return sorted(out)


def write_manifest(root: Path) -> None:
    """Write :data:`MARKER` into the just-built ``root``, listing every path under it (and itself)."""
    paths = sorted(set(_walk(root)) | {MARKER})
    (root / MARKER).write_text(HEADER + "\n" + "".join(p + "\n" for p in paths), encoding="utf-8")


def owned(root: Path) -> set[str] | None:
    """The paths the build that wrote ``root`` owns; ``None`` for an older marker without a list."""
    lines = (root / MARKER).read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or lines[0] != HEADER:
        return None
    return {line for line in lines[1:] if line}


def foreign(root: Path) -> list[str]:
    """The outermost paths under the site ``root`` that its build did not write (to be kept)."""
    mine = owned(root)
    out: list[str] = []

    def visit(folder: Path, prefix: str) -> None:
        for entry in sorted(os.listdir(folder)):
            rel = f"{prefix}{entry}"
            if mine is None:  # an older build's marker: its top-level entries (it never recursed)
                is_mine = entry == MARKER or _LEGACY_TOP.fullmatch(entry) is not None
            else:
                is_mine = rel in mine
            if not is_mine:
                out.append(rel)
            elif mine is not None and (folder / entry).is_dir() and not (folder / entry).is_symlink():
                visit(folder / entry, rel + "/")

    visit(root, "")
    return out


def carry_foreign(old: Path, new: Path) -> list[str]:
    """Move the paths of site ``old`` its build did not write into ``new`` (same place); returns them.

    Raises :class:`~posenc.tools.sphinx_build.DocsError` naming the first one ``new`` already has, before moving anything."""
    keep = foreign(old)
    for rel in keep:
        if os.path.lexists(new / rel):
            raise DocsError(f"{old / rel} was not written by posenc docs build and the new site writes "
                                   f"{rel}: refusing to replace it (move it away, or build into another folder)")
    moved: list[str] = []
    try:
        for rel in keep:
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(old / rel, new / rel)
            moved.append(rel)
    except BaseException:
        for rel in reversed(moved):  # put them back: the caller removes ``new``
            os.rename(new / rel, old / rel)
        raise
    return keep

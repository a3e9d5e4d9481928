"""The files of a built site: which ones the build wrote (its manifest, :data:`MARKER`), keeping every
other file of an existing site folder across a rebuild, and world-readable permissions.

``posenc docs build --out DIR`` owns only what it wrote: :data:`MARKER` lists every path of the site
(one per line, relative, ``/``-separated) under a first line :data:`HEADER`.  A rebuild replaces those
paths and keeps every other one (a ``.git`` of a ``gh-pages`` checkout, a ``CNAME``, a note), moved
into the new site; one the new site would itself write is an error, and nothing is replaced.  A marker
of an older build (:data:`LEGACY`, no list) owns ``index.html``, the spec's own version folders (its
released versions and the one in development, no other ``X.Y.Z``) and, inside them, only the paths the
new site writes: a file a user added there is kept.  A marker of any other content is refused before
anything is built or changed.  The built site is world-readable: folders 0755, files 0644,
whatever the umask (and ``tempfile.mkdtemp``'s 0700).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from posenc.tools.sphinx_build import DocsError, make_readable  # noqa: F401 - make_readable: re-exported

#: the file that marks a folder as a site ``posenc docs build`` wrote, and lists what it wrote
MARKER = ".posenc-site"
HEADER = "written by posenc docs build; it owns (replaces, removes) only the paths listed below"
#: the whole text of an older build's marker (no list of paths)
LEGACY = "written by posenc docs build"
#: a marker is a short text file; a bigger one is not read
MARKER_LIMIT = 64 * 1024 * 1024


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


def _marker_lines(root: Path) -> list[str]:
    """The lines of ``root``'s marker (a regular file of at most :data:`MARKER_LIMIT` bytes, UTF-8)."""
    m = root / MARKER
    try:
        st = os.lstat(m)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MARKER_LIMIT:
            raise DocsError(f"{m}: not a regular file of at most {MARKER_LIMIT} bytes: refusing to change {root}")
        with open(m, "rb") as f:
            return f.read(MARKER_LIMIT + 1).decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise DocsError(f"{m}: not UTF-8 text, not a marker posenc docs build wrote: refusing to change {root} "
                        f"(remove the marker, or build into another folder)") from None


def check_marker(root: Path) -> None:
    """:class:`DocsError` (one line) where ``root``'s marker is neither a listing one nor :data:`LEGACY`."""
    lines = _marker_lines(root)
    if lines and lines[0] == HEADER or [line.strip() for line in lines if line.strip()] == [LEGACY]:
        return
    first = (lines[0] if lines else "")[:60]
    raise DocsError(f"{root / MARKER}: a marker this posenc cannot read (first line {first!r}): refusing to "
                    f"change {root}; remove the marker, or build into another folder")


def owned(root: Path, new: Path | None = None, versions: tuple[str, ...] | list[str] = ()) -> set[str]:
    """The paths the build that wrote ``root`` owns.  For an older marker (:data:`LEGACY`): the marker,
    ``index.html``, the folders of ``versions`` (the spec's own) and, inside them, the paths the new site
    ``new`` writes.  Raises :class:`DocsError` for a marker it cannot read."""
    check_marker(root)
    lines = _marker_lines(root)
    if lines[0] == HEADER:
        return {line for line in lines[1:] if line}
    tops = {MARKER, "index.html", *versions}
    return tops | {p for p in (_walk(new) if new is not None else []) if p.split("/")[0] in set(versions)}


def foreign(root: Path, new: Path | None = None, versions: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The outermost paths under the site ``root`` that its build did not write (to be kept)."""
    mine = owned(root, new, versions)
    out: list[str] = []

    def visit(folder: Path, prefix: str) -> None:
        for entry in sorted(os.listdir(folder)):
            rel = f"{prefix}{entry}"
            if rel not in mine:
                out.append(rel)
            elif (folder / entry).is_dir() and not (folder / entry).is_symlink():
                visit(folder / entry, rel + "/")

    visit(root, "")
    return out


def carry_foreign(old: Path, new: Path, versions: tuple[str, ...] | list[str] = ()) -> list[str]:
    """Move the paths of site ``old`` its build did not write into ``new`` (same place); returns them.
    ``versions``: the spec's own versions (what an older marker owns).

    Raises :class:`~posenc.tools.sphinx_build.DocsError` naming the first one ``new`` already has, before moving anything."""
    keep = foreign(old, new, versions)
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

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
import shutil
import stat
import tempfile
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


def carry_foreign(old: Path, new: Path, versions: tuple[str, ...] | list[str] = (), nested_only: bool = False
                  ) -> list[str]:
    """Move the paths of site ``old`` its build did not write into ``new`` (same place); returns them.
    ``versions``: the spec's own versions (what an older marker owns); ``nested_only``: move only those inside
    a folder the build wrote (the ones at the top stay where they are).  The build's own temporary folders
    (:func:`is_temporary`) are never moved.

    Raises :class:`~posenc.tools.sphinx_build.DocsError` naming the first one ``new`` already has, before moving anything."""
    keep = [rel for rel in foreign(old, new, versions) if not is_temporary(rel)]
    for rel in keep:
        if os.path.lexists(new / rel):
            raise DocsError(f"{old / rel} was not written by posenc docs build and the new site writes "
                                   f"{rel}: refusing to replace it (move it away, or build into another folder)")
    keep = [rel for rel in keep if "/" in rel] if nested_only else keep
    moved: list[str] = []
    try:
        for rel in keep:
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(old / rel, new / rel)
            moved.append(rel)
    except BaseException:
        _move_back(old, new, moved)  # the caller removes ``new``
        raise
    return keep


def _move_back(old: Path, new: Path, moved: list[str]) -> None:
    for rel in reversed(moved):
        os.rename(new / rel, old / rel)


#: the prefixes of the build's temporary folders inside the output folder (the new site, the old one's paths)
BUILDING, OLD = ".posenc-site.building-", ".posenc-site.old-"


def is_temporary(rel: str) -> bool:
    """Whether ``rel`` (relative to the output folder) is one of the build's temporary folders."""
    return rel.startswith((BUILDING, OLD)) and "/" not in rel


def install(final: Path, new: Path, versions: tuple[str, ...] | list[str] = ()) -> None:
    """Put the site built in ``new`` (a folder inside ``final``) into ``final``, which stays the same folder
    (a mount point, its owner, group and mode are kept): the paths the previous build wrote (its marker) are
    replaced, a path it did not write stays (one inside a folder it wrote is moved into the new one).  On any
    error everything moved is put back, and the error raised; ``new`` is then the caller's to remove.

    Raises :class:`DocsError` where ``final`` is no longer empty and holds no site, or holds a path the build did
    not write where the new site writes one (nothing is changed then)."""
    entries = [n for n in os.listdir(final) if not is_temporary(n)]
    if is_site(final):
        mine = {p.split("/")[0] for p in owned(final, new, versions)}
        carried = carry_foreign(final, new, versions, nested_only=True)
        old = [n for n in entries if n in mine]
    elif entries:  # filled while the site was built
        raise DocsError(f"{final} is no longer empty and is not a posenc site: refusing to write into it")
    else:
        carried, old = [], []
    done: list[tuple[Path, Path]] = []
    trash = Path(tempfile.mkdtemp(prefix=OLD, dir=final))
    try:
        for n in old:
            os.rename(final / n, trash / n)
            done.append((final / n, trash / n))
        for n in sorted(os.listdir(new), key=lambda n: n == MARKER):  # the marker last
            os.rename(new / n, final / n)
            done.append((new / n, final / n))
    except BaseException:
        for src, dst in reversed(done):
            os.rename(dst, src)
        _move_back(final, new, carried)
        os.rmdir(trash)  # empty again (were a path not put back, it would stay there, and this fail)
        raise
    shutil.rmtree(trash, ignore_errors=True)


# ------------------------------------------------------------------------------------------- serving

#: what :func:`site_target` answers for a folder named without its trailing ``/`` (a redirect to it)
REDIRECT = "redirect"


def _inside(root: str, path: str) -> str | None:
    """``path`` with every link resolved, where that is a path inside ``root`` (itself resolved) none of whose
    parts below ``root`` starts with a dot; else None."""
    real = os.path.realpath(path)
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        return None
    rel = os.path.relpath(real, root)
    return None if rel != "." and any(p.startswith(".") for p in rel.split(os.sep)) else real


def site_target(root: Path | str, request_path: str) -> str | None:
    """The regular file to answer the HTTP request path ``request_path`` with, from the site folder ``root``:
    a file inside it (links resolved, never one leading out), none of whose parts starts with a dot; for a
    folder, its ``index.html`` (never a listing); :data:`REDIRECT` for a folder named without its trailing
    ``/``; None otherwise (404)."""
    from urllib.parse import unquote
    path = unquote(request_path.split("?", 1)[0].split("#", 1)[0], errors="strict")
    parts = [p for p in path.split("/") if p]
    if any(p.startswith(".") or "\\" in p or "\0" in p for p in parts):
        return None
    base = os.path.realpath(root)
    real = _inside(base, os.path.join(base, *parts))
    if real is None or not os.path.exists(real):
        return None
    if os.path.isdir(real):
        index = _inside(base, os.path.join(real, "index.html"))
        if index is None or not os.path.isfile(index):
            return None
        return index if path.endswith("/") or not parts else REDIRECT
    if path.endswith("/"):  # a file named as a folder
        return None
    return real if os.path.isfile(real) else None


def handler(root: Path):
    """The request handler class of ``posenc docs serve`` for the site folder ``root`` (GET and HEAD):
    :func:`site_target`'s file, a redirect to a folder's ``/``, or 404; no access log."""
    from http import HTTPStatus
    from http.server import SimpleHTTPRequestHandler
    from urllib.parse import quote, unquote

    class SiteHandler(SimpleHTTPRequestHandler):
        def send_head(self):
            try:
                found = site_target(root, self.path)
            except (OSError, UnicodeDecodeError, ValueError):
                found = None
            if found == REDIRECT:
                parts = [p for p in unquote(self.path.split("?", 1)[0].split("#", 1)[0]).split("/") if p]
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", "/" + "/".join(quote(p) for p in parts) + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            try:
                fd = os.open(found, os.O_RDONLY | os.O_NOFOLLOW) if found else -1
            except OSError:
                fd = -1
            if fd < 0:
                self.send_error(HTTPStatus.NOT_FOUND, "File not found")
                return None
            f = os.fdopen(fd, "rb")
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                f.close()
                self.send_error(HTTPStatus.NOT_FOUND, "File not found")
                return None
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-type", self.guess_type(found))
            self.send_header("Content-Length", str(st.st_size))
            self.send_header("Last-Modified", self.date_time_string(st.st_mtime))
            self.end_headers()
            return f

        def list_directory(self, path):  # never a listing
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None

        def log_message(self, *args):  # no access log on stderr
            pass

    return SiteHandler

"""cite-check's files: which files a folder holds (walked without recursion: any depth), reading only
regular files, decoding them best-effort (a name is shown through ``posenc.spec.errors.printable``).
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from pathlib import Path
from typing import Callable, Iterator, Optional


MAX_BYTES = 16 * 1024 * 1024

"""The largest file cite-check reads (16 MiB): a larger one is refused unread (an error ``unreadable``)."""


class _Special(Exception):
    """Not a regular file (a FIFO, a socket, a device): never read."""


class TooLarge(OSError):
    """A file over :data:`MAX_BYTES` (by its size, or by what it gave when read: ``/proc`` files say 0)."""


def _read_bytes(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file; :class:`_Special` for anything else, which is never opened
    blocking (a FIFO without a writer would hang a blocking open); :class:`TooLarge` for a file over
    ``limit`` bytes, never read whole (at most ``limit + 1`` bytes are read)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise _Special(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the stat and the open
            raise _Special(path)
        if st.st_size > limit:
            raise TooLarge(f"{st.st_size} bytes, over the limit of {limit} bytes ({limit // 2**20} MiB)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise TooLarge(f"over the limit of {limit} bytes ({limit // 2**20} MiB)")
        return data
    finally:
        os.close(fd)


def why_unreadable(e: OSError) -> str:
    """What an error of reading a file says, in words (``symbolic link loop``, ``permission denied`` ...)."""
    import errno
    if isinstance(e, TooLarge):
        return f"file too large: {e}"
    if e.errno == errno.ELOOP:
        return "cannot be read: a loop of symbolic links"
    if e.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file or directory"
    return f"cannot be read: {(e.strerror or type(e).__name__).lower()}"


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
         (b"\xfe\xff", "utf-16"))


def _declared(data: bytes) -> tuple[Optional[str], Optional[str]]:
    """A Python file's text in its declared encoding, or ``(None, why)`` where that encoding cannot
    decode it (an unknown codec, one that is not a text encoding, bytes it rejects: any codec may be named)."""
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:  # an unknown codec is named; else none is, and the text is not UTF-8 (read as Latin-1)
        return None, (str(e) if "unknown encoding" in str(e) or "encoding problem" in str(e) else None)
    try:
        return data.decode(enc).lstrip("\ufeff"), None
    except (UnicodeError, LookupError, ValueError, TypeError) as e:  # punycode, 'undefined', 'hex', 'rot13' ...
        if enc in ("utf-8", "utf-8-sig"):  # none declared: not UTF-8 is read as Latin-1, counted, no warning
            return None, None
        return None, f"the declared encoding {enc!r} cannot decode it ({type(e).__name__}: {e})"


def decode(data: bytes, language: str) -> Optional[tuple[str, Optional[str], Optional[str]]]:
    """``(text, decoding, problem)``: ``decoding`` is ``None`` for UTF-8 (or a Python file's declared
    encoding), else one of ``utf-16``, ``utf-32``, ``latin-1``; ``problem`` says why a declared encoding
    was not used (the file is read as UTF-8 / Latin-1 then).  ``None`` when binary: a NUL byte (outside
    UTF-16/32 with a BOM), or a BOM the rest does not decode under."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), codec, None
            except UnicodeDecodeError:
                return None
    if b"\0" in data:
        return None
    problem = None
    if language == "python":
        text, problem = _declared(data)
        if text is not None:
            return text, None, None
    try:
        return data.decode("utf-8-sig"), None, problem
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1", problem


def _display(paths: list[Path]) -> Path:
    """Of the paths naming one file, the real one (no symbolic link on the way), else the first."""
    for p in paths:
        if os.path.realpath(p) == os.path.abspath(p):
            return p
    return paths[0]


def walk_files(top: Path, prune: Callable[[Path], bool],
               on_error: Optional[Callable[[Path, OSError], None]] = None) -> Iterator[Path]:
    """The files under the folder ``top`` (and links that are not to folders), top-down, sorted, folders
    ``prune`` rejects left out; a link to a folder is not followed.  A stack, not recursion: any depth.
    A folder that cannot be listed is left out and given to ``on_error``."""
    stack = [Path(top)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            if on_error is not None:
                on_error(folder, e)
            continue
        dirs = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if not is_dir:
                yield Path(e.path)
            elif not e.is_symlink() and not prune(Path(e.path)):
                dirs.append(Path(e.path))
        stack.extend(reversed(dirs))

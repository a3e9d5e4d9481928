"""Writing into an output folder the user named without ever following a symbolic link inside it:
a file is written as a new regular file renamed onto its path (a link there is replaced, its target
left alone), a folder that is a link is replaced by a real folder, and only the files written are
chmod'ed (world-readable, whatever the umask).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_replacing(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``data`` as the content of ``path``: a new regular file (``mode``) renamed onto it, so a link
    at ``path`` is replaced, never written through."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def real_folder(path: Path) -> None:
    """Make ``path`` a real folder (0755): a link there is removed first, a folder is kept."""
    path = Path(path)
    if path.is_symlink():
        path.unlink()
    if not path.exists():
        path.mkdir()
        os.chmod(path, 0o755)
    elif not path.is_dir():
        raise NotADirectoryError(20, "exists and is not a folder", str(path))


def copy_tree_replacing(src: Path, dst: Path) -> None:
    """Copy the regular files and folders under ``src`` into the folder ``dst`` (created), with their
    modes; a link under ``dst`` on the way is replaced, never followed; other files of ``dst`` are kept."""
    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(src):
        here = dst / Path(dirpath).relative_to(src)
        for d in sorted(dirnames):
            real_folder(here / d)
        for f in sorted(filenames):
            s = Path(dirpath) / f
            st = os.lstat(s)
            if stat.S_ISREG(st.st_mode):
                write_replacing(here / f, s.read_bytes(), stat.S_IMODE(st.st_mode))


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (not a link to one)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False

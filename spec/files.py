"""Reading a file the user names (a config.json, a golden manifest): a regular file only -- a FIFO, a
device, a socket is never read (nor opened blocking: a FIFO without a writer would hang) -- of at most a
given size (``/dev/zero`` or a huge file never fills memory).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Union


class NotRegularFile(ValueError):
    """The path is not a regular file, or is bigger than the limit (the message says which)."""


def read_regular(path: Union[str, Path], limit: int, what: str = "size") -> bytes:
    """The bytes of regular file ``path`` of at most ``limit`` bytes.  :class:`NotRegularFile` for
    anything else (checked on the opened file; ``what`` names the limit in its message), :class:`OSError` where it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile("not a regular file (a FIFO, a device, a socket or a folder is never read)")
        if st.st_size > limit:
            raise NotRegularFile(f"{st.st_size} bytes, over the {what} limit of {limit} bytes")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotRegularFile(f"over the {what} limit of {limit} bytes (it grew while it was read)")
    return data

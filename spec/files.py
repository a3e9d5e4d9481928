"""Reading a file the user names (a config.json, a golden manifest): a regular file only -- a FIFO, a
device, a socket is never read (nor opened blocking: a FIFO without a writer would hang) -- of at most a
given size (``/dev/zero`` or a huge file never fills memory); its JSON nested at most a fixed depth.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Union

#: The JSON the kit reads from files a user names or could tamper with (a config.json, a golden manifest) nests a
#: few levels; deeper is refused at this depth, whatever recursion limit the process has (Hypothesis, for one,
#: raises ``sys.setrecursionlimit`` while it runs: whether a file is read must not depend on it)
JSON_DEPTH = 64


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


class TooDeep(ValueError):
    """The JSON nests objects and arrays deeper than the limit (:data:`JSON_DEPTH`)."""


def loads_json(text: Union[str, bytes], depth: int = JSON_DEPTH, **kwargs) -> Any:
    """``json.loads(text, **kwargs)``, refusing JSON nested more than ``depth`` levels (:class:`TooDeep`), also
    where the reader runs out of the interpreter's recursion limit first; the depth is counted iteratively after
    the parse.  ``json.JSONDecodeError`` (a ``ValueError``) for malformed JSON, as ``json.loads``."""
    try:
        data = json.loads(text, **kwargs)
    except RecursionError:
        raise TooDeep(f"nested deeper than {depth} levels") from None
    stack = [(data, 1)]
    while stack:
        x, level = stack.pop()
        if isinstance(x, (dict, list)):
            if level > depth:
                raise TooDeep(f"nested deeper than {depth} levels")
            stack.extend((v, level + 1) for v in (x.values() if isinstance(x, dict) else x))
    return data

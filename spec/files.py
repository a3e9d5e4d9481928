"""Reading a file the user names (a config.json, a golden manifest): a regular file only -- a FIFO, a
device, a socket is never read (nor opened blocking: a FIFO without a writer would hang) -- of at most a
given size (``/dev/zero`` or a huge file never fills memory); its JSON nested at most a fixed depth.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Union

import numpy as np

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
    """``json.loads(text, **kwargs)``, refusing JSON nested more than ``depth`` levels (:class:`TooDeep`).

    The depth is counted on the text before it is parsed (the brackets outside strings, without recursion), so
    ``json.loads`` never meets deeper nesting: its C reader recurses once per level, and a deep document either
    exhausts the interpreter's recursion limit (which Hypothesis, for one, raises while it runs) or, under a very
    high limit, overflows the C stack.  ``json.JSONDecodeError`` (a ``ValueError``) for malformed JSON, as
    ``json.loads``."""
    if nesting_depth(text) > depth:
        raise TooDeep(f"nested deeper than {depth} levels")
    return json.loads(text, **kwargs)


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, escapes included (unrolled: linear)


def nesting_depth(text: Union[str, bytes]) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON ``text``, strings left out (an unbalanced or malformed text
    gives some count; ``json.loads`` then reports what is wrong).  Linear, no recursion."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    steps = np.frombuffer(_STRING.sub("", text).encode("ascii", "ignore"), np.uint8)
    deepest = level = 0
    for start in range(0, steps.size, _CHUNK):  # in chunks: a 1 GiB report never needs 8 GiB of running sums
        run = level + np.cumsum(_STEP[steps[start:start + _CHUNK]], dtype=np.int64)
        deepest, level = max(deepest, int(run.max())), int(run[-1])
    return deepest


_CHUNK = 1 << 22
_STEP = np.zeros(256, np.int8)  # +1 for an opening bracket, -1 for a closing one, by byte
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1

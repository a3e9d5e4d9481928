"""The wire format between the conformance plugin and the adapter's worker process.

A message is a frame: a 4-byte big-endian length, a JSON header, then the header's ``blobs``
(each an 8-byte length and the bytes of one ``.npy`` array, written and read with
``allow_pickle=False``).  Nothing is pickled: values are JSON (``None``, bools, numbers with
NaN / inf, strings), tuples ``{"$t": [...]}`` (a named tuple's ``fields`` with them), sets
``{"$set": [...]}``, dicts ``{"$d": {...}}``, NumPy arrays ``{"$a": k}``
(blob ``k``; a dtype NumPy's format cannot name, such as ml_dtypes' bfloat16, travels as its raw
unsigned-integer view with ``"ext"``), NumPy scalars ``{"$s": k}``, pydantic models
``{"$m": "module:Class", "v": ...}`` (rebuilt with ``model_validate``; only models of
``posenc.*`` modules), and objects that stay in the worker as handles ``{"$h": id, ...}``.
Used by :mod:`posenc.conformance.isolation` (the plugin's side) and
:mod:`posenc.conformance.worker`.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import struct
import sys
from typing import Any, Callable, Optional

import numpy as np

_LEN = struct.Struct(">I")
_BLOB = struct.Struct(">Q")


_MAGIC = b"\x93NUMPY\x01\x00"
_HEADER = re.compile(r"\{'descr': '([^']+)', 'fortran_order': (True|False), 'shape': \(([0-9, ]*)\), \}")
_DTYPES: dict[str, np.dtype] = {}


def _npy(a: np.ndarray) -> tuple[bytes, Optional[str]]:
    """``a`` as the bytes of a ``.npy`` file (format 1.0, C order; what ``np.save`` writes)."""
    ext = None
    if a.dtype.kind == "V" or a.dtype.type.__module__ not in ("numpy", "builtins"):
        ext = a.dtype.name  # e.g. bfloat16 (ml_dtypes): its bits as unsigned integers
        a = a.view(f"u{a.dtype.itemsize}")
    if a.dtype.hasobject:
        raise TypeError("object arrays do not cross the process boundary")
    shape = "".join(f"{n}, " for n in a.shape)[:-1] if len(a.shape) > 1 else (f"{a.shape[0]}," if a.shape else "")
    head = f"{{'descr': '{np.lib.format.dtype_to_descr(a.dtype)}', 'fortran_order': False, 'shape': ({shape}), }}"
    pad = -(len(_MAGIC) + 2 + len(head) + 1) % 64
    head = (head + " " * pad + "\n").encode("latin1")
    body = a.tobytes(order="C")
    return _MAGIC + len(head).to_bytes(2, "little") + head + body, ext


def _from_npy(data: bytes, ext: Optional[str]) -> np.ndarray:
    """A writeable array from ``.npy`` bytes; the headers this module writes are parsed at once,
    any other through NumPy's reader (never with pickles)."""
    m = None
    if data[:8] == _MAGIC:
        n = int.from_bytes(data[8:10], "little")
        m = _HEADER.match(data[10:10 + n].decode("latin1"))
    if m is None or m[2] == "True":
        a = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    else:
        dt = _DTYPES.get(m[1])
        if dt is None:
            dt = _DTYPES[m[1]] = np.dtype(m[1])
        shape = tuple(int(x) for x in m[3].split(",") if x.strip())
        a = np.frombuffer(data, dt, offset=10 + n, count=int(np.prod(shape, dtype=np.int64))).reshape(shape).copy()
    if ext:
        import ml_dtypes  # noqa: F401 - registers bfloat16 and the other extension dtypes by name
        a = a.view(np.dtype(ext))
    return a


#: Arrays of at least this many bytes travel as ``.npy`` files in :data:`SPILL_DIR` (a tmpfs
#: folder both processes know) instead of through the pipe, which is slow for large data.
SPILL_BYTES = 1 << 18
#: The folder of spilled arrays (set by :func:`spill_to` on both sides), or None: all inline.
SPILL_DIR: Optional[str] = None
_SPILLED = [0]


def spill_to(folder: Optional[str]) -> None:
    global SPILL_DIR
    SPILL_DIR = folder


def _spill(a: np.ndarray) -> dict:
    data, ext = _npy(a)
    os.makedirs(SPILL_DIR, exist_ok=True)  # the adapter may have removed it
    _SPILLED[0] += 1
    path = os.path.join(SPILL_DIR, f"{os.getpid()}-{_SPILLED[0]}.npy")
    with open(path, "wb") as f:
        f.write(data)
    return {"$f": os.path.basename(path), "ext": ext}


def _unspill(name: str, ext: Optional[str]) -> np.ndarray:
    if SPILL_DIR is None or os.path.basename(name) != name:
        raise ValueError(f"refusing spilled array {name!r} (not a file of this run's spill folder)")
    path = os.path.join(SPILL_DIR, name)
    try:
        with open(path, "rb") as f:
            return _from_npy(f.read(), ext)
    finally:
        os.unlink(path)


def encode(value: Any, blobs: list[bytes], other: Callable[[Any], Any]) -> Any:
    """``value`` as JSON data; arrays appended to ``blobs`` (or spilled to a file when large);
    anything else is ``other(value)``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, np.generic):
        return value if type(value) in (int, float) else (int(value) if isinstance(value, int) else float(value))
    if isinstance(value, np.ndarray) and value.dtype != object:
        if type(value) is not np.ndarray:
            value = value.view(np.ndarray)  # a subclass's data (a masked array's too: never filled in)
        if SPILL_DIR is not None and value.nbytes >= SPILL_BYTES:
            return _spill(value)
        data, ext = _npy(value)
        blobs.append(data)
        return {"$a": len(blobs) - 1, "ext": ext}
    if isinstance(value, np.generic) and not isinstance(value, np.object_):
        data, ext = _npy(np.asarray(value))
        blobs.append(data)
        return {"$s": len(blobs) - 1, "ext": ext}
    if isinstance(value, tuple):
        return tuple_data(value, [encode(v, blobs, other) for v in value])
    if isinstance(value, (set, frozenset)):
        return {"$set": [encode(v, blobs, other) for v in value], "frozen": isinstance(value, frozenset)}
    if isinstance(value, list):
        return [encode(v, blobs, other) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$d": {k: encode(v, blobs, other) for k, v in value.items()}}
    model = _model_name(value)
    if model:
        return {"$m": model, "v": encode(value.model_dump(mode="python"), blobs, other)}
    return other(value)


def tuple_data(value: tuple, items: list) -> dict:
    """A tuple's message value (``{"$t": items}``); a named tuple's field names travel with it,
    so that its fields can be read by name on the other side (a prepared object may be one)."""
    fields = getattr(type(value), "_fields", None)
    if type(value) is not tuple and isinstance(fields, tuple) and len(fields) == len(value) \
            and all(isinstance(f, str) and f.isidentifier() for f in fields):
        return {"$t": items, "fields": list(fields), "name": type(value).__name__}
    return {"$t": items}


_NAMED: dict[tuple, type] = {}


def _named_tuple(name: str, fields: tuple) -> type:
    import collections
    key = (name, fields)
    if key not in _NAMED:
        try:
            _NAMED[key] = collections.namedtuple(name if name.isidentifier() else "NamedTuple", fields)
        except ValueError:  # a field name namedtuple refuses (a keyword, a leading underscore)
            _NAMED[key] = collections.namedtuple(name if name.isidentifier() else "NamedTuple", fields, rename=True)
    return _NAMED[key]


def _model_name(value) -> Optional[str]:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover - pydantic is a dependency
        return None
    cls = type(value)
    if isinstance(value, BaseModel) and "<" not in cls.__qualname__:
        return f"{cls.__module__}:{cls.__qualname__}"
    return None


#: The worker may import the module of a parameter model the plugin sends (a family of another
#: package); the plugin rebuilds only models of modules it has loaded itself.
IMPORT_MODELS = False


def decode(data: Any, blobs: list[bytes], handle: Callable[[dict], Any]) -> Any:
    """The inverse of :func:`encode`; ``handle(d)`` makes what a ``{"$h": ...}`` stands for."""
    if isinstance(data, list):
        return [decode(v, blobs, handle) for v in data]
    if not isinstance(data, dict):
        return data
    if "$a" in data:
        return _from_npy(blobs[data["$a"]], data.get("ext"))
    if "$f" in data:
        return _unspill(data["$f"], data.get("ext"))
    if "$s" in data:
        return _from_npy(blobs[data["$s"]], data.get("ext"))[()]
    if "$t" in data:
        items = tuple(decode(v, blobs, handle) for v in data["$t"])
        if "fields" in data:  # a named tuple: a local one with the same field names
            return _named_tuple(data.get("name", "NamedTuple"), tuple(data["fields"]))(*items)
        return items
    if "$set" in data:
        items = [decode(v, blobs, handle) for v in data["$set"]]
        return frozenset(items) if data.get("frozen") else set(items)
    if "$d" in data:
        return {k: decode(v, blobs, handle) for k, v in data["$d"].items()}
    if "$m" in data:
        mod, _, qual = data["$m"].partition(":")
        cls = sys.modules.get(mod) or (importlib.import_module(mod) if IMPORT_MODELS else None)
        for part in qual.split("."):
            cls = getattr(cls, part, None)
        from pydantic import BaseModel
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise TypeError(f"refusing to build {data['$m']}: not a pydantic model of a loaded module")
        return cls.model_validate(decode(data["v"], blobs, handle))
    if "$h" in data:
        return handle(data)
    if "$j" in data:
        return data["$j"]  # plain JSON data, as is
    if "$bound" in data:
        return {"$bound": data["$bound"]}  # a method of the object asked about
    raise TypeError(f"malformed message value {data!r}")


def write_frame(stream, header: dict, blobs: list[bytes]) -> None:
    head = json.dumps({**header, "blobs": len(blobs)}).encode()
    parts = [_LEN.pack(len(head)), head]
    for b in blobs:
        parts += [_BLOB.pack(len(b)), b]
    stream.write(b"".join(parts))
    stream.flush()


class Reader:
    """Reads frames from a pipe's file descriptor (its own buffer, large reads).  Given the
    writing process (``proc``, a ``subprocess.Popen``), a read also ends when that process exits
    -- a child it forked may still hold the pipe open, so end of file alone would never come."""

    def __init__(self, fd: int, proc=None):
        self.fd, self.proc = fd, proc
        self.buf = bytearray()
        self.pidfd: Optional[int] = None
        if proc is not None and hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(proc.pid)  # readable once the process has exited
            except OSError:
                pass

    #: ``time.monotonic()`` by which the next frame must have come (None: no limit); past it a read raises
    #: ``TimeoutError``
    deadline: Optional[float] = None

    def _wait(self) -> None:
        import select
        import time
        fds = [self.fd] if self.pidfd is None else [self.fd, self.pidfd]
        while True:
            wait = None if self.pidfd is not None else 0.25
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no reply within the limit")
                wait = left if wait is None else min(wait, left)
            ready, _, _ = select.select(fds, [], [], wait)
            if self.fd in ready:
                return
            if self.proc.poll() is not None:
                raise EOFError("the other process exited")

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if self.proc is not None:
                self._wait()
            chunk = os.read(self.fd, max(1 << 16, n - len(self.buf)))
            if not chunk:
                raise EOFError("the other process closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def close(self) -> None:
        if self.pidfd is not None:
            try:
                os.close(self.pidfd)
            except OSError:
                pass
            self.pidfd = None


#: A header longer than this is no frame of the kit's (bytes the adapter wrote into the
#: protocol pipe): the connection is broken, never waited on.
MAX_HEADER = 1 << 26


def read_frame(reader: Reader) -> tuple[dict, list[bytes]]:
    (n,) = _LEN.unpack(reader.exact(_LEN.size))
    if n > MAX_HEADER:
        raise ValueError(f"malformed frame (a {n}-byte header): something else wrote into the connection")
    header = json.loads(reader.exact(n))
    if not isinstance(header, dict) or not isinstance(header.get("blobs"), int):
        raise ValueError("malformed frame: something else wrote into the connection")
    blobs = []
    for _ in range(header.pop("blobs")):
        (m,) = _BLOB.unpack(reader.exact(_BLOB.size))
        blobs.append(reader.exact(m))
    return header, blobs


def exception_data(e: BaseException) -> dict:
    """What the plugin needs of an exception raised in the worker, to raise its like.  Nothing
    the exception does (a ``__str__`` or a ``reason`` property that raises) escapes."""
    import traceback

    from posenc.spec.errors import exception_text

    def text_attr(name):
        try:
            v = getattr(e, name, None)
        except BaseException:  # noqa: BLE001 - a property that raises
            return None
        return v if type(v) is str else None

    try:
        tb = traceback.extract_tb(e.__traceback__)
        where = [str(tb[-1].filename), int(tb[-1].lineno or 0), str(tb[-1].name)] if tb else None
    except BaseException:  # noqa: BLE001
        where = None

    def name(c, attr):
        try:
            v = getattr(c, attr)
            return v if type(v) is str else "?"
        except BaseException:  # noqa: BLE001 - a class whose names cannot be read
            return "?"

    mro = [[name(c, "__module__"), name(c, "__qualname__")] for c in type(e).__mro__]
    return {"mro": mro, "msg": exception_text(e), "where": where, "reason": text_attr("reason"),
            "outcome_msg": text_attr("msg")}

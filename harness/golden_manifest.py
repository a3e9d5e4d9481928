"""The golden manifest's format, validated before use, and the confined, bounded reading of its files.

A golden folder is the kit's data (or a family's), read by every run: whatever is wrong with it -- a field of
the wrong type, an entry that is not an object, a ``file`` outside the folder, a file far larger than any
golden -- is a :class:`~posenc.spec.errors.GoldenError` naming the file, the field and the case, which the
suite reports as a *kit error* (never a failure of the adapter or a clause), before anything is read into
memory that the manifest does not declare:

* the manifest is read only below :data:`MANIFEST_LIMIT` bytes and validated with :class:`Manifest`; each
  entry with :class:`Entry` when its case is loaded (a bad entry is its own case's kit error, the other
  cases still load);
* an entry's ``file`` is a plain relative path inside the golden folder (no absolute path, no ``..``, and
  no symlink that resolves outside it);
* its ``size`` (bytes) is at most :data:`FILE_LIMIT` and equals the file's before a byte is read, and no
  more than that is read; the arrays it holds are at most :data:`ARRAYS_LIMIT` bytes uncompressed (a small
  compressed file cannot unpack to gigabytes);
* only regular files are read: a FIFO, a folder, a socket or a device is named as what it is and never
  opened blocking; the manifest itself is never a symlink (a link is refused, naming it, never followed);
* a key written twice in one JSON object of the manifest is refused, naming the key and its lines
  (:func:`loads_strict`: JSON readers disagree on which of the two wins).

Writing (``posenc golden regenerate``, :func:`golden_folder`, :func:`write_atomic`): a golden folder is an
empty folder or one holding a golden ``manifest.json`` (a regular file the :class:`Manifest` format
validates).  Regenerate writes into no other folder, removes only the files its previous manifest lists,
refuses a symlink (or anything but a regular file) where it would write or remove, and writes each file
to a temporary file in the same folder renamed over the old one (a link there is replaced, never written
through; a reader sees the old file or the new one, never half of one).
"""

from __future__ import annotations

import bisect
import io
import json
import os
import re
import stat
import tempfile
import zipfile
from json.decoder import WHITESPACE, scanstring
from json.scanner import py_make_scanner
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, StringConstraints, ValidationError, field_validator

from posenc.spec.errors import GoldenError
from posenc.spec.files import TooDeep, loads_json

#: The most bytes a golden manifest may have (the kit's is about 0.5 MB).
MANIFEST_LIMIT = 64 << 20
#: The most bytes one golden file may declare and have (the kit's largest is about 0.2 MB).
FILE_LIMIT = 64 << 20
#: The most bytes the arrays of one golden file may take uncompressed (the kit's largest: a few MB).
ARRAYS_LIMIT = 512 << 20

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class InputMeta(_Strict):
    shape: list[NonNegativeInt]
    dtype: str
    sha256: Sha256
    generated: Optional[dict[str, Any]] = None  # the generator rule's arguments (not stored: regenerated)


class OutputMeta(_Strict):
    shape: list[NonNegativeInt]
    dtype: str


class ParamsMeta(_Strict):
    model: str
    values: dict[str, Any]


class Entry(_Strict):
    """One case of a manifest: what its file must hold and what the case definition must equal."""

    id: str = Field(min_length=1)
    op: str
    clauses: list[str]
    note: str = ""
    params: ParamsMeta
    inputs: dict[str, InputMeta]
    outputs: dict[str, OutputMeta]
    file: str
    size: NonNegativeInt = Field(description="the file's size in bytes, checked before it is read")
    sha256: Sha256

    @field_validator("file")
    @classmethod
    def _inside(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not v or "\\" in v or "\0" in v or p.is_absolute() or ".." in p.parts or str(p) in (".", "") or \
                (len(v) > 1 and v[1] == ":"):
            raise ValueError("must be a relative path inside the golden folder (no absolute path, no '..')")
        return v


class Manifest(_Strict):
    format: int
    spec_version: str
    seed: NonNegativeInt
    generator: str
    store_limit: Optional[NonNegativeInt] = None
    cases: list[Any]  # each entry is validated when its case is loaded (Entry): one bad entry, one kit error


def _field(loc) -> str:
    return ".".join(str(x) for x in loc) or "<root>"


def validation_text(e: ValidationError) -> str:
    """A pydantic error in one line: each field, what is wrong and the value found."""
    out = []
    for err in e.errors():
        where = _field(err["loc"])
        if err["type"] == "missing":
            out.append(f"has no field {where!r}")
        else:
            got = repr(err.get("input"))
            out.append(f"field {where!r}: {err['msg']} (got {got[:60] + '...' if len(got) > 60 else got})")
    return "; ".join(out)


def manifest(path: Path, text: str) -> dict:
    """The manifest at ``path`` (its ``text``, already read) validated: a plain dict, ``cases`` unvalidated."""
    try:
        raw = loads_strict(text)
    except json.JSONDecodeError as e:
        raise GoldenError(f"{path}: not valid JSON: {e}") from None
    except DuplicateKey as e:
        raise GoldenError(f"{path}: {e}") from None
    except TooDeep as e:  # a manifest is an object of a few levels
        raise GoldenError(f"{path}: not a golden manifest: its JSON is {e}") from None
    if not isinstance(raw, dict):
        raise GoldenError(f"{path}: not a JSON object (a {type(raw).__name__})")
    try:
        Manifest.model_validate(raw)
    except ValidationError as e:
        first = next(iter(e.errors()))
        if first["type"] == "missing":  # the message the format has always given
            raise GoldenError(f"{path}: field {_field(first['loc'])!r} missing") from None
        raise GoldenError(f"{path}: {validation_text(e)}") from None
    return raw


def entry(path: Path, m: dict, case_id: str) -> Optional[Entry]:
    """The validated manifest entry of ``case_id`` (None when the manifest has none)."""
    found = [(i, e) for i, e in enumerate(m["cases"]) if isinstance(e, dict) and e.get("id") == case_id]
    if len(found) > 1:
        raise GoldenError(f"{path}: cases[{found[0][0]}] and cases[{found[1][0]}] are both case {case_id!r}")
    if not found:
        return None
    i, raw = found[0]
    try:
        return Entry.model_validate(raw)
    except ValidationError as e:
        raise GoldenError(f"{path}: manifest entry {case_id!r} (cases[{i}]) {validation_text(e)}") from None


def entry_problems(path: Path, m: dict) -> tuple[set[str], list[str]]:
    """The case IDs of a manifest's well-formed entries, and one line per entry that is not (not an object,
    no string ``id``, an ID listed twice, a field of the wrong type): what ``posenc golden check`` prints."""
    ids: set[str] = set()
    seen: set[str] = set()
    problems = []
    for i, raw in enumerate(m["cases"]):
        cid = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(cid, str):
            what = f"not an object (a {type(raw).__name__})" if not isinstance(raw, dict) else "has no string field 'id'"
            problems.append(f"{path}: manifest entry cases[{i}] {what}")
            continue
        if cid in seen:
            problems.append(f"{path}: manifest entry cases[{i}]: case {cid!r} is listed twice")
            ids.discard(cid)
            continue
        seen.add(cid)
        try:
            Entry.model_validate(raw)
            ids.add(cid)
        except ValidationError as e:
            problems.append(f"{path}: manifest entry {cid!r} (cases[{i}]) {validation_text(e)}")
    return ids, problems


class DuplicateKey(ValueError):
    """A JSON object names one key twice: ``line N column C: duplicate key 'K' (first at line M column D)``."""

    def __init__(self, key: str, at: Optional[tuple[int, int]] = None, first: Optional[tuple[int, int]] = None):
        self.key, self.at, self.first = key, at, first
        where = f"line {at[0]} column {at[1]}: " if at else ""
        since = f" (first at line {first[0]} column {first[1]})" if first else ""
        super().__init__(f"{where}duplicate key {key!r}{since}: a key written twice is refused (JSON readers "
                         "disagree on which one wins)")


def _no_duplicates(pairs: list) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` refusing a key written twice in one object, at any depth (:class:`DuplicateKey`, naming
    the key and its lines; the lines are found by a second, position-keeping pass, only then)."""
    try:
        return loads_json(text, object_pairs_hook=_no_duplicates)
    except DuplicateKey as e:
        raise _located(text) or e from None


def _located(text: str) -> Optional[DuplicateKey]:
    """The first duplicate key of ``text`` (valid JSON) with its lines, by the pure-Python scanner."""
    def skip(s: str, i: int) -> int:
        return WHITESPACE.match(s, i).end()

    newlines = [m.start() for m in re.finditer("\n", text)]

    def parse_object(s_and_end, strict, scan_once, *_):
        s, end = s_and_end
        seen: dict[str, tuple[int, int]] = {}
        end = skip(s, end)
        while s[end] != "}":
            line = bisect.bisect_left(newlines, end)  # newlines before ``end``: linear in the text, not quadratic
            at = (line + 1, end - (newlines[line - 1] if line else -1))  # 1-based line and column
            key, end = scanstring(s, end + 1, strict)
            if key in seen:
                raise DuplicateKey(key, at, seen[key])
            seen[key] = at
            _, end = scan_once(s, skip(s, skip(s, end) + 1))  # past the ':'
            end = skip(s, end)
            end = skip(s, end + 1) if s[end] == "," else end
        return None, end + 1

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object
    decoder.scan_once = py_make_scanner(decoder)
    try:
        decoder.decode(text)
    except DuplicateKey as e:
        return e
    except (ValueError, RecursionError):
        return None
    return None


_KINDS = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a FIFO", "a folder", ...)."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _link_text(path: Path) -> str:
    try:
        return f"a symlink (to {os.readlink(path)})"
    except OSError:
        return "a symlink"


def open_regular(path: Path, what: str, follow: bool = True) -> tuple[int, os.stat_result]:
    """An open descriptor of regular file ``path`` and its stat: anything else is a :class:`GoldenError` saying
    what it is (a FIFO is never opened: stat first, then a non-blocking open checked again by fstat);
    ``follow=False``: a symlink is refused too, never followed."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        dangling = os.path.islink(path)
        raise GoldenError(f"{path}: {what} missing" + (f" ({_link_text(path)}, dangling)" if dangling else "")) from None
    if stat.S_ISLNK(st.st_mode):
        raise GoldenError(f"{path}: the {what} is {_link_text(path)}: refused, never followed (it must be a regular "
                          "file in the golden folder)")
    if not stat.S_ISREG(st.st_mode):
        raise GoldenError(f"{path}: not a regular file: {file_kind(st.st_mode)} (the {what} is never read from it)")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # swapped after the stat: still never read
        os.close(fd)
        raise GoldenError(f"{path}: not a regular file: {file_kind(st.st_mode)} (the {what} is never read from it)")
    return fd, st


def _read_fd(fd: int, n: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        return f.read(n)


def read_bounded(path: Path, size: int, limit: int, what: str = "golden file") -> bytes:
    """The bytes of regular file ``path``, which must have ``size`` bytes (at most ``limit``): checked
    before anything is read, and no more than ``size`` bytes are read even if it grows meanwhile."""
    try:
        fd, st = open_regular(path, what)
        try:
            if size > limit:
                raise GoldenError(f"{path}: the manifest declares {size} bytes, over the {what} limit of {limit} bytes")
            if st.st_size != size:
                raise GoldenError(f"{path}: {st.st_size} bytes, the manifest says {size} (file tampered with or "
                                  "corrupt)")
        except GoldenError:
            os.close(fd)
            raise
        data = _read_fd(fd, size + 1)
    except OSError as e:
        raise GoldenError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) != size:
        raise GoldenError(f"{path}: changed while it was read (now {len(data)}+ bytes, the manifest says {size})")
    return data


def read_manifest_text(path: Path) -> str:
    """The manifest's text, read only when it is a regular file (never a symlink, never a FIFO) of at most
    :data:`MANIFEST_LIMIT` bytes."""
    try:
        fd, st = open_regular(path, "manifest", follow=False)
        if st.st_size > MANIFEST_LIMIT:
            os.close(fd)
            raise GoldenError(f"{path}: {st.st_size} bytes, over the manifest limit of {MANIFEST_LIMIT} bytes")
        data = _read_fd(fd, MANIFEST_LIMIT + 1)
    except OSError as e:
        raise GoldenError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > MANIFEST_LIMIT:
        raise GoldenError(f"{path}: over the manifest limit of {MANIFEST_LIMIT} bytes (it grew while it was read)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GoldenError(f"{path}: not UTF-8 text: {e}") from None


def confined(directory: Path, name: str) -> Path:
    """``directory / name`` where it resolves inside ``directory`` (an entry's ``file``, already checked
    to be relative and free of ``..``: a symlink may still point outside)."""
    path = directory / name
    inside = Path(os.path.realpath(directory))
    if not Path(os.path.realpath(path)).is_relative_to(inside):
        raise GoldenError(f"{path}: resolves to {os.path.realpath(path)}, outside the golden folder {inside} "
                          "(a symlink out of the folder)")
    return path


def check_arrays_size(path: Path, data: bytes) -> None:
    """The npz's members unpack to at most :data:`ARRAYS_LIMIT` bytes (as its zip directory declares them;
    zipfile never reads past a member's declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            total = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise GoldenError(f"{path}: not a readable npz of plain arrays: {e}") from None
    if total > ARRAYS_LIMIT:
        raise GoldenError(f"{path}: its arrays take {total} bytes uncompressed, over the limit of {ARRAYS_LIMIT}")


def _listed_files(m: dict) -> set[str]:
    """The files a (validated) manifest lists that regenerate may remove: plain ``.npz`` names in the folder."""
    names = {e.get("file") for e in m["cases"] if isinstance(e, dict)}
    return {n for n in names if isinstance(n, str) and n.endswith(".npz") and "/" not in n and "\\" not in n
            and "\0" not in n}


def golden_folder(directory: Path, writes: list[str], manifest_name: str = "manifest.json") -> set[str]:
    """Make sure ``directory`` may be (re)written by ``posenc golden regenerate`` before anything is written:
    it does not exist (created), is empty, or holds a golden manifest (a regular file that :func:`manifest`
    validates); and no name it will write (``writes``) or remove (the files its manifest lists) is a symlink
    or anything but a regular file.  Returns the files the previous manifest lists (empty for a new folder)."""
    try:
        if not os.path.lexists(directory):
            directory.mkdir(parents=True)
            return set()
        if not directory.is_dir():
            raise GoldenError(f"{directory}: not a folder; `posenc golden regenerate` writes into a golden folder")
        if not any(directory.iterdir()):
            return set()
    except OSError as e:
        raise GoldenError(f"{directory}: cannot be made or listed ({e.strerror or e})") from None
    path = directory / manifest_name
    if not os.path.lexists(path):
        raise GoldenError(f"{directory}: not a golden folder (no {manifest_name}) and not empty: `posenc golden "
                          f"regenerate` writes only into an empty folder or one holding a golden {manifest_name}; "
                          "nothing was written or removed")
    try:
        listed = _listed_files(manifest(path, read_manifest_text(path)))
    except GoldenError as e:
        raise GoldenError(f"{e}; `posenc golden regenerate` rewrites only a folder whose {manifest_name} is a golden "
                          "manifest (or an empty folder); nothing was written or removed") from None
    bad = []
    for name in sorted(set(writes) | listed):
        try:
            mode = os.lstat(directory / name).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            bad.append(f"{name} is {_link_text(directory / name) if stat.S_ISLNK(mode) else file_kind(mode)}")
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise GoldenError(f"{directory}: {'; '.join(bad[:3])}{more}: `posenc golden regenerate` replaces or removes only "
                          "regular files (never writes through a link); remove them first; nothing was written or removed")
    return listed


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(directory: Path, name: str, data: bytes) -> None:
    """Write ``directory / name`` whole or not at all: a temporary file in the same folder, renamed over the
    old one (a symlink of that name is replaced, never written through).  A :class:`GoldenError` where it
    cannot be written (the old file left as it was, the temporary file removed)."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, directory / name)
    except OSError as e:
        raise GoldenError(f"{directory / name}: cannot be written ({e.strerror or e}); the old file is left as "
                          "it was") from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)


def remove_listed(directory: Path, name: str) -> None:
    """Remove a file the previous manifest listed (a regular file; anything else was refused before writing)."""
    path = directory / name
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            path.unlink()
    except FileNotFoundError:
        pass

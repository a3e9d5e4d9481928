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
  compressed file cannot unpack to gigabytes).
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, StringConstraints, ValidationError, field_validator

from posenc.spec.errors import GoldenError
from posenc.spec.files import NotRegularFile, read_regular

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
    import json
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise GoldenError(f"{path}: not valid JSON: {e}") from None
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


def read_bounded(path: Path, size: int, limit: int, what: str = "golden file") -> bytes:
    """The bytes of regular file ``path``, which must have ``size`` bytes (at most ``limit``): checked
    before anything is read, and no more than ``size`` bytes are read even if it grows meanwhile."""
    if size > limit:
        raise GoldenError(f"{path}: the manifest declares {size} bytes, over the {what} limit of {limit} bytes")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise GoldenError(f"{path}: not a regular file")
        if st.st_size != size:
            raise GoldenError(f"{path}: {st.st_size} bytes, the manifest says {size} (file tampered with or corrupt)")
        with open(path, "rb") as f:
            data = f.read(size + 1)
    except OSError as e:
        raise GoldenError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) != size:
        raise GoldenError(f"{path}: changed while it was read (now {len(data)}+ bytes, the manifest says {size})")
    return data


def read_manifest_text(path: Path) -> str:
    """The manifest's text, read only when it is a regular file of at most :data:`MANIFEST_LIMIT` bytes."""
    try:
        data = read_regular(path, MANIFEST_LIMIT, "manifest")
    except NotRegularFile as e:
        raise GoldenError(f"{path}: {e}") from None
    except OSError as e:
        raise GoldenError(f"{path}: cannot be read ({e.strerror or e})") from None
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

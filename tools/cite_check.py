"""``posenc cite-check PATH...``: check the spec IDs cited in source files.

A *citation* is ``posenc:`` (any case) followed by one or more ``ID`` or ``ID@VERSION`` items (the
grammar is in ``docs/citing.md``); each is resolved by :func:`posenc.spec.versions.resolve` and
every problem it reports (``unknown-id``, ``unknown-version``, ``not-in-version``, ``superseded``,
``meaning-changed``) is an **error**, as is a ``posenc:`` citation that does not parse
(``malformed-citation``).  A *bare* ID -- an ID-shaped token outside a citation whose prefix is one
of the spec's ID prefixes (``ROPE-``, ``DIV-ROPE-``, ``T5-`` ...) -- is checked leniently: a
**warning** when it is superseded, was removed, carries a ``@VERSION`` with a problem, or is not an
ID but is a near miss of one (same prefix, length within :data:`NEAR_LENGTH`, ``difflib`` ratio >=
:data:`NEAR_CUTOFF`); otherwise nothing (``T5-XL`` is prose, ``ROPE-PAIR-HALF`` is fine).  Only
comments and docstrings are read (the whole text of Markdown, reST and plain-text files); what
counts as a comment per language is :data:`LANGUAGES`.

Entry points: :func:`main` (the CLI, given the parsed arguments), :func:`check_paths` (a
:class:`Report`), :func:`check_text` (the findings of one text).  Nothing here writes files or
reaches the network; only regular files are opened, none over :data:`~.cite_files.MAX_BYTES`.  The
grammar's pieces are :mod:`.cite_grammar`, the look-alike IDs :mod:`.cite_hidden`, the comments per
language :mod:`.cite_lexers`, the files :mod:`.cite_files`.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import re
import stat
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional, Sequence

from posenc.tools.cite_blocks import example_lines
from posenc.tools.cite_grammar import (BARE, ID_RE, LEADER, MARK_IGNORE, MARK_OFF, MARK_ON, URL,  # noqa: F401
                                       _citation, _ignored, _item, _marker, _Spans, blanks, continuation,
                                       one_newline)
from posenc.tools.cite_hidden import hidden_ids
from posenc.spec.errors import printable
from posenc.tools.cite_files import (MAX_BYTES, TooLarge, _display, _read_bytes, _Special, decode, walk_files,
                                     why_unreadable)
from posenc.tools.cite_lexers import PIECES, Note, language_of

JSON_FORMAT = 1

"""The version of the ``--format json`` document (``"format"``); bumped on an incompatible change."""

NEAR_CUTOFF = 0.8

"""A bare non-ID token with a known prefix is warned about only when this close to a real ID."""

NEAR_LENGTH = 3

"""... and only about IDs of the same prefix whose length differs from the token's by at most this."""

ERROR, WARNING, INFO = "error", "warning", "info"

PRUNE_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", "venv", ".venv", ".tox", ".nox",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache"})


@dataclass(frozen=True)
class Finding:
    """One problem: ``file`` as scanned, 1-based ``line`` and ``column`` of the ID, ``severity``
    (``error`` / ``warning`` / ``info``), ``code``, the cited ``id`` and ``version`` (``None``: none
    given), ``message``, an actionable ``hint`` and ``url`` (the ID's page; ``None`` when unknown or
    the docs-site module is absent).  An ``unparsed`` warning (a file read only in part) has ``id``
    ``""``."""

    file: str
    line: int
    column: int
    severity: str
    code: str
    id: str
    version: Optional[str]
    message: str
    hint: str
    url: Optional[str] = None

    def text(self) -> str:
        """The finding's block of the text report; every character that is not printable (ESC, a bidi
        control, a line separator ...), wherever it comes from, written as its Python escape."""
        cited = self.id + (f"@{self.version}" if self.version else "")
        lines = [f"{self.file}:{self.line}:{self.column}: {self.severity}[{self.code}]" + (f" {cited}" if cited else "")
                 + f": {self.message}"]
        lines += [f"    hint: {self.hint}"] if self.hint else []
        lines += [f"    see: {self.url}"] if self.url else []
        return "\n".join(printable(line) for line in lines)


DECODINGS = ("utf-16", "utf-32", "latin-1")

"""The ways a file that is not UTF-8 (nor in its Python encoding) is still read, counted in the summary."""


@dataclass
class Report:
    """The result of a scan: the findings (sorted by file, line, column) and the file counts."""

    findings: list[Finding] = field(default_factory=list)
    files_scanned: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: {"binary": 0, "unreadable": 0, "unsupported": 0,
                                                             "special": 0})
    partially_parsed: int = 0
    decoded: dict[str, int] = field(default_factory=lambda: {d: 0 for d in DECODINGS})
    unread: list[tuple[str, str, bool]] = field(default_factory=list)  # (file, why, it does not exist)

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def could_not_read(self, path: Path, e: OSError, named: bool) -> None:
        """A file (``named`` on the command line, or found in a folder) that could not be read: counted as
        ``unreadable`` and reported as an error of that code -- except a dangling symbolic link found in a
        folder, which names no file (counted only)."""
        self.skipped["unreadable"] += 1
        why = why_unreadable(e)
        missing = not isinstance(e, TooLarge) and e.errno in (errno.ENOENT, errno.ENOTDIR)
        if missing and not named:
            return
        file = path.as_posix()
        self.unread.append((file, why, missing))
        hint = ("check the path" if missing else
                f"cite-check reads files of up to {MAX_BYTES // 2**20} MiB: leave it out of the paths (or split it)"
                if isinstance(e, TooLarge) else "fix the file (its permissions, the link) or leave it out of the paths")
        self.findings.append(Finding(file, 1, 1, ERROR, "unreadable", "", None, why, hint))

    def status(self) -> int:
        """The exit status (docs/citing.md): 2 a named path does not exist, 3 a file could not be read,
        1 a citation error, else 0."""
        if any(missing for _, _, missing in self.unread):
            return 2
        if self.unread:
            return 3
        return 1 if self.count(ERROR) else 0

    def to_json(self) -> dict:
        """The ``--format json`` document (documented in ``docs/citing.md``)."""
        from posenc.spec import SPEC_VERSION
        return {"format": JSON_FORMAT, "spec_version": SPEC_VERSION,
                "findings": [asdict(f) for f in self.findings],
                "summary": {"errors": self.count(ERROR), "warnings": self.count(WARNING), "infos": self.count(INFO),
                            "files_scanned": self.files_scanned, "files_skipped": dict(self.skipped),
                            "files_partially_parsed": self.partially_parsed, "files_decoded": dict(self.decoded)}}

    def summary_line(self) -> str:
        skipped = sum(self.skipped.values())
        out = (f"posenc cite-check: {self.count(ERROR)} error(s), {self.count(WARNING)} warning(s) in "
               f"{self.files_scanned} file(s)")
        extra = []
        if skipped:
            extra.append(f"{skipped} skipped: " + ", ".join(f"{n} {k}" for k, n in self.skipped.items() if n))
        if self.partially_parsed:
            extra.append(f"{self.partially_parsed} partially parsed")
        extra += [f"{n} decoded as {k}" for k, n in self.decoded.items() if n]
        return out + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class _Spec:
    current: frozenset
    ever: frozenset  # IDs of every known version
    prefixes: frozenset
    by_head: dict = field(hash=False, compare=False)  # prefix -> current IDs of that prefix


def _head(ident: str) -> str:
    parts = ident.split("-")
    return parts[1] if parts[0] == "DIV" and len(parts) > 2 else parts[0]


@lru_cache(maxsize=1)
def _spec() -> _Spec:
    from posenc import registry
    from posenc.spec import SPEC_VERSION
    from posenc.spec.versions import known_versions, snapshot
    prefixes: set[str] = set()
    ever: set[str] = set()
    for v in known_versions():
        snap = snapshot(v)
        ever |= set(snap.entries)
        for fam in snap.families.values():
            prefixes |= set(fam.get("id_prefixes") or ())
    try:
        for fam in registry.spec().families.values():  # the kit's and every registered family's
            prefixes |= set(getattr(fam, "id_prefixes", None) or ())
    except Exception:  # noqa: BLE001 -- the snapshots' prefixes suffice
        pass
    for ident in ever:  # IDs of families that predate id_prefixes
        prefixes.add(_head(ident))
    current = frozenset(snapshot(SPEC_VERSION).entries)
    by_head: dict[str, list[str]] = {}
    for ident in sorted(current):
        by_head.setdefault(_head(ident), []).append(ident)
    return _Spec(current, frozenset(ever), frozenset(prefixes), by_head)


def _has_known_prefix(ident: str, spec: _Spec) -> bool:
    return _head(ident) in spec.prefixes


def _url(ident: str) -> Optional[str]:
    if ident not in _spec().current:
        return None
    try:
        from posenc.tools.docs_site import page_url
    except ImportError:
        return None
    try:
        return page_url(ident)
    except Exception:  # noqa: BLE001 -- a link is a courtesy; its absence is not an error of the scan
        return None


class _Cache:
    """What one run has resolved: per (ID, version) and per near-miss token, so that a file citing
    the same ID a million times resolves it once."""

    def __init__(self):
        self.resolved: dict = {}
        self.near: dict = {}
        self.urls: dict = {}
        self.hints: dict = {}

    def resolve(self, ident: str, ver: Optional[str]):
        key = (ident, ver)
        if key not in self.resolved:
            from posenc.spec.versions import resolve
            self.resolved[key] = resolve(ident, ver)
        return self.resolved[key]

    def url(self, ident: str) -> Optional[str]:
        if ident not in self.urls:
            self.urls[ident] = _url(ident)
        return self.urls[ident]

    def hint(self, code: str, hint: str, r) -> str:
        if code == "unknown-version" and r.entry is not None and not r.entry.get("superseded_by"):
            if r.ident not in self.hints:
                from posenc.spec.versions import citable_since
                self.hints[r.ident] = citable_since(r.ident)
            since = self.hints[r.ident]
            return f"{hint}; it has meant what it means now since {since}: cite {r.ident}@{since}"
        return hint

    def near_misses(self, ident: str, spec: _Spec) -> list[str]:
        """Current IDs of the same prefix, of a length within NEAR_LENGTH, difflib ratio >= NEAR_CUTOFF."""
        if ident not in self.near:
            cands = [c for c in spec.by_head.get(_head(ident), ()) if abs(len(c) - len(ident)) <= NEAR_LENGTH]
            self.near[ident] = difflib.get_close_matches(ident, cands, n=3, cutoff=NEAR_CUTOFF) if cands else []
        return self.near[ident]


def _strict(cache: _Cache, file: str, ln: int, col: int, ident: str, ver: Optional[str],
            warnings: bool = True) -> list[Finding]:
    r = cache.resolve(ident, ver)
    url = cache.url(ident)
    out = [Finding(file, ln, col + 1, ERROR, code, ident, ver, msg, cache.hint(code, hint, r), url)
           for code, msg, hint in r.problems]
    if not warnings or out:  # a note on the wording of an ID that is wrong anyway is noise
        return out
    out += [Finding(file, ln, col + 1, INFO, "reworded", ident, ver, note, "no change needed: the meaning is the same",
                    url) for note in r.notes]
    return out


def _malformed(file: str, ln: int, col: int, tok: str, severity: str = ERROR) -> Finding:
    return Finding(file, ln, col + 1, severity, "malformed-citation", tok, None,
                   f"`posenc:` is followed by {tok!r}, which is not ID or ID@MAJOR.MINOR.PATCH"
                   if severity == ERROR else f"{tok!r} is not ID or ID@MAJOR.MINOR.PATCH",
                   "write `posenc: ID@VERSION[, ID@VERSION...]` with an ID as `posenc spec list` "
                   "prints it (upper case, hyphens), e.g. `posenc: ROPE-PAIR-HALF@0.4.0`")


def _bare(cache: _Cache, file: str, ln: int, col: int, ident: str, ver: Optional[str]) -> list[Finding]:
    spec = _spec()
    if ident not in spec.ever:
        if not _has_known_prefix(ident, spec):
            return []
        near = cache.near_misses(ident, spec)
        if not near:
            return []
        return [Finding(file, ln, col + 1, WARNING, "unknown-id", ident, ver,
                        f"{ident} is not a clause or divergence ID (a near miss of {near[0]})",
                        f"did you mean {' or '.join(near)}? (cite it as `posenc: {near[0]}`)")]
    r = cache.resolve(ident, ver)
    return [Finding(file, ln, col + 1, WARNING, code, ident, ver, msg, hint, cache.url(ident))
            for code, msg, hint in r.problems]


_ID_FULL = re.compile(ID_RE)


def _hidden(text: str, file: str, ln: int, col: int, out: list[Finding], cache: _Cache) -> str:
    """Report each ID written with a hidden or look-alike character (:mod:`.cite_hidden`) as an error;
    the text with each such token replaced by its ID (blanks before it: columns stay), to be read on."""
    spec = _spec()
    def known(ident: str) -> bool:  # an ID, or a near miss of one (as a bare token is judged)
        return ident in spec.ever or (_has_known_prefix(ident, spec) and bool(cache.near_misses(ident, spec)))
    parts, last = [], 0
    for c, tok, ident, what, plain in sorted(hidden_ids(text, _ID_FULL, known, spec.prefixes)):
        if c < last:  # overlaps the one before
            continue
        like = f"looks like {ident}" if ident == "posenc:" or (_ID_FULL.fullmatch(ident) and known(ident)) else \
            "is written like an ID"
        out.append(Finding(file, ln, col + c + 1, ERROR, "hidden-character", ident, None,
                           f"{tok!r} {like} but holds {what}: it is read as another token (and a search "
                           f"misses it)", "retype it in ASCII: upper-case letters, digits and '-'"))
        parts += [text[last:c], plain]  # joined once: linear in the line, however many tokens it holds
        last = c + len(tok)
    return "".join(parts) + text[last:] if parts else text


@dataclass
class _Line:
    """One piece of a file being read: where it is, its text, and where its findings go."""

    file: str
    ln: int
    col: int
    text: str
    warnings: bool
    cache: _Cache
    out: list

    def strict(self, items, bad) -> None:
        for c, ident, ver, _, _ in items:
            self.out += _strict(self.cache, self.file, self.ln, self.col + c, ident, ver, self.warnings)
        for c, tok in bad:
            self.out.append(_malformed(self.file, self.ln, self.col + c, tok))


def _read_line(line: _Line, cont: bool) -> bool:
    """Check one piece (``cont``: it continues the citation list of the line before); whether a citation
    list is still open at its end (it goes on on the next line)."""
    text = line.text
    if not text.isascii():
        text = line.text = _hidden(text, line.file, line.ln, line.col, line.out, line.cache)
    leaders = list(LEADER.finditer(text)) if ":" in text else []
    bares = list(BARE.finditer(text)) if line.warnings and "-" in text else []
    if not leaders and not bares and not cont:
        return False
    spec = _spec()
    urls = [m.span() for m in URL.finditer(text)] if "/" in text or "www." in text else []
    in_url, cited = _Spans(urls), _Spans()
    is_open = False
    if cont:
        start = continuation(text)
        items, bad, end, is_open = _citation(text, start, spec.prefixes, continued=True)
        cited.add(start, end)
        line.strict(items, bad)
    for lead in leaders:
        if in_url.covers(lead.start()) or cited.covers(lead.start()):
            continue
        items, bad, end, is_open = _citation(text, lead.end(), spec.prefixes)
        cited.add(lead.start(), end)
        line.strict(items, bad)
    for m in bares:
        if in_url.covers(m.start()) or cited.covers(m.start()):
            continue
        it = _item(text, m.start())
        if it[3] is not None:
            if _has_known_prefix(it[1], spec):
                line.out.append(_malformed(line.file, line.ln, line.col + m.start(), it[3], WARNING))
            continue
        line.out += _bare(line.cache, line.file, line.ln, line.col + m.start(), it[1], it[2])
    return is_open


def _check(source: str, language: str, file: str, warnings: bool, cache: _Cache) -> tuple[list[Finding], bool]:
    """The findings of one text and whether it was parsed only in part."""
    out: list[Finding] = []
    notes: list[Note] = []
    off = False
    source = one_newline(source)  # a lone CR is a line break too (a CR-only file's lines are counted)
    examples = example_lines(source, language)  # a marker in a code block is an example, not a marker
    pending, last_ln = None, None  # the line on which a citation list continues (its line ended with `,` ...)
    for ln, col, text in sorted(PIECES[language](source, notes)):
        first, last_ln = ln != last_ln, ln
        cont = first and ln == pending
        if first:
            pending = None
        mark = None if ln in examples else _marker(text, language)
        if mark == "on":
            off = False
        skip = off or _ignored(text, language)
        if mark == "off":
            off = True  # from the next line on; the marker's own line is checked like any other
        if skip:
            continue
        if _read_line(_Line(file, ln, col, blanks(text), warnings, cache, out), cont):
            pending = ln + 1
    if notes and warnings:
        for ln, col, msg in notes:
            out.append(Finding(file, ln, col + 1, WARNING, "unparsed", "", None,
                               f"{msg}: the file was read best-effort (every comment and string literal)",
                               "fix the syntax error; until then string literals in code are read as if "
                               "they were docstrings"))
    return out, bool(notes)


def check_text(source: str, language: str, file: str = "<text>", warnings: bool = True) -> list[Finding]:
    """The findings of one file's text.

    ``language``: a key of :data:`PIECES` (``python``, ``c``, ``js``, ``rust``, ``go``, ``swift``,
    ``hash``, ``markdown``, ``rst``, ``text``); ``file``: the name the findings carry; ``warnings``:
    ``False`` drops the bare-ID warnings and infos.  Raises ``KeyError`` for an unknown language and
    :class:`posenc.spec.errors.SpecError` when the spec snapshots cannot be read.
    """
    return _check(source, language, file, warnings, _Cache())[0]


def _walk(path: Path, rep: Report) -> Iterator[tuple[Path, Optional[str]]]:
    """``(file, language)`` of a path: a named file as it is (its language may be ``None``), a
    folder's files of a supported type (by extension or ``#!`` line) recursively (a folder that cannot
    be listed is reported in ``rep``)."""
    if not path.is_dir():
        yield path, language_of(path, sniff=True)
        return
    def prune(d: Path) -> bool:
        return d.name in PRUNE_DIRS or (d / "pyvenv.cfg").exists()
    for p in walk_files(path, prune, lambda d, e: rep.could_not_read(d, e, named=d == Path(path))):
        lang = language_of(p, sniff=True)
        if lang is not None:
            yield p, lang


def _collect(paths: Sequence[Path], rep: Report) -> tuple[list, dict]:
    """The files to read, each once: ``(order, names)``, ``order`` the ``(real path, language)`` of each file
    in the order found, ``names`` the paths that reach each.  A named path that cannot be reached (it does
    not exist, a symbolic-link loop ...) is reported in ``rep``."""
    order: list = []
    names: dict = {}
    for top in paths:
        try:
            os.stat(top)
        except OSError as e:
            rep.could_not_read(Path(top), e, named=True)
            continue
        for p, lang in _walk(Path(top), rep):
            try:
                key = os.path.realpath(p) if os.path.lexists(p) else p
            except OSError:
                key = p
            if key not in names:
                names[key] = []
                order.append((key, lang))
            if p not in names[key]:
                names[key].append(p)
    return order, names


def _scan(rep: Report, p: Path, lang: Optional[str], warnings: bool, cache: _Cache) -> None:
    """Read one file into ``rep``: its findings, or why it was skipped."""
    if lang is None:
        try:
            special = not stat.S_ISREG(os.stat(p).st_mode)
        except OSError:
            special = False
        rep.skipped["special" if special else "unsupported"] += 1
        return
    try:
        data = _read_bytes(p)
    except _Special:
        rep.skipped["special"] += 1
        return
    except OSError as e:
        rep.could_not_read(p, e, named=False)
        return
    decoded = decode(data, lang)
    if decoded is None:
        rep.skipped["binary"] += 1
        return
    text, how, problem = decoded
    rep.files_scanned += 1
    if how:
        rep.decoded[how] += 1
    found, partial = _check(text, lang, p.as_posix(), warnings, cache)
    if problem is not None and warnings:
        found.append(Finding(p.as_posix(), 1, 1, WARNING, "unparsed", "", None,
                             f"{problem}: the file was read best-effort as {how or 'UTF-8'}",
                             "declare a text encoding Python can decode the file with (or none: UTF-8)"))
    rep.findings += found
    rep.partially_parsed += partial or problem is not None


def check_paths(paths: Sequence[Path], warnings: bool = True) -> Report:
    """Scan files and folders (folders recursively, supported file types only, without ``.git``,
    ``__pycache__``, ``node_modules`` and virtual environments).  Binary and special (not regular) files,
    and a named file of an unsupported type, are skipped and counted, never reported.  A file that cannot
    be read -- a named path that does not exist, a symbolic-link loop, no permission, over
    :data:`MAX_BYTES` -- is counted as ``unreadable`` and reported as an error ``unreadable`` (not a
    dangling symbolic link found in a folder: counted only); the others are read all the same.  A file
    reached by several paths (a symbolic link and its target) is scanned once, under its real path.
    Raises :class:`posenc.spec.errors.SpecError` when the spec cannot be read."""
    rep = Report()
    order, names = _collect(paths, rep)
    cache = _Cache()
    for key, lang in order:
        _scan(rep, _display(names[key]), lang, warnings, cache)
    rank = {ERROR: 0, WARNING: 1, INFO: 2}
    rep.findings.sort(key=lambda f: (f.file, f.line, f.column, rank[f.severity], f.code))
    return rep


def _spec_errors() -> tuple:
    from posenc.spec.errors import PosencError
    try:
        import yaml
        return (PosencError, yaml.YAMLError)
    except ImportError:  # pragma: no cover -- yaml is a dependency of the spec
        return (PosencError,)


def main(a) -> int:
    """The CLI: ``a.paths`` (list of Path), ``a.fmt`` (``text`` / ``json``), ``a.no_warnings`` (bool).

    Prints the findings (text: one ``file:line:col: severity[code] ID@V: message`` block each, then a
    summary line; json: the document of :meth:`Report.to_json`, always).  Returns (:meth:`Report.status`)
    0 without errors, 1 with at least one citation error, 2 when a path named does not exist, 3 when a
    file could not be read (each such path is named on stderr, one line each, and reported as an error
    ``unreadable``; the other paths are read all the same), and 2 when the spec cannot be read (nothing is
    scanned then: ``error: <message>`` on stderr; with ``--format json`` ``{"error": "<message>"}`` on
    stdout).
    """
    try:
        _spec()
        rep = check_paths(a.paths, warnings=not a.no_warnings)
        doc = rep.to_json() if a.fmt == "json" else None
    except _spec_errors() as e:
        msg = f"posenc cite-check: the spec cannot be read: {e}"
        print(f"error: {printable(msg)}", file=sys.stderr)
        if a.fmt == "json":
            print(json.dumps({"error": msg}, indent=2))
        return 2
    for file, why, _ in rep.unread:
        print(printable(f"error: posenc cite-check: {file}: {why}"), file=sys.stderr)
    if doc is not None:
        print(json.dumps(doc, indent=2))
    else:
        for f in rep.findings:
            print(f.text())
        print(rep.summary_line())
    return rep.status()

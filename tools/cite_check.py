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
reaches the network; only regular files are opened.
"""

from __future__ import annotations

import bisect
import difflib
import json
import os
import re
import stat
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional, Sequence

from posenc.tools.cite_hidden import hidden_ids
from posenc.tools.cite_blocks import example_lines
from posenc.tools.cite_files import _display, _read_bytes, _Special, decode, printable, walk_files
from posenc.tools.cite_lexers import PIECES, Note, language_of

JSON_FORMAT = 1

"""The version of the ``--format json`` document (``"format"``); bumped on an incompatible change."""

NEAR_CUTOFF = 0.8

"""A bare non-ID token with a known prefix is warned about only when this close to a real ID."""

NEAR_LENGTH = 3

"""... and only about IDs of the same prefix whose length differs from the token's by at most this."""

ERROR, WARNING, INFO = "error", "warning", "info"

ID_RE = r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+"

VERSION_FULL = re.compile(r"[0-9]+(?:\.[0-9]+)*")

# an ID, then (optionally) `@` and the whole version token: up to a blank, a list separator, a bracket,
# a quote or Markdown emphasis; trailing sentence punctuation is not part of it
ID_AT = re.compile(rf"(?P<id>{ID_RE})(?![\w-])")

VTOKEN = re.compile(r"@(?P<tok>[^\s,;/()\[\]{}<>\"'`*|]*)")

_SENTENCE_END = re.compile(r"[.:!?]+$")

LEADER = re.compile(r"(?<![\w.:-])posenc:(?!:)", re.IGNORECASE)

SEP = re.compile(r"[ \t]*[,;/][ \t]*|[ \t]+")

BARE = re.compile(rf"(?<![\w@/.-]){ID_RE}(?![\w-])")

URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://\S*|\bwww\.\S+")  # a scheme of at most 32 characters

# the token after `posenc:` is an attempted citation (not prose) when it holds `@`, starts like an ID,
# or is a lower-case ID of a known prefix (`rope-pair-half`; checked in `_attempt`)
ATTEMPT = re.compile(r"[^\s,;()`'\"*]*@|[A-Z][A-Za-z0-9]*[-_]")

_LOWER_ID = re.compile(r"(?:div[-_])?([a-z][a-z0-9]*)(?:[-_][a-zA-Z0-9]+)+")

_WORD = re.compile(r"[^\s,;()`'\"*]+")

MARK_IGNORE, MARK_OFF, MARK_ON = "cite-check: ignore", "cite-check: off", "cite-check: on"

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
        cited = self.id + (f"@{self.version}" if self.version else "")
        out = f"{printable(self.file)}:{self.line}:{self.column}: {self.severity}[{self.code}]" + (f" {cited}" if cited else "")
        out += f": {self.message}"
        out += f"\n    hint: {self.hint}" if self.hint else ""
        return out + (f"\n    see: {self.url}" if self.url else "")


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

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

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


Item = tuple[int, str, Optional[str], Optional[str], int]  # (column, id, version, malformed token, end)


def _item(text: str, pos: int) -> Optional[Item]:
    """``ID`` or ``ID@TOKEN`` at ``pos``: the version is the whole token after ``@`` (less trailing
    sentence punctuation); a token that is not digits and dots makes the item malformed."""
    m = ID_AT.match(text, pos)
    if not m:
        return None
    v = VTOKEN.match(text, m.end())
    if not v:
        return (pos, m.group("id"), None, None, m.end())
    tok = v.group("tok")
    core = _SENTENCE_END.sub("", tok)
    end = v.start("tok") + len(core)
    if VERSION_FULL.fullmatch(core):
        return (pos, m.group("id"), core, None, end)
    return (pos, m.group("id"), None, text[pos:end], end)


def _attempt(word: str) -> bool:
    """Whether a word after ``posenc:`` is an attempted citation rather than prose."""
    if ATTEMPT.match(word):
        return True
    low = _LOWER_ID.fullmatch(_SENTENCE_END.sub("", word))
    return bool(low) and low.group(1).upper() in _spec().prefixes


def _citation(text: str, start: int) -> tuple[list[Item], list[tuple[int, str]], int]:
    """Parse the items after ``posenc:`` at ``start``: ``(items, malformed, end)``; ``malformed``
    lists ``(column, token)`` of the words that attempt a citation and do not parse (none for prose
    such as ``posenc: the kit``).  Items are separated by blanks, or by ``,`` ``;`` ``/``."""
    pos = re.compile(r"[ \t]*").match(text, start).end()
    items: list[Item] = []
    bad: list[tuple[int, str]] = []
    punct = True  # the first word after `posenc:` is judged like a word after a `,`
    while True:
        it = _item(text, pos)
        if it is None:
            w = _WORD.match(text, pos)
            if w and ("@" in w.group() or (punct and _attempt(w.group()))):
                bad.append((w.start(), w.group()))
                pos = w.end()
            break
        if it[3] is not None:
            bad.append((it[0], it[3]))
        else:
            items.append(it)
        pos = it[4]
        sep = SEP.match(text, pos)
        if not sep:
            break
        punct = sep.group().strip() != ""
        pos = sep.end()
    return items, bad, pos


# `cite-check:` markers: the whole content of a comment (after its leader; in Markdown of an HTML
# comment, in reST of a `..` comment), optionally followed by a reason
_LEAD = {"markdown": re.compile(r"\s*<!--\s*"), "rst": re.compile(r"\s*\.\.\s+"), "text": re.compile(r"\s*"),
         "hash": re.compile(r"\s*#+\s*"),
         "python": re.compile(r"\s*(?:#+|[rRuUbBfF]{0,2}(?:\"\"\"|'''|\"|'))?\s*")}

_LEAD_C = re.compile(r"\s*(?://+!?|/\*+!?|\*+(?!/))?\s*")

_ON_OFF = re.compile(r"cite-check: (off|on)(?=$|[\s(]|-->|\*/)")

_IGNORE_TAIL = re.compile(r"(?:^|(?<=\s)|(?<=<!--)|(?<=#)|(?<=//)|(?<=/\*))cite-check: ignore(?:\s+\([^()]*\))?"
                          r"\s*(?:-->|\*+/|\"\"\"|''')?\s*$")

_IGNORE_MD = re.compile(r"<!--\s*cite-check: ignore(?:\s+\([^()]*\))?\s*-->")


def _marker(text: str, language: str) -> Optional[str]:
    """``"off"`` / ``"on"`` when the piece is a marker comment, else ``None``."""
    if "cite-check:" not in text:
        return None
    lead = _LEAD.get(language, _LEAD_C).match(text)
    if not lead or (language in ("markdown", "rst") and not lead.group().strip()):
        return None
    m = _ON_OFF.match(text, lead.end())
    return m.group(1) if m else None


def _ignored(text: str, language: str) -> bool:
    if "cite-check: ignore" not in text:
        return False
    if language == "markdown":
        return bool(_IGNORE_MD.search(text))
    return bool(_IGNORE_TAIL.search(text))


_ID_FULL = re.compile(ID_RE)


def _hidden(text: str, file: str, ln: int, col: int, out: list[Finding], cache: _Cache) -> str:
    """Report each ID written with a hidden or look-alike character (:mod:`.cite_hidden`) as an error;
    the text with each such token replaced by its ID (blanks before it: columns stay), to be read on."""
    spec = _spec()
    def known(ident: str) -> bool:  # an ID, or a near miss of one (as a bare token is judged)
        return ident in spec.ever or (_has_known_prefix(ident, spec) and bool(cache.near_misses(ident, spec)))
    parts, last = [], 0
    for c, tok, ident, what, plain in sorted(hidden_ids(text, _ID_FULL, known)):
        if c < last:  # overlaps the one before
            continue
        out.append(Finding(file, ln, col + c + 1, ERROR, "hidden-character", ident, None,
                           f"{tok!r} looks like {ident} but holds {what}: it is read as another token (and a search "
                           f"misses it)", "retype it in ASCII: upper-case letters, digits and '-'"))
        parts += [text[last:c], plain]  # joined once: linear in the line, however many tokens it holds
        last = c + len(tok)
    return "".join(parts) + text[last:] if parts else text


class _Spans:
    """Spans of a line (URLs, citations), asked in increasing order whether they cover a position: each
    question costs O(log n) (a line of a million citations and URLs is read in linear time)."""

    def __init__(self, spans: Sequence[tuple[int, int]] = ()):
        self.starts: list[int] = []
        self.ends: list[int] = []  # the furthest end of the spans that start at or before starts[i]
        for a, b in spans:
            self.add(a, b)

    def add(self, a: int, b: int) -> None:
        """A span starting at or after every span added so far."""
        self.starts.append(a)
        self.ends.append(max(b, self.ends[-1]) if self.ends else b)

    def covers(self, pos: int) -> bool:
        i = bisect.bisect_right(self.starts, pos)
        return bool(i) and pos < self.ends[i - 1]


def _check(source: str, language: str, file: str, warnings: bool, cache: _Cache) -> tuple[list[Finding], bool]:
    """The findings of one text and whether it was parsed only in part."""
    out: list[Finding] = []
    notes: list[Note] = []
    off = False
    spec_seen = False
    examples = example_lines(source, language)  # a marker in a code block is an example, not a marker
    for ln, col, text in sorted(PIECES[language](source, notes)):
        mark = None if ln in examples else _marker(text, language)
        if mark == "on":
            off = False
        skip = off or _ignored(text, language)
        if mark == "off":
            off = True  # from the next line on; the marker's own line is checked like any other
        if skip:
            continue
        if not text.isascii():
            text = _hidden(text, file, ln, col, out, cache)
        leaders = list(LEADER.finditer(text)) if ":" in text else []
        bares = list(BARE.finditer(text)) if warnings and "-" in text else []
        if not leaders and not bares:
            continue
        if not spec_seen:
            _spec()
            spec_seen = True
        urls = [m.span() for m in URL.finditer(text)] if "/" in text or "www." in text else []
        in_url, cited = _Spans(urls), _Spans()
        for lead in leaders:
            if in_url.covers(lead.start()):
                continue
            items, bad, end = _citation(text, lead.end())
            cited.add(lead.start(), end)
            for c, ident, ver, _, _ in items:
                out += _strict(cache, file, ln, col + c, ident, ver, warnings)
            for c, tok in bad:
                out.append(_malformed(file, ln, col + c, tok))
        for m in bares:
            if in_url.covers(m.start()) or cited.covers(m.start()):
                continue
            it = _item(text, m.start())
            if it[3] is not None:
                if _has_known_prefix(it[1], _spec()):
                    out.append(_malformed(file, ln, col + m.start(), it[3], WARNING))
                continue
            out += _bare(cache, file, ln, col + m.start(), it[1], it[2])
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


def _walk(path: Path) -> Iterator[tuple[Path, Optional[str]]]:
    """``(file, language)`` of a path: a named file as it is (its language may be ``None``), a
    folder's files of a supported type (by extension or ``#!`` line) recursively."""
    if not path.is_dir():
        yield path, language_of(path, sniff=True)
        return
    def prune(d: Path) -> bool:
        return d.name in PRUNE_DIRS or (d / "pyvenv.cfg").exists()
    for p in walk_files(path, prune):
        lang = language_of(p, sniff=True)
        if lang is not None:
            yield p, lang


def check_paths(paths: Sequence[Path], warnings: bool = True) -> Report:
    """Scan files and folders (folders recursively, supported file types only, without ``.git``,
    ``__pycache__``, ``node_modules`` and virtual environments).  Binary, unreadable and special
    (not regular) files, and a named file of an unsupported type, are skipped and counted, never
    reported.  A file reached by several paths (a symbolic link and its target) is scanned once,
    under its real path.  The caller checks that the paths exist (a missing one is skipped as
    unreadable here).  Raises :class:`posenc.spec.errors.SpecError` when the spec cannot be read."""
    rep = Report()
    order: list = []
    names: dict = {}
    for top in paths:
        for p, lang in _walk(top):
            try:
                key = os.path.realpath(p) if os.path.lexists(p) else p
            except OSError:
                key = p
            if key not in names:
                names[key] = []
                order.append((key, lang))
            if p not in names[key]:
                names[key].append(p)
    cache = _Cache()
    for key, lang in order:
        p = _display(names[key])
        if lang is None:
            try:
                special = not stat.S_ISREG(os.stat(p).st_mode)
            except OSError:
                special = False
            rep.skipped["special" if special else "unsupported"] += 1
            continue
        try:
            data = _read_bytes(p)
        except _Special:
            rep.skipped["special"] += 1
            continue
        except OSError:
            rep.skipped["unreadable"] += 1
            continue
        decoded = decode(data, lang)
        if decoded is None:
            rep.skipped["binary"] += 1
            continue
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
    summary line; json: the document of :meth:`Report.to_json`).  Returns 0 without errors, 1 with
    at least one error, 2 when a path does not exist (nothing is scanned then; the message names it
    on stderr) or the spec cannot be read (``error: <message>`` on stderr; with ``--format json``
    also ``{"error": "<message>"}`` on stdout).
    """
    missing = [p for p in a.paths if not os.path.lexists(p) or not p.exists()]
    if missing:
        for p in missing:
            print(f"error: posenc cite-check: {printable(str(p))}: no such file or directory", file=sys.stderr)
        return 2
    try:
        _spec()
        rep = check_paths(a.paths, warnings=not a.no_warnings)
        doc = rep.to_json() if a.fmt == "json" else None
    except _spec_errors() as e:
        msg = f"posenc cite-check: the spec cannot be read: {e}"
        print(f"error: {msg}", file=sys.stderr)
        if a.fmt == "json":
            print(json.dumps({"error": msg}, indent=2))
        return 2
    if doc is not None:
        print(json.dumps(doc, indent=2))
    else:
        for f in rep.findings:
            print(f.text())
        print(rep.summary_line())
    return 1 if rep.count(ERROR) else 0

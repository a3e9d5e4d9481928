"""cite-check's grammar (``docs/citing.md``): a ``posenc:`` citation and its items, the list continued on the
next line, bare ID-shaped tokens, URLs, the ``cite-check:`` markers, and the blanks and line breaks a text
is read with.  Pure text functions: what an ID *means* is resolved by :mod:`.cite_check`.
"""

from __future__ import annotations

import bisect
import re
from typing import Collection, Optional, Sequence

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

_BLANK_END = re.compile(r"[ \t]*$")

MARK_IGNORE, MARK_OFF, MARK_ON = "cite-check: ignore", "cite-check: off", "cite-check: on"

# line breaks: LF, CR LF and a lone CR (as Python, C compilers, CommonMark and editors count lines)
_NEWLINES = re.compile(r"\r\n?")

# the other characters Unicode (and str.splitlines) counts as line or paragraph separators, and the form feed
# and vertical tab: read as blanks (a citation is never hidden behind one), not as line breaks
OTHER_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"

_OTHER_BREAK = re.compile(f"[{OTHER_BREAKS}]")

# a comment's leader on the line that continues a citation list (`#`, `//`, `/*`, ` * `, `<!--`)
_CONT_LEAD = re.compile(r"[ \t]*(?:#+|//+[!/]?|/\*+!?|\*+(?!/)|<!--)?[ \t]*")


def one_newline(source: str) -> str:
    """``source`` with each CR LF and lone CR written as LF (a CR-only file has as many lines as it shows)."""
    return _NEWLINES.sub("\n", source) if "\r" in source else source


def blanks(text: str) -> str:
    """``text`` with each of :data:`OTHER_BREAKS` written as a space (same length: columns stay)."""
    return _OTHER_BREAK.sub(" ", text)


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


def _attempt(word: str, prefixes: Collection[str]) -> bool:
    """Whether a word after ``posenc:`` is an attempted citation rather than prose."""
    if ATTEMPT.match(word):
        return True
    low = _LOWER_ID.fullmatch(_SENTENCE_END.sub("", word))
    return bool(low) and low.group(1).upper() in prefixes


def _citation(text: str, start: int, prefixes: Collection[str], continued: bool = False
              ) -> tuple[list[Item], list[tuple[int, str]], int, bool]:
    """Parse the items after ``posenc:`` at ``start`` (or, ``continued``, on the line that continues a list):
    ``(items, malformed, end, open)``; ``malformed`` lists ``(column, token)`` of the words that attempt a
    citation and do not parse (none for prose such as ``posenc: the kit``).  Items are separated by blanks,
    or by ``,`` ``;`` ``/``.  ``open``: the list goes on on the next line -- nothing but blanks follows a
    ``,`` ``;`` ``/`` after an item, or (not ``continued``) ``posenc:`` itself."""
    pos = re.compile(r"[ \t]*").match(text, start).end()
    items: list[Item] = []
    bad: list[tuple[int, str]] = []
    punct = True  # the first word after `posenc:` is judged like a word after a `,`
    while True:
        it = _item(text, pos)
        if it is None:
            w = _WORD.match(text, pos)
            if w and ("@" in w.group() or (punct and _attempt(w.group(), prefixes))):
                bad.append((w.start(), w.group()))
                pos = w.end()
                punct = False
            break
        if it[3] is not None:
            bad.append((it[0], it[3]))
        else:
            items.append(it)
        pos = it[4]
        sep = SEP.match(text, pos)
        if not sep:
            punct = False
            break
        punct = sep.group().strip() != ""
        pos = sep.end()
    parsed = bool(items or bad)
    is_open = punct and (parsed or not continued) and _BLANK_END.match(text, pos) is not None
    return items, bad, pos, is_open


def continuation(text: str) -> int:
    """Where the items start on a line that continues a citation list: after its comment leader."""
    return _CONT_LEAD.match(text).end()


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

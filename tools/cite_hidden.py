"""IDs written with characters that are not what they look like: an invisible (format, Unicode category
``Cf``: a zero-width space, a soft hyphen, a bidirectional mark ...) character inside, a non-ASCII hyphen
(``‐`` ``‑`` ``‒`` ``–`` ``−`` ``﹣`` ``－``), a full-width letter or digit, a Cyrillic or Greek capital
that looks Latin.  cite-check matches IDs exactly (ASCII ``A-Z``, ``0-9``, ``-``), so such a token would be
read as a shorter ID or none; :func:`hidden_ids` finds them, to be reported (``hidden-character``).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache
from typing import Iterator

_HYPHENS = "\u2010\u2011\u2012\u2013\u2212\ufe63\uff0d"

# capitals of other scripts drawn like Latin ones (Cyrillic, Greek)
_LOOKALIKE = dict(zip("\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425"
                      "\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7",
                      "ABEKMHOPCTX" "ABEZHIKMNOPTYX"))


@lru_cache(maxsize=1)
def _token() -> re.Pattern:
    """An ID-shaped token that may hold format characters, odd hyphens and look-alike letters."""
    cf = "".join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    odd = re.escape(cf + _HYPHENS + "".join(_LOOKALIKE))
    alnum = r"A-Z0-9\uff10-\uff19\uff21-\uff3a" + re.escape("".join(_LOOKALIKE))
    # ... and the format characters between it and an `@VERSION` (which would cut the version off)
    return re.compile(rf"(?<![\w@/.-])[{alnum}](?:[{alnum}\-]|[{odd}])*[{alnum}](?:[{odd}]+(?=@))?")


@lru_cache(maxsize=1)
def _leader() -> re.Pattern:
    """``posenc:`` with format characters between its letters (it would not lead a citation)."""
    cf = "[" + re.escape("".join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")) + "]*"
    return re.compile(r"(?<![\w.:-])" + cf.join("posenc") + cf + ":", re.IGNORECASE)


def _clean(token: str) -> str:
    out = []
    for ch in token:
        if unicodedata.category(ch) == "Cf":
            continue
        ch = "-" if ch in _HYPHENS else _LOOKALIKE.get(ch, ch)
        out.append(unicodedata.normalize("NFKC", ch))
    return "".join(out)


def _named(token: str) -> str:
    odd = dict.fromkeys(ch for ch in token if not (ch.isascii() and (ch.isalnum() or ch == "-")))
    return ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in odd)


def hidden_ids(text: str, id_shape: re.Pattern, known) -> Iterator[tuple[int, str, str, str]]:
    """``(column, token, id, what)`` of every token of ``text`` that reads as an ID (``id_shape``
    fullmatches it and ``known(id)``), or as ``posenc:``, only once its odd characters are dropped or
    mapped to ASCII; ``what`` names those characters.  Nothing for an ASCII text (linear in the text)."""
    if text.isascii():
        return
    for m in _leader().finditer(text):
        if not m.group().isascii():
            yield m.start(), m.group(), _clean(m.group()), _named(m.group())
    for m in _token().finditer(text):
        tok = m.group()
        if tok.isascii():
            continue
        ident = _clean(tok)
        if id_shape.fullmatch(ident) and known(ident):
            yield m.start(), tok, ident, _named(tok)

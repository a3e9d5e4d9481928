"""IDs written with characters that are not what they look like: an invisible character inside or before
its ``@VERSION`` (a format character, Unicode category ``Cf``, and every other *default-ignorable* code
point -- variation selectors, U+034F, the Mongolian selectors, Hangul fillers, tags -- and U+2800 BRAILLE
PATTERN BLANK), a non-ASCII hyphen (``‐`` ``‑`` ``‒`` ``–`` ``−`` ``﹣`` ``－``), a full-width letter, digit
or ``＠``, a Cyrillic or Greek letter that looks Latin; and ``posenc:`` itself so written, with a colon
look-alike (``：`` ``∶`` ``꞉`` ...) or followed by a Unicode space (NBSP, EM SPACE ...) or an invisible
character.  cite-check matches IDs exactly (ASCII ``A-Z``, ``0-9``, ``-``), so such a token would be read
as a shorter ID or none; :func:`hidden_ids` finds them, to be reported (``hidden-character``).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache
from typing import Iterator

_HYPHENS = "\u2010\u2011\u2012\u2013\u2212\ufe63\uff0d"

# letters of other scripts drawn like Latin ones (Cyrillic, Greek): the capitals of IDs, the small
# letters of `posenc`
_LOOKALIKE = dict(zip("\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425"
                      "\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"
                      "\u043e\u0440\u0441\u0435\u0455\u03bf",
                      "ABEKMHOPCTX" "ABEZHIKMNOPTYX" "opcese"))

# Default_Ignorable_Code_Point of Unicode's DerivedCoreProperties.txt beyond category Cf (which
# unicodedata gives): drawn as nothing
_IGNORABLE = [(0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
              (0xE0000, 0xE0FFF), (0x2800, 0x2800)]  # and U+2800 BRAILLE PATTERN BLANK, blank too

# colons that are not U+003A (NFKC maps the full-width and small ones to it; these it keeps)
_COLONS = "\u2236\ua789\u02d0\u05c3\u0589\u1361\u16ec\u205a\ufe13"


@lru_cache(maxsize=1)
def invisible() -> str:
    """Every character drawn as nothing: category ``Cf`` and the other default-ignorable code points."""
    cf = (chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    return "".join(dict.fromkeys([*cf, *(chr(c) for a, b in _IGNORABLE for c in range(a, b + 1))]))


def _is_invisible(ch: str) -> bool:
    return ch in _invisible_set()


@lru_cache(maxsize=1)
def _invisible_set() -> frozenset:
    return frozenset(invisible())


@lru_cache(maxsize=1)
def _token() -> re.Pattern:
    """An ID-shaped token that may hold invisible characters, odd hyphens and look-alike letters."""
    odd = re.escape(invisible() + _HYPHENS + "".join(_LOOKALIKE))
    alnum = r"A-Z0-9\uff10-\uff19\uff21-\uff3a" + re.escape("".join(_LOOKALIKE))
    # ... and the invisible characters between it and an `@VERSION` (which would cut the version off), or
    # an `@` look-alike (the version would not be read)
    return re.compile(rf"(?<![\w@/.-])[{alnum}](?:[{alnum}\-]|[{odd}])*[{alnum}]"
                      rf"(?:[{odd}]*[\uff20\ufe6b]|[{odd}]+(?=@))?")


@lru_cache(maxsize=1)
def _leader() -> re.Pattern:
    """``posenc:`` written with look-alike letters, invisible characters between them, a colon look-alike,
    or followed by a Unicode space or an invisible character (it would not lead a citation)."""
    letters = {ch: {ch} for ch in "posenc"}
    for c in range(0x80, sys.maxunicode + 1):  # what NFKC or a look-alike maps onto a letter of `posenc`
        low = _clean(chr(c)).lower()
        if low in letters:
            letters[low].add(chr(c))
    hidden = "[" + re.escape(invisible()) + "]*"
    colon = "[:" + re.escape(_COLONS + "\uff1a\ufe55\ufe13") + "]"
    spaces = "[" + re.escape(invisible() + "".join(
        chr(c) for c in range(0x80, 0x3001) if unicodedata.category(chr(c)) == "Zs")) + "]*"
    body = hidden.join("[" + re.escape("".join(sorted(letters[ch]))) + "]" for ch in "posenc")
    return re.compile(r"(?<![\w.:-])" + body + hidden + colon + spaces, re.IGNORECASE)


def _clean(token: str) -> str:
    out = []
    for ch in token:
        if _is_invisible(ch):
            continue
        ch = "-" if ch in _HYPHENS else ":" if ch in _COLONS else _LOOKALIKE.get(ch, ch)
        out.append(unicodedata.normalize("NFKC", ch))
    return "".join(out)


def _named(token: str) -> str:
    odd = dict.fromkeys(ch for ch in token if not (ch.isascii() and (ch.isalnum() or ch in "-:")))
    return ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in odd)


def hidden_ids(text: str, id_shape: re.Pattern, known) -> Iterator[tuple[int, str, str, str, str]]:
    """``(column, token, id, what, ascii)`` of every token of ``text`` that reads as an ID (``id_shape``
    fullmatches it and ``known(id)``), or as ``posenc:``, only once its odd characters are dropped or
    mapped to ASCII; ``what`` names those characters; ``ascii`` is the token so mapped, padded with blanks
    on the left to the token's length (columns stay), to be read on.  Nothing for an ASCII text (linear
    in the text)."""
    if text.isascii():
        return
    for m in _leader().finditer(text):
        tok = m.group()
        if not tok.isascii():
            ident = _clean(tok).strip().lower()
            yield m.start(), tok, ident, _named(tok), ident.rjust(len(tok))
    for m in _token().finditer(text):
        tok = m.group()
        if tok.isascii():
            continue
        clean = _clean(tok)
        ident = clean.removesuffix("@")
        if id_shape.fullmatch(ident) and known(ident):
            yield m.start(), tok, ident, _named(tok), clean.rjust(len(tok))

"""IDs written with characters that are not what they look like: an invisible character inside or before
its ``@VERSION`` (a format character, Unicode category ``Cf``, and every other *default-ignorable* code
point -- variation selectors, U+034F, the Mongolian selectors, Hangul fillers, tags -- and U+2800 BRAILLE
PATTERN BLANK), a non-ASCII hyphen (``‐`` ``‑`` ``‒`` ``–`` ``−`` ``﹣`` ``－``), a full-width letter, digit
or ``＠``, a Cyrillic or Greek letter that looks Latin; and ``posenc:`` itself so written, with a colon
look-alike (``：`` ``∶`` ``꞉`` ...) or followed by a Unicode space (NBSP, EM SPACE ...) or an invisible
character.  cite-check matches IDs exactly (ASCII ``A-Z``, ``0-9``, ``-``), so such a token would be read
as a shorter ID or none; :func:`hidden_ids` finds them, to be reported (``hidden-character``).

Each character is folded first -- NFKC (mathematical bold, script and full-width letters, ligatures, modifier
letters, superscript digits, Roman numerals), a digit of any script to its ASCII digit, a combining mark
dropped -- and a token that then reads as an ID, or a near miss of one, is reported as that ID.  Beyond
those, any *ID-shaped* word of a known prefix (upper-case letters, digits and hyphens, its first part one of
the spec's ID prefixes) holding a letter or digit outside ASCII -- an Armenian, Cherokee, Coptic, Lisu ...
look-alike, whatever the script -- is reported, naming the characters.
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
def _categories() -> tuple[str, str]:
    """``(format characters, combining marks)``: Unicode categories ``Cf`` and ``M*``, in one pass."""
    cf, marks = [], []
    for c in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(c))
        if cat == "Cf":
            cf.append(chr(c))
        elif cat[0] == "M":
            marks.append(chr(c))
    return "".join(cf), "".join(marks)


@lru_cache(maxsize=1)
def invisible() -> str:
    """Every character drawn as nothing: category ``Cf`` and the other default-ignorable code points."""
    cf = _categories()[0]
    return "".join(dict.fromkeys([*cf, *(chr(c) for a, b in _IGNORABLE for c in range(a, b + 1))]))


def _class(chars: str) -> str:
    """A regular-expression class body for ``chars``, as ranges (thousands of code points stay short)."""
    out, codes = [], sorted(set(map(ord, chars)))
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        out.append(re.escape(chr(codes[i])) + ("-" + re.escape(chr(codes[j])) if j > i else ""))
        i = j + 1
    return "".join(out)


def _is_invisible(ch: str) -> bool:
    return ch in _invisible_set()


@lru_cache(maxsize=1)
def _invisible_set() -> frozenset:
    """What a token is read without: the invisible characters and the combining marks."""
    return frozenset(invisible() + _categories()[1])


@lru_cache(maxsize=1)
def _token() -> re.Pattern:
    """A word that may be an ID written with invisible characters, combining marks, odd hyphens, and letters
    and digits of any script (``[^\\W_]``: Unicode letters and digits; what is ID-shaped is judged after)."""
    odd = _class(invisible() + _categories()[1] + _HYPHENS)
    # ... and the invisible characters between it and an `@VERSION` (which would cut the version off), or
    # an `@` look-alike (the version would not be read)
    return re.compile(rf"(?<![\w@/.-])[^\W_](?:[^\W_]|-|[{odd}])*(?:[^\W_]|[{_class(_categories()[1])}])"
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


def _fold(ch: str) -> str:
    """One character as cite-check reads an ID: ASCII as it is, else mapped (a hyphen, a colon or a letter
    look-alike), NFKC-folded (an ASCII result from a ligature or a modifier letter in upper case), a digit of
    any script as its ASCII digit."""
    if ch.isascii():
        return ch
    if ch in _HYPHENS:
        return "-"
    if ch in _COLONS:
        return ":"
    if ch in _LOOKALIKE:
        return _LOOKALIKE[ch]
    n = unicodedata.normalize("NFKC", ch)
    if n.isascii():
        return n.upper() if n.isalpha() else n
    d = unicodedata.decimal(n, None) if len(n) == 1 else None
    return str(d) if d is not None else n


def _clean(token: str) -> str:
    return "".join(_fold(ch) for ch in token if not _is_invisible(ch))


def _named(token: str) -> str:
    odd = dict.fromkeys(ch for ch in token if not (ch.isascii() and (ch.isalnum() or ch in "-:")))
    return ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in odd)


def _upper_like(ch: str) -> bool:
    """A letter of another script that can stand for an ID's capital: not a small letter (an upper-case or
    title-case letter, a small capital ``ꜰ``, a letter of a script without case)."""
    cat = unicodedata.category(ch)
    return cat in ("Lu", "Lt", "Lo", "Lm") or (cat == "Ll" and "CAPITAL" in unicodedata.name(ch, ""))


def _shaped(ident: str, id_shape: re.Pattern, prefixes) -> bool:
    """Whether ``ident`` (folded, still holding letters of other scripts) is an ID of a known prefix once each
    such letter is read as a capital: each part upper-case letters and digits (a caseless letter only beside
    an ASCII one: ``T5-模型`` is prose), the first part (after ``DIV-``) a prefix of the spec's IDs, with at
    least one ASCII letter or digit."""
    parts = ident.split("-")
    for part in parts:
        if not part.isascii() and not any(c.isascii() and c.isalnum() for c in part) \
                and any(unicodedata.category(c) == "Lo" for c in part):
            return False
    wild = "".join(c if c.isascii() else "X" if _upper_like(c) else "x" for c in ident)
    if not id_shape.fullmatch(wild):
        return False
    def prefix(head: str, known) -> bool:  # at least one of its letters ASCII, those as in a known prefix
        return any(h.isascii() for h in head) and any(
            len(p) == len(head) and all(h == q or not h.isascii() for h, q in zip(head, p)) for p in known)
    return prefix(parts[0], prefixes) or (len(parts) > 2 and prefix(parts[0], ("DIV",)) and prefix(parts[1], prefixes))


def hidden_ids(text: str, id_shape: re.Pattern, known, prefixes=()) -> Iterator[tuple[int, str, str, str, str]]:
    """``(column, token, id, what, ascii)`` of every token of ``text`` that reads as an ID (``id_shape``
    fullmatches it and ``known(id)``), or as ``posenc:``, only once its odd characters are dropped or
    mapped to ASCII, or that is ID-shaped with a known prefix (``prefixes``) and holds a letter or digit
    outside ASCII; ``what`` names those characters; ``ascii`` is the token so mapped, padded with blanks
    on the left to the token's length (columns stay), to be read on (the token itself where it maps to
    no shorter ASCII).  Nothing for an ASCII text (linear in the text)."""
    if text.isascii():
        return
    for m in _leader().finditer(text):
        tok = m.group()
        if not tok.isascii():
            ident = _clean(tok).strip().lower()
            yield m.start(), tok, ident, _named(tok), ident.rjust(len(tok))
    for m in _token().finditer(text):
        tok = m.group()
        if tok.isascii() or ("-" not in tok and not any(h in tok for h in _HYPHENS)):  # an ID holds a hyphen
            continue
        clean = _clean(tok)
        ident = clean.removesuffix("@")
        plain = clean.rjust(len(tok)) if clean.isascii() and len(clean) <= len(tok) else tok
        if id_shape.fullmatch(ident) and known(ident):
            yield m.start(), tok, ident, _named(tok), plain
        elif _shaped(ident, id_shape, prefixes) and any(c.isalnum() and not c.isascii() for c in tok):
            yield m.start(), tok, ident if ident.isascii() else tok.removesuffix("@"), _named(tok), plain

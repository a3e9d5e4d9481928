"""Plain text for a card: outside strings made one line of plain text, the card's slugs, numbers and
index spans as a card prints them."""

from __future__ import annotations

import math
import re


def _spans(idx) -> str:
    idx = sorted(int(i) for i in idx)
    if not idx:
        return ""
    out, start, prev = [], idx[0], idx[0]
    for i in idx[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(out)


def _num(x) -> str:
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, float):
        if math.isinf(x):
            return "inf"
        if x == int(x) and abs(x) < 1e15:
            return f"{int(x):,}" if abs(x) >= 10000 else str(int(x))
        return f"{x:.6g}"
    return str(x)


# -- escaping: text from outside the kit (the config, the registry, a path) is marked with _u() when
# a block is built and escaped by each renderer; the kit's own text keeps its light markup
_U0, _U1 = "\ue000", "\ue001"  # private-use brackets around outside text
_UNTRUSTED = re.compile(f"{_U0}([^{_U1}]*){_U1}")


#: every character str.splitlines() (and so docutils) breaks a line at, and other control characters
_BREAKS = re.compile("[\r\n\t\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")


_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ufeff]")


#: outside text is cut at this many characters (a card is not the place for a megabyte of name)
MAX_TEXT = 2000


def _plain(x) -> str:
    """One line of plain text: line breaks and tabs as spaces, control characters and the markers
    dropped, cut at :data:`MAX_TEXT` characters."""
    s = _CONTROLS.sub("", _BREAKS.sub(" ", str(x).replace(_U0, "").replace(_U1, "")))
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT] + "…"


#: a slug (the card's file names) is cut at this many characters
MAX_SLUG = 80


def _slug(text: str) -> str:
    """A file-safe name: lower-case ASCII letters, digits, ``.`` and ``-`` only (no ``/``, no
    leading dot, no ``..`` alone), at most :data:`MAX_SLUG` characters."""
    s = re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-.")
    s = re.sub(r"\.{2,}", ".", s)[:MAX_SLUG].strip("-.")
    return s or "model"

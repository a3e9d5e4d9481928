"""What an unnamed expectation line's ``finding`` says and which inferred lines it explains (the
matching rule of :mod:`posenc.conformance.expectations`, README "Expectation files"): fact for fact,
``*`` within a part, a trailing aside ignored, a last ``*`` part explicitly excusing further facts."""

from __future__ import annotations

import re
from typing import Iterable

from posenc.harness.inference import is_finding


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


#: The fewest letters and digits a finding holds outside its ``*`` wildcards.
MIN_FINDING = 12


#: The words every parameter-fit sentence has ("<field> <used> where <value> is specified", "... where it is
#: unset (the rule's default applies)"): they say nothing of what the implementation did.
_TEMPLATE_WORDS = re.compile(r"\b(where|is|it|specified|unset|the|rule's|default|applies)\b")


#: The fewest letters and digits each part of a finding (its facts, :func:`facts`) holds outside its ``*``
#: wildcards: a part that is only ``*`` would match whatever second bug an inferred line states.
MIN_FACT = 3


def _said(text: str) -> int:
    """The letters and digits ``text`` states: those of its words of two or more, outside the ``*``
    wildcards and the template words (a finding spelt one letter at a time between wildcards,
    ``*p*o*s*i*t*i*o*n*s*``, matches nearly anything and states nothing)."""
    words = (w for frag in _norm(text).split("*") for w in _TEMPLATE_WORDS.sub(" ", frag).split())
    return sum(n for n in (sum(ch.isalnum() for ch in w) for w in words) if n >= 2)


def substantive(finding: str) -> bool:
    """Whether a finding says enough to explain a failure: ``MIN_FINDING`` letters and digits outside its
    ``*`` wildcards and the parameter-fit sentences' own words (``e``, ``* *``, ``q`` or ``* where * is
    specified`` match nearly anything), and ``MIN_FACT`` in each of its parts (:func:`facts`)."""
    parts = facts(finding)
    rest = parts[:-1] if len(parts) > 1 and parts[-1] == "*" else parts  # a last "*": any further facts, said so
    return _said(finding) >= MIN_FINDING and all(_said(f) >= MIN_FACT for f in rest)


def facts(text: str) -> list[str]:
    """The facts an inferred line (or a finding) states: its parts separated by ``;`` outside parentheses
    (the inference joins what it found with "; ": "attention factor 1.25 where 1 is specified; the positions
    used differ ..."), each without a trailing parenthetical aside (commentary whose wording differs from
    one case to the next), spaces and case normalized."""
    return [_norm(_without_aside(p)) for p in _parts(str(text)) if p.strip()]


def _parts(text: str) -> list[str]:
    """``text`` split at each ``;`` outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth <= 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return parts + ["".join(cur)]


def _without_aside(part: str) -> str:
    """``part`` without a parenthetical group that ends it (balanced, nested ones included)."""
    t = part.rstrip()
    if not t.endswith(")"):
        return t
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        depth += (t[i] == ")") - (t[i] == "(")
        if depth == 0:
            return t[:i].rstrip() if t[:i].strip() else t
    return t


def no_finding_note(inferred: Iterable[str]) -> str:
    """What a message adds when an unnamed line's finding matched nothing because the inference stated
    no finding at all (only element counts or a closest fit): '' when it stated one."""
    if any(is_finding(x) for x in inferred):
        return ""
    return " (the inference states no finding for this failure: element counts and a closest fit are not one)"


def finding_matches(finding: str, inferred: str) -> bool:
    """Whether a line's ``finding`` says what the inferred line ``inferred`` says, fact for fact
    (:func:`facts`): as many facts, in order, each the finding's in full, ``*`` standing for any text
    within it (a value that differs from one drawn case to the next).  A finding of one bug never
    matches a line that states a second one too ("...; the positions used differ ...", "...; the angles
    are wrong too, ... (a second bug)"): record both, or fix one.  A last part that is only ``*``
    ("attention factor 1 where * is specified; *") says so explicitly: any further facts (a library with
    several bugs on one path, each draw showing another combination; the evidence must explain them).
    Spaces and case ignored."""
    if not substantive(finding):
        return False
    want, got = facts(finding), facts(inferred)
    if len(want) > 1 and want[-1] == "*":  # "...; *": the facts before it, then any number of others
        want = want[:-1]
        got = got[:len(want)]
    return len(want) == len(got) and all(
        re.fullmatch(".*".join(re.escape(x) for x in w.split("*")), g) for w, g in zip(want, got))

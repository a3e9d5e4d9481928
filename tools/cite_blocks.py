"""The lines of a file where a ``cite-check: off`` / ``on`` marker is example text, not a marker: a
Markdown fenced (```` ``` ```` / ``~~~``) or indented code block, a reST literal block (after ``::``) or
code directive, a shell here-document's body.  Checking is never switched off from there.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEREDOC = re.compile(r"""(?<!<)<<(-?)[ \t]*(?:'(\w+)'|"(\w+)"|\\?(\w+))""")
_RST_CODE = re.compile(r"\s*\.\.\s+(?:code-block|code|sourcecode|highlight|parsed-literal)::")


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def _markdown(lines: list[str]) -> set[int]:
    out: set[int] = set()
    fence = None
    blank_before = True
    for ln, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if fence is not None:
            out.add(ln)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip():
                fence = None
            continue
        if m and not (m.group(1)[0] == "`" and "`" in line[m.end():]):
            fence = m.group(1)
            out.add(ln)
            continue
        if line.strip() and _indent(line) >= 4 and (blank_before or ln - 1 in out):
            out.add(ln)
        blank_before = not line.strip()
    return out


def _rst(lines: list[str]) -> set[int]:
    out: set[int] = set()
    opener = None  # the indent of the paragraph or directive that opened a literal block
    for ln, line in enumerate(lines, 1):
        if opener is not None:
            if not line.strip() or _indent(line) > opener:
                out.add(ln)
                continue
            opener = None
        if line.rstrip().endswith("::") or _RST_CODE.match(line):
            opener = _indent(line)
    return out


def _heredocs(lines: list[str]) -> set[int]:
    out: set[int] = set()
    pending: list[tuple[str, bool]] = []
    for ln, line in enumerate(lines, 1):
        if pending:
            out.add(ln)
            word, dash = pending[0]
            if (line.lstrip("\t") if dash else line).rstrip("\r") == word:
                pending.pop(0)
            continue
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        pending = [(next(g for g in m.groups()[1:] if g), bool(m.group(1))) for m in _HEREDOC.finditer(code)]
    return out


def example_lines(source: str, language: str) -> set[int]:
    """The 1-based lines of ``source`` inside a code block, literal block or here-document."""
    if language not in ("markdown", "rst", "hash") or ("cite-check:" not in source):
        return set()
    lines = source.split("\n")
    return {"markdown": _markdown, "rst": _rst, "hash": _heredocs}[language](lines)

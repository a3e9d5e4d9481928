"""Where cite-check looks in a file: the pieces of text that may hold a citation (comments and
docstrings of Python, ``//`` and ``/* */`` comments of C-like languages outside their string and
character literals, ``#`` comments of shell-like files, the whole text of Markdown, RST and plain
text), by the file's language (:func:`language_of`: its extension, name or ``#!`` line).
"""

from __future__ import annotations

import bisect
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional


# extension (or exact file name) -> how comments are found
_C = ("c", "cc", "cpp", "cxx", "c++", "h", "hh", "hpp", "hxx", "cu", "cuh", "java", "cs")

_JS = ("js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts")

_SWIFT = ("kt", "kts", "scala", "swift")

_HASH = ("sh", "bash", "zsh", "yaml", "yml", "toml", "cmake", "r")

LANGUAGES: dict[str, str] = {**{e: "c" for e in _C}, **{e: "js" for e in _JS}, **{e: "swift" for e in _SWIFT},
                             **{e: "hash" for e in _HASH}, "rs": "rust", "go": "go",
                             "md": "markdown", "markdown": "markdown", "rst": "rst", "txt": "text",
                             "py": "python", "pyi": "python"}

"""File extension -> ``"python"`` (``tokenize``: ``#`` comments and docstrings), a C-like language
(``"c"``, ``"js"``, ``"rust"``, ``"go"``, ``"swift"``: ``//`` and ``/* */`` outside the language's
string and character literals), ``"hash"`` (``#`` at the start of a line or after whitespace,
outside quotes) or ``"markdown"`` / ``"rst"`` / ``"text"`` (the whole text; they differ in how a
``cite-check:`` marker is written)."""

NAMES: dict[str, str] = {"Makefile": "hash", "Dockerfile": "hash", "CMakeLists.txt": "hash", "BUILD": "hash"}

SHEBANG = {"sh": "hash", "bash": "hash", "zsh": "hash", "ksh": "hash", "dash": "hash", "ash": "hash",
           "node": "js", "deno": "js", "python": "python"}

"""Interpreter of a ``#!`` line -> language, for files without an extension (``python3.11`` -> ``python``)."""

Piece = tuple[int, int, str]

Note = tuple[int, int, str]  # (line, column, message): a part of the file that could not be parsed


def _split(line: int, col: int, text: str) -> Iterator[Piece]:
    for i, part in enumerate(text.split("\n")):
        yield (line + i, col if i == 0 else 0, part.rstrip("\r"))


class _Lines:
    """Offset -> (1-based line, 0-based column)."""

    def __init__(self, source: str):
        self.nl = [m.start() for m in re.finditer("\n", source)]

    def at(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_left(self.nl, offset)
        return i + 1, offset - (self.nl[i - 1] + 1 if i else 0)


def _spans_to_pieces(source: str, spans: list[tuple[int, int]]) -> Iterator[Piece]:
    lines = _Lines(source)
    for s, e in spans:
        ln, col = lines.at(s)
        yield from _split(ln, col, source[s:e])


def pieces_text(source: str, notes: Optional[list] = None) -> Iterator[Piece]:
    """Markdown, reST, plain text: every line."""
    yield from _split(1, 0, source)


_STMT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


def _docstrings(sig: list) -> Iterator[tokenize.TokenInfo]:
    """The string tokens of string statements: ``"doc"``, ``"a" "b"``, ``("a"\\n "b")``."""
    i, n = 0, len(sig)
    while i < n:
        if i and sig[i - 1].type not in _STMT_START:
            i += 1
            continue
        j = i
        while j < n and sig[j].type == tokenize.OP and sig[j].string == "(":
            j += 1
        k = j
        while k < n and sig[k].type == tokenize.STRING:
            k += 1
        if k == j:
            i += 1
            continue
        m = k
        while m < n and m - k < j - i and sig[m].type == tokenize.OP and sig[m].string == ")":
            m += 1
        end = sig[m] if m < n else None
        if m - k == j - i and (end is None or end.type in (tokenize.NEWLINE, tokenize.ENDMARKER)
                               or (end.type == tokenize.OP and end.string == ";")):
            yield from sig[j:k]
        i = k


_PY_LEX = re.compile(r"""(?P<c>\#[^\n]*)|(?P<s>[rRbBuUfF]{0,2}(?:
      \"\"\"(?:\\[\s\S]|[^\\])*?(?:\"\"\"|\Z)
    | '''(?:\\[\s\S]|[^\\])*?(?:'''|\Z)
    | "(?:\\[\s\S]|[^"\\\n])*(?:"|$)
    | '(?:\\[\s\S]|[^'\\\n])*(?:'|$)))""", re.X | re.M)


def pieces_python(source: str, notes: Optional[list] = None) -> Iterator[Piece]:
    """``#`` comments and string statements (module, class, function and attribute docstrings,
    implicitly concatenated or parenthesised), by :mod:`tokenize`.  A file that does not tokenize is
    read best-effort -- every ``#`` comment and every string literal -- and a note names the line of
    the tokenize error."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as e:
        if isinstance(e, SyntaxError):
            where, what = (e.lineno or 1, (e.offset or 1) - 1), e.msg
        else:
            where, what = (e.args[1] if len(e.args) > 1 else (1, 0)), e.args[0]
        if notes is not None:
            notes.append((where[0], where[1], f"Python tokenize failed here ({what})"))
        lines = _Lines(source)
        for m in _PY_LEX.finditer(source):
            ln, col = lines.at(m.start())
            yield from _split(ln, col, m.group())
        return
    skip = {tokenize.NL, tokenize.COMMENT}
    for t in toks:
        if t.type == tokenize.COMMENT:
            yield (t.start[0], t.start[1], t.string)
    for t in _docstrings([t for t in toks if t.type not in skip]):
        yield from _split(t.start[0], t.start[1], t.string)


@dataclass(frozen=True)
class _CSyntax:
    """The literals of a C-like language that can hold ``//`` or ``/*`` without being comments."""

    sq: str = "char"          # '...': "char" (a character literal, else a lifetime / digit separator) or "string"
    bt: str = "line"          # `...`: "line" (one line, no escapes), "raw" (Go: spans lines) or "template" (JS)
    dq_lines: bool = False    # "..." may span lines (Rust)
    triple: bool = False      # """...""" text blocks (Java, C#, Kotlin, Scala, Swift)
    rust_raw: bool = False    # r#"..."#
    swift_raw: bool = False   # #"..."#, ##"""..."""## (Swift's extended delimiters)
    line_cont: bool = False   # a `\` at the end of a line continues a // comment onto the next (C, C++)
    cpp_raw: bool = False     # R"delim(...)delim"
    verbatim: bool = False    # C# @"..." ("" escapes a quote, \ is literal, spans lines)
    nest: bool = False        # /* /* */ */ nests (Rust, Kotlin, Scala, Swift)
    regex: bool = False       # /.../flags regular-expression literals (JS, TS), where an operand may start
    include: bool = False     # #include <a//b.h>: a header name, not a comment (C, C++)

    def lexer(self, braces: bool) -> re.Pattern:
        alts = [r"//", r"/\*"]
        if self.rust_raw:
            alts.append(r'(?<![\w])b?r\#*"')
        if self.swift_raw:
            alts.append(r'\#+"(?:"")?')
        if self.cpp_raw:
            alts.append(r'(?<![\w])(?:u8|[uUL])?R"[^()\\ \t\n"]{0,16}\(')
        if self.verbatim:
            alts.append(r'@"')
        if self.include:  # a directive's header name, at the start of a line
            alts.append(r"(?<![^\n])[ \t]*\#[ \t]*(?:include|include_next|import)[ \t]*<[^>\n]*>")
        if self.triple:
            alts.append(r'"""')
        alts += ['"', "'", "`"]
        if self.regex:
            alts.append("/")
        if braces:
            alts += [r"\{", r"\}"]
        return re.compile("|".join(alts))


C_SYNTAX = {
    "c": _CSyntax(triple=True, cpp_raw=True, verbatim=True, line_cont=True, include=True),
    "js": _CSyntax(sq="string", bt="template", regex=True),
    "rust": _CSyntax(bt="none", dq_lines=True, rust_raw=True, nest=True),
    "go": _CSyntax(bt="raw"),
    "swift": _CSyntax(triple=True, nest=True, swift_raw=True),
}

_RX: dict[tuple[str, bool], re.Pattern] = {}

_CHAR = re.compile(r"'(?:\\[^\n]{1,10}?|[^'\\\n])'")

_QUOTE_END = {(q, esc): re.compile(("[\\\\" if esc else "[") + q + "\n]") for q in "\"'`" for esc in (True, False)}

_MAX_NEST = 50


def _quoted_end(src: str, i: int, q: str, escapes: bool, lines: bool) -> int:
    """The end of a quoted literal whose body starts at ``i``; an unterminated one that may not span
    lines stops at the end of its line."""
    rx = _QUOTE_END[(q, escapes)]
    while True:
        m = rx.search(src, i)
        if not m:
            return len(src)
        c = m.group()
        if c == "\\":
            i = m.end() + 1
        elif c == "\n":
            if not lines:
                return m.start()
            i = m.end()
        else:
            return m.end()


def _c_scan(src: str, i: int, syn: _CSyntax, out: list, braces: bool = False, level: int = 0) -> int:
    """Append the comment spans from ``i`` on to ``out``; with ``braces`` (inside a JS template's
    ``${...}``) stop after the ``}`` that closes it.  Returns where the scan stopped."""
    n = len(src)
    key = (repr(syn), braces)
    rx = _RX.get(key) or _RX.setdefault(key, syn.lexer(braces))
    depth = 0
    while True:
        m = rx.search(src, i)
        if not m:
            return n
        s, t = m.start(), m.group()
        if t == "//":
            e = _line_comment_end(src, s, syn.line_cont)
            out.append((s, e))
            i = e
        elif t == "/*":
            e = _block_comment_end(src, s, syn)
            out.append((s, e))
            i = e
        elif t == "{":
            depth, i = depth + 1, s + 1
        elif t == "}":
            if not depth:
                return s + 1
            depth, i = depth - 1, s + 1
        else:
            i = _literal_end(src, m, syn, out, level)


def _line_comment_end(src: str, s: int, cont: bool) -> int:
    """Where the ``//`` comment at ``s`` ends: its line's end; with ``cont`` (C, C++: a backslash-newline
    is removed before comments are), the end of the last line continued by a backslash at the end."""
    e = src.find("\n", s)
    while cont and e >= 0 and src[max(s + 2, e - 2):e].rstrip("\r").endswith("\\"):  # the line's tail only
        e = src.find("\n", e + 1)
    return len(src) if e < 0 else e


def _block_comment_end(src: str, s: int, syn: _CSyntax) -> int:
    """Where the ``/*`` comment at ``s`` ends (after its ``*/``; nested ones counted where the language
    nests them, Rust and Swift); the end of the text when it is not closed."""
    n = len(src)
    if not syn.nest:
        e = src.find("*/", s + 2)
        return n if e < 0 else e + 2
    d, j = 1, s + 2
    while d:
        b = re.compile(r"/\*|\*/").search(src, j)
        if not b:
            return n
        d += 1 if b.group() == "/*" else -1
        j = b.end()
    return j


def _literal_end(src: str, m, syn: _CSyntax, out: list, level: int) -> int:
    """Where the literal that ``m`` starts ends (a string, character, template, raw string): the scan
    resumes there, so nothing inside a literal is taken for a comment."""
    n = len(src)
    s, t = m.start(), m.group()
    if t.endswith(">"):  # `#include <...>`: a header name, read as a whole
        return m.end()
    if t == "/":
        return _regex_end(src, s, out.memo)
    if t == "`":
        if syn.bt == "template":
            return _template_end(src, s + 1, syn, out, level)
        if syn.bt == "raw":
            e = src.find("`", s + 1)
            return n if e < 0 else e + 1
        if syn.bt == "line":
            return _quoted_end(src, s + 1, "`", False, False)
        return s + 1
    if t == "'":
        if syn.sq == "string":
            return _quoted_end(src, s + 1, "'", True, False)
        c = _CHAR.match(src, s)
        return c.end() if c else s + 1  # a Rust lifetime or a C++14 digit separator: not a literal
    if t == '"""':
        j = s + 3
        while True:
            e = re.compile(r'\\|"""').search(src, j)
            if not e:
                return n
            if e.group() == "\\":
                j = e.end() + 1
            else:
                return e.end()
    if t == '"':
        return _quoted_end(src, s + 1, '"', True, syn.dq_lines)
    if t == '@"':
        j = s + 2
        while True:
            e = src.find('"', j)
            if e < 0:
                return n
            if src.startswith('""', e):
                j = e + 2
            else:
                return e + 1
    if t.startswith("#"):  # Swift's #"..."# / #"""..."""#
        close = t.lstrip("#") + "#" * t.count("#")
    elif t.endswith("("):  # C++ raw string R"delim(
        close = ")" + t[t.index('"') + 1:-1] + '"'
    else:  # Rust raw string r#"
        close = '"' + "#" * t.count("#")
    e = src.find(close, m.end())
    return n if e < 0 else e + len(close)


# after these words an expression starts (a `/` there opens a regular expression, not a division)
_JS_KEYWORDS = frozenset({"return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do",
                          "else", "yield", "await"})

# in a regular-expression literal: a run outside a class (escapes kept whole), and a class's body to its `]`
_JS_REGEX_RUN = re.compile(r"(?:\\[^\n]|[^/\\\[\n])*")
_JS_REGEX_CLASS = re.compile(r"(?:\\[^\n]|[^\]\\\n])*\]")


def _regex_end(src: str, s: int, memo: dict) -> int:
    """Where the JS regular-expression literal opened by the ``/`` at ``s`` ends (quotes, backticks and
    ``//`` inside it are not literals or comments); ``s + 1`` where that ``/`` is a division (after an
    operand: a name, a number, a literal, ``)``, ``]`` or ``}``) or no literal closes on its line.
    ``memo`` holds each line's last ``]``, so that a class that cannot close fails at once (linear)."""
    j = s
    while j and src[j - 1] in " \t\r\n\f\v":
        j -= 1
    prev = src[j - 1] if j else ""
    if prev and (prev.isalnum() or prev in "_$"):
        k = j
        while k and (src[k - 1].isalnum() or src[k - 1] in "_$"):
            k -= 1
        if src[k:j] not in _JS_KEYWORDS:
            return s + 1
    elif prev and prev in ")]}\"'`" or src[max(j - 2, 0):j] in ("++", "--"):  # after an operand (x++ / 2)
        return s + 1
    eol = src.find("\n", s)
    eol = len(src) if eol < 0 else eol
    last = memo.get(eol)
    if last is None:
        last = memo[eol] = src.rfind("]", s, eol)
    i = s + 1
    while True:
        q = _JS_REGEX_RUN.match(src, i, eol).end()
        if q >= eol:
            return s + 1
        if src[q] == "/":
            return q + 1 if q > s + 1 else s + 1
        if q > last:  # a `[` with no `]` after it on the line
            return s + 1
        c = _JS_REGEX_CLASS.match(src, q + 1, eol)
        if not c:
            return s + 1
        i = c.end()


_TEMPLATE = re.compile(r"\\|`|\$\{")


def _template_end(src: str, i: int, syn: _CSyntax, out: list, level: int) -> int:
    """The end of a JS template literal whose body starts at ``i`` (it spans lines; ``${...}`` is
    code, which may hold strings, comments and templates of its own)."""
    while True:
        m = _TEMPLATE.search(src, i)
        if not m:
            return len(src)
        t = m.group()
        if t == "\\":
            i = m.end() + 1
        elif t == "`":
            return m.end()
        elif level >= _MAX_NEST:
            i = m.end()
        else:
            i = _c_scan(src, m.end(), syn, out, braces=True, level=level + 1)


class _Spans(list):
    """The comment spans found so far, and the scan's memo (a line's last ``]``, by the line's end)."""

    def __init__(self):
        super().__init__()
        self.memo: dict = {}


def _c_pieces(language: str):
    syn = C_SYNTAX[language]

    def pieces(source: str, notes: Optional[list] = None) -> Iterator[Piece]:
        spans = _Spans()
        _c_scan(source, 0, syn, spans)
        yield from _spans_to_pieces(source, spans)
    pieces.__doc__ = f"``//`` and ``/* */`` comments of {language!r} source, outside its literals."
    return pieces


pieces_c = _c_pieces("c")

_QUOTE_START = set(" \t:=[{,(")


def pieces_hash(source: str, notes: Optional[list] = None) -> Iterator[Piece]:
    """``#`` to the end of the line, when ``#`` starts the line or follows whitespace and is not inside
    a '...' or "..." that opened a token (shell, YAML, TOML, CMake; quotes do not span lines; in
    "..." a backslash escapes the next character, in '...' it is literal)."""
    for ln, text in enumerate(source.split("\n"), 1):
        quote, j, n = None, 0, len(text)
        while j < n:
            c = text[j]
            if quote:
                if c == "\\" and quote == '"':
                    j += 1
                elif c == quote:
                    quote = None
            elif c in "'\"" and (j == 0 or text[j - 1] in _QUOTE_START):
                quote = c
            elif c == "#" and (j == 0 or text[j - 1] in " \t"):
                yield (ln, j, text[j:].rstrip("\r"))
                break
            j += 1


PIECES = {"python": pieces_python, "hash": pieces_hash, "text": pieces_text, "markdown": pieces_text,
          "rst": pieces_text, **{k: _c_pieces(k) for k in C_SYNTAX}}


def _interpreter(first_line: bytes) -> Optional[str]:
    """The language of a ``#!`` line, ``None`` when not one of :data:`SHEBANG`."""
    if not first_line.startswith(b"#!"):
        return None
    words = first_line[2:].decode("latin-1").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    else:
        words = words[:1]
    if not words:
        return None
    name = os.path.basename(words[0])
    if re.fullmatch(r"python[0-9.]*", name):
        name = "python"
    return SHEBANG.get(name)


def language_of(path: Path, sniff: bool = False) -> Optional[str]:
    """The comment syntax of ``path`` (a key of :data:`PIECES`), ``None`` when not a supported type.
    With ``sniff``, a regular file without an extension is read as its ``#!`` line says."""
    if path.name in NAMES:
        return NAMES[path.name]
    if path.suffix:
        return LANGUAGES.get(path.suffix[1:].lower())
    if not sniff:
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            return _interpreter(fh.readline(256))
    except OSError:
        return None

"""The spec's text on the site: a formula as TeX for MathJax (:func:`formula_tex`, prose formulas kept as
written), every spec string escaped on its way into reStructuredText, issue references and URLs linked,
sources linked to their upstream file at its tag, tables.

Every string from a spec, a matrix or a config reaches the generated reStructuredText through one of:
:func:`esc` (text; every ASCII punctuation character backslash-escaped, so no markup can start), the
wrappers over it -- :func:`lit` (inline code: the ``:literal:`` role, whose escapes are processed; never a
````literal````, which a backquote in the text would close), :func:`strong`, a link's label --, or, where it
becomes a page name, an anchor or a directive's argument, :func:`name` (a name of letters, digits, ``-``,
``_`` and ``.``, else :class:`~posenc.tools.sphinx_build.DocsError`); a URL only through :func:`uri`.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from posenc.tools.card.render import rst_escape
from posenc.tools.sphinx_build import DocsError

_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "theta", "lambda", "mu", "pi", "rho", "sigma", "tau",
          "phi", "psi", "omega", "eta", "kappa", "nu", "xi", "zeta", "chi", "Phi", "Theta", "Lambda", "Omega"}

_FUNCS = {"sin": r"\sin", "cos": r"\cos", "ln": r"\ln", "log": r"\log", "exp": r"\exp", "min": r"\min",
          "max": r"\max", "log2": r"\log_2"}

_TOKEN = re.compile(r"\s+|\d+(?:\.\d+)?(?:e-?\d+)?|[A-Za-z_][A-Za-z0-9_]*'*|\.\.\.|\.\.|==|!=|<=|>=|\+\+|//|->|.")

_ESCAPE = {"{": r"\{", "}": r"\}", "#": r"\#", "&": r"\&", "%": r"\bmod ", "$": r"\$", "~": r"\sim ",
           "\\": r"\backslash ", "_": r"\_"}

def _tex_ident(tok: str) -> str:
    primes = len(tok) - len(tok.rstrip("'"))
    name = tok.rstrip("'")
    if name in _GREEK:
        out = "\\" + ("varphi" if name == "phi" else "epsilon" if name == "eps" else name)
    elif "_" in name and not name.startswith("_"):
        base, _, sub = name.partition("_")
        if (len(base) == 1 or base in _GREEK or base == "eps") and len(sub) <= 4 and "_" not in sub:
            b = "\\epsilon" if base == "eps" else (("\\" + ("varphi" if base == "phi" else base)) if base in _GREEK
                                                   else base)
            out = f"{b}_{{\\mathrm{{{sub}}}}}" if len(sub) > 1 else f"{b}_{{{sub}}}"
        else:
            out = r"\mathrm{" + name.replace("_", r"\_") + "}"
    elif len(name) == 1:
        out = name
    else:
        out = r"\mathrm{" + name + "}"
    return out + "'" * primes

def _close(toks: list[str], i: int) -> int:
    """Index of the ``)`` matching the ``(`` at ``toks[i]`` (``len(toks)`` when unbalanced)."""
    depth = 0
    for j in range(i, len(toks)):
        depth += toks[j] == "("
        depth -= toks[j] == ")"
        if depth == 0:
            return j
    return len(toks)

def _tex(toks: list[str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if t.isspace():
            out.append(r"\ ")
        elif t == "^":
            if nxt == "(":
                j = _close(toks, i + 1)
                out.append("^{" + _tex(toks[i + 2:j]) + "}")
                i = j
            elif nxt:
                out.append("^{" + _tex([nxt]) + "}")
                i += 1
        elif t in ("sqrt", "floor", "ceil") and nxt == "(":
            j = _close(toks, i + 1)
            inner = _tex(toks[i + 2:j])
            out.append({"sqrt": r"\sqrt{%s}", "floor": r"\left\lfloor %s \right\rfloor",
                        "ceil": r"\left\lceil %s \right\rceil"}[t] % inner)
            i = j
        elif t in _FUNCS:
            out.append(_FUNCS[t] + " ")
        elif re.match(r"[A-Za-z_]", t):
            out.append(_tex_ident(t))
        elif t[0].isdigit():
            out.append(t)
        else:
            out.append({"*": r"\cdot ", "<=": r"\le ", ">=": r"\ge ", "==": r"\overset{!}{=}", "!=": r"\ne ",
                        "..": r"\ldots ", "...": r"\ldots ", "++": r"\mathbin{+\!\!+}", "//": r"\mathbin{//}",
                        "->": r"\to ", ";": r";\quad ", "?": r"\ ?\ ", "|": r"\vert ", "<": "<", ">": ">"}.get(
                t, _ESCAPE.get(t, t)))
        i += 1
    return "".join(out)

_MATHY = set(_GREEK) | set(_FUNCS) | {"sqrt", "floor", "ceil"}

def is_prose(formula: str) -> bool:
    """A formula written in words (``three bands by wavelength; linear blend ...``): shown as written only,
    not as math (no equation, and three or more lower-case words in a row that are not function or Greek names)."""
    if "=" in formula:
        return False
    for run in re.findall(r"(?<![\w(])[a-z]{2,}(?: [a-z]+){2,}", formula):
        if sum(w not in _MATHY and len(w) > 1 for w in run.split()) >= 3:
            return True
    return False

def formula_tex(formula: str) -> str:
    """The spec's ASCII formula (``inv_freq[i] = rope_theta^(-2i/rotary_dim)``) as LaTeX for display.

    A rendering aid only: the literal formula stays the normative text and the pages show both.
    ``^(...)`` becomes a superscript, ``sqrt`` / ``floor`` / ``ceil`` their symbols, Greek names their
    letters, ``a_h`` a subscript, ``==`` (a checked equality) ``=`` with a ``!`` over it, words upright.
    """
    toks = _TOKEN.findall(formula.strip())
    # unbalanced parentheses would swallow the rest of a superscript: leave them as written
    return _tex(toks)

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ufeff]")


def plain(text) -> str:
    """One line of text: control characters as blanks, runs of whitespace as one blank, stripped."""
    return " ".join(_CONTROLS.sub(" ", str(text)).split())


def esc(text) -> str:
    """Plain text for reStructuredText: :func:`posenc.tools.card.rst_escape` of :func:`plain`."""
    return rst_escape(plain(text))


def lit(text) -> str:
    """Text shown as inline code: the ``:literal:`` role over :func:`esc` (a blank cell when empty)."""
    s = esc(text)
    return f":literal:`{s}`" if s else "\\ "


def strong(text) -> str:
    """Text in bold: :func:`esc` between ``**`` (nothing when empty)."""
    s = esc(text)
    return f"**{s}**" if s else ""


_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?")

#: page names Sphinx writes itself: no family (nor card) may take one
RESERVED = frozenset({"index", "search", "genindex", "py-modindex", "cards"})


def name(text, what: str = "name") -> str:
    """``text`` where it becomes a page name, an anchor, a link's target or a directive's argument (an ID, a
    family, a version): letters, digits, ``-``, ``_`` and ``.`` (no ``..``), starting and ending with a letter or
    digit; else :class:`DocsError` (one line) -- such a string cannot be escaped there, only refused."""
    s = text if isinstance(text, str) else str(text)
    if not _NAME.fullmatch(s) or ".." in s:
        raise DocsError(f"the spec's {what} {plain(s)[:80]!r} is not a name of letters, digits, '-', '_' and '.': "
                        f"refusing to build the site")
    if what == "family" and s in RESERVED:
        raise DocsError(f"the spec's family {s!r} is not a name a family page may have (Sphinx writes "
                        f"{', '.join(sorted(RESERVED))}): refusing to build the site")
    return s


_SAFE_URI = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]+)?(?:[/?#][A-Za-z0-9._~!$&()*+,;=:@%/?#\[\]-]*)?")


def uri(url) -> Optional[str]:
    """``url`` as the target of an RST link: an ``http(s)://`` URL of URL characters only (no quote, backquote,
    backslash, angle bracket or blank), a trailing ``_`` escaped (else RST reads a reference name); else None."""
    if not isinstance(url, str) or not _SAFE_URI.fullmatch(url):
        return None
    return url[:-1] + "\\_" if url.endswith("_") else url

_URL = re.compile(r"https?://[^\s)\]<>`,;\"'\\]+")

_ISSUE = re.compile(r"\b(?:([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)|(transformers|vllm|llama\.cpp))#(\d+)\b")

_SHORT = {"transformers": "huggingface/transformers", "vllm": "vllm-project/vllm", "llama.cpp": "ggml-org/llama.cpp"}

def linked(text) -> str:
    """Escaped text with URLs and ``owner/repo#N`` / ``transformers#N`` references as links."""
    text = plain(text)
    out, pos = [], 0
    marks = sorted([(m.start(), m.end(), m.group(0), m.group(0)) for m in _URL.finditer(text)] +
                   [(m.start(), m.end(), m.group(0),
                     f"https://github.com/{m.group(1) or _SHORT[m.group(2)]}/issues/{m.group(3)}")
                    for m in _ISSUE.finditer(text)])
    for start, end, label, url in marks:
        if start < pos:
            continue
        target = uri(url)
        if target is None:
            continue
        out.append(esc(text[pos:start]))
        out.append(f" `{esc(label)} <{target}>`__ ")
        pos = end
    out.append(esc(text[pos:]))
    return "".join(out).strip()

def source_url(src: dict) -> Optional[str]:
    """A link for a source: arXiv for a paper with an arXiv ID, the file at its tag for an upstream
    repository file (transformers' ``src/transformers/`` layout), the repository otherwise."""
    cit, loc, ver = str(src.get("citation", "")), str(src.get("location", "")), src.get("version")
    m = re.search(r"arXiv:(\d{4}\.\d{4,5})", cit + " " + loc)
    if m:
        return f"https://arxiv.org/abs/{m.group(1)}"
    m = _URL.search(cit + " " + loc)
    if m:
        return m.group(0)
    if re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", cit):
        path = loc.split("::")[0].split(" ")[0]
        if cit == "huggingface/transformers" and re.fullmatch(r"[\w./-]+\.py", path):
            return f"https://github.com/{cit}/blob/{'v' + ver if ver else 'main'}/src/transformers/{path}"
        return f"https://github.com/{cit}"
    return None

def rst_table(header: list[str], rows: Iterable[list[str]], widths: Optional[str] = None) -> list[str]:
    rows = list(rows)
    if not rows:
        return []
    out = [".. list-table::", "   :header-rows: 1"]
    if widths:
        out.append(f"   :widths: {widths}")
    out.append("")
    for row in [header, *rows]:
        for k, cell in enumerate(row):
            out.append(("   * - " if k == 0 else "     - ") + (cell if cell.strip() else "\\ "))
    out.append("")
    return out

def rst_ref(ident: str, snap, here: str) -> str:
    """A link to the entry ``ident`` of ``snap`` (on the page of family ``here``: its anchor only); the ID
    as text when ``snap`` has no such entry."""
    e = snap.entry(ident) if isinstance(ident, str) else None
    if e is None:
        return esc(ident)
    ident = name(ident, "ID")
    page = "" if e["family"] == here else f"{name(e['family'], 'family')}.html"
    return f"`{ident} <{page}#{ident}>`__"

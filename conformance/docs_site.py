"""The spec as a static web site: one page per family and spec version, one anchor per ID.

``posenc docs build [--out DIR] [--base URL]`` writes the site with Sphinx (the documentation
generator of the Python ecosystem, actively maintained; its search runs in the page, offline):
for every released version (:func:`posenc.spec.versions.released_versions`, plus the version in
development if any) a folder ``DIR/<version>/`` with ``<family>.html`` for each family, whose
anchors are the clause and divergence IDs themselves, so a citation links as
``<base>/<version>/<family>.html#<ID>`` (:func:`page_url`; ``posenc spec show ID --url``).  Each
entry shows its formula as math (MathJax, bundled by ``sphinx-mathjax-offline``: the pages request
nothing outside the site), the literal formula, parameters with their declared domains and
defaults, sources with links and provenance, tolerance class, invariants, the divergences that
violate a clause (description, mutant, evidence links), which wrapped implementations conform,
diverge or cannot express it (the current version's pages, from :mod:`.matrix_status`), and
``since`` / ``superseded_by``.  The current version also gets the cards of the registry's named
models (:mod:`.card`).  ``posenc docs serve`` serves the built site on localhost.

The base URL: ``--base``, else ``$POSENC_DOCS_BASE``, else :data:`DEFAULT_BASE` (where ``posenc docs
serve`` serves).  Needs the ``[docs]`` extra (Sphinx, sphinx-mathjax-offline).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from posenc.spec.errors import PosencError, SpecError

from .card import rst_escape
from .failure_plots import EXTRA  # the [docs] extra

DEFAULT_BASE = "http://localhost:8000"
DEFAULT_OUT = Path("posenc-site")
_DOCS_EXTRA = f"pip install '{EXTRA}'"


class DocsError(PosencError):
    """The site cannot be built or served (missing extra, Sphinx error); the message says why."""


# --------------------------------------------------------------------------------------------- links

def docs_base(base: Optional[str] = None) -> str:
    """The site's base URL without a trailing slash: ``base``, ``$POSENC_DOCS_BASE`` or :data:`DEFAULT_BASE`.

    An ``http://``, ``https://`` or ``file://`` URL without blanks, quotes or angle brackets; anything
    else raises :class:`DocsError` (a base is written into every page's links)."""
    given = base or os.environ.get("POSENC_DOCS_BASE") or DEFAULT_BASE
    where = "--base" if base else "$POSENC_DOCS_BASE" if os.environ.get("POSENC_DOCS_BASE") else "the default base"
    if not re.fullmatch(r"(https?|file)://[^\s\"'<>`\\]+", given):
        raise DocsError(f"{where} {given!r} is not an http(s):// or file:// URL without blanks, quotes or brackets")
    return given.rstrip("/")


def page_url(ident: str, version: Optional[str] = None, base: Optional[str] = None) -> str:
    """``<base>/<version>/<family>.html#<ID>``: the link of a clause or divergence ID.

    ``version``: a released version or the one in development (default: the current spec's).
    Raises :class:`~posenc.spec.errors.SpecError` for an unknown version or an ID that does not
    exist in that version.
    """
    from posenc.spec import SPEC_VERSION
    from posenc.spec.versions import snapshot
    version = version or SPEC_VERSION
    entry = snapshot(version).entry(ident)
    if entry is None:
        raise SpecError(f"{ident} does not exist in spec {version}")
    return f"{docs_base(base)}/{version}/{entry['family']}.html#{ident}"


# ------------------------------------------------------------------------------------- formula -> TeX

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


def _is_prose(formula: str) -> bool:
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


# ------------------------------------------------------------------------------------------ RST text

def _esc(text) -> str:
    """Plain text for reStructuredText: :func:`posenc.conformance.card.rst_escape`, on one line."""
    return rst_escape(" ".join(str(text).split()))


_URL = re.compile(r"https?://[^\s)\]<>`,;\"'\\]+")
_ISSUE = re.compile(r"\b(?:([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)|(transformers|vllm|llama\.cpp))#(\d+)\b")
_SHORT = {"transformers": "huggingface/transformers", "vllm": "vllm-project/vllm", "llama.cpp": "ggml-org/llama.cpp"}


def _linked(text) -> str:
    """Escaped text with URLs and ``owner/repo#N`` / ``transformers#N`` references as links."""
    text = " ".join(str(text).split())
    out, pos = [], 0
    marks = sorted([(m.start(), m.end(), m.group(0), m.group(0)) for m in _URL.finditer(text)] +
                   [(m.start(), m.end(), m.group(0),
                     f"https://github.com/{m.group(1) or _SHORT[m.group(2)]}/issues/{m.group(3)}")
                    for m in _ISSUE.finditer(text)])
    for start, end, label, url in marks:
        if start < pos:
            continue
        out.append(_esc(text[pos:start]))
        out.append(f" `{_esc(label)} <{url}>`__ ")
        pos = end
    out.append(_esc(text[pos:]))
    return "".join(out).strip()


def _source_url(src: dict) -> Optional[str]:
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


def _table(header: list[str], rows: Iterable[list[str]], widths: Optional[str] = None) -> list[str]:
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


def _ref(ident: str, snap, here: str) -> str:
    e = snap.entry(ident)
    if e is None:
        return _esc(ident)
    page = "" if e["family"] == here else f"{e['family']}.html"
    return f"`{ident} <{page}#{ident}>`__"


def _entry_rst(e: dict, snap, base: str, current: str, status: bool) -> list[str]:
    ident, fam, version = e["id"], e["family"], snap.version
    title = e.get("title") or e.get("description", "")
    title = title if len(title) <= 90 else title[:87].rsplit(" ", 1)[0] + " ..."
    out = [f".. posenc-entry:: {ident}", f"   :kind: {e['kind']}", f"   :heading: {' '.join(str(title).split())}", ""]
    body: list[str] = []
    fields = [("Kind", e["kind"] + ("" if e.get("kind") != "divergence" else f" ({e.get('level', 'operation')} level)")),
              ("Since", _esc(e.get("since", "?"))), ("Family", f"`{fam} <{fam}.html>`__")]
    if e["kind"] == "clause":
        fields.append(("Tolerance class", _esc(e.get("tolerance", "?"))))
        if e.get("required") is False:
            fields.append(("Required", "no (opt-in)"))
    if e.get("superseded_by"):
        fields.append(("Superseded by", ", ".join(_ref(s, snap, fam) for s in e["superseded_by"])
                       + " (kept with its old meaning; no longer checked)"))
    fields.append(("Cite as", f"``posenc: {ident}@{version}``"))
    fields.append(("Link", f"`{base}/{version}/{fam}.html#{ident} <{base}/{version}/{fam}.html#{ident}>`__"))
    if version != current:
        from posenc.spec.versions import snapshot
        now = snapshot(current).entry(ident)
        if now is None:
            fields.append(("In spec " + current, "not present"))
        else:
            link = f"`{ident}@{current} <../{current}/{now['family']}.html#{ident}>`__"
            if str(now.get("since")) != str(e.get("since")):
                state = f" -- **meaning changed** (its current meaning dates from {_esc(now.get('since'))})"
            elif now.get("superseded_by") and not e.get("superseded_by"):
                state = (" -- **superseded** there by " + ", ".join(_esc(x) for x in now["superseded_by"])
                         + ": compare the texts")
            elif any(now.get(k) != e.get(k) for k in ("statement", "formula", "description", "violates")):
                state = (" -- reworded there; the spec records the same meaning (same ``since``): compare the "
                         "texts")
            else:
                state = " (same text)"
            fields.append((f"In spec {current}", link + state))
    body += [f":{k}: {v}" for k, v in fields] + [""]
    if e["kind"] == "clause":
        body += [_esc(e.get("statement", "")), ""]
        if e.get("formula"):
            body += ["**Formula**", ""]
            if not _is_prose(str(e["formula"])):
                body += [".. math::", "", "   " + formula_tex(str(e["formula"])), ""]
            body += [".. code-block:: none", "", "   " + " ".join(str(e["formula"]).split()), ""]
        params = e.get("parameters") or []
        domains = {f: (m, r) for m, fs in (snap.families[fam].get("parameters") or {}).items()
                   for f, r in (fs or {}).items()}
        if params:
            body += ["**Parameters**", ""]
            rows = []
            for p in params:
                dom = domains.get(p.get("name"))
                rng = ""
                if dom:
                    m, r = dom
                    rng = (f"values {r['values']}" if r.get("values") is not None else
                           f"[{r['range'][0]}, {r['range'][1]}]" + (" (log)" if r.get("scale") == "log" else "")
                           if r.get("range") else f"nested {r.get('nested')}")
                    if r.get("library_defaults"):
                        rng += "; library defaults " + ", ".join(f"{k}: {v}" for k, v in r["library_defaults"].items())
                    if r.get("description"):
                        rng += "; " + r["description"]
                meaning = ""
                if dom and dom[1].get("description"):
                    meaning = dom[1]["description"]
                    rng = rng.replace("; " + meaning, "")
                rows.append([f"``{p.get('name')}``", _esc(p.get("type", "")), _esc(p.get("default", "")),
                             _esc(p.get("constraints") or ""), _esc(rng), _esc(meaning)])
            body += _table(["name", "type", "default", "constraints", "declared range", "meaning"], rows,
                           "14 7 10 20 24 25")
        io = [("input", t) for t in e.get("inputs") or []] + [("output", t) for t in e.get("outputs") or []]
        if io:
            body += ["**Tensors**", ""] + _table(["", "name", "shape", "dtype"], (
                [k, f"``{t.get('name')}``", f"``{t.get('shape')}``", _esc(t.get("dtype", ""))] for k, t in io))
        if e.get("invariants"):
            body += ["**Invariants (oracle-free checks)**: " + ", ".join(f"``{i}``" for i in e["invariants"]), ""]
        if e.get("branches"):
            body += ["**Branch points** (cases on both sides required)", ""]
            body += [f"- ``{b.get('name')}``: {_esc(b.get('description', ''))}" for b in e["branches"]] + [""]
        if e.get("sources"):
            body += ["**Sources**", ""]
            for s in e["sources"]:
                url = _source_url(s)
                label = _esc(s.get("citation", ""))
                line = f"- `{label} <{url}>`__" if url else f"- {label}"
                line += f", {_esc(s.get('location', ''))}"
                if s.get("version"):
                    line += f", version {_esc(s['version'])}"
                line += f" -- *{_esc(s.get('kind', ''))}; provenance: {_esc(s.get('provenance', ''))}*"
                body.append(line)
            body.append("")
        divs = snap.violators.get(ident, [])
        if divs:
            body += ["**Divergences** (known wrong behaviours that violate it)", ""]
            for d in divs:
                de = snap.entry(d)
                body.append(f"- {_ref(d, snap, fam)}: {_esc(de.get('description', ''))}"
                            + (" *(superseded)*" if de.get("superseded_by") else ""))
            body.append("")
        if status:
            body += _status_rst(ident, snap, fam)
        else:
            body += [f"**Implementations**: the matrices check the current spec; see ``{ident}@{current}``'s page.", ""]
    else:
        body += ["**Violates**: " + ", ".join(_ref(c, snap, fam) for c in e.get("violates") or []), "",
                 _esc(e.get("description", "")), ""]
        if e.get("symptom"):
            body += ["**Symptom**: " + _esc(e["symptom"]), ""]
        body += [f"**Mutant**: {_esc(e.get('mutant'))} (the reference with this bug; failures are diagnosed "
                 "against it)", ""]
        if e.get("dtypes"):
            body += ["**Observable at**: " + ", ".join(f"``{d}``" for d in e["dtypes"]), ""]
        if e.get("evidence"):
            body += ["**Evidence**", ""] + [f"- {_linked(x)}" for x in e["evidence"]] + [""]
    out += ["   " + line if line else "" for line in body]
    return out


def _status_rst(ident: str, snap, here: str) -> list[str]:
    from .matrix_status import clause_status
    rows = clause_status(ident)
    if rows is None:
        return ["**Implementations**: no conformance matrix in this installation (docs/conformance-matrix.json).", ""]
    if not rows:
        return ["**Implementations**: no row for this clause in the matrices.", ""]
    src = "model matrix" if ident.startswith("MODEL-") else "conformance matrix"
    mat = "model-matrix" if ident.startswith("MODEL-") else "conformance-matrix"
    dts = sorted({dt for r in rows for dt in r.dtypes}, key=["float64", "float32", "bfloat16", "float16"].index)
    table = _table(["implementation", "status", *dts, "divergences"], (
        [f"``{r.implementation}``", f"**{r.status}**" + (f" ({_esc(r.note)})" if r.note else ""),
         *[_esc(r.dtypes.get(dt, "")) for dt in dts], ", ".join(_ref(d, snap, here) for d in r.divergences)]
        for r in rows))
    return [f"**Implementations** (from the {src}, ``docs/{mat}.json``: conforms, diverges, cannot express)", ""] + table


def _family_rst(snap, fam: str, base: str, current: str, status: bool) -> str:
    raw = snap.families[fam]
    title = f"{fam} -- spec {snap.version}"
    lines = [title, "=" * len(title), "", _linked(raw.get("description", "")), ""]
    if raw.get("id_prefixes"):
        lines += [f"ID prefixes: {', '.join('``' + p + '-``' for p in raw['id_prefixes'])}", ""]
    clauses = [c for c in raw.get("clauses") or []]
    divs = [d for d in raw.get("divergences") or []]
    lines += ["Clauses", "-------", ""]
    lines += _table(["ID", "title", "since"], ([f"`{c['id']} <#{c['id']}>`__", _esc(c.get("title", "")),
                                                _esc(c.get("since", ""))] for c in clauses))
    for c in clauses:
        lines += _entry_rst(snap.entry(c["id"]), snap, base, current, status)
    if divs:
        lines += ["Divergences", "-----------", ""]
        for d in divs:
            lines += _entry_rst(snap.entry(d["id"]), snap, base, current, status)
    ops = raw.get("operations") or []
    if ops:
        lines += ["Operations (the adapter contract)", "---------------------------------", ""]
        lines += _table(["operation", "title", "method", "clauses"], (
            [f"``{o.get('name')}``", _esc(o.get("title", "")), f"``{o.get('method')}``",
             ", ".join(_ref(c, snap, fam) for c in o.get("clauses") or [])] for o in ops))
    return "\n".join(lines) + "\n"


def _index_rst(snap, versions: list[str], current: str, cards: list[str]) -> str:
    title = f"posenc spec {snap.version}"
    state = "released" if snap.released else "in development"
    lines = [title, "=" * len(title), "",
             f"The specification of transformer positional encodings, version {snap.version} ({state}). Every "
             "normative rule is a *clause* with a stable ID; every known wrong behaviour a *divergence*. Each ID "
             "is an anchor of its family's page: ``<base>/<version>/<family>.html#<ID>``. Cite one in code as "
             f"``posenc: ROPE-PAIR-HALF@{snap.version}`` (checked by ``posenc cite-check``).", "",
             "Other versions: " + ", ".join(f"`{v} <../{v}/index.html>`__" if v != snap.version else f"**{v}**"
                                            for v in versions), "",
             ".. toctree::", "   :maxdepth: 1", "   :caption: Families", ""]
    lines += [f"   {fam}" for fam in sorted(snap.families)] + [""]
    if cards:
        lines += [".. toctree::", "   :maxdepth: 1", "   :caption: Positional-encoding cards", ""]
        lines += [f"   cards/{c}" for c in cards] + [""]
    lines += ["Families", "--------", ""]
    lines += _table(["family", "clauses", "divergences", "description"], (
        [f":doc:`{fam}`", str(len(raw.get("clauses") or [])), str(len(raw.get("divergences") or [])),
         _esc(" ".join(str(raw.get("description", "")).split())[:160])] for fam, raw in sorted(snap.families.items())))
    return "\n".join(lines) + "\n"


_CONF = '''# generated by posenc docs build
project = "posenc spec {version}"
copyright = "the posenc authors"
version = release = "{version}"
extensions = ["sphinx.ext.mathjax", "sphinx-mathjax-offline", "posenc.conformance.docs_site"]
html_theme = "alabaster"
html_title = "posenc spec {version}"
html_theme_options = {{"font_family": "serif", "head_font_family": "serif", "code_font_family": "monospace",
                      "page_width": "95%", "sidebar_width": "260px"}}
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
templates_path = []
exclude_patterns = []
'''


# ----------------------------------------------------------------------------------- Sphinx extension

def setup(app):  # pragma: no cover - called by Sphinx
    """Sphinx extension: the ``posenc-entry`` directive (a section whose anchor is the ID itself,
    registered as a ``clause`` / ``divergence`` object so the search finds it by ID)."""
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives

    class PosencEntry(Directive):
        required_arguments = 1
        has_content = True
        option_spec = {"kind": directives.unchanged, "heading": directives.unchanged}

        def run(self):
            ident = self.arguments[0]
            env = self.state.document.settings.env
            sec = nodes.section()
            sec["ids"] = [ident]  # the fragment is the ID exactly (docutils would lower-case it)
            sec["names"] = [ident.lower()]
            heading = self.options.get("heading", "")
            sec += nodes.title("", f"{ident} -- {heading}" if heading else ident)
            self.state.nested_parse(self.content, self.content_offset, sec)
            kind = self.options.get("kind", "clause")
            # the object's name carries the title: Sphinx's search matches object names by substring, so a
            # clause is found (and linked at its anchor) by its ID and by any word of its title
            env.get_domain("std").note_object(kind, f"{ident} {heading}".strip(), ident,
                                              location=(env.docname, self.lineno))
            return [sec]

    app.add_object_type("clause", "clause", objname="spec clause")
    app.add_object_type("divergence", "divergence", objname="spec divergence")
    app.add_directive("posenc-entry", PosencEntry)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# ----------------------------------------------------------------------------------------- building

def _need_sphinx():
    try:
        import sphinx  # noqa: F401
        import importlib
        importlib.import_module("sphinx-mathjax-offline")
    except ImportError as e:
        raise DocsError(f"the spec site needs Sphinx and sphinx-mathjax-offline ({e.name} is not installed): "
                        f"{_DOCS_EXTRA}") from None


def _sphinx(src: Path, out: Path) -> None:
    from sphinx.cmd.build import build_main
    import io
    import contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = build_main(["-b", "html", "-q", "-W", "--keep-going", "-E", str(src), str(out)])
    if rc != 0:
        raise DocsError(f"Sphinx failed on {src} (exit {rc}):\n{err.getvalue().strip()}")


def build(out: Path = DEFAULT_OUT, base: Optional[str] = None, versions: Optional[list[str]] = None,
          cards: bool = True) -> Path:
    """Write the site into ``out`` (replaced): ``out/<version>/`` per version, ``out/index.html``.

    ``versions``: default every known version (released ones and the one in development).
    ``cards``: the registry's named models' cards on the current version's site (needs matplotlib).
    Returns ``out``.  Raises :class:`DocsError` without the ``[docs]`` extra or on a Sphinx error.
    """
    _need_sphinx()
    from posenc.spec.versions import known_versions
    versions = versions or known_versions()
    base = docs_base(base)
    out = Path(out)
    if out.is_symlink():
        raise DocsError(f"{out} is a symbolic link: give the folder itself")
    if out.exists() and not out.is_dir():
        raise DocsError(f"{out} exists and is not a folder")
    if out.exists() and not (out / ".posenc-site").exists() and any(out.iterdir()):
        raise DocsError(f"{out} exists and is not a posenc site: refusing to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    # built beside the target and swapped in at the end: a failed build leaves the previous site as it was
    final, out = out, Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        _build_into(out, versions, base, cards)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
        final.rename(old / "site")
        out.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.rename(final)
    return final


def _build_into(out: Path, versions: list[str], base: str, cards: bool) -> None:
    from posenc.spec import SPEC_VERSION
    from posenc.spec.versions import snapshot
    (out / ".posenc-site").write_text("written by posenc docs build\n", encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="posenc-docs-") as tmp:
        for v in versions:
            snap = snapshot(v)
            src = Path(tmp) / v
            src.mkdir()
            (src / "conf.py").write_text(_CONF.format(version=v), encoding="utf-8")
            card_names: list[str] = []
            if cards and v == SPEC_VERSION:
                card_names = _write_cards(src / "cards")
            (src / "index.rst").write_text(_index_rst(snap, versions, SPEC_VERSION, card_names), encoding="utf-8")
            for fam in snap.families:
                (src / f"{fam}.rst").write_text(_family_rst(snap, fam, base, SPEC_VERSION, v == SPEC_VERSION),
                                                encoding="utf-8")
            _sphinx(src, out / v)
    latest = versions[-1]
    items = "\n".join(f'<li><a href="{v}/index.html">{v}</a>{" (current)" if v == SPEC_VERSION else ""}</li>'
                      for v in reversed(versions))
    (out / "index.html").write_text(
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>posenc spec</title>'
        f'<meta http-equiv="refresh" content="5; url={latest}/index.html"></head><body>'
        f'<h1>posenc specification</h1><p>Versions:</p><ul>{items}</ul>'
        f'<p>Links: <code>{html.escape(base)}/&lt;version&gt;/&lt;family&gt;.html#&lt;ID&gt;</code></p></body></html>\n',
        encoding="utf-8")


def _write_cards(folder: Path) -> list[str]:
    """The registry's model cards as RST pages (with their plots) in ``folder``; their page names."""
    from . import card as card_mod
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for c in card_mod.registry_cards():
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", c.name)
        plots = folder / f"{name}_plots"
        c.write_plots(plots)
        (folder / f"{name}.rst").write_text(c.to_rst(plot_prefix=f"{name}_plots/"), encoding="utf-8")
        names.append(name)
    return names


def build_card_page(card, out_dir: Path) -> Path:
    """One card as a small site in ``out_dir`` (``index.html`` and its plots); returns the page."""
    _need_sphinx()
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="posenc-card-") as tmp:
        src = Path(tmp)
        (src / "conf.py").write_text(_CONF.format(version=f"card {card.name}"), encoding="utf-8")
        card.write_plots(src / "plots")
        (src / "index.rst").write_text(card.to_rst(plot_prefix="plots/"), encoding="utf-8")
        _sphinx(src, out_dir)
    return out_dir / "index.html"


def serve(directory: Path = DEFAULT_OUT, host: str = "127.0.0.1", port: int = 8000):
    """An HTTP server of ``directory`` (stdlib ``http.server``, threaded); the caller runs
    ``serve_forever()``.  Its address is ``server.server_address``."""
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # noqa: D401 - no access log on stderr
            pass

    return ThreadingHTTPServer((host, port), functools.partial(Quiet, directory=str(directory)))


def main(a) -> int:
    """``posenc docs build`` / ``posenc docs serve``: 0, or 2 with the reason on stderr."""
    try:
        if a.cmd == "build":
            out = build(a.out or DEFAULT_OUT, a.base)
            from posenc.spec import SPEC_VERSION
            print(f"wrote {out}/ (versions: {', '.join(sorted(p.name for p in out.iterdir() if p.is_dir()))}); "
                  f"open {out}/{SPEC_VERSION}/index.html or run `posenc docs serve --dir {out}`")
            return 0
        directory = a.dir or DEFAULT_OUT
        if directory.exists() and not directory.is_dir():
            raise DocsError(f"{directory} exists and is not a folder")
        if not (directory / "index.html").is_file():
            print(f"{directory}: no built site; building it first", file=sys.stderr)
            build(directory)
        if not directory.is_dir():
            raise DocsError(f"{directory} is not a folder")
        try:
            srv = serve(directory, a.host, a.port)
        except (OSError, OverflowError) as e:
            raise DocsError(f"cannot serve on {a.host}:{a.port}: {e}") from None
        host, port = srv.server_address[:2]
        print(f"serving {directory}/ at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            srv.server_close()
        return 0
    except (DocsError, SpecError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the output folder cannot be written, ...
        print(f"error: {e}", file=sys.stderr)
        return 2

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
from typing import Optional

from posenc.spec.errors import SpecError
from posenc.tools import site_files
from posenc.tools.site_text import esc, formula_tex, is_prose, linked, rst_ref, rst_table, source_url
from posenc.tools.sphinx_build import DocsError, conf, need_sphinx, run_sphinx

DEFAULT_BASE = "http://localhost:8000"

DEFAULT_OUT = Path("posenc-site")


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


def _entry_rst(e: dict, snap, base: str, current: str, status: bool) -> list[str]:
    """One clause or divergence of ``snap`` as a ``posenc-entry`` section (its anchor: the ID)."""
    ident = e["id"]
    title = e.get("title") or e.get("description", "")
    title = title if len(title) <= 90 else title[:87].rsplit(" ", 1)[0] + " ..."
    out = [f".. posenc-entry:: {ident}", f"   :kind: {e['kind']}", f"   :heading: {' '.join(str(title).split())}", ""]
    body = [f":{k}: {v}" for k, v in _entry_fields(e, snap, base, current)] + [""]
    body += _clause_body(e, snap, current, status) if e["kind"] == "clause" else _divergence_body(e, snap)
    out += ["   " + line if line else "" for line in body]
    return out


def _entry_fields(e: dict, snap, base: str, current: str) -> list[tuple[str, str]]:
    """The entry's field list: kind, since, family, tolerance, supersession, how to cite it, its link, and
    what the current spec says of it (on an older version's page)."""
    ident, fam, version = e["id"], e["family"], snap.version
    fields = [("Kind", e["kind"] + ("" if e.get("kind") != "divergence" else f" ({e.get('level', 'operation')} level)")),
              ("Since", esc(e.get("since", "?"))), ("Family", f"`{fam} <{fam}.html>`__")]
    if e["kind"] == "clause":
        fields.append(("Tolerance class", esc(e.get("tolerance", "?"))))
        if e.get("required") is False:
            fields.append(("Required", "no (opt-in)"))
    if e.get("superseded_by"):
        fields.append(("Superseded by", ", ".join(rst_ref(s, snap, fam) for s in e["superseded_by"])
                       + " (kept with its old meaning; no longer checked)"))
    fields.append(("Cite as", f"``posenc: {ident}@{version}``"))
    fields.append(("Link", f"`{base}/{version}/{fam}.html#{ident} <{base}/{version}/{fam}.html#{ident}>`__"))
    if version != current:
        fields.append(_in_current(e, current))
    return fields


def _in_current(e: dict, current: str) -> tuple[str, str]:
    """What the current spec says of an older version's entry: absent, its meaning changed, superseded,
    reworded, or the same text."""
    from posenc.spec.versions import snapshot
    ident = e["id"]
    now = snapshot(current).entry(ident)
    if now is None:
        return ("In spec " + current, "not present")
    link = f"`{ident}@{current} <../{current}/{now['family']}.html#{ident}>`__"
    if str(now.get("since")) != str(e.get("since")):
        state = f" -- **meaning changed** (its current meaning dates from {esc(now.get('since'))})"
    elif now.get("superseded_by") and not e.get("superseded_by"):
        state = (" -- **superseded** there by " + ", ".join(esc(x) for x in now["superseded_by"])
                 + ": compare the texts")
    elif any(now.get(k) != e.get(k) for k in ("statement", "formula", "description", "violates")):
        state = (" -- reworded there; the spec records the same meaning (same ``since``): compare the "
                 "texts")
    else:
        state = " (same text)"
    return (f"In spec {current}", link + state)


def _clause_body(e: dict, snap, current: str, status: bool) -> list[str]:
    """A clause's statement, formula, parameters, tensors, invariants, branch points, sources, the
    divergences that violate it and the implementations' status."""
    ident, fam = e["id"], e["family"]
    body = [esc(e.get("statement", "")), ""]
    if e.get("formula"):
        body += ["**Formula**", ""]
        if not is_prose(str(e["formula"])):
            body += [".. math::", "", "   " + formula_tex(str(e["formula"])), ""]
        body += [".. code-block:: none", "", "   " + " ".join(str(e["formula"]).split()), ""]
    body += _parameters_rst(e, snap)
    io = [("input", t) for t in e.get("inputs") or []] + [("output", t) for t in e.get("outputs") or []]
    if io:
        body += ["**Tensors**", ""] + rst_table(["", "name", "shape", "dtype"], (
            [k, f"``{t.get('name')}``", f"``{t.get('shape')}``", esc(t.get("dtype", ""))] for k, t in io))
    if e.get("invariants"):
        body += ["**Invariants (oracle-free checks)**: " + ", ".join(f"``{i}``" for i in e["invariants"]), ""]
    if e.get("branches"):
        body += ["**Branch points** (cases on both sides required)", ""]
        body += [f"- ``{b.get('name')}``: {esc(b.get('description', ''))}" for b in e["branches"]] + [""]
    body += _sources_rst(e)
    divs = snap.violators.get(ident, [])
    if divs:
        body += ["**Divergences** (known wrong behaviours that violate it)", ""]
        for d in divs:
            de = snap.entry(d)
            body.append(f"- {rst_ref(d, snap, fam)}: {esc(de.get('description', ''))}"
                        + (" *(superseded)*" if de.get("superseded_by") else ""))
        body.append("")
    if status:
        body += _status_rst(ident, snap, fam)
    else:
        body += [f"**Implementations**: the matrices check the current spec; see ``{ident}@{current}``'s page.", ""]
    return body


def _parameters_rst(e: dict, snap) -> list[str]:
    """A clause's parameters as a table, with the family file's declared domains (range or values, scale,
    library defaults) and meanings."""
    params = e.get("parameters") or []
    if not params:
        return []
    domains = {f: (m, r) for m, fs in (snap.families[e["family"]].get("parameters") or {}).items()
               for f, r in (fs or {}).items()}
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
        rows.append([f"``{p.get('name')}``", esc(p.get("type", "")), esc(p.get("default", "")),
                     esc(p.get("constraints") or ""), esc(rng), esc(meaning)])
    return ["**Parameters**", ""] + rst_table(["name", "type", "default", "constraints", "declared range", "meaning"],
                                             rows, "14 7 10 20 24 25")


def _sources_rst(e: dict) -> list[str]:
    """A clause's sources, each linked where it has a URL (an arXiv paper, an upstream file at its tag)."""
    if not e.get("sources"):
        return []
    body = ["**Sources**", ""]
    for s in e["sources"]:
        url = source_url(s)
        label = esc(s.get("citation", ""))
        line = f"- `{label} <{url}>`__" if url else f"- {label}"
        line += f", {esc(s.get('location', ''))}"
        if s.get("version"):
            line += f", version {esc(s['version'])}"
        line += f" -- *{esc(s.get('kind', ''))}; provenance: {esc(s.get('provenance', ''))}*"
        body.append(line)
    return body + [""]


def _divergence_body(e: dict, snap) -> list[str]:
    """A divergence's violated clauses, description, symptom, mutant, dtypes and evidence (linked)."""
    body = ["**Violates**: " + ", ".join(rst_ref(c, snap, e["family"]) for c in e.get("violates") or []), "",
            esc(e.get("description", "")), ""]
    if e.get("symptom"):
        body += ["**Symptom**: " + esc(e["symptom"]), ""]
    body += [f"**Mutant**: {esc(e.get('mutant'))} (the reference with this bug; failures are diagnosed "
             "against it)", ""]
    if e.get("dtypes"):
        body += ["**Observable at**: " + ", ".join(f"``{d}``" for d in e["dtypes"]), ""]
    if e.get("evidence"):
        body += ["**Evidence**", ""] + [f"- {linked(x)}" for x in e["evidence"]] + [""]
    return body


def _status_rst(ident: str, snap, here: str) -> list[str]:
    from posenc.tools.matrix_status import clause_status
    rows = clause_status(ident)
    if rows is None:
        return ["**Implementations**: no conformance matrix in this installation (docs/conformance-matrix.json).", ""]
    if not rows:
        return ["**Implementations**: no row for this clause in the matrices.", ""]
    src = "model matrix" if ident.startswith("MODEL-") else "conformance matrix"
    mat = "model-matrix" if ident.startswith("MODEL-") else "conformance-matrix"
    dts = sorted({dt for r in rows for dt in r.dtypes}, key=["float64", "float32", "bfloat16", "float16"].index)
    table = rst_table(["implementation", "status", *dts, "divergences"], (
        [f"``{r.implementation}``", f"**{r.status}**" + (f" ({esc(r.note)})" if r.note else ""),
         *[esc(r.dtypes.get(dt, "")) for dt in dts], ", ".join(rst_ref(d, snap, here) for d in r.divergences)]
        for r in rows))
    return [f"**Implementations** (from the {src}, ``docs/{mat}.json``: conforms, diverges, cannot express)", ""] + table


def _family_rst(snap, fam: str, base: str, current: str, status: bool) -> str:
    raw = snap.families[fam]
    title = f"{fam} -- spec {snap.version}"
    lines = [title, "=" * len(title), "", linked(raw.get("description", "")), ""]
    if raw.get("id_prefixes"):
        lines += [f"ID prefixes: {', '.join('``' + p + '-``' for p in raw['id_prefixes'])}", ""]
    clauses = [c for c in raw.get("clauses") or []]
    divs = [d for d in raw.get("divergences") or []]
    lines += ["Clauses", "-------", ""]
    lines += rst_table(["ID", "title", "since"], ([f"`{c['id']} <#{c['id']}>`__", esc(c.get("title", "")),
                                                esc(c.get("since", ""))] for c in clauses))
    for c in clauses:
        lines += _entry_rst(snap.entry(c["id"]), snap, base, current, status)
    if divs:
        lines += ["Divergences", "-----------", ""]
        for d in divs:
            lines += _entry_rst(snap.entry(d["id"]), snap, base, current, status)
    ops = raw.get("operations") or []
    if ops:
        lines += ["Operations (the adapter contract)", "---------------------------------", ""]
        lines += rst_table(["operation", "title", "method", "clauses"], (
            [f"``{o.get('name')}``", esc(o.get("title", "")), f"``{o.get('method')}``",
             ", ".join(rst_ref(c, snap, fam) for c in o.get("clauses") or [])] for o in ops))
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
    lines += rst_table(["family", "clauses", "divergences", "description"], (
        [f":doc:`{fam}`", str(len(raw.get("clauses") or [])), str(len(raw.get("divergences") or [])),
         esc(" ".join(str(raw.get("description", "")).split())[:160])] for fam, raw in sorted(snap.families.items())))
    return "\n".join(lines) + "\n"


def build(out: Path = DEFAULT_OUT, base: Optional[str] = None, versions: Optional[list[str]] = None,
          cards: bool = True) -> Path:
    """Write the site into ``out``: ``out/<version>/`` per version, ``out/index.html``.

    ``versions``: default every known version (released ones and the one in development).
    ``cards``: the registry's named models' cards on the current version's site (needs matplotlib).
    ``out`` may be new, empty, or a site an earlier build wrote: the build replaces only the paths its
    marker lists (:mod:`.site_files`) and keeps every other file there (``.git``, ``CNAME``, ...).  The site
    is world-readable (folders 0755, files 0644).  Returns ``out``.  Raises :class:`DocsError` without the
    ``[docs]`` extra, on a Sphinx error, where ``out`` is a link, a file, or a non-empty folder without the
    marker, or where a file the build did not write stands where the new site writes one (nothing is
    changed then).
    """
    need_sphinx()
    from posenc.spec.versions import known_versions
    own = known_versions()
    versions = versions or own
    base = docs_base(base)
    given = Path(out)
    _check_out(given)  # every refusal before the build (minutes), not after
    final = Path(os.path.abspath(given))  # "." has no name and is its own parent: build beside its real path
    final.parent.mkdir(parents=True, exist_ok=True)
    # built beside the target and swapped in at the end: a failed build leaves the previous site as it was
    out = Path(tempfile.mkdtemp(prefix=f".{final.name}.building-", dir=final.parent))
    try:
        _build_into(out, versions, base, cards)
        site_files.write_manifest(out)
        site_files.make_readable(out)
        if site_files.is_site(final):
            site_files.carry_foreign(final, out, own)
        elif final.exists() and any(final.iterdir()):  # filled while the site was built
            raise DocsError(f"{given} is no longer empty and is not a posenc site: refusing to write into it")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    _swap(final, out)
    return given


def _check_out(out: Path) -> None:
    """:class:`DocsError` (one line) where ``out`` may not receive the site: a link, a file, a non-empty
    folder without the marker, a marker this posenc cannot read."""
    if out.is_symlink():
        raise DocsError(f"{out} is a symbolic link: give the folder itself")
    if out.exists() and not out.is_dir():
        raise DocsError(f"{out} exists and is not a folder")
    if out.exists() and os.path.lexists(out / site_files.MARKER):
        site_files.check_marker(out)
    elif out.exists() and any(out.iterdir()):
        raise DocsError(f"{out} exists and is not a posenc site (no {site_files.MARKER}): refusing to write into it; "
                        f"name a new or an empty folder")


def _swap(final: Path, built: Path) -> None:
    """Put the folder ``built`` in place of ``final`` (which may be the working directory: it follows)."""
    cwd = Path(os.getcwd())
    here = cwd.relative_to(final) if cwd == final or final in cwd.parents else None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
        final.rename(old / "site")
        built.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        built.rename(final)
    if here is not None and (final / here).is_dir():
        os.chdir(final / here)


def _build_into(out: Path, versions: list[str], base: str, cards: bool) -> None:
    from posenc.spec import SPEC_VERSION
    from posenc.spec.versions import snapshot
    with tempfile.TemporaryDirectory(prefix="posenc-docs-") as tmp:
        for v in versions:
            snap = snapshot(v)
            src = Path(tmp) / v
            src.mkdir()
            (src / "conf.py").write_text(conf(v), encoding="utf-8")
            card_names: list[str] = []
            if cards and v == SPEC_VERSION:
                card_names = _write_cards(src / "cards")
            (src / "index.rst").write_text(_index_rst(snap, versions, SPEC_VERSION, card_names), encoding="utf-8")
            for fam in snap.families:
                (src / f"{fam}.rst").write_text(_family_rst(snap, fam, base, SPEC_VERSION, v == SPEC_VERSION),
                                                encoding="utf-8")
            run_sphinx(src, out / v)
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
    from posenc.tools import card as card_mod
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for c in card_mod.registry_cards():
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", c.name)
        plots = folder / f"{name}_plots"
        c.write_plots(plots)
        (folder / f"{name}.rst").write_text(c.to_rst(plot_prefix=f"{name}_plots/"), encoding="utf-8")
        names.append(name)
    return names


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

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

import contextlib
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
from posenc.tools.site_text import (esc, formula_tex, is_prose, linked, lit, name, plain, rst_ref, rst_table,
                                     source_url, strong, uri)
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
    ident = name(e["id"], "ID")
    title = plain(e.get("title") or e.get("description", ""))  # an option's value: plain text, never parsed
    title = title if len(title) <= 90 else title[:87].rsplit(" ", 1)[0] + " ..."
    kind = "clause" if e["kind"] == "clause" else "divergence"
    out = [f".. posenc-entry:: {ident}", f"   :kind: {kind}", f"   :heading: {title}", ""]
    body = [f":{k}: {v}" for k, v in _entry_fields(e, snap, base, current)] + [""]
    body += _clause_body(e, snap, current, status) if e["kind"] == "clause" else _divergence_body(e, snap)
    out += ["   " + line if line else "" for line in body]
    return out


def _entry_fields(e: dict, snap, base: str, current: str) -> list[tuple[str, str]]:
    """The entry's field list: kind, since, family, tolerance, supersession, how to cite it, its link, and
    what the current spec says of it (on an older version's page)."""
    ident, fam, version = name(e["id"], "ID"), name(e["family"], "family"), name(snap.version, "version")
    level = f" ({esc(e.get('level', 'operation'))} level)" if e.get("kind") == "divergence" else ""
    fields = [("Kind", e["kind"] + level),
              ("Since", esc(e.get("since", "?"))), ("Family", f"`{fam} <{fam}.html>`__")]
    if e["kind"] == "clause":
        fields.append(("Tolerance class", esc(e.get("tolerance", "?"))))
        if e.get("required") is False:
            fields.append(("Required", "no (opt-in)"))
    if e.get("superseded_by"):
        fields.append(("Superseded by", ", ".join(rst_ref(s, snap, fam) for s in e["superseded_by"])
                       + " (kept with its old meaning; no longer checked)"))
    fields.append(("Cite as", f"``posenc: {ident}@{version}``"))
    link = f"{base}/{version}/{fam}.html#{ident}"  # base: checked by docs_base
    fields.append(("Link", f"`{esc(link)} <{link}>`__"))
    if version != current:
        fields.append(_in_current(e, current))
    return fields


def _in_current(e: dict, current: str) -> tuple[str, str]:
    """What the current spec says of an older version's entry: absent, its meaning changed, superseded,
    reworded, or the same text."""
    from posenc.spec.versions import snapshot
    ident, current = name(e["id"], "ID"), name(current, "version")
    now = snapshot(current).entry(ident)
    if now is None:
        return ("In spec " + current, "not present")
    link = f"`{ident}@{current} <../{current}/{name(now['family'], 'family')}.html#{ident}>`__"
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
    ident, fam = name(e["id"], "ID"), e["family"]
    body = [esc(e.get("statement", "")), ""]
    if e.get("formula"):
        body += ["**Formula**", ""]
        if not is_prose(str(e["formula"])):
            body += [".. math::", "", "   " + formula_tex(str(e["formula"])), ""]
        body += [".. code-block:: none", "", "   " + plain(e["formula"]), ""]
    body += _parameters_rst(e, snap)
    io = [("input", t) for t in e.get("inputs") or []] + [("output", t) for t in e.get("outputs") or []]
    if io:
        body += ["**Tensors**", ""] + rst_table(["", "name", "shape", "dtype"], (
            [k, lit(t.get("name")), lit(t.get("shape")), esc(t.get("dtype", ""))] for k, t in io))
    if e.get("invariants"):
        body += ["**Invariants (oracle-free checks)**: " + ", ".join(lit(i) for i in e["invariants"]), ""]
    if e.get("branches"):
        body += ["**Branch points** (cases on both sides required)", ""]
        body += [f"- {lit(b.get('name'))}: {esc(b.get('description', ''))}" for b in e["branches"]] + [""]
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
        body += ["**Implementations**: the matrices check the current spec; see "
                 f"{lit(ident + '@' + current)}'s page.", ""]
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
        rows.append([lit(p.get("name")), esc(p.get("type", "")), esc(p.get("default", "")),
                     esc(p.get("constraints") or ""), esc(rng), esc(meaning)])
    return ["**Parameters**", ""] + rst_table(["name", "type", "default", "constraints", "declared range", "meaning"],
                                             rows, "14 7 10 20 24 25")


def _sources_rst(e: dict) -> list[str]:
    """A clause's sources, each linked where it has a URL (an arXiv paper, an upstream file at its tag)."""
    if not e.get("sources"):
        return []
    body = ["**Sources**", ""]
    for s in e["sources"]:
        url = uri(source_url(s))
        label = esc(s.get("citation", "")) or esc(url or "")
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
        body += ["**Observable at**: " + ", ".join(lit(d) for d in e["dtypes"]), ""]
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
    order = ["float64", "float32", "bfloat16", "float16"]
    dts = sorted({dt for r in rows for dt in r.dtypes}, key=lambda d: (order.index(d) if d in order else 4, str(d)))
    table = rst_table(["implementation", "status", *[esc(dt) for dt in dts], "divergences"], (
        [lit(r.implementation), strong(r.status) + (f" ({esc(r.note)})" if r.note else ""),
         *[esc(r.dtypes.get(dt, "")) for dt in dts], ", ".join(rst_ref(d, snap, here) for d in r.divergences)]
        for r in rows))
    return [f"**Implementations** (from the {src}, ``docs/{mat}.json``: conforms, diverges, cannot express)", ""] + table


def _family_rst(snap, fam: str, base: str, current: str, status: bool) -> str:
    raw = snap.families[fam]
    title = f"{name(fam, 'family')} -- spec {name(snap.version, 'version')}"
    lines = [title, "=" * len(title), "", linked(raw.get("description", "")), ""]
    if raw.get("id_prefixes"):
        lines += [f"ID prefixes: {', '.join(lit(str(p) + '-') for p in raw['id_prefixes'])}", ""]
    clauses = [c for c in raw.get("clauses") or []]
    divs = [d for d in raw.get("divergences") or []]
    lines += ["Clauses", "-------", ""]
    lines += rst_table(["ID", "title", "since"], ([rst_ref(c["id"], snap, fam), esc(c.get("title", "")),
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
            [lit(o.get("name")), esc(o.get("title", "")), lit(o.get("method")),
             ", ".join(rst_ref(c, snap, fam) for c in o.get("clauses") or [])] for o in ops))
    return "\n".join(lines) + "\n"


def _index_rst(snap, versions: list[str], current: str, cards: list[str]) -> str:
    title = f"posenc spec {name(snap.version, 'version')}"
    state = "released" if snap.released else "in development"
    lines = [title, "=" * len(title), "",
             f"The specification of transformer positional encodings, version {snap.version} ({state}). Every "
             "normative rule is a *clause* with a stable ID; every known wrong behaviour a *divergence*. Each ID "
             "is an anchor of its family's page: ``<base>/<version>/<family>.html#<ID>``. Cite one in code as "
             f"``posenc: ROPE-PAIR-HALF@{snap.version}`` (checked by ``posenc cite-check``).", "",
             "Other versions: " + ", ".join(f"`{name(v, 'version')} <../{v}/index.html>`__" if v != snap.version
                                            else f"**{v}**" for v in versions), "",
             ".. toctree::", "   :maxdepth: 1", "   :caption: Families", ""]
    lines += [f"   {name(fam, 'family')}" for fam in sorted(snap.families)] + [""]
    if cards:
        lines += [".. toctree::", "   :maxdepth: 1", "   :caption: Positional-encoding cards", ""]
        lines += [f"   cards/{name(c, 'card name')}" for c in cards] + [""]
    lines += ["Families", "--------", ""]
    lines += rst_table(["family", "clauses", "divergences", "description"], (
        [f":doc:`{name(fam, 'family')}`", str(len(raw.get("clauses") or [])), str(len(raw.get("divergences") or [])),
         esc(" ".join(str(raw.get("description", "")).split())[:160])] for fam, raw in sorted(snap.families.items())))
    return "\n".join(lines) + "\n"


def build(out: Path = DEFAULT_OUT, base: Optional[str] = None, versions: Optional[list[str]] = None,
          cards: bool = True) -> Path:
    """Write the site into ``out``: ``out/<version>/`` per version, ``out/index.html``.

    ``versions``: default every known version (released ones and the one in development).
    ``cards``: the registry's named models' cards on the current version's site (needs matplotlib).
    ``out`` may be new, empty, or a site an earlier build wrote: the build replaces only the paths its
    marker lists (:mod:`.site_files`) and keeps every other file there (``.git``, ``CNAME``, ...); the folder
    ``out`` itself is never replaced (a mount point, its owner, group and mode stay).  The site is
    world-readable (folders 0755, files 0644; a new ``out`` 0755).  Returns ``out``.  Raises :class:`DocsError`
    without the ``[docs]`` extra, on a Sphinx error, where ``out`` is a link, a file, or a non-empty folder
    without the marker, where a file the build did not write stands where the new site writes one (nothing is
    changed then), or (one line naming the path) on an OS error; no temporary folder is left behind.
    """
    need_sphinx()
    from posenc.spec.versions import known_versions
    own = known_versions()
    versions = [name(v, "version") for v in versions or own]
    base = docs_base(base)
    given = Path(out)
    _check_out(given)  # every refusal before the build (minutes), not after
    final = Path(os.path.abspath(given))  # "." has no name and is its own parent
    created = False
    try:
        created = not os.path.lexists(final)
        final.mkdir(parents=True, exist_ok=True)
        if created:
            os.chmod(final, 0o755)  # a new folder is world-readable; an existing one keeps its owner and mode
        _build_in(final, versions, base, cards, own)
    except BaseException as e:
        if created:
            with contextlib.suppress(OSError):
                final.rmdir()  # only where it is still empty
        if isinstance(e, OSError):
            raise _os_error(e, given) from None
        raise
    return given


def _build_in(final: Path, versions: list[str], base: str, cards: bool, own: list[str]) -> None:
    """Build the site in a temporary folder inside ``final`` (the same file system) and put it in place
    there (:func:`.site_files.install`): ``final`` itself is never replaced, a failed build leaves the previous
    site as it was, and the temporary folder is removed whatever happens."""
    cwd = Path(os.getcwd())
    here = cwd.relative_to(final) if final in cwd.parents else None
    built = Path(tempfile.mkdtemp(prefix=site_files.BUILDING, dir=final))
    try:
        _build_into(built, versions, base, cards)
        site_files.write_manifest(built)
        site_files.make_readable(built)
        site_files.install(final, built, own)
    finally:
        shutil.rmtree(built, ignore_errors=True)
    if here is not None and (final / here).is_dir():  # the working directory was inside a replaced folder
        os.chdir(final / here)


def _os_error(e: OSError, out: Path) -> DocsError:
    """An OS error while writing the site into ``out``, as one line naming the path."""
    where = e.filename if e.filename is not None else out
    more = f" -> {e.filename2}" if e.filename2 is not None else ""
    text = f"{out}: cannot write the site: {e.strerror or e} ({where}{more})"
    return DocsError(text.replace("\n", "\\n").replace("\r", "\\r"))


def _check_out(out: Path) -> None:
    """:class:`DocsError` (one line) where ``out`` may not receive the site: a link, a file, a non-empty
    folder without the marker, a marker this posenc cannot read."""
    if out.is_symlink():
        raise DocsError(f"{out} is a symbolic link: give the folder itself")
    if out.exists() and not out.is_dir():
        raise DocsError(f"{out} exists and is not a folder")
    if out.exists() and os.path.lexists(out / site_files.MARKER):
        site_files.check_marker(out)
    elif out.exists() and any(not site_files.is_temporary(n) for n in os.listdir(out)):
        raise DocsError(f"{out} exists and is not a posenc site (no {site_files.MARKER}): refusing to write into it; "
                        f"name a new or an empty folder")


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
                page = _family_rst(snap, fam, base, SPEC_VERSION, v == SPEC_VERSION)
                (src / f"{name(fam, 'family')}.rst").write_text(page, encoding="utf-8")
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
        page = name(re.sub(r"[^A-Za-z0-9_.-]+", "-", c.name).strip("-_."), "card name")
        plots = folder / f"{page}_plots"
        c.write_plots(plots)
        (folder / f"{page}.rst").write_text(c.to_rst(plot_prefix=f"{page}_plots/"), encoding="utf-8")
        names.append(page)
    return names


def serve(directory: Path = DEFAULT_OUT, host: str = "127.0.0.1", port: int = 8000):
    """An HTTP server of the site in ``directory`` (stdlib ``http.server``, threaded); the caller runs
    ``serve_forever()``.  Its address is ``server.server_address``.  It serves only the regular files inside
    ``directory`` (links resolved, none leading out), none under a name starting with a dot (``.git``, the
    marker), a folder's ``index.html`` for the folder, and no listing (:func:`.site_files.site_target`)."""
    import socket
    from http.server import ThreadingHTTPServer

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    return Server((host, port), site_files.handler(Path(directory)))


def _loopback(address: str) -> bool:
    import ipaddress
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def main(a) -> int:
    """``posenc docs build`` / ``posenc docs serve``: 0, or 2 with the reason on stderr."""
    try:
        if a.cmd == "build":
            out = build(a.out or DEFAULT_OUT, a.base)
            from posenc.spec import SPEC_VERSION
            from posenc.spec.versions import known_versions
            print(f"wrote {out}/ (versions: {', '.join(known_versions())}); "
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
        if not _loopback(host):
            print(f"warning: serving on {host}: the site is reachable from the network, by anyone who can reach "
                  f"this machine (--host 127.0.0.1 serves it to this machine only)", file=sys.stderr, flush=True)
        shown = f"[{host}]" if ":" in host else host
        print(f"serving {directory}/ at http://{shown}:{port}/ (Ctrl-C stops)", flush=True)
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

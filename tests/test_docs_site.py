"""The spec site (``posenc docs build``): links, anchors, rendering, search -- in a real headless browser.

The browser tests run Debian's ``chromium`` through ``chromium-driver`` (selenium) against the site
served over http on localhost; they skip, with the reason, where either is absent, and are required
when ``CI=true`` (``.ci/run`` installs both).  Every request the browser makes is recorded from its
DevTools log: one to a host other than localhost fails the test (fonts, math and search are
bundled).  Screenshots go to ``$POSENC_SCREENSHOTS`` (default: the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from posenc.tools import docs_site
from posenc.cli import main as cli
from posenc.spec import SPEC_VERSION
from posenc.spec.errors import SpecError
from posenc.spec.versions import released_versions, snapshot

pytest.importorskip("sphinx", reason="the [docs] extra (Sphinx) is not installed")


# ------------------------------------------------------------------------------------ links, no browser

def test_page_url_format(monkeypatch):
    monkeypatch.delenv("POSENC_DOCS_BASE", raising=False)
    assert docs_site.page_url("ROPE-PAIR-HALF") == f"http://localhost:8000/{SPEC_VERSION}/rope.html#ROPE-PAIR-HALF"
    assert docs_site.page_url("DIV-LEARNED-OPT-NO-OFFSET", "0.1.0", base="https://x.org/spec/") == \
        "https://x.org/spec/0.1.0/learned.html#DIV-LEARNED-OPT-NO-OFFSET"
    monkeypatch.setenv("POSENC_DOCS_BASE", "https://example.org/posenc")
    assert docs_site.page_url("SCALE-YARN-RAMP").startswith("https://example.org/posenc/")
    with pytest.raises(SpecError, match="does not exist in spec 0.1.0"):
        docs_site.page_url("ALIBI-SLOPES", "0.1.0")  # ALiBi arrived in 0.2.0
    with pytest.raises(SpecError, match="does not exist"):
        docs_site.page_url("ROPE-PAIR-HALF", "0.0.9")


def test_spec_show_url(capsys, monkeypatch):
    monkeypatch.delenv("POSENC_DOCS_BASE", raising=False)
    assert cli(["spec", "show", "rope-pair-half", "--url", "--base", "https://r.example/s"]) == 0
    assert capsys.readouterr().out.strip() == f"https://r.example/s/{SPEC_VERSION}/rope.html#ROPE-PAIR-HALF"
    assert cli(["spec", "show", "DIV-MODEL-PADDED-ROWS-NAN"]) == 0
    assert f"http://localhost:8000/{SPEC_VERSION}/model.html#DIV-MODEL-PADDED-ROWS-NAN" in capsys.readouterr().out
    assert cli(["spec", "show", "rope.apply", "--url"]) == 2
    capsys.readouterr()
    assert cli(["spec", "show", "rope-pair-half@0.1.0", "--url"]) == 0
    assert capsys.readouterr().out.strip() == "http://localhost:8000/0.1.0/rope.html#ROPE-PAIR-HALF"
    assert cli(["spec", "show", "DIV-ROPE-BF16-ANGLES@0.2.0"]) == 0
    out = capsys.readouterr().out
    assert "(posenc spec 0.2.0)" in out and "rope_bf16_angles" in out and "now: DIV-ROPE-BF16-ANGLES is superseded" in out
    assert cli(["spec", "show", "ALIBI-SLOPES@0.1.0"]) == 2
    assert "does not exist in spec 0.1.0" in capsys.readouterr().err
    assert cli(["spec", "show", "ALIBI-SLOPES@0.9.0"]) == 2


@pytest.mark.parametrize("formula, tex", [
    ("inv_freq[i] = rope_theta^(-2i/rotary_dim)", r"\mathrm{inv\_freq}[i]\ =\ \mathrm{rope\_theta}^{-2i/\mathrm{rotary\_dim}}"),
    ("a = sqrt(1 + ln s / ln L_orig)", r"a\ =\ \sqrt{1\ +\ \ln \ s\ /\ \ln \ L_{\mathrm{orig}}}"),
    ("bias[h,i,j] = -m_h (i' - j), j <= i'", r"\mathrm{bias}[h,i,j]\ =\ -m_{h}\ (i'\ -\ j),\ j\ \le \ i'"),
    ("y_q == q", r"y_{q}\ \overset{!}{=}\ q"),
    ("w_i = base^(-i / max(h-1, 1)), h = floor(D/2)",
     r"w_{i}\ =\ \mathrm{base}^{-i\ /\ \max (h-1,\ 1)},\ h\ =\ \left\lfloor D/2 \right\rfloor"),
])
def test_formula_tex(formula, tex):
    assert docs_site.formula_tex(formula) == tex


def test_snapshots_are_the_released_specs():
    """Each kept version loads, is what its files say, and the current one equals its snapshot."""
    from posenc.spec.versions import check_released_unchanged
    assert released_versions()[:3] == ["0.1.0", "0.2.0", "0.3.0"]
    assert check_released_unchanged() is None
    assert "ALIBI-SLOPES" not in snapshot("0.1.0").entries and "ALIBI-SLOPES" in snapshot("0.2.0").entries
    assert snapshot("0.3.0").entry("ROPE-PAIR-DEINTERLEAVE")["since"] == "0.3.0"


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A copy of spec/versions/ that the test may tamper with (the snapshot cache cleared around it)."""
    from posenc.spec import versions
    copy = tmp_path / "versions"
    shutil.copytree(versions.VERSIONS_DIR, copy)
    monkeypatch.setattr(versions, "VERSIONS_DIR", copy)
    versions.snapshot.cache_clear()
    yield copy
    versions.snapshot.cache_clear()


def test_released_spec_edited_is_named(kept):
    """The working spec edited after its version's release is named (while the version is in
    development, the test releases it in the copy first, as ``versions.release`` would)."""
    from posenc.spec import versions
    if not versions.is_released(SPEC_VERSION):
        import hashlib
        (kept / SPEC_VERSION).mkdir()
        man = json.loads((kept / "manifest.json").read_text(encoding="utf-8"))
        man[SPEC_VERSION] = {}
        for f in sorted(versions.SPEC_DIR.glob("*.yaml")):
            shutil.copy(f, kept / SPEC_VERSION / f.name)
            man[SPEC_VERSION][f.name] = hashlib.sha256(f.read_bytes()).hexdigest()
        (kept / "manifest.json").write_text(json.dumps(man), encoding="utf-8")
        assert versions.check_released_unchanged() is None
    p = kept / SPEC_VERSION / "rope.yaml"
    p.write_text(p.read_text(encoding="utf-8").replace("Half pairing", "Half pairs"), encoding="utf-8")
    with pytest.raises(SpecError, match=f"spec/versions/{SPEC_VERSION}/rope.yaml: differs from the released snapshot"):
        versions.check_released_unchanged()


@pytest.mark.parametrize("tamper, match", [
    (lambda d: (d / "0.2.0" / "rope.yaml").write_text(
        (d / "0.2.0" / "rope.yaml").read_text(encoding="utf-8").replace("ROPE-PAIR-HALF", "ROPE-PAIR-HALVES"),
        encoding="utf-8"), "0.2.0/rope.yaml: differs"),
    (lambda d: (d / "0.3.0" / "rope.yaml").write_text("family: rope\n  bad: [", encoding="utf-8"), "0.3.0/rope.yaml: differs"),
    (lambda d: [p.unlink() for p in (d / "0.4.0").glob("*.yaml")], "0.4.0/alibi.yaml: missing"),
    (lambda d: (d / "0.1.0" / "extra.yaml").write_text("family: x\n", encoding="utf-8"), "0.1.0/extra.yaml: not part"),
    (lambda d: (d / "0.5.0").mkdir(), "0.5.0 not in manifest.json"),
], ids=["edited-old", "malformed", "deleted", "added", "unrecorded"])
def test_kept_snapshots_are_verified(kept, tamper, match):
    """A kept snapshot edited, broken, emptied or added to is an error naming the file -- for validate, for a
    citation's resolution and for the site -- never a silent change of what an old citation means."""
    from posenc.spec import versions
    tamper(kept)
    with pytest.raises(SpecError, match=match):
        versions.verify_all()
    assert cli(["spec", "validate"]) == 2
    if "0.5.0" not in match:
        with pytest.raises(SpecError, match=match.split(":")[0]):
            versions.resolve("ROPE-PAIR-HALF", match.split("/")[0])


def test_release_records_a_snapshot(kept, monkeypatch):
    """`posenc spec release` keeps the working files and their hashes; twice is refused."""
    import json
    from posenc import spec
    from posenc.spec import versions
    man = json.loads((kept / "manifest.json").read_text(encoding="utf-8"))
    if SPEC_VERSION in man:  # released already: unrelease it in the copy
        del man[SPEC_VERSION]
        (kept / "manifest.json").write_text(json.dumps(man), encoding="utf-8")
        shutil.rmtree(kept / SPEC_VERSION)
    assert SPEC_VERSION not in versions.released_versions()
    assert versions.release() == SPEC_VERSION
    assert (kept / SPEC_VERSION / "rope.yaml").read_bytes() == (spec.SPEC_DIR / "rope.yaml").read_bytes()
    versions.verify_all()
    with pytest.raises(SpecError, match="already released"):
        versions.release()


def test_build_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "mine.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(docs_site.DocsError, match="not a posenc site"):
        docs_site.build(tmp_path, cards=False)
    assert (tmp_path / "mine.txt").read_text(encoding="utf-8") == "keep"


def test_failed_rebuild_keeps_the_previous_site(tmp_path, monkeypatch):
    out = tmp_path / "site"
    docs_site.build(out, versions=["0.1.0"], cards=False)
    before = (out / "0.1.0" / "rope.html").read_bytes()

    def broken(src, dest):
        raise docs_site.DocsError("Sphinx failed (simulated)")
    monkeypatch.setattr(docs_site, "run_sphinx", broken)
    with pytest.raises(docs_site.DocsError, match="simulated"):
        docs_site.build(out, versions=["0.1.0"], cards=False)
    assert (out / "0.1.0" / "rope.html").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # nothing half-built left beside it


def test_rebuild_keeps_the_files_it_did_not_write(tmp_path):
    """A rebuild replaces only what the build wrote (its marker lists it): a gh-pages checkout's ``.git``,
    a ``CNAME`` and a note inside a version folder stay; a file the old build wrote and the new one does
    not is removed."""
    out = tmp_path / "site"
    docs_site.build(out, versions=["0.1.0"], cards=False)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/gh-pages\n", encoding="utf-8")
    (out / "CNAME").write_text("spec.example.org\n", encoding="utf-8")
    (out / "0.1.0" / "notes.txt").write_text("mine", encoding="utf-8")
    (out / "0.1.0" / "stale.html").write_text("old", encoding="utf-8")  # as if an older build had written it
    marker = out / docs_site.site_files.MARKER
    marker.write_text(marker.read_text(encoding="utf-8") + "0.1.0/stale.html\n", encoding="utf-8")
    docs_site.build(out, versions=["0.1.0"], cards=False)
    assert (out / ".git" / "HEAD").read_text(encoding="utf-8") == "ref: refs/heads/gh-pages\n"
    assert (out / "CNAME").read_text(encoding="utf-8") == "spec.example.org\n"
    assert (out / "0.1.0" / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert not (out / "0.1.0" / "stale.html").exists() and (out / "0.1.0" / "rope.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    listed = marker.read_text(encoding="utf-8").splitlines()
    assert "0.1.0/rope.html" in listed and "CNAME" not in listed and ".git" not in listed


def test_rebuild_over_an_older_marker_keeps_the_other_files(tmp_path):
    """A site of an older build (a marker without a list) owns index.html, the spec's own version folders
    and, inside them, only what the new site writes: a user's file there stays, as does a folder named like a
    version the spec never had."""
    out = tmp_path / "site"
    (out / "0.1.0").mkdir(parents=True)
    (out / "0.1.0" / "rope.html").write_text("old", encoding="utf-8")
    (out / "0.1.0" / ".htaccess").write_text("mine", encoding="utf-8")
    (out / "7.1.0").mkdir()
    (out / "7.1.0" / "page.html").write_text("mine", encoding="utf-8")
    (out / "index.html").write_text("old", encoding="utf-8")
    (out / docs_site.site_files.MARKER).write_text("written by posenc docs build\n", encoding="utf-8")
    (out / "CNAME").write_text("spec.example.org\n", encoding="utf-8")
    docs_site.build(out, versions=["0.1.0"], cards=False)
    assert (out / "CNAME").read_text(encoding="utf-8") == "spec.example.org\n"
    assert (out / "0.1.0" / ".htaccess").read_text(encoding="utf-8") == "mine"
    assert (out / "7.1.0" / "page.html").read_text(encoding="utf-8") == "mine"
    assert (out / "0.1.0" / "rope.html").read_text(encoding="utf-8") != "old"
    assert (out / "index.html").read_text(encoding="utf-8") != "old"


@pytest.mark.parametrize("marker", ["written by some other tool\n", "written by posenc docs build v9\na\n", b"\xff\xfe\x00junk", None])
def test_unreadable_marker_is_refused_before_the_build(tmp_path, monkeypatch, capsys, marker):
    """A marker neither this build's nor an older build's (or a link, or not text): one line, before anything
    is built, and nothing changes."""
    built = []
    monkeypatch.setattr(docs_site, "_build_into", lambda *a: built.append(a))
    out = tmp_path / "site"
    (out / "0.4.0").mkdir(parents=True)
    (out / "0.4.0" / "mine.html").write_text("mine", encoding="utf-8")
    m = out / docs_site.site_files.MARKER
    if marker is None:
        (tmp_path / "elsewhere").write_text("written by posenc docs build\n", encoding="utf-8")
        m.symlink_to(tmp_path / "elsewhere")
    elif isinstance(marker, bytes):
        m.write_bytes(marker)
    else:
        m.write_text(marker, encoding="utf-8")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert cli(["docs", "build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {m}") and "refusing" in err and err.count("\n") == 1
    assert not built and sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_refusals_come_before_the_build(tmp_path, monkeypatch, capsys):
    built = []
    monkeypatch.setattr(docs_site, "_build_into", lambda *a: built.append(a))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x", encoding="utf-8")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "full")
    for name in ("full", "afile", "link"):
        assert cli(["docs", "build", "--out", str(tmp_path / name)]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert not built


@pytest.mark.parametrize("where", ["empty", "dot", "dot-site"])
def test_build_into_an_empty_folder_or_the_working_directory(tmp_path, monkeypatch, where):
    """A new or empty folder is fine (its marker does not exist yet), and so is ``.``, empty or a site."""
    target = tmp_path / "w"
    target.mkdir()
    if where == "dot-site":
        docs_site.build(target, versions=["0.1.0"], cards=False)
        (target / "CNAME").write_text("x", encoding="utf-8")
    if where.startswith("dot"):
        monkeypatch.chdir(target)
    out = Path(".") if where.startswith("dot") else target
    docs_site.build(out, versions=["0.1.0"], cards=False)
    assert (target / "0.1.0" / "rope.html").is_file() and docs_site.site_files.is_site(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]  # nothing half-built left beside it
    if where == "dot-site":
        assert (target / "CNAME").read_text(encoding="utf-8") == "x"
    if where.startswith("dot"):
        assert Path(os.getcwd()) == target and Path(".").resolve() == target


def test_rebuild_refuses_to_replace_a_file_it_did_not_write(tmp_path):
    out = tmp_path / "site"
    docs_site.build(out, versions=["0.1.0"], cards=False)
    (out / "0.2.0").mkdir()
    (out / "0.2.0" / "rope.html").write_text("hand-written", encoding="utf-8")
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    with pytest.raises(docs_site.DocsError, match=r"0\.2\.0 was not written by posenc docs build"):
        docs_site.build(out, versions=["0.1.0", "0.2.0"], cards=False)
    assert (out / "0.2.0" / "rope.html").read_text(encoding="utf-8") == "hand-written"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_build_into_a_foreign_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "CNAME").write_text("spec.example.org\n", encoding="utf-8")
    assert cli(["docs", "build", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path} exists and is not a posenc site") and err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["CNAME"]


def test_site_is_world_readable(tmp_path):
    """Folders 0755 and files 0644 whatever the umask (the root was mkdtemp's 0700)."""
    import stat
    old = os.umask(0o077)
    try:
        out = docs_site.build(tmp_path / "site", versions=["0.1.0"], cards=False)
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in [out, *out.rglob("*")]}
    wrong = {p: oct(m) for p, m in modes.items() if m != (0o755 if (tmp_path / p).is_dir() else 0o644)}
    assert len(modes) > 20 and not wrong, list(wrong.items())[:5]


@pytest.mark.parametrize("args, message", [
    (["docs", "build", "--out", "{file}"], "exists and is not a folder"),
    (["docs", "build", "--out", "{link}"], "is a symbolic link"),
    (["docs", "build", "--out", "{tmp}/s", "--base", "javascript:alert(1)//"], "is not an http(s)"),
    (["docs", "build", "--out", "{tmp}/s", "--base", "http://x/a b"], "is not an http(s)"),
    (["docs", "serve", "--dir", "{file}"], "exists and is not a folder"),
    (["docs", "serve", "--dir", "{site}", "--port", "70000"], "cannot serve"),
    (["spec", "show", "ROPE-PAIR-HALF", "--url", "--base", "ftp://x"], "is not an http(s)"),
])
def test_docs_cli_errors_are_named(tmp_path, capsys, args, message):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<html></html>", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "site")
    subst = {"{file}": str(tmp_path / "file"), "{link}": str(tmp_path / "link"), "{site}": str(tmp_path / "site")}
    args = [subst.get(a, a.replace("{tmp}", str(tmp_path))) for a in args]
    assert cli(args) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "file").read_text(encoding="utf-8") == "x"


def test_serve_on_a_busy_port_is_named(tmp_path, capsys):
    srv = docs_site.serve(tmp_path, "127.0.0.1", 0)
    try:
        (tmp_path / "index.html").write_text("<html></html>", encoding="utf-8")
        assert cli(["docs", "serve", "--dir", str(tmp_path), "--port", str(srv.server_address[1])]) == 2
        assert "cannot serve on 127.0.0.1" in capsys.readouterr().err
    finally:
        srv.server_close()


def test_spec_text_cannot_inject_markup():
    """Spec text reaches the pages escaped: a directive, a role, a raw-HTML block or a javascript: link in a
    description, a mutant name or an evidence line stays text."""
    from docutils.core import publish_parts
    from posenc.spec.versions import Snapshot
    evil = "x\n\n.. raw:: html\n\n   <script>alert(1)</script>\n\n`click <javascript:alert(1)>`__ :math:`x`"
    div = {"id": "DIV-X-EVIL", "kind": "divergence", "family": "x", "violates": ["X-A"], "description": evil,
           "symptom": evil, "evidence": [evil, "see https://example.org/a`b<c"], "mutant": "m``y`` `z <javascript:1>`__",
           "since": "0.1.0"}
    clause = {"id": "X-A", "kind": "clause", "family": "x", "title": evil, "statement": evil, "formula": "y = x",
              "tolerance": "exact", "sources": [{"citation": evil, "location": evil, "kind": "paper",
                                                  "provenance": "paper"}], "since": "0.1.0"}
    snap = Snapshot("0.1.0", True, {"x": {"family": "x", "description": evil, "clauses": [clause],
                                          "divergences": [div]}}, {"X-A": clause, "DIV-X-EVIL": div})
    rst = docs_site._family_rst(snap, "x", "https://b.example", "0.1.0", False)
    import re
    # the entry directive is the site's Sphinx extension; for plain docutils, a container holding the same body
    rst = re.sub(r"\.\. posenc-entry:: \S+\n   :kind: .*\n   :heading: .*\n", ".. container::\n", rst)
    rst = rst.replace(".. code-block:: none", "::")  # Sphinx's directive; a literal block in docutils
    parts = publish_parts(rst, writer="html", settings_overrides={"report_level": 2, "halt_level": 5,
                                                                   "warning_stream": False})
    body = parts["body"]
    assert body.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4  # the text is there, as text
    assert "<script>" not in body
    assert 'href="javascript' not in body
    assert "system-message" not in body  # every generated construct parsed cleanly


#: an RST link that a ````literal```` around the string would let out: the backquotes close the literal
EVIL_RST = "rope_theta`` `clickme <javascript:alert(document.domain)>`__ ``x"


def _publish(rst: str) -> str:
    """The generated RST of a family page as HTML by plain docutils (the site's directives replaced by
    docutils' own), every problem reported in the page."""
    import re
    from docutils.core import publish_parts
    rst = re.sub(r"\.\. posenc-entry:: \S+\n   :kind: .*\n   :heading: .*\n", ".. container::\n", rst)
    rst = rst.replace(".. code-block:: none", "::")
    return publish_parts(rst, writer="html", settings_overrides={"report_level": 2, "halt_level": 5,
                                                                 "warning_stream": False})["body"]


def test_spec_strings_shown_as_code_cannot_inject_markup(monkeypatch):
    """A parameter's, a tensor's, an invariant's, a branch's, an operation's name, a shape, an ID prefix, a
    dtype, a divergence's level, a source's version and the matrix's strings reach the page as text: a
    backquote in them cannot close a literal and make a ``javascript:`` link (or any markup)."""
    from posenc.spec.versions import Snapshot
    from posenc.tools import matrix_status
    evil = EVIL_RST
    clause = {"id": "X-A", "kind": "clause", "family": "x", "title": "t", "statement": "s", "tolerance": "exact",
              "since": "0.1.0", "parameters": [{"name": evil, "type": evil, "default": evil, "constraints": evil}],
              "inputs": [{"name": evil, "shape": evil, "dtype": evil}], "outputs": [{"name": evil, "shape": evil}],
              "invariants": [evil, "ok"], "branches": [{"name": evil, "description": evil}],
              "sources": [{"citation": "huggingface/transformers", "location": "models/llama/modeling_llama.py",
                           "version": evil, "kind": evil, "provenance": evil}]}
    div = {"id": "DIV-X-B", "kind": "divergence", "family": "x", "violates": ["X-A"], "description": "d",
           "mutant": "m", "since": "0.1.0", "level": evil, "dtypes": [evil]}
    fam = {"family": "x", "description": "f", "id_prefixes": [evil], "clauses": [clause], "divergences": [div],
           "operations": [{"name": evil, "title": evil, "method": evil, "clauses": ["X-A", evil]}]}
    snap = Snapshot("0.1.0", True, {"x": fam}, {"X-A": clause, "DIV-X-B": div})
    row = matrix_status.ImplementationStatus(evil, evil, {evil: evil, "float32": "pass"}, ("DIV-X-B", evil), evil)
    monkeypatch.setattr(matrix_status, "clause_status", lambda ident: [row])
    body = _publish(docs_site._family_rst(snap, "x", "https://b.example", "0.1.0", True))
    assert 'href="javascript' not in body and "javascript:alert" in body
    assert "system-message" not in body  # every generated construct parsed cleanly
    shown = _text(body)
    assert shown.count("clickme <javascript:alert(document.domain)>") >= 24, shown  # every one, as text
    assert shown.count(evil) >= 10  # a name shown as code keeps its text exactly


@pytest.mark.parametrize("where, value", [
    ("ID", "X-A <javascript:alert(1)>"), ("ID", "X-A\n\n.. raw:: html\n\n   <script>alert(1)</script>"),
    ("family", "x <javascript:alert(1)>"), ("family", "../x"), ("family", "search"), ("version", "0.1.0`x`"),
])
def test_spec_names_that_become_links_are_refused(where, value):
    """An ID, a family or a version becomes a page, an anchor, a link's target: one that is not a plain name
    is refused (one line), never written into the page."""
    from posenc.spec.versions import Snapshot
    given = {"ID": "X-A", "family": "x", "version": "0.1.0", where: value}
    ident, fam, version = given["ID"], given["family"], given["version"]
    clause = {"id": ident, "kind": "clause", "family": fam, "title": "t", "statement": "s", "since": "0.1.0"}
    snap = Snapshot(version, True, {fam: {"family": fam, "clauses": [clause]}}, {ident: clause})
    with pytest.raises(docs_site.DocsError, match=f"the spec's {where} .* is not a name") as err:
        docs_site._family_rst(snap, fam, "https://b.example", version, False)
    assert "\n" not in str(err.value)


def test_site_conf_is_python_literals_whatever_the_name():
    """A card's name (from a config) or a version in the site's conf.py is a Python string literal: a quote
    and a line break in it cannot add code."""
    from posenc.tools.sphinx_build import conf
    hostile = 'x"\nimport os; os.environ["POSENC_PWNED"] = "1"\n#'
    ns: dict = {}
    exec(compile(conf(f"card {hostile}"), "conf.py", "exec"), ns)  # noqa: S102 - the generated file
    assert ns["project"] == f"posenc spec card {hostile}" and "POSENC_PWNED" not in os.environ


def test_linked_urls_are_safe_targets():
    """A URL ending in ``_`` is linked to itself (not read as a reference name); one with a character RST or
    HTML would read otherwise is left as text."""
    from posenc.tools.site_text import linked, uri
    body = _publish("Title\n=====\n\n" + linked("see https://example.org/path_ for details") + "\n")
    assert 'href="https://example.org/path_"' in body and "system-message" not in body
    assert uri("https://example.org/a`b") is None and uri("javascript:alert(1)") is None
    assert uri("https://github.com/o/r/blob/v1> `x <javascript:1>`__/a.py") is None


# ---------------------------------------------------------------------------------------- built site

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    docs_site.build(out, base="https://spec.example/posenc")
    return out


def _text(page: str) -> str:
    import html
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_site_pages(site):
    for v in released_versions():
        snap = snapshot(v)
        for fam, raw in snap.families.items():
            page = (site / v / f"{fam}.html").read_text(encoding="utf-8")
            for item in [*(raw.get("clauses") or []), *(raw.get("divergences") or [])]:
                assert f'id="{item["id"]}"' in page, (v, fam, item["id"])
    rope = (site / SPEC_VERSION / "rope.html").read_text(encoding="utf-8")
    assert f"https://spec.example/posenc/{SPEC_VERSION}/rope.html#ROPE-PAIR-HALF" in rope
    assert "posenc: ROPE-PAIR-HALF@" + SPEC_VERSION in _text(rope)
    # sources linked: the transformers file at its tag, the paper on arXiv
    assert "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/llama/modeling_llama.py" in rope
    assert "https://arxiv.org/abs/2104.09864" in rope
    # a superseded divergence says so and links its successors
    assert "DIV-ROPE-BF16-INV-FREQ" in rope and "no longer checked" in rope
    # implementations, from the matrix: the hf-transformers wrapper conforms to half pairing
    sec = rope.split('id="ROPE-PAIR-HALF"', 1)[1].split('<section id="', 1)[0]
    assert "hf-transformers" in sec and "conforms" in sec
    model = (site / SPEC_VERSION / "model.html").read_text(encoding="utf-8")
    sec = model.split('id="MODEL-LEFT-PAD"', 1)[1].split('<section id="', 1)[0]
    assert "hf:llama" in sec and "DIV-MODEL-PADDED-ROWS-NAN" in sec
    # the registry's named models have cards, with their figures and plots
    from posenc.spec.registry import load as load_registry
    cards = {p.stem for p in (site / SPEC_VERSION / "cards").glob("*.html")}
    assert len(cards) == len(load_registry()) and {"gpt2", "llama-3.1-8b", "bloom-176b", "t5-base"} <= cards
    gpt2 = _text((site / SPEC_VERSION / "cards" / "gpt2.html").read_text(encoding="utf-8"))
    assert "786,432" in gpt2 and "LEARNED-GPT2-POSITIONS" in gpt2
    # an old version's page points to the current meaning
    old = (site / "0.1.0" / "rope.html").read_text(encoding="utf-8")
    assert f"../{SPEC_VERSION}/rope.html#ROPE-PAIR-HALF" in old
    old = _text((site / "0.3.0" / "rope.html").read_text(encoding="utf-8"))
    entry = old.split("DIV-ROPE-BF16-ANGLES –", 1)[1].split("Mutant:", 1)[0]
    assert "superseded there by DIV-ROPE-BF16-INV-FREQ" in entry and "same text" not in entry
    entry = old.split("ROPE-PAIR-HALF –", 1)[1].split("Formula", 1)[0]
    assert "(same text)" in entry
    # a formula in words is shown as written, not typeset
    scaling = (site / SPEC_VERSION / "rope_scaling.html").read_text(encoding="utf-8")
    sec = scaling.split('id="SCALE-LLAMA3"', 1)[1].split('<section id="', 1)[0]
    assert "three bands by wavelength" in sec and 'class="math' not in sec


# ------------------------------------------------------------------------------------------- browser

def _driver_or_skip():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    why = None
    if not chromium or not driver:
        why = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
    else:
        try:
            from selenium import webdriver  # noqa: F401
        except ImportError:
            why = "selenium is not installed (the [docs] extra)"
    if why:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true requires the browser test: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-default-apps", "--disable-sync", "--metrics-recording-only"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


@pytest.fixture(scope="module")
def served(site):
    srv = docs_site.serve(site, "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser(served):
    drv = _driver_or_skip()
    drv.requests = []
    yield drv
    drv.quit()


@pytest.fixture
def shots(tmp_path):
    d = Path(os.environ.get("POSENC_SCREENSHOTS") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _requests(drv) -> list[str]:
    """Every URL the browser requested since the last call (DevTools performance log)."""
    out = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            out.append(msg["params"]["request"]["url"])
    drv.requests += out
    return out


def _outside(urls) -> list[str]:
    return [u for u in urls if urlparse(u).scheme not in ("data", "blob", "about", "chrome", "devtools")
            and urlparse(u).hostname not in ("127.0.0.1", "localhost")]


def _wait(drv, script: str, timeout: float = 20.0):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(drv, timeout, poll_frequency=0.2).until(lambda d: d.execute_script(script))


def test_browser_site_loads_and_anchor_lands(browser, served, shots):
    browser.get(f"{served}/index.html")
    assert "posenc specification" in browser.page_source
    browser.get(f"{served}/{SPEC_VERSION}/index.html")
    assert browser.title.startswith(f"posenc spec {SPEC_VERSION}")
    browser.get(f"{served}/{SPEC_VERSION}/rope.html#ROPE-PAIR-HALF")
    _wait(browser, "return document.readyState === 'complete'")
    target = browser.execute_script("const t = document.querySelector(':target'); return t && t.id")
    assert target == "ROPE-PAIR-HALF"
    top = browser.execute_script("return document.getElementById('ROPE-PAIR-HALF').getBoundingClientRect().top")
    scrolled = browser.execute_script("return window.scrollY")
    assert scrolled > 200 and -5 <= top <= 60, (scrolled, top)  # the clause is at the top of the viewport
    heading = browser.execute_script("return document.getElementById('ROPE-PAIR-HALF').querySelector('h2,h3').textContent")
    assert heading.startswith("ROPE-PAIR-HALF") and "Half pairing" in heading
    browser.save_screenshot(str(shots / "rope-pair-half.png"))
    assert not _outside(_requests(browser))


def test_browser_card_page(browser, served, shots):
    """A registry model's card: its plots load (served from the site, each with a size)."""
    browser.get(f"{served}/{SPEC_VERSION}/cards/llama-3.1-8b.html")
    _wait(browser, "return document.readyState === 'complete'")
    imgs = browser.execute_script("return Array.from(document.images).map(i => [i.src, i.complete, i.naturalWidth])")
    assert len(imgs) >= 2 and all(ok and w > 100 for _, ok, w in imgs), imgs
    assert "SCALE-LLAMA3" in browser.find_element("tag name", "body").text
    browser.save_screenshot(str(shots / "card-llama-3.1-8b.png"))
    assert not _outside(_requests(browser))


@pytest.mark.parametrize("version", [SPEC_VERSION, "0.1.0"])
def test_browser_math_renders(browser, served, shots, version):
    """MathJax typesets every formula of every page of the version: no TeX error, each has a size."""
    for fam in sorted(snapshot(version).families):
        browser.get(f"{served}/{version}/{fam}.html")
        _wait(browser, "return window.MathJax && MathJax.startup && MathJax.startup.promise && "
                       "document.querySelectorAll('mjx-container').length > 0", 30)
        browser.execute_async_script("MathJax.startup.promise.then(() => arguments[arguments.length - 1](true))")
        n_formulas = browser.execute_script("return document.querySelectorAll('div.math').length")
        n_rendered = browser.execute_script("return document.querySelectorAll('div.math mjx-container').length")
        errors = browser.execute_script("return Array.from(document.querySelectorAll('mjx-merror')).map("
                                        "e => e.getAttribute('data-mjx-error') || e.textContent)")
        sizes = browser.execute_script("return Array.from(document.querySelectorAll('div.math mjx-container')).map("
                                       "e => [e.getBoundingClientRect().width, e.getBoundingClientRect().height])")
        assert n_formulas > 0 and n_rendered == n_formulas, (fam, n_formulas, n_rendered)
        assert not errors, (version, fam, errors[:3])
        assert all(w > 10 and h > 5 for w, h in sizes), (fam, sizes[:3])
        if fam == "rope":
            browser.save_screenshot(str(shots / f"math-{version}-rope.png"))
    assert not _outside(_requests(browser))


@pytest.mark.parametrize("query, anchor", [
    ("ROPE-PAIR-HALF", "rope.html#ROPE-PAIR-HALF"),
    ("DIV-LEARNED-OPT-NO-OFFSET", "learned.html#DIV-LEARNED-OPT-NO-OFFSET"),
    ("NanoChat", "rope.html#ROPE-ROTATION-NEGATIVE"),  # a word of its title
])
def test_browser_search(browser, served, shots, query, anchor):
    browser.get(f"{served}/{SPEC_VERSION}/search.html?q={query}")
    # results are shown one by one; the summary line says when the search has finished
    _wait(browser, "const s = document.querySelector('.search-summary');"
                   "return s && /finished|did not match/i.test(s.textContent)", 30)
    hrefs = browser.execute_script("return Array.from(document.querySelectorAll('#search-results a')).map(x => x.href)")
    assert any(h.endswith(anchor) for h in hrefs), hrefs[:10]
    browser.save_screenshot(str(shots / f"search-{query}.png"))
    assert not _outside(_requests(browser))


HOSTILE_TEX = (r"\(\href{javascript:alert(1)}{x}\) $$\href{javascript:alert(2)}{y}$$ "
               r"\[\require{html}\href{javascript:alert(3)}{z}\] \(\class{c}{\style{color:red}{w}}\)")


@pytest.fixture(scope="module")
def hostile_pages(tmp_path_factory):
    """A card page built from a config whose name holds TeX links, given a formula of its own (so MathJax
    runs on it, as on any card page with math), and a site whose clauses' titles and statements hold them,
    and whose clauses' parameter names, tensor names and shapes, invariants and branch names, and divergences'
    dtypes, hold an RST link (:data:`EVIL_RST`)."""
    from posenc.spec import versions
    from posenc.tools.card import Card, build_card
    from posenc.tools.sphinx_build import build_card_page
    root = tmp_path_factory.mktemp("hostile")
    cfg = root / "config.json"
    cfg.write_text(json.dumps({"_name_or_path": HOSTILE_TEX, "model_type": "llama", "hidden_size": 64,
                               "num_attention_heads": 2, "max_position_embeddings": 128}), encoding="utf-8")
    real = versions.snapshot

    def hostile_snapshot(v):
        import copy
        snap = real(v)
        families, entries = copy.deepcopy(snap.families), copy.deepcopy(snap.entries)
        for raw in families.values():
            for clause in raw.get("clauses") or []:
                clause["title"] = HOSTILE_TEX
                clause["statement"] = HOSTILE_TEX + " " + str(clause.get("statement", ""))
        for e in entries.values():
            e["statement"] = HOSTILE_TEX + " " + str(e.get("statement", ""))
            e["parameters"] = [{"name": EVIL_RST, "type": "float"}, *(e.get("parameters") or [])]
            e["inputs"] = [{"name": EVIL_RST, "shape": EVIL_RST, "dtype": "float32"}]
            e["invariants"] = [EVIL_RST]
            e["branches"] = [{"name": EVIL_RST, "description": "both sides"}]
            e["dtypes"] = [EVIL_RST]
        return versions.Snapshot(snap.version, snap.released, families, entries)
    with pytest.MonkeyPatch.context() as mp:
        to_rst = Card.to_rst
        mp.setattr(Card, "to_rst", lambda self, **kw: to_rst(self, **kw) + "\n.. math:: x^2 + y_{k}\n")
        build_card_page(build_card(cfg).without_plots("no plots in this test"), root / "card")
        mp.setattr(versions, "snapshot", hostile_snapshot)
        docs_site.build(root / "site", versions=["0.1.0"], cards=False)
    srv = docs_site.serve(root, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("page", ["card/index.html", "site/0.1.0/rope.html"])
def test_browser_tex_in_outside_strings_is_never_live(hostile_pages, page):
    """TeX in a config or spec string stays text: MathJax typesets the page's formulas only, so no
    ``javascript:`` link (nor class, style) is made of it; and a formula itself could make none."""
    browser = _driver_or_skip()
    browser.requests = []
    try:
        _tex_never_live(browser, f"{hostile_pages}/{page}")
    finally:
        browser.quit()


def _tex_never_live(browser, url: str) -> None:
    import re
    browser.get(url)
    _wait(browser, "return !!(window.MathJax && MathJax.startup && MathJax.startup.promise)", 30)
    browser.execute_async_script("MathJax.startup.promise.then(() => arguments[arguments.length - 1](true))")
    assert browser.execute_script("return document.querySelectorAll('.math mjx-container').length") > 0
    assert browser.execute_script("return document.querySelectorAll('mjx-container').length") == \
        browser.execute_script("return document.querySelectorAll('.math mjx-container').length")
    links = browser.execute_script("return Array.from(document.querySelectorAll('[href]')).map(a => a.getAttribute('href'))")
    assert not [h for h in links if "javascript:" in h.lower().replace(" ", "")], links
    shown = browser.find_element("tag name", "body").text
    assert r"\href{javascript:alert(1)}{x}" in shown  # shown, as text
    if "/site/" in url:  # the RST link in a name, a shape, an invariant, ...: shown, as text
        assert shown.count("clickme <javascript:alert(document.domain)>") >= 5, shown[:2000]
        protocols = browser.execute_script("return Array.from(document.links).map(a => a.protocol)")
        assert set(protocols) <= {"http:", "https:"}, protocols  # as the browser reads the links
    assert browser.execute_script("return !!(MathJax._.ui && MathJax._.ui.safe)")  # the safe extension is loaded
    for tex in (r"\href{javascript:alert(1)}{x}", r"\require{html}\href{javascript:alert(1)}{x}",
                r"\class{c}{x}\cssId{i}{y}\style{color:red}{z}"):
        made = browser.execute_script("return MathJax.tex2mml(arguments[0])", tex)
        assert not re.search(r"\b(href|class|id|style)=", made), made
    assert not _outside(_requests(browser))


def test_browser_made_no_outside_request(browser):
    """Runs last in this module: every request of every page above went to the local server."""
    _requests(browser)
    assert browser.requests, "no request recorded: the DevTools log is not working"
    assert not _outside(browser.requests), _outside(browser.requests)[:5]


def test_changelog_headings_match_the_snapshots():
    """A dated CHANGELOG heading for every kept snapshot; `(in development)` only for a version without one."""
    import re
    from posenc.spec import SPEC_DIR
    heads = dict(re.findall(r"^## (\d+\.\d+\.\d+) \(([^)]*)\)", (SPEC_DIR / "CHANGELOG.md").read_text(encoding="utf-8"),
                            re.M))
    for v in released_versions():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", heads.get(v, "")), (v, heads.get(v))
    for v, state in heads.items():
        if state == "in development":
            assert v not in released_versions() and v == SPEC_VERSION
    assert SPEC_VERSION in heads

"""``posenc cite-check``: strict ``posenc:`` citations, bare-ID warnings, comment extraction per
language, exit codes, the JSON document (docs/citing.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from posenc.tools import cite_check
from posenc.cli import main as cli
from posenc.spec import versions

FIX = Path(__file__).resolve().parent / "fixtures" / "cite_check"

# every finding of the bad fixtures: (file, line, severity, code, id, version)
EXPECTED_BAD = {
    ("bad/README.md", 3, "error", "not-in-version", "DIV-ROPE-SIN-SIGN-FLIPPED", "0.3.0"),
    ("bad/README.md", 4, "warning", "unknown-version", "ROPE-PAIR-HALF", "0.9.0"),
    ("bad/README.md", 4, "warning", "unknown-id", "SCALE-LLAMA33", None),
    ("bad/kernel.cpp", 2, "error", "unknown-id", "ROPE-PAIR-HALFX", "0.3.0"),
    ("bad/kernel.cpp", 5, "error", "malformed-citation", "rope-pair-half@0.3.0", None),
    ("bad/kernel.cpp", 6, "error", "malformed-citation", "ROPE-PAIR-HALF@v0.3.0", None),
    ("bad/lib.rs", 2, "error", "superseded", "DIV-ROPE-BF16-ANGLES", None),
    ("bad/main.go", 3, "error", "unknown-id", "NOSUCH-CLAUSE", "0.4.0"),
    ("bad/main.go", 5, "warning", "superseded", "DIV-ROPE-BF16-ANGLES", None),
    ("bad/model.py", 3, "error", "unknown-version", "ROPE-PAIR-HALF", "0.9.0"),
    ("bad/model.py", 6, "error", "not-in-version", "DIV-ROPE-SIN-SIGN-FLIPPED", "0.3.0"),
    ("bad/model.py", 10, "error", "superseded", "DIV-ROPE-BF16-ANGLES", "0.3.0"),
    ("bad/model.py", 13, "error", "unknown-id", "ROPE-PAIR-HALFX", None),
    ("bad/model.py", 14, "warning", "unknown-id", "ROPE-PAIR-HALFF", None),
}


def _run(capsys, *args: str):
    rc = cli(["cite-check", *args])
    return rc, capsys.readouterr()


def _json(capsys, *args: str):
    rc, cap = _run(capsys, "--format", "json", *args)
    return rc, json.loads(cap.out)


def _key(f: dict) -> tuple:
    return (Path(f["file"]).relative_to(FIX).as_posix(), f["line"], f["severity"], f["code"], f["id"], f["version"])


def test_good_fixtures_have_no_findings(capsys):
    rc, doc = _json(capsys, str(FIX / "good"))
    assert rc == 0
    assert doc["findings"] == []
    # rope.py kernel.cu lib.rs notes.md run.sh read; blob.md (NUL bytes) skipped, not reported
    assert doc["summary"]["files_scanned"] == 5
    assert doc["summary"]["files_skipped"] == {"binary": 1, "unreadable": 0, "unsupported": 0, "special": 0}
    rc, cap = _run(capsys, str(FIX / "good"))
    assert rc == 0 and "0 error(s), 0 warning(s) in 5 file(s) (1 skipped: 1 binary)" in cap.out


def test_bad_fixtures_exact_findings(capsys):
    rc, doc = _json(capsys, str(FIX / "bad"))
    assert rc == 1
    got = [_key(f) for f in doc["findings"]]
    assert len(got) == len(set(got)), "a finding reported twice"
    assert set(got) == EXPECTED_BAD
    s = doc["summary"]
    assert (s["errors"], s["warnings"], s["infos"], s["files_scanned"]) == (10, 4, 0, 5)


def test_json_document_shape(capsys):
    _, doc = _json(capsys, str(FIX / "bad" / "model.py"))
    assert set(doc) == {"format", "spec_version", "findings", "summary"}
    assert doc["format"] == cite_check.JSON_FORMAT == 1
    from posenc.spec import SPEC_VERSION
    assert doc["spec_version"] == SPEC_VERSION
    assert set(doc["summary"]) == {"errors", "warnings", "infos", "files_scanned", "files_skipped",
                                   "files_partially_parsed", "files_decoded"}
    assert doc["summary"]["files_partially_parsed"] == 0
    assert doc["summary"]["files_decoded"] == {"utf-16": 0, "utf-32": 0, "latin-1": 0}
    for f in doc["findings"]:
        assert set(f) == {"file", "line", "column", "severity", "code", "id", "version", "message", "hint", "url"}
        assert f["message"] and f["hint"]
    first = doc["findings"][0]  # sorted by file, line, column
    assert (first["line"], first["column"], first["code"]) == (3, 9, "unknown-version")
    assert "0.9.0" in first["message"] and "cite ROPE-PAIR-HALF@0.1.0" in first["hint"]
    lines = [(f["line"], f["column"]) for f in doc["findings"]]
    assert lines == sorted(lines)


def test_text_output_names_file_line_column_and_hint(capsys):
    rc, cap = _run(capsys, str(FIX / "bad" / "lib.rs"))
    assert rc == 1
    path = (FIX / "bad" / "lib.rs").as_posix()
    assert f"{path}:2:33: error[superseded] DIV-ROPE-BF16-ANGLES: " in cap.out
    assert "hint: cite DIV-ROPE-BF16-INV-FREQ@" in cap.out
    assert cap.out.rstrip().endswith("1 error(s), 0 warning(s) in 1 file(s)")


def test_hints_are_actionable(capsys):
    _, doc = _json(capsys, str(FIX / "bad"))
    by = {(Path(f["file"]).name, f["line"], f["code"]): f for f in doc["findings"]}
    assert by[("model.py", 6, "not-in-version")]["hint"] == "cite DIV-ROPE-SIN-SIGN-FLIPPED@0.4.0"
    assert "did you mean ROPE-PAIR-HALF" in by[("model.py", 13, "unknown-id")]["hint"]
    assert "did you mean SCALE-LLAMA3" in by[("README.md", 4, "unknown-id")]["hint"]
    assert "posenc: ROPE-PAIR-HALF@0.4.0" in by[("kernel.cpp", 5, "malformed-citation")]["hint"]


def test_links_to_the_id_page(capsys):
    pytest.importorskip("posenc.tools.docs_site")
    _, doc = _json(capsys, str(FIX / "bad" / "model.py"))
    by = {(f["line"], f["code"]): f for f in doc["findings"]}
    assert by[(3, "unknown-version")]["url"].endswith("/rope.html#ROPE-PAIR-HALF")
    assert by[(13, "unknown-id")]["url"] is None  # no page for an ID that does not exist


def test_no_warnings(capsys):
    rc, doc = _json(capsys, "--no-warnings", str(FIX / "bad"))
    assert rc == 1
    assert {f["severity"] for f in doc["findings"]} == {"error"}
    assert {_key(f) for f in doc["findings"]} == {k for k in EXPECTED_BAD if k[2] == "error"}
    assert doc["summary"]["warnings"] == 0
    rc, doc = _json(capsys, "--no-warnings", str(FIX / "bad" / "README.md"))
    assert rc == 1 and len(doc["findings"]) == 1


def test_exit_codes(capsys, tmp_path):
    assert _run(capsys, str(FIX / "good"))[0] == 0
    assert _run(capsys, str(FIX / "bad"))[0] == 1
    warn_only = tmp_path / "w.md"
    warn_only.write_text("see ROPE-PAIR-HALFF\n", encoding="utf-8")
    rc, cap = _run(capsys, str(warn_only))
    assert rc == 0 and "warning[unknown-id]" in cap.out  # warnings alone do not fail
    missing = tmp_path / "nope.py"
    rc, cap = _run(capsys, str(FIX / "good"), str(missing))
    assert rc == 2
    # named on stderr (one line), reported as an error, and the other paths are still read and reported
    assert cap.err == f"error: posenc cite-check: {missing}: no such file or directory\n"
    assert f"{missing}:1:1: error[unreadable]: no such file or directory" in cap.out
    assert cap.out.rstrip().endswith("1 error(s), 0 warning(s) in 5 file(s) (2 skipped: 1 binary, 1 unreadable)")
    rc, cap = _run(capsys, str(FIX / "bad"), str(missing))
    assert rc == 2 and "error[unknown-id]" in cap.out  # a missing path outranks citation errors


def test_unsupported_and_unreadable_files_are_counted(capsys, tmp_path):
    (tmp_path / "data.bin").write_bytes(b"posenc: ROPE-PAIR-HALFX")
    # a UTF-16 byte-order mark, then an odd number of bytes: not UTF-16, so binary
    (tmp_path / "x.md").write_bytes(b"\xff\xfe posenc: ROPE-PAIR-HALFX\n")
    rc, doc = _json(capsys, str(tmp_path / "data.bin"), str(tmp_path))
    assert rc == 0 and doc["findings"] == []
    assert doc["summary"]["files_skipped"] == {"binary": 1, "unreadable": 0, "unsupported": 1, "special": 0}
    assert doc["summary"]["files_scanned"] == 0


def test_pruned_folders(capsys, tmp_path):
    for d in (".git", "__pycache__", "node_modules", "venv", "myenv"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "a.py").write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    rc, doc = _json(capsys, str(tmp_path))
    assert rc == 1 and doc["summary"]["files_scanned"] == 1
    assert [Path(f["file"]).parent.name for f in doc["findings"]] == ["src"]


@pytest.mark.parametrize("language, source, expected", [
    # C: an ID inside a string literal is not a citation; '//' inside a string is not a comment
    ("c", 'char *s = "posenc: ROPE-PAIR-HALFX // ROPE-PAIR-HALFF";\n', []),
    ("c", "char c = '\"'; // posenc: ROPE-PAIR-HALFX\n", [(1, 26, "unknown-id")]),
    ("c", "/* a\n * posenc: ROPE-PAIR-HALFX */\n", [(2, 12, "unknown-id")]),
    ("c", "x = `posenc: ROPE-PAIR-HALFX`; /* ROPE-PAIR-HALFF */", [(1, 35, "unknown-id")]),
    # Python: a code string is not read; a docstring and a comment are
    ("python", 'X = "posenc: ROPE-PAIR-HALFX"\n', []),
    ("python", 'def f():\n    """posenc: ROPE-PAIR-HALFX"""\n', [(2, 16, "unknown-id")]),
    ("python", "x = 1  # posenc: ROPE-PAIR-HALFX\n", [(1, 18, "unknown-id")]),
    ("hash", 'key: "a # posenc: ROPE-PAIR-HALFX"  # posenc: ROPE-PAIR-HALFX\n', [(1, 47, "unknown-id")]),
    ("hash", "it's # posenc: ROPE-PAIR-HALFX\n", [(1, 16, "unknown-id")]),
    ("text", "posenc: ROPE-PAIR-HALFX\n", [(1, 9, "unknown-id")]),
])
def test_what_counts_as_a_comment(language, source, expected):
    got = [(f.line, f.column, f.code) for f in cite_check.check_text(source, language)]
    assert got == expected


@pytest.mark.parametrize("text, expected", [
    ("posenc: ROPE-PAIR-HALF@0.3.0", []),
    ("posenc: ROPE-PAIR-HALF", []),
    ("posenc:ROPE-PAIR-HALF@0.4.0", []),
    ("posenc: ROPE-PAIR-HALF@0.4.0, ROPE-PAIR-INTERLEAVED@0.1.0 ROPE-PAIR-HALF.", []),
    ("posenc: ROPE-PAIR-HALF@0.4.0, ROPE-PAIR-HALFX@0.1.0", [("error", "unknown-id", "ROPE-PAIR-HALFX")]),
    ("posenc: ROPE-PAIR-HALF@0.4.0, DIV-ROPE-BF16-ANGLES", [("error", "superseded", "DIV-ROPE-BF16-ANGLES")]),
    ("posenc: ROPE-PAIR-HALF@0.4.0 (the half pairing)", []),
    ("posenc: ROPE-PAIR-HALF@0.4.0, ROPE-PAIR-HALF@latest", [("error", "malformed-citation", "ROPE-PAIR-HALF@latest")]),
    ("posenc: ROPE-PAIR-HALF@0.3", [("error", "unknown-version", "ROPE-PAIR-HALF")]),
    ("posenc: ROPE_PAIR_HALF", [("error", "malformed-citation", "ROPE_PAIR_HALF")]),
    ("posenc: the kit's own message", []),
    ("posenc::rope::apply(ROPE-PAIR-HALF)", []),
    # bare IDs: warnings only, and only for a near miss, a superseded ID or a bad version
    ("T5-small, T5-XL, T5-V1-1, GPT-2, UTF-8, ROPE-FOO", []),
    ("ROPE-PAIR-HALF and DIV-ROPE-BF16-INV-FREQ", []),
    ("ROPE-PAIR-INTERLEAVD", [("warning", "unknown-id", "ROPE-PAIR-INTERLEAVD")]),
    ("DIV-ROPE-BF16-ANGLES", [("warning", "superseded", "DIV-ROPE-BF16-ANGLES")]),
    ("ROPE-PAIR-HALF@0.2.0", []),
    ("DIV-ROPE-SIN-SIGN-FLIPPED@0.2.0", [("warning", "not-in-version", "DIV-ROPE-SIN-SIGN-FLIPPED")]),
    ("ROPE-PAIR-HALFF  cite-check: ignore", []),
])
def test_grammar(text, expected):
    got = [(f.severity, f.code, f.id) for f in cite_check.check_text(text + "\n", "text")]
    assert got == expected


def test_off_on_markers():
    src = "ROPE-PAIR-HALFF\ncite-check: off\nposenc: ROPE-PAIR-HALFX\ncite-check: on\nposenc: ROPE-PAIR-HALFX\n"
    assert [(f.line, f.code) for f in cite_check.check_text(src, "text")] == [(1, "unknown-id"), (5, "unknown-id")]


@pytest.fixture
def changed_meaning(tmp_path, monkeypatch):
    """A copy of the released snapshots in which ROPE-PAIR-HALF's current meaning dates from 0.4.0."""
    from posenc.spec import SPEC_VERSION
    root = tmp_path / "versions"
    shutil.copytree(versions.VERSIONS_DIR, root)
    cur = root / SPEC_VERSION / "rope.yaml"
    if not versions.is_released(SPEC_VERSION):  # in development: its meaning is the working spec's
        work = tmp_path / "spec"
        shutil.copytree(versions.SPEC_DIR, work, ignore=shutil.ignore_patterns("versions", "registry", "*.py"))
        monkeypatch.setattr(versions, "SPEC_DIR", work)
        cur = work / "rope.yaml"
    text = cur.read_text(encoding="utf-8")
    head, tail = text.split("  - id: ROPE-PAIR-HALF\n", 1)
    assert '    since: "0.1.0"\n' in tail
    cur.write_text(head + "  - id: ROPE-PAIR-HALF\n" + tail.replace('    since: "0.1.0"\n',
                                                                     f'    since: "{SPEC_VERSION}"\n', 1),
                   encoding="utf-8")
    manifest = root / "manifest.json"
    if manifest.exists():  # released snapshots are checked against their recorded digests
        import hashlib
        man = json.loads(manifest.read_text(encoding="utf-8"))
        if SPEC_VERSION in man:
            man[SPEC_VERSION]["rope.yaml"] = hashlib.sha256(cur.read_bytes()).hexdigest()
            manifest.write_text(json.dumps(man), encoding="utf-8")
    monkeypatch.setattr(versions, "VERSIONS_DIR", root)
    versions.snapshot.cache_clear()
    cite_check._spec.cache_clear()
    yield SPEC_VERSION
    monkeypatch.undo()
    versions.snapshot.cache_clear()
    cite_check._spec.cache_clear()


def test_meaning_changed(changed_meaning):
    got = cite_check.check_text(f"# posenc: ROPE-PAIR-HALF@0.3.0, ROPE-PAIR-HALF@{changed_meaning}\n", "python", "m.py")
    assert [(f.file, f.line, f.column, f.severity, f.code, f.version) for f in got] == \
        [("m.py", 1, 11, "error", "meaning-changed", "0.3.0")]
    assert f"cite ROPE-PAIR-HALF@{changed_meaning}" in got[0].hint


def test_without_docs_site(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "posenc.tools.docs_site", None)  # an import of it fails
    rc, doc = _json(capsys, str(FIX / "bad" / "lib.rs"))
    assert rc == 1 and doc["findings"][0]["url"] is None


def test_superseded_hint_resolves_cleanly():
    """The hint's citation is itself good (DIV-ROPE-BF16-ANGLE-PRODUCT's meaning dates from 0.2.0, the ID
    from 0.4.0: the hint pins 0.4.0)."""
    [f] = cite_check.check_text("posenc: DIV-ROPE-BF16-ANGLES\n", "text")
    suggested = f.hint.removeprefix("cite ").removesuffix(" instead")
    assert cite_check.check_text(f"posenc: {suggested}\n", "text") == []


# --- hardening: one test per kind of finding of the hostile review --------------------------------

@pytest.mark.parametrize("text, expected", [
    # 1. the whole token after `@` is the version; only digits and dots are one
    ("posenc: ROPE-PAIR-HALF@0.4.0.0-rc1", [("error", "malformed-citation", "ROPE-PAIR-HALF@0.4.0.0-rc1", None)]),
    ("posenc: ROPE-PAIR-HALF@0.4.0-rc1", [("error", "malformed-citation", "ROPE-PAIR-HALF@0.4.0-rc1", None)]),
    ("posenc: ROPE-PAIR-HALF@0.4.0x", [("error", "malformed-citation", "ROPE-PAIR-HALF@0.4.0x", None)]),
    ("posenc: ROPE-PAIR-HALF@", [("error", "malformed-citation", "ROPE-PAIR-HALF@", None)]),
    ("posenc: ROPE-PAIR-HALF@0.4.0.0", [("error", "unknown-version", "ROPE-PAIR-HALF", "0.4.0.0")]),
    ("It follows posenc: ROPE-PAIR-HALF@0.3.0.", []),
    ("(posenc: ROPE-PAIR-HALF@0.3.0, ROPE-PAIR-HALF@0.4.0)", []),
    ("**posenc: ROPE-PAIR-HALF@0.4.0**", []),
    ("see ROPE-PAIR-HALF@0.4.0-rc1", [("warning", "malformed-citation", "ROPE-PAIR-HALF@0.4.0-rc1", None)]),
    # 7. the keyword in any case; lower-case IDs; `;` and `/` lists; URLs
    ("Posenc: ROPE-PAIR-HALFX", [("error", "unknown-id", "ROPE-PAIR-HALFX", None)]),
    ("POSENC: ROPE-PAIR-HALFX", [("error", "unknown-id", "ROPE-PAIR-HALFX", None)]),
    ("Posenc: the kit's message", []),
    ("posenc: rope-pair-half", [("error", "malformed-citation", "rope-pair-half", None)]),
    ("posenc: well-known prose", []),
    ("posenc: ROPE-PAIR-HALF; ROPE-PAIR-HALFX", [("error", "unknown-id", "ROPE-PAIR-HALFX", None)]),
    ("posenc: ROPE-PAIR-HALF/ROPE-PAIR-HALFX", [("error", "unknown-id", "ROPE-PAIR-HALFX", None)]),
    ("posenc: ROPE-PAIR-HALF; rope-pair-half", [("error", "malformed-citation", "rope-pair-half", None)]),
    ("see https://x.org/posenc:ROPE-PAIR-HALFX and https://x.org/ROPE-PAIR-HALFF", []),
])
def test_grammar_hardened(text, expected):
    got = [(f.severity, f.code, f.id, f.version) for f in cite_check.check_text(text + "\n", "text")]
    assert got == expected


@pytest.mark.parametrize("language, source, expected", [
    # 2. single-quoted strings (JS/TS), multi-line strings (Rust, JS templates, Go raw, text blocks)
    ("js", "const help = 'usage: // posenc: ROPE-PAIR-HALFX';\n", []),
    ("js", "const q = 'a\"b'; // posenc: ROPE-PAIR-HALFY\n", [(1, 29, "ROPE-PAIR-HALFY")]),
    ("js", "const t = `a\n// not ${x + `in ${y}`} b\n`; // posenc: ROPE-PAIR-HALFX\n", [(3, 15, "ROPE-PAIR-HALFX")]),
    ("js", "const t = `a\n/* posenc: ROPE-PAIR-HALFY */\n`;\n", []),
    ("rust", 'let s = "first line\nsecond"; // posenc: ROPE-PAIR-HALFX\n', [(2, 21, "ROPE-PAIR-HALFX")]),
    ("rust", "fn f<'a>(x: &'a str) -> char { '\"' } // posenc: ROPE-PAIR-HALFX\n", [(1, 49, "ROPE-PAIR-HALFX")]),
    ("rust", "/* a /* nested */ posenc: ROPE-PAIR-HALFX */ // posenc: ROPE-PAIR-HALFY\n",
     [(1, 27, "ROPE-PAIR-HALFX"), (1, 57, "ROPE-PAIR-HALFY")]),
    ("go", "x := `C:\\` // posenc: ROPE-PAIR-HALFX\nr := '\"' // posenc: ROPE-PAIR-HALFY\n",
     [(1, 23, "ROPE-PAIR-HALFX"), (2, 21, "ROPE-PAIR-HALFY")]),
    ("go", "x := `a\n// posenc: ROPE-PAIR-HALFX`\n", []),
    ("c", 'auto s = R"(a // b)"; // posenc: ROPE-PAIR-HALFX\n', [(1, 34, "ROPE-PAIR-HALFX")]),
    ("c", 's = """a\n// posenc: ROPE-PAIR-HALFY\n"""; // posenc: ROPE-PAIR-HALFX\n', [(3, 17, "ROPE-PAIR-HALFX")]),
    ("c", 'var s = @"C:\\"; // posenc: ROPE-PAIR-HALFX\n', [(1, 28, "ROPE-PAIR-HALFX")]),
    ("hash", 'X="C:\\\\" # posenc: ROPE-PAIR-HALFX\n', [(1, 20, "ROPE-PAIR-HALFX")]),
    ("hash", "X='C:\\' # posenc: ROPE-PAIR-HALFX\n", [(1, 19, "ROPE-PAIR-HALFX")]),
    # 9. docstrings: implicitly concatenated and parenthesised (a code string still is not one)
    ("python", 'def f():\n    "a" "posenc: ROPE-PAIR-HALFX"\n', [(2, 18, "ROPE-PAIR-HALFX")]),
    ("python", 'def f():\n    ("a"\n     "posenc: ROPE-PAIR-HALFX")\n', [(3, 15, "ROPE-PAIR-HALFX")]),
    ("python", 'x = ("a"\n     "posenc: ROPE-PAIR-HALFX")\nf("a" "posenc: ROPE-PAIR-HALFX")\n', []),
])
def test_comments_hardened(language, source, expected):
    got = [(f.line, f.column, f.id) for f in cite_check.check_text(source, language) if f.code == "unknown-id"]
    assert got == expected


def test_extensions_map_to_their_literal_syntax():
    lang = {e: cite_check.language_of(Path(f"x.{e}")) for e in ("ts", "js", "rs", "go", "cpp", "kt", "md", "rst")}
    assert lang == {"ts": "js", "js": "js", "rs": "rust", "go": "go", "cpp": "c", "kt": "swift", "md": "markdown",
                    "rst": "rst"}


@pytest.mark.parametrize("source, expected", [
    # 6. a marker is the whole content of a comment; a mention does not switch anything
    ("# see `cite-check: off` for that\n# posenc: ROPE-PAIR-HALFX\n", [2]),
    ("# use cite-check: off to stop\n# posenc: ROPE-PAIR-HALFX\n", [2]),
    ("# cite-check: off (examples)\n# posenc: ROPE-PAIR-HALFX\n# cite-check: on\n# posenc: ROPE-PAIR-HALFY\n", [4]),
    ("x = 1  # posenc: ROPE-PAIR-HALFX  cite-check: ignore\n", []),
    ("x = 1  # posenc: ROPE-PAIR-HALFX  cite-check: ignore (an example)\n", []),
    ("x = 1  # posenc: ROPE-PAIR-HALFX; `cite-check: ignore` is a marker\n", [1]),
])
def test_markers_are_strict(source, expected):
    assert [f.line for f in cite_check.check_text(source, "python") if f.severity == "error"] == expected


def test_markdown_markers():
    md = ("Write `<!-- cite-check: off -->` to stop.\nposenc: ROPE-PAIR-HALFX\n"
          "cite-check: off\nposenc: ROPE-PAIR-HALFX\n"
          "<!-- cite-check: off (quotes bad citations) -->\nposenc: ROPE-PAIR-HALFX\n"
          "<!-- cite-check: on --> posenc: ROPE-PAIR-HALFY\n"
          "posenc: ROPE-PAIR-HALFX  <!-- cite-check: ignore -->\n"
          "Use `cite-check: ignore` here: posenc: ROPE-PAIR-HALFX\n")
    assert [(f.line, f.id) for f in cite_check.check_text(md, "markdown") if f.severity == "error"] == \
        [(2, "ROPE-PAIR-HALFX"), (4, "ROPE-PAIR-HALFX"), (7, "ROPE-PAIR-HALFY"), (9, "ROPE-PAIR-HALFX")]
    assert cite_check.check_text(".. cite-check: off\n\nposenc: ROPE-PAIR-HALFX\n", "rst") == []


@pytest.mark.parametrize("source, line", [
    ('def f():\n    x = 1\n  y = 2\n# posenc: ROPE-PAIR-HALFX\nZ = "posenc: ROPE-PAIR-HALFY"\n', 3),
    ('x = 1  # posenc: ROPE-PAIR-HALFX\n"""posenc: ROPE-PAIR-HALFY\n', 2),
])
def test_python_that_does_not_tokenize_is_read_best_effort(capsys, tmp_path, source, line):
    (tmp_path / "broken.py").write_text(source, encoding="utf-8")
    rc, doc = _json(capsys, str(tmp_path))
    assert rc == 1
    assert {f["id"] for f in doc["findings"] if f["code"] == "unknown-id"} == {"ROPE-PAIR-HALFX", "ROPE-PAIR-HALFY"}
    [note] = [f for f in doc["findings"] if f["code"] == "unparsed"]
    assert (note["severity"], note["line"], note["id"]) == ("warning", line, "")
    assert doc["summary"]["files_partially_parsed"] == 1
    rc, cap = _run(capsys, str(tmp_path))
    assert "warning[unparsed]: Python tokenize failed" in cap.out and "(1 partially parsed)" in cap.out
    rc, doc = _json(capsys, "--no-warnings", str(tmp_path))  # the count stays, without the warning
    assert doc["summary"]["files_partially_parsed"] == 1 and doc["summary"]["warnings"] == 0


def test_encodings(capsys, tmp_path):
    (tmp_path / "a.md").write_bytes("posenc: ROPE-PAIR-HALFX\n".encode("utf-16"))  # with a BOM
    (tmp_path / "b.py").write_bytes("# caf\xe9 posenc: ROPE-PAIR-HALFX\n".encode("latin-1"))  # no cookie
    (tmp_path / "c.md").write_bytes("posenc: ROPE-PAIR-HALFX \xe9\n".encode("latin-1") + b"\0")  # NUL: binary
    rc, doc = _json(capsys, str(tmp_path))
    assert rc == 1
    assert [(Path(f["file"]).name, f["line"], f["column"]) for f in doc["findings"]] == [("a.md", 1, 9), ("b.py", 1, 16)]
    s = doc["summary"]
    assert s["files_decoded"] == {"utf-16": 1, "utf-32": 0, "latin-1": 1}
    assert s["files_skipped"]["binary"] == 1 and s["files_scanned"] == 2
    assert "1 decoded as utf-16; 1 decoded as latin-1" in _run(capsys, str(tmp_path))[1].out


@pytest.mark.parametrize("shebang, found", [("#!/bin/sh", True), ("#!/usr/bin/env python3", True),
                                            ("#!/usr/bin/env -S bash -e", True), ("#!/bin/zsh", True),
                                            ("#!/usr/bin/perl", False), ("no shebang", False)])
def test_extensionless_scripts_by_shebang(capsys, tmp_path, shebang, found):
    script = tmp_path / "tool"
    script.write_text(f"{shebang}\n# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    _, in_folder = _json(capsys, str(tmp_path))
    _, named = _json(capsys, str(script))  # how pre-commit hands it over
    for doc in (in_folder, named):
        assert [f["line"] for f in doc["findings"]] == ([2] if found else [])
    assert named["summary"]["files_skipped"]["unsupported"] == (0 if found else 1)


def test_special_files_are_never_opened(capsys, tmp_path):
    import os
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    import threading
    result = {}
    t = threading.Thread(target=lambda: result.update(doc=_json(capsys, str(tmp_path))[1],
                                                      named=_json(capsys, str(tmp_path / "pipe.py"))[1]),
                         daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # unblock the hung open so that the test run can end
        with open(tmp_path / "pipe.py", "wb"):
            pass
        pytest.fail("cite-check opened a FIFO and blocked")
    assert result["doc"]["summary"]["files_skipped"]["special"] == 1
    assert result["doc"]["summary"]["files_scanned"] == 1
    assert result["named"]["summary"]["files_skipped"]["special"] == 1


def test_symlinked_duplicates_reported_once_under_the_real_path(capsys, tmp_path):
    real = tmp_path / "src" / "a.py"
    real.parent.mkdir()
    real.write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    for order in ((link, real.parent), (real.parent, link), (tmp_path,)):
        _, doc = _json(capsys, *map(str, order))
        assert [f["file"] for f in doc["findings"]] == [real.as_posix()]
        assert doc["summary"]["files_scanned"] == 1
    _, doc = _json(capsys, str(link))  # the only path given: kept as given
    assert [f["file"] for f in doc["findings"]] == [link.as_posix()]


def test_repeated_citations_resolve_once(monkeypatch):
    """5. resolutions and near misses are cached within a run (the throughput is in
    bench/bench_cite_check.py, not asserted here)."""
    calls = []
    real = versions.resolve
    monkeypatch.setattr(versions, "resolve", lambda i, v=None: calls.append((i, v)) or real(i, v))
    near = []
    real_close = cite_check.difflib.get_close_matches
    monkeypatch.setattr(cite_check.difflib, "get_close_matches", lambda *a, **k: near.append(a[0]) or real_close(*a, **k))
    src = "# posenc: ROPE-PAIR-HALF@0.4.0, ROPE-PAIR-HALF@0.4.0; see ROPE-PAIR-HALFF, DIV-ROPE-BF16-ANGLES\n" * 500
    got = cite_check.check_text(src, "python")
    assert len(got) == 1000 and {f.severity for f in got} == {"warning"}
    assert sorted(calls) == [("DIV-ROPE-BF16-ANGLES", None), ("ROPE-PAIR-HALF", "0.4.0")]
    assert near == ["ROPE-PAIR-HALFF"]


def test_near_miss_prefilter():
    spec = cite_check._spec()
    cache = cite_check._Cache()
    assert cache.near_misses("ROPE-PAIR-HALFF", spec) == ["ROPE-PAIR-HALF"]
    assert cache.near_misses("ROPE-PAIR-HALF-EXTRA", spec) == []  # 6 longer: not a near miss


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_unreadable_spec_is_exit_2_with_a_message(capsys, tmp_path, monkeypatch, fmt):
    from posenc.spec.errors import SpecError

    def broken(*a, **k):
        raise SpecError("spec/versions/0.3.0/rope.yaml: bad YAML")
    monkeypatch.setattr(versions, "snapshot", broken)
    monkeypatch.setattr(versions, "resolve", broken)
    cite_check._spec.cache_clear()
    try:
        (tmp_path / "a.py").write_text("# posenc: ROPE-PAIR-HALF\n", encoding="utf-8")
        rc, cap = _run(capsys, "--format", fmt, str(tmp_path))
    finally:
        cite_check._spec.cache_clear()
    assert rc == 2
    assert cap.err.startswith("error: ") and "spec/versions/0.3.0/rope.yaml: bad YAML" in cap.err
    assert "Traceback" not in cap.err
    if fmt == "json":
        assert "spec/versions/0.3.0/rope.yaml" in json.loads(cap.out)["error"]
    else:
        assert cap.out == ""


def test_yaml_error_is_exit_2(capsys, tmp_path, monkeypatch):
    yaml = pytest.importorskip("yaml")

    def broken(*a, **k):
        raise yaml.YAMLError("while scanning: rope.yaml line 3")
    monkeypatch.setattr(versions, "snapshot", broken)
    cite_check._spec.cache_clear()
    try:
        rc, cap = _run(capsys, str(FIX / "good" / "rope.py"))
    finally:
        cite_check._spec.cache_clear()
    assert rc == 2 and "rope.yaml line 3" in cap.err


@pytest.mark.parametrize("source, expected", [
    # a regular-expression literal holding a quote or a backtick opens no string: the citations after it count
    ("const r = /['\"`]/; // ROPE-PAIR-HALFF\nlet y = 1; // posenc: ROPE-PAIR-HALFX\n",
     [(1, 23, "ROPE-PAIR-HALFF"), (2, 23, "ROPE-PAIR-HALFX")]),
    ("if (/[/'\"]+/.test(x)) return /a\\/'/g; // posenc: ROPE-PAIR-HALFX\n", [(1, 50, "ROPE-PAIR-HALFX")]),
    ("x = s.replace(/`/g, ''); // posenc: ROPE-PAIR-HALFX\n", [(1, 37, "ROPE-PAIR-HALFX")]),
    ("return /'/.test(s) // posenc: ROPE-PAIR-HALFX\n", [(1, 31, "ROPE-PAIR-HALFX")]),
    # a division is not a regular expression: the quote after it still opens a string
    ("x = a / b; y = '/ // posenc: ROPE-PAIR-HALFY'; // posenc: ROPE-PAIR-HALFX\n", [(1, 59, "ROPE-PAIR-HALFX")]),
    ("x = f(a) / 2 / g['k']; // posenc: ROPE-PAIR-HALFX\n", [(1, 35, "ROPE-PAIR-HALFX")]),
    ("y = i++ / 2 // posenc: ROPE-PAIR-HALFX\n", [(1, 24, "ROPE-PAIR-HALFX")]),
    # a regular expression's `//` is not a comment
    ("const u = /https?:\\/\\/x/; const s = 'a'; // posenc: ROPE-PAIR-HALFX\n", [(1, 53, "ROPE-PAIR-HALFX")]),
])
def test_js_regex_literals(source, expected):
    got = [(f.line, f.column, f.id) for f in cite_check.check_text(source, "js") if f.code == "unknown-id"]
    assert got == expected


@pytest.mark.parametrize("text, found", [
    ("posenc: ROPE-PAIR\u200b-HALF", [(9, "ROPE-PAIR-HALF")]),
    ("see ROPE-PAIR\u200b-HALF", [(5, "ROPE-PAIR-HALF")]),  # bare: an error too, never silent
    ("see ROPE-PAIR\u2060-HALF, ROPE\u00ad-PAIR-HALF and ROPE-PAIR-HALF\ufeff", [(5, "ROPE-PAIR-HALF"),
                                                                             (22, "ROPE-PAIR-HALF")]),
    ("posenc: ROPE\u2011PAIR\u2011HALF", [(9, "ROPE-PAIR-HALF")]),  # non-breaking hyphens
    ("posenc: ROPE\u2212PAIR-HALF", [(9, "ROPE-PAIR-HALF")]),  # a minus sign
    ("posenc: R\u041ePE-PAIR-HALF", [(9, "ROPE-PAIR-HALF")]),  # a Cyrillic O
    ("posenc: \uff32\uff2f\uff30\uff25-PAIR-HALF", [(9, "ROPE-PAIR-HALF")]),  # full-width letters
    ("posenc: ROPE-PAIR-HALF\u200b@0.4.0", [(9, "ROPE-PAIR-HALF")]),  # would cut the version off
    ("posenc: DIV-ROPE-BF16\u200e-ANGLES", [(9, "DIV-ROPE-BF16-ANGLES")]),  # a direction mark
    ("T5\u200b-XL, caf\u00e9, \u200bROPE-PAIR-HALF, ROPE-PAIR-HALF\u200b.", []),  # prose; around an ID: the ID is exact
])
def test_hidden_characters_in_ids_are_errors(text, found):
    findings = cite_check.check_text(text + "\n", "text")
    got = [(f.column, f.id) for f in findings if f.code == "hidden-character"]
    assert got == found
    assert all(f.severity == "error" for f in findings if f.code == "hidden-character")
    assert all("U+" in f.message for f in findings if f.code == "hidden-character")


def test_every_format_character_inside_an_id_is_reported():
    import sys
    import unicodedata
    cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(cf) > 150
    text = "".join(f"posenc: ROPE-PAIR{ch}-HALF\n" for ch in cf)
    got = [(f.line, f.code, f.id) for f in cite_check.check_text(text, "text")]
    assert got == [(i, "hidden-character", "ROPE-PAIR-HALF") for i in range(1, len(cf) + 1)]


LONG_LINES = {
    "text": "posenc: ROPE-PAIR-HALF see https://x.org/a ROPE-PAIR-HALFF https://y.org/ROPE-PAIR-HALF T5-XL ",
    "markdown": "www.x.org/ROPE-PAIR-HALF posenc: ROPE-PAIR-HALF@0.4.0, DIV-ROPE-BF16-ANGLES a.b-c.d-e.f-g ",
    "js": "x = /['\"`]/.test(s) / 2; (/[/[ ",
}


@pytest.mark.parametrize("language", sorted(LONG_LINES))
def test_one_long_line_is_read_in_linear_time(language):
    """8x the line takes about 8x the time (not 64x): ratios of the best of three runs, in one process."""
    import time
    cite_check.check_text("warm up ROPE-PAIR-HALF\n", "text")

    def best(k: int) -> float:
        src = LONG_LINES[language] * (1500 * k) + "\n"
        times = []
        for _ in range(3):
            t = time.perf_counter()
            cite_check.check_text(src, language)
            times.append(time.perf_counter() - t)
        return min(times)
    small, large = best(1), best(8)
    assert large / small < 20, (language, small, large)


def test_a_hidden_character_in_the_leader_is_an_error_and_the_citation_still_read():
    got = [(f.column, f.severity, f.code, f.id) for f in cite_check.check_text("posenc\u200b: ROPE-PAIR-HALFX\n", "text")]
    assert got == [(1, "error", "hidden-character", "posenc:"), (10, "error", "unknown-id", "ROPE-PAIR-HALFX")]


# ---- encodings any codec may name, folders of any depth, file names that are not printable ----------

ENCODINGS = ["punycode", "idna", "undefined", "hex", "rot13", "zlib", "unicode_escape", "raw_unicode_escape",
             "utf-7", "cp037", "charmap", "no-such-codec"]


@pytest.mark.parametrize("enc", ENCODINGS)
def test_any_declared_encoding_is_read_best_effort(tmp_path, capsys, enc):
    """A coding line names any codec, which may raise anything on decoding: the file is still read (as UTF-8)
    with a warning, the other findings stay, and --format json is JSON."""
    (tmp_path / "a.py").write_bytes(f"# -*- coding: {enc} -*-\n# posenc: ROPE-PAIR-HALFX\n".encode())
    (tmp_path / "b.py").write_text("# posenc: ROPE-PAIR-HALFY\n", encoding="utf-8")
    rc, cap = _run(capsys, "--format", "json", str(tmp_path))
    doc = json.loads(cap.out)
    ids = {f["id"] for f in doc["findings"] if f["severity"] == "error"}
    assert "ROPE-PAIR-HALFY" in ids and rc == 1 and "Traceback" not in cap.err
    assert doc["summary"]["files_scanned"] == 2
    mine = [f for f in doc["findings"] if f["file"].endswith("a.py")]
    try:
        (tmp_path / "a.py").read_bytes().decode(enc)
        return  # the declared codec reads it (into whatever text it makes): Python would too
    except Exception:  # noqa: BLE001 - any codec, any error
        pass
    assert [f["code"] for f in mine] == ["unparsed", "unknown-id"], (enc, mine)  # read as UTF-8, with a warning
    assert "best-effort" in mine[0]["message"] and enc in mine[0]["message"]


def test_a_folder_of_any_depth_is_walked(tmp_path, capsys):
    import os
    d, made = tmp_path, []
    for _ in range(11):  # 1100 levels (a hundred at a time: a path of under 4096 bytes per call)
        d = d / "/".join(["d"] * 100)
        os.makedirs(d)
    (d / "deep.py").write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    try:
        rep = cite_check.check_paths([tmp_path])
        assert [f.id for f in rep.findings] == ["ROPE-PAIR-HALFX"] and rep.files_scanned == 1
    finally:  # removed here, bottom up: pytest's own clean-up of old temporary folders recurses
        (d / "deep.py").unlink()
        while d != tmp_path:
            os.rmdir(d)
            d = d.parent


@pytest.mark.parametrize("name", ["a\x1b[31mRED\x1b[0m.py", "b\nfake.py:1:1: error[x] forged\n.py", "c\u202eyp.py",
                                  "d\r.py", "e\x7f.py"])
def test_file_names_are_printed_escaped(tmp_path, capsys, name):
    """A file name cannot colour the terminal or forge a line of the text report."""
    (tmp_path / name).write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    rc, cap = _run(capsys, str(tmp_path))
    assert rc == 1 and cap.out.isprintable() is False  # newlines between the report's lines only
    lines = cap.out.splitlines()
    assert all(line.isprintable() for line in lines), lines
    assert len([line for line in lines if "error[" in line]) == 1 and "forged" not in lines[0].split(":")[0]
    rc, cap = _run(capsys, str(tmp_path / name) + "-missing")
    assert rc == 2 and cap.err.count("\n") == 1 and cap.err.rstrip("\n").isprintable()


def test_a_long_line_of_look_alike_ids_is_read_in_linear_time():
    """Each hidden-character token is replaced in the line to be read on: once per line, not once per token
    (8x the line: about 8x the time, not 64x; ratios of the best of three runs, in one process)."""
    import time
    line = "ROPE\u2011PAIR-HALF posenc: DIV\u2011ROPE-BF16-ANGLES\ufe0f@0.9.0 "
    cite_check.check_text(line + "\n", "text")

    def best(k: int) -> float:
        src = line * (1000 * k) + "\n"
        times = []
        for _ in range(3):
            t = time.perf_counter()
            found = cite_check.check_text(src, "text")
            times.append(time.perf_counter() - t)
        assert sum(f.code == "hidden-character" for f in found) == 2000 * k
        return min(times)
    small, large = best(1), best(8)
    assert large / small < 20, (small, large)


# ---- every invisible character, an `@` look-alike, a disguised `posenc:` -----------------------------------

INVISIBLE = ["\ufe00", "\ufe0f", "\u034f", "\u180b", "\u180f", "\u2800", "\u3164", "\uffa0", "\U000e0041",
             "\U000e0100", "\u200b", "\u00ad", "\u2060", "\u115f", "\u17b4", "\U0001d173"]


@pytest.mark.parametrize("ch", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_an_invisible_character_before_the_version_is_an_error_and_the_version_read(ch):
    got = [(f.code, f.id, f.version) for f in cite_check.check_text(f"posenc: ROPE-PAIR-HALF{ch}@0.9.0\n", "text")]
    assert got == [("hidden-character", "ROPE-PAIR-HALF", None), ("unknown-version", "ROPE-PAIR-HALF", "0.9.0")]


@pytest.mark.parametrize("at", ["\uff20", "\ufe6b"])
def test_an_at_look_alike_is_an_error_and_the_version_read(at):
    got = [(f.code, f.id, f.version) for f in cite_check.check_text(f"posenc: ROPE-PAIR-HALF{at}0.9.0\n", "text")]
    assert got == [("hidden-character", "ROPE-PAIR-HALF", None), ("unknown-version", "ROPE-PAIR-HALF", "0.9.0")]


@pytest.mark.parametrize("leader", ["p\u043esenc:", "\uff50osenc:", "\uff30\uff2f\uff33\uff25\uff2e\uff23:", "posenc\uff1a",
                                    "posenc\ufe55", "posenc\u2236", "posenc\ua789", "posenc:\u00a0", "posenc:\u2003",
                                    "posenc:\u3000", "posenc:\u202f", "posenc:\u1680", "posenc:\u200b", "pos\ufe0fenc:",
                                    "\U0001d429osenc:"])
def test_a_disguised_leader_is_an_error_and_the_citation_read(leader):
    got = [(f.severity, f.code, f.id) for f in cite_check.check_text(f"{leader}ROPE-PAIR-HALFX\n", "text")]
    assert got == [("error", "hidden-character", "posenc:"), ("error", "unknown-id", "ROPE-PAIR-HALFX")], leader


@pytest.mark.parametrize("language, source, lines", [
    ("c", "// note \\\n   posenc: ROPE-PAIR-HALFX\nint x;\n", [2]),
    ("c", "#define A 1 /* ok */ // \\\nposenc: ROPE-PAIR-HALFY\n", [2]),
    ("c", "// a \\\r\n b \\\r\n posenc: ROPE-PAIR-HALFX\r\nint y;\r\n", [3]),
    ("c", "// a\nx = \"// posenc: ROPE-PAIR-HALFZ\";\n", []),
    ("c", "// a \\ b\nx = \"// posenc: ROPE-PAIR-HALFZ\";\n", []),
    ("swift", 'let s = #"a"b"#  // posenc: ROPE-PAIR-HALFX\n', [1]),
    ("swift", 'let s = #"a"b // posenc: ROPE-PAIR-HALFW"#\n', []),
    ("swift", 'let s = ##"a"#b"## // posenc: ROPE-PAIR-HALFX\n', [1]),
    ("swift", 'let s = #"""\n"""\n// posenc: ROPE-PAIR-HALFW\n"""#\n// posenc: ROPE-PAIR-HALFX\n', [5]),
])
def test_c_line_continuations_and_swift_raw_strings(language, source, lines):
    """A C/C++ // comment ending in a backslash continues onto the next line (the preprocessor joins them
    first); a Swift raw string #"..."# (any number of #) ends only at its own delimiter."""
    assert [f.line for f in cite_check.check_text(source, language)] == lines


def test_a_long_continued_c_comment_is_read_in_linear_time():
    import time

    def best(k: int) -> float:
        src = "// a \\\n" * (20000 * k) + "posenc: ROPE-PAIR-HALFX\n"
        t = time.perf_counter()
        assert [f.line for f in cite_check.check_text(src, "c")] == [20000 * k + 1]
        return time.perf_counter() - t
    best(1)
    assert best(8) / best(1) < 20


@pytest.mark.parametrize("language, source", [
    ("markdown", "```\n<!-- cite-check: off -->\n```\n\nposenc: ROPE-PAIR-HALFX\n"),
    ("markdown", "~~~~md\n<!-- cite-check: off -->\n~~~\n~~~~\nposenc: ROPE-PAIR-HALFX\n"),
    ("markdown", "text\n\n    <!-- cite-check: off -->\n\nposenc: ROPE-PAIR-HALFX\n"),
    ("markdown", "    <!-- cite-check: off -->\n\nposenc: ROPE-PAIR-HALFX\n"),
    ("rst", "Example::\n\n    .. cite-check: off\n\nposenc: ROPE-PAIR-HALFX\n"),
    ("rst", ".. code-block:: rst\n\n   .. cite-check: off\n\nposenc: ROPE-PAIR-HALFX\n"),
    ("hash", "cat <<EOF\n# cite-check: off\nEOF\n# posenc: ROPE-PAIR-HALFX\n"),
    ("hash", "cat <<-'END' > f\n\t# cite-check: off\n\tEND\n# posenc: ROPE-PAIR-HALFX\n"),
])
def test_an_off_marker_in_a_code_block_or_heredoc_is_an_example(language, source):
    """A marker shown as an example (a Markdown code block, a reST literal block, a here-document's body)
    does not switch checking off."""
    assert [f.id for f in cite_check.check_text(source, language)] == ["ROPE-PAIR-HALFX"]


@pytest.mark.parametrize("language, source", [
    ("markdown", "<!-- cite-check: off -->\nposenc: ROPE-PAIR-HALFX\n"),
    ("markdown", "```\ncode\n```\n<!-- cite-check: off -->\nposenc: ROPE-PAIR-HALFX\n"),
    ("rst", "Example::\n\n    code\n\n.. cite-check: off\n\nposenc: ROPE-PAIR-HALFX\n"),
    ("hash", "cat <<EOF\nx\nEOF\n# cite-check: off\n# posenc: ROPE-PAIR-HALFX\n"),
])
def test_an_off_marker_outside_code_blocks_still_works(language, source):
    assert cite_check.check_text(source, language) == []

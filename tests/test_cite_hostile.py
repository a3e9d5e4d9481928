"""``posenc cite-check`` against the second hostile review: distinct unknown IDs resolved without reloading the
spec, files over the size limit and paths that cannot be read, citations hidden behind Unicode line separators
and controls, CR-only line numbers, citation lists wrapped onto the next line, look-alike IDs of any script,
control and bidi characters in the text report, ``#include <a//b>`` (docs/citing.md)."""

from __future__ import annotations

import difflib
import json
import os
import sys
from pathlib import Path

import pytest

from posenc.cli import main as cli
from posenc.spec import loader, versions
from posenc.tools import cite_check, cite_files


def _run(capsys, *args: str):
    rc = cli(["cite-check", *args])
    return rc, capsys.readouterr()


def _found(source: str, language: str = "text") -> list[tuple]:
    return [(f.line, f.column, f.severity, f.code, f.id) for f in cite_check.check_text(source, language)]


# ---- 1. each distinct unknown ID is resolved without loading the spec's YAML again --------------------------

def test_distinct_unknown_ids_load_the_spec_once(monkeypatch):
    calls = []
    real = versions.load_spec
    monkeypatch.setattr(versions, "load_spec", lambda *a, **k: calls.append(1) or real(*a, **k))
    src = "".join(f"# posenc: ROPE-X{i}@0.{i}.0\n" for i in range(300))
    got = cite_check.check_text(src, "python")
    assert len(calls) == 1, len(calls)  # was: once per distinct ID (~45 ms each)
    assert {(f.code, f.hint) for f in got if f.code == "unknown-id"} == {("unknown-id", "posenc spec list shows every ID")}
    assert sum(f.code == "unknown-version" for f in got) == 300 - len(versions.known_versions())


def test_a_family_registered_later_is_still_seen(monkeypatch):
    """The loaded spec is keyed by the files it reads: a family registered after a first resolution counts."""
    toy = Path(__file__).resolve().parent / "toy_family" / "toy.yaml"
    monkeypatch.setattr(loader, "_REGISTERED_FILES", [])
    assert [p[0] for p in versions.resolve("TOY-RAMP").problems] == ["unknown-id"]
    monkeypatch.setattr(loader, "_REGISTERED_FILES", [toy])
    r = versions.resolve("TOY-RAMP")
    assert r.entry is not None and r.entry["family"] == "toy" and not r.problems


def test_the_did_you_mean_hint_is_difflibs_own():
    """The length pre-filter of versions._near keeps exactly difflib's matches."""
    current = versions.snapshot(versions.SPEC_VERSION)
    tokens = ["ROPE-PAIR-HALFX", "ROPE-X1", "T5-X", "SCALE-LLAMA33", "DIV-ROPE-BF16-ANGLESS", "A-B",
              "ROPE-PAIR-INTERLEAVED-AND-MORE-WORDS", "MROPE-PARTIALL", "ALIBI-SLOPE"]
    for t in tokens:
        close = difflib.get_close_matches(t, list(current.entries), n=3, cutoff=0.7)
        want = f"did you mean {' or '.join(close)}?" if close else "posenc spec list shows every ID"
        assert versions._near(t, current) == want, t


# ---- 2. files over the limit, symbolic-link loops, missing paths: reported per path, the rest read -----------

@pytest.fixture
def good_and_bad(tmp_path):
    (tmp_path / "ok.py").write_text("# posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    return tmp_path / "ok.py"


def test_a_file_over_the_limit_is_refused_unread(tmp_path, capsys, good_and_bad):
    big = tmp_path / "big.md"
    with open(big, "wb") as fh:  # sparse: nothing written
        fh.truncate(6 * 2**30)
    for fmt in ("json", "text"):
        rc, cap = _run(capsys, "--format", fmt, str(big), str(good_and_bad))
        assert rc == 3, cap  # could not read: not 1 (citation errors), not a MemoryError
        assert cap.err == f"error: posenc cite-check: {big.as_posix()}: file too large: {6 * 2**30} bytes, over the " \
                          f"limit of {cite_files.MAX_BYTES} bytes (16 MiB)\n"
        assert "Traceback" not in cap.err
    doc = json.loads(_run(capsys, "--format", "json", str(big), str(good_and_bad))[1].out)
    assert [(Path(f["file"]).name, f["severity"], f["code"]) for f in doc["findings"]] == \
        [("big.md", "error", "unreadable"), ("ok.py", "error", "unknown-id")]
    assert doc["summary"]["files_scanned"] == 1 and doc["summary"]["files_skipped"]["unreadable"] == 1


def test_read_bytes_never_reads_more_than_the_limit(tmp_path):
    f = tmp_path / "a.md"
    f.write_bytes(b"x" * 11)
    assert cite_files._read_bytes(f, limit=11) == b"x" * 11
    with pytest.raises(cite_files.TooLarge):
        cite_files._read_bytes(f, limit=10)
    pagemap = Path("/proc/self/pagemap")  # a file that says it is empty and is not: read at most limit + 1 bytes
    if sys.platform.startswith("linux") and os.access(pagemap, os.R_OK):
        with pytest.raises(cite_files.TooLarge):
            cite_files._read_bytes(pagemap, limit=1024)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_symlink_loop_is_reported_and_the_others_read(tmp_path, capsys, good_and_bad, fmt):
    (tmp_path / "loop1.md").symlink_to(tmp_path / "loop2.md")
    (tmp_path / "loop2.md").symlink_to(tmp_path / "loop1.md")
    rc, cap = _run(capsys, "--format", fmt, str(tmp_path / "loop1.md"), str(good_and_bad))
    assert rc == 3
    assert cap.err == f"error: posenc cite-check: {(tmp_path / 'loop1.md').as_posix()}: cannot be read: a loop of " \
                      "symbolic links\n"
    if fmt == "json":
        doc = json.loads(cap.out)  # always printed
        assert [(Path(f["file"]).name, f["code"]) for f in doc["findings"]] == [("loop1.md", "unreadable"),
                                                                                ("ok.py", "unknown-id")]
    else:
        assert "loop1.md:1:1: error[unreadable]: cannot be read: a loop of symbolic links" in cap.out
        assert "ok.py:1:11: error[unknown-id] ROPE-PAIR-HALFX" in cap.out
    rc, cap = _run(capsys, "--format", fmt, str(tmp_path))  # in a folder: each loop reported, the file read
    assert rc == 3 and cap.err.count("\n") == 2 and "ROPE-PAIR-HALFX" in cap.out


def test_a_missing_path_with_json_still_prints_the_document(tmp_path, capsys, good_and_bad):
    rc, cap = _run(capsys, "--format", "json", str(tmp_path / "nope.md"), str(good_and_bad))
    assert rc == 2  # documented: a path that does not exist
    doc = json.loads(cap.out)
    assert [(Path(f["file"]).name, f["code"], f["message"]) for f in doc["findings"]] == \
        [("nope.md", "unreadable", "no such file or directory"), ("ok.py", "unknown-id", doc["findings"][1]["message"])]


def test_a_dangling_link_in_a_folder_is_counted_not_reported(tmp_path, capsys, good_and_bad):
    (tmp_path / "gone.md").symlink_to(tmp_path / "nothing-here.md")
    rc, cap = _run(capsys, "--format", "json", str(tmp_path))
    doc = json.loads(cap.out)
    assert rc == 1 and cap.err == "" and [f["code"] for f in doc["findings"]] == ["unknown-id"]
    assert doc["summary"]["files_skipped"]["unreadable"] == 1


def test_an_unreadable_file_in_a_folder_is_reported(tmp_path, capsys, good_and_bad, monkeypatch):
    """Was: skipped and counted, never reported (exit 0 with citation errors unread)."""
    import errno
    (tmp_path / "secret.md").write_text("posenc: ROPE-PAIR-HALFX\n", encoding="utf-8")
    real = cite_check._read_bytes

    def read(path, *a, **k):  # as for a file without read permission (this may run as root)
        if Path(path).name == "secret.md":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *a, **k)
    monkeypatch.setattr(cite_check, "_read_bytes", read)
    rc, cap = _run(capsys, str(tmp_path))
    assert rc == 3 and "secret.md:1:1: error[unreadable]: cannot be read: permission denied" in cap.out
    assert "ok.py:1:11: error[unknown-id]" in cap.out and cap.err.count("\n") == 1


def test_a_folder_that_cannot_be_listed_is_reported(tmp_path, capsys, good_and_bad, monkeypatch):
    import errno
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "a.md").write_text("posenc: ROPE-PAIR-HALFY\n", encoding="utf-8")
    real = os.scandir

    def scandir(path):  # as for a folder without read permission (this may run as root)
        if Path(path).name == "locked":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(cite_files.os, "scandir", scandir)
    rc, cap = _run(capsys, str(tmp_path))
    monkeypatch.undo()
    assert rc == 3 and "locked:1:1: error[unreadable]: cannot be read: permission denied" in cap.out
    assert "ok.py:1:11: error[unknown-id]" in cap.out and "ROPE-PAIR-HALFY" not in cap.out


# ---- 3. Unicode line and paragraph separators, NEL, form feed, vertical tab: blanks; CR: a line break --------

SEPARATORS = ["\u2028", "\u2029", "\x85", "\f", "\v", "\x1c", "\x1d", "\x1e"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("language, template", [
    ("python", "x = 1  # posenc:{sep}DIV-ROPE-BF16-ANGLES@0.3.0\n"),
    ("python", "# posenc: {sep}DIV-ROPE-BF16-ANGLES@0.3.0\n"),
    ("c", "int x; // posenc:{sep}DIV-ROPE-BF16-ANGLES@0.3.0\n"),
    ("markdown", "<!-- posenc:{sep} DIV-ROPE-BF16-ANGLES@0.3.0 -->\n"),
    ("hash", "# posenc: ROPE-PAIR-HALF,{sep}DIV-ROPE-BF16-ANGLES@0.3.0\n"),
])
def test_a_separator_or_control_does_not_hide_a_citation(sep, language, template):
    """Was: the citation was not read (an unknown ID: nothing), or read as a bare ID (superseded: a warning)."""
    got = _found(template.format(sep=sep), language)
    assert [(ln, sev, code, ident) for ln, _, sev, code, ident in got] == \
        [(1, "error", "superseded", "DIV-ROPE-BF16-ANGLES")], got


@pytest.mark.parametrize("sep", SEPARATORS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_separator_is_a_blank_not_a_line_break(sep):
    got = _found(f"a{sep}b\nposenc: ROPE-PAIR-HALFX{sep}and more\n")
    assert [(ln, col, code) for ln, col, _, code, _ in got] == [(2, 9, "unknown-id")]


@pytest.mark.parametrize("language, source, lines", [
    ("python", "# posenc: ROPE-FOO@0.9.0\r# posenc: ROPE-PAIR-HALF@0.9.0\rx = 1\r", [1, 2]),
    ("python", '"""Doc.\r\rposenc: ROPE-FOO@0.9.0\r"""\r# posenc: ROPE-PAIR-HALF@0.9.0\r', [3, 5]),
    ("c", "/* a\r * posenc: ROPE-FOO@0.9.0 */\r// posenc: ROPE-PAIR-HALF@0.9.0\r", [2, 3]),
    ("markdown", "# Title\rposenc: ROPE-FOO@0.9.0\r\r\nposenc: ROPE-PAIR-HALF@0.9.0\r", [2, 4]),
    ("hash", "x=1\r# posenc: ROPE-FOO@0.9.0\r# posenc: ROPE-PAIR-HALF@0.9.0", [2, 3]),
])
def test_cr_only_line_breaks_are_counted(language, source, lines):
    """A lone CR is a line break (CR LF one too): was, every finding of a CR-only file on line 1."""
    got = sorted({(ln, ident) for ln, _, _, _, ident in _found(source, language)})
    assert got == [(lines[0], "ROPE-FOO"), (lines[1], "ROPE-PAIR-HALF")]


def test_a_cr_only_marker_still_switches():
    src = "# cite-check: off\r# posenc: ROPE-PAIR-HALFX\r# cite-check: on\r# posenc: ROPE-PAIR-HALFY\r"
    assert [(ln, ident) for ln, _, _, _, ident in _found(src, "python")] == [(4, "ROPE-PAIR-HALFY")]


# ---- 4. a citation list wrapped onto the next line: a line ending in `posenc:` or in `,` `;` `/` goes on ----

@pytest.mark.parametrize("language, source, expected", [
    ("python", "# posenc:\n#   ROPE-FOO@0.9.0\nx = 1\n", [(2, 5, "error", "unknown-id", "ROPE-FOO")]),
    ("python", "# posenc: ROPE-PAIR-HALF@0.1.0,\n#         ROPE-BAR@0.9.0, DIV-ROPE-BF16-ANGLES@0.3.0\n",
     [(2, 11, "error", "unknown-id", "ROPE-BAR"), (2, 27, "error", "superseded", "DIV-ROPE-BF16-ANGLES")]),
    ("markdown", "This code follows posenc: ROPE-PAIR-HALF@0.1.0,\nROPE-BAZ@0.9.0 and DIV-ROPE-BF16-ANGLES@0.3.0.\n",
     [(2, 1, "error", "unknown-id", "ROPE-BAZ"), (2, 20, "warning", "superseded", "DIV-ROPE-BF16-ANGLES")]),
    ("python", '"""Module.\n\nposenc:\n    ROPE-QUX@0.9.0\n"""\n', [(4, 5, "error", "unknown-id", "ROPE-QUX")]),
    ("c", "/* posenc: ROPE-PAIR-HALF@0.1.0;\n * ROPE-BAR@0.9.0 /\n * DIV-ROPE-BF16-ANGLES@0.3.0 */\n",
     [(2, 4, "error", "unknown-id", "ROPE-BAR"), (3, 4, "error", "superseded", "DIV-ROPE-BF16-ANGLES")]),
    ("c", "// posenc: ROPE-PAIR-HALF@0.1.0,\n/// ROPE-BAR@0.9.0\n", [(2, 5, "error", "unknown-id", "ROPE-BAR")]),
    ("markdown", "<!-- posenc:\n     ROPE-BAR -->\n", [(2, 6, "error", "unknown-id", "ROPE-BAR")]),
    # a continuation's first word is judged like a word after a `,`: an attempt at an ID is malformed
    ("python", "# posenc: ROPE-PAIR-HALF,\n# rope-pair-half\n", [(2, 3, "error", "malformed-citation", "rope-pair-half")]),
])
def test_a_wrapped_citation_list_is_checked_strictly(language, source, expected):
    got = [g for g in _found(source, language) if g[3] != "unknown-version"]
    assert got == expected


@pytest.mark.parametrize("language, source, expected", [
    # no `,` at the end: the next line is not part of the list (its IDs are bare)
    ("python", "# posenc: ROPE-PAIR-HALF@0.1.0\n#   DIV-ROPE-BF16-ANGLES@0.3.0\n", [(2, "warning")]),
    # an empty line, or a line of code, ends it
    ("python", "# posenc: ROPE-PAIR-HALF,\n#\n# DIV-ROPE-BF16-ANGLES\n", [(3, "warning")]),
    ("python", "# posenc: ROPE-PAIR-HALF,\nx = 1  # DIV-ROPE-BF16-ANGLES\n", [(2, "error")]),
    ("python", "# posenc: ROPE-PAIR-HALF,\nx = 1\n# DIV-ROPE-BF16-ANGLES\n", [(3, "warning")]),
    # `posenc:` ending a line of prose, then prose: nothing
    ("markdown", "The leader is posenc:\nthe kit reads what follows.\n", []),
    # a list closed on its line does not go on
    ("c", "/* posenc: ROPE-PAIR-HALF, */\n// DIV-ROPE-BF16-ANGLES\n", [(2, "warning")]),
    # a continuation in a region switched off is not read
    ("python", "# posenc: ROPE-PAIR-HALF,\n# cite-check: off\n# ROPE-PAIR-HALFX\n", []),
])
def test_what_does_not_continue_a_list(language, source, expected):
    assert [(ln, sev) for ln, _, sev, _, _ in _found(source, language)] == expected


# ---- 5. look-alike letters and digits of any script in a bare ID: an error naming them -----------------------

LOOKALIKES = {
    "armenian O": ("R\u0555PE-PAIR-HALF", "U+0555"), "cherokee E": ("\u13a1OPE-PAIR-HALF", "U+13A1"),
    "coptic O": ("R\u2c9ePE-PAIR-HALF", "U+2C9E"), "math bold R": ("\U0001d411OPE-PAIR-HALF", "U+1D411"),
    "arabic-indic 1": ("DIV-ROPE-BF\u06616-ANGLES", "U+0661"), "ligature ff": ("ROPE-PAIR-HAL\ufb00", "U+FB00"),
    "modifier f": ("ROPE-PAIR-HAL\u1da0", "U+1DA0"), "small capital F": ("ROPE-PAIR-HAL\ua730", "U+A730"),
    "math digit 1": ("DIV-ROPE-BF\U0001d7cf6-ANGLES", "U+1D7CF"), "superscript 1": ("DIV-ROPE-BF\u00b96-ANGLES", "U+00B9"),
    "roman fifty": ("ROPE-PAIR-HA\u216cF", "U+216C"), "script R": ("\u211bOPE-PAIR-HALF", "U+211B"),
    "lisu R": ("\ua4e3OPE-PAIR-HALF", "U+A4E3"), "combining acute": ("RO\u0301PE-PAIR-HALF", "U+0301"),
    "cyrillic I in DIV": ("D\u0406V-ROPE-BF16-ANGLES", "U+0406"), "unknown ID": ("R\u0555PE-NO-SUCH-RULE", "U+0555"),
}


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_a_look_alike_bare_id_is_an_error_naming_the_character(name):
    token, code_point = LOOKALIKES[name]
    findings = cite_check.check_text(f"# bare {token} here\n", "python")
    hidden = [f for f in findings if f.code == "hidden-character"]
    assert [(f.line, f.column, f.severity) for f in hidden] == [(1, 8, "error")], findings
    assert code_point in hidden[0].message


@pytest.mark.parametrize("text", ["T5-\u6a21\u578b and T5-\u041c\u043e\u0434\u0435\u043b\u044c", "caf\u00e9-bar, na\u00efve-ROPE",
                                  "\u041a\u0422\u041e-\u0422\u041e", "ROPE-\u7f16\u7801", "x\u00b2-y\u00b2",
                                  "\u00c9T\u00c9-2024", "R\u00e9sum\u00e9-PAIR"])
def test_prose_in_other_scripts_is_not_an_id(text):
    assert cite_check.check_text(text + "\n", "text") == []


# ---- 6. control and bidi characters are escaped in every line of the text report -----------------------------

@pytest.mark.parametrize("source", ["# posenc: \x1b[31mDIV-ROPE-BF16-ANGLES@0.3.0\n",
                                    "# posenc: ROPE-PAIR\u202eFLAH-\n# posenc: ROPE-PAIR-HALF@\u202e0.1.0\n",
                                    "# posenc: ROPE-PAIR-HALF@\x1b]0;PWNED\x07\x1b[2J\n",
                                    "# bare R\u0555PE-PAIR\u202e-HALF\n"])
def test_the_text_report_escapes_controls_and_bidi(tmp_path, capsys, source):
    (tmp_path / "a.py").write_text(source, encoding="utf-8")
    rc, cap = _run(capsys, str(tmp_path / "a.py"))
    assert rc == 1
    for line in cap.out.splitlines():
        assert line.isprintable(), line
    assert "\x1b" not in cap.out and "\u202e" not in cap.out
    assert "\\x1b" in cap.out or "\\u202e" in cap.out


def test_the_id_of_a_finding_is_escaped_in_its_header():
    f = cite_check.Finding("a.py", 1, 11, "error", "malformed-citation", "\x1b[31mX\u202e", "0\u20281", "m\x07", "h\x1b", "u\x85")
    assert f.text() == "a.py:1:11: error[malformed-citation] \\x1b[31mX\\u202e@0\\u20281: m\\x07\n    hint: h\\x1b\n" \
                       "    see: u\\x85"


def test_a_spec_error_message_is_escaped(capsys, tmp_path, monkeypatch):
    from posenc.spec.errors import SpecError

    def broken(*a, **k):
        raise SpecError("spec/versions/0.3.0/\x1b[31mrope.yaml: bad")
    monkeypatch.setattr(versions, "snapshot", broken)
    cite_check._spec.cache_clear()
    try:
        (tmp_path / "a.py").write_text("# posenc: ROPE-PAIR-HALF\n", encoding="utf-8")
        rc, cap = _run(capsys, str(tmp_path))
    finally:
        cite_check._spec.cache_clear()
    assert rc == 2 and "\x1b" not in cap.err and "\\x1b[31mrope.yaml" in cap.err


# ---- 7. `#include <a//b>` is a header name, not a comment ----------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    ("#include <a//posenc: ROPE-FOO@0.9.0>\nint x;\n", []),
    ("  #  include <x/*posenc: ROPE-FOO@0.9.0*/y> // posenc: ROPE-BAR@0.9.0\n", [(1, 56, "ROPE-BAR")]),
    ("#import <a//posenc: ROPE-FOO@0.9.0>\n#include_next <c//posenc: ROPE-BAZ@0.9.0> /* posenc: ROPE-BAR */\n",
     [(2, 54, "ROPE-BAR")]),
    ("if (a < b) x = 1; // posenc: ROPE-BAR@0.9.0 > 2\n", [(1, 30, "ROPE-BAR")]),  # not a directive: a comment
])
def test_an_include_header_name_is_not_a_comment(source, expected):
    assert [(ln, col, ident) for ln, col, _, code, ident in _found(source, "c") if code == "unknown-id"] == expected

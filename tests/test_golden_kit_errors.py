"""A broken golden folder is the kit's error, never the adapter's (issue 28, finding 1).

Whatever is wrong with a manifest or a golden file -- a field of the wrong type, an entry that is not an
object, a ``file`` outside the folder, a size far beyond any golden's, an exception nobody foresaw -- loading
it is a ``GoldenError`` naming the file, the field and the case; the suite books it as a *kit error* (never
under a clause, the report's outcome ``error``, the run fails) and goes on with the other tests; ``posenc golden
check`` prints one line per problem, never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from posenc import cli, registry
from posenc.harness import golden
from posenc.harness import golden_manifest as gm
from posenc.registry import cases_by_id as by_id
from posenc.spec.errors import GoldenError

CASE = "rope-tiny-half"


@pytest.fixture
def folder(tmp_path) -> Path:
    d = tmp_path / "golden"
    shutil.copytree(golden.GOLDEN_DIR, d)
    return d


def _edit(d: Path, fn, case_id: str = CASE) -> None:
    m = json.loads((d / "manifest.json").read_text())
    fn(next(e for e in m["cases"] if isinstance(e, dict) and e.get("id") == case_id))
    (d / "manifest.json").write_text(json.dumps(m))


def _only_problem(d: Path, case_id: str = CASE) -> str:
    """The one problem ``golden.check`` finds (the other cases still verify), the case named in it."""
    problems = golden.check(d)
    assert len(problems) == 1 and "\n" not in problems[0], problems
    assert case_id in problems[0], problems
    return problems[0]


# (edit of the entry, the field the message names): each of these raised AttributeError or TypeError before
WRONG_TYPES = [
    (lambda e: e.update(outputs={"q": [1, 1, 1, 8], "k": e["outputs"]["k"]}), "outputs.q"),
    (lambda e: e.update(outputs=[["q", 1]]), "outputs"),
    (lambda e: e.update(params="RopeParams"), "params"),
    (lambda e: e["params"].update(values=[8, 10000.0]), "params.values"),
    (lambda e: e["inputs"]["q"].update(shape="1x1x1x8"), "inputs.q.shape"),
    (lambda e: e["inputs"].update(q="e718add5"), "inputs.q"),
    (lambda e: e.update(clauses="ROPE-PAIR-HALF"), "clauses"),
    (lambda e: e.update(file=5), "file"),
    (lambda e: e.update(size="1024"), "size"),
    (lambda e: e.update(sha256=None), "sha256"),
    (lambda e: e.pop("size"), "size"),
]


@pytest.mark.parametrize("edit, field", WRONG_TYPES)
def test_a_manifest_field_of_the_wrong_type_is_named(folder, edit, field):
    _edit(folder, edit)
    with pytest.raises(GoldenError) as ei:
        golden.load(by_id()[CASE], folder)
    msg = str(ei.value)
    assert f"manifest.json: manifest entry {CASE!r} (cases[0])" in msg and f"field {field!r}" in msg, msg
    assert _only_problem(folder) == msg


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.npz", "sub/../../outside.npz", "C:\\golden.npz", ""])
def test_a_file_outside_the_folder_is_refused(folder, name):
    shutil.copy(folder / f"{CASE}.npz", folder.parent / "outside.npz")  # the same bytes: only the path is wrong
    _edit(folder, lambda e: e.update(file=name))
    with pytest.raises(GoldenError, match=r"field 'file': .*relative path inside the golden folder"):
        golden.load(by_id()[CASE], folder)
    _only_problem(folder)


def test_a_symlink_out_of_the_folder_is_refused(folder):
    outside = folder.parent / "outside.npz"
    shutil.copy(folder / f"{CASE}.npz", outside)  # the same bytes: sha256 and size agree
    os.symlink(outside, folder / "link.npz")
    _edit(folder, lambda e: e.update(file="link.npz"))
    with pytest.raises(GoldenError, match=r"link.npz: resolves to .*outside.npz, outside the golden folder"):
        golden.load(by_id()[CASE], folder)
    os.symlink(folder / f"{CASE}.npz", folder / "inside.npz")  # a symlink within the folder is fine
    _edit(folder, lambda e: e.update(file="inside.npz"))
    golden.load(by_id()[CASE], folder)


@pytest.fixture
def no_whole_reads(monkeypatch):
    """A file the size checks must refuse is never read whole (the old code's ``Path.read_bytes``)."""
    def refuse(self):
        raise AssertionError(f"read {self} whole: its size was not checked against the manifest first")
    monkeypatch.setattr(Path, "read_bytes", refuse)


def test_a_huge_file_is_refused_before_it_is_read(folder, no_whole_reads):
    huge = folder / "huge.npz"
    with open(huge, "wb") as f:
        f.truncate(20 << 30)  # 20 GB, sparse: what read whole gave a MemoryError booked under ALIBI-SLOPES
    _edit(folder, lambda e: e.update(file="huge.npz"), "alibi-slopes-8")  # declared size left: the file's differs
    with pytest.raises(GoldenError, match=r"huge.npz: 21474836480 bytes, the manifest says \d+ \(file tampered"):
        golden.load(by_id()["alibi-slopes-8"], folder)
    _edit(folder, lambda e: e.update(size=20 << 30), "alibi-slopes-8")  # the manifest lies too: the limit
    with pytest.raises(GoldenError, match=r"huge.npz: the manifest declares 21474836480 bytes, over the golden file "
                                          r"limit of 67108864 bytes"):
        golden.load(by_id()["alibi-slopes-8"], folder)


def test_a_file_that_unpacks_past_the_limit_is_refused(folder, monkeypatch):
    monkeypatch.setattr(gm, "ARRAYS_LIMIT", 1000)  # rope-tiny-half's arrays: about 1.3 kB
    with pytest.raises(GoldenError, match=r"rope-tiny-half.npz: its arrays take \d+ bytes uncompressed, over the "
                                          r"limit of 1000"):
        golden.load(by_id()[CASE], folder)


def test_an_oversized_manifest_is_refused_before_it_is_read(folder, monkeypatch, no_whole_reads):
    monkeypatch.setattr(gm, "MANIFEST_LIMIT", 1000)
    with pytest.raises(GoldenError, match=r"manifest.json: \d+ bytes, over the manifest limit of 1000 bytes"):
        golden.read_manifest(folder)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(seed="20261129"), "field 'seed': Input should be a valid integer"),
    (lambda m: m.update(cases={"rope-tiny-half": {}}), "field 'cases': Input should be a valid list"),
    (lambda m: m.pop("cases"), "field 'cases' missing"),
    (lambda m: m.update(format=[1]), "field 'format'"),
])
def test_a_malformed_manifest_is_named(folder, edit, message):
    m = json.loads((folder / "manifest.json").read_text())
    edit(m)
    (folder / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match=message):
        golden.read_manifest(folder)
    assert golden.check(folder) == [str(pytest.raises(GoldenError, golden.read_manifest, folder).value)]


def test_golden_check_names_bad_entries_in_one_line_each(folder, capsys):
    """A non-dict entry, an entry with no ID, an ID listed twice, a field of the wrong type: one line each,
    exit status 1, no traceback; the other cases are still checked."""
    m = json.loads((folder / "manifest.json").read_text())
    first = m["cases"][0]
    m["cases"][1:1] = [5, {"op": "rope.apply"}, dict(first)]
    m["cases"][5]["outputs"] = "none"
    (folder / "manifest.json").write_text(json.dumps(m))
    assert cli.main(["golden", "check", "--dir", str(folder)]) == 1
    out = capsys.readouterr()
    lines = out.out.splitlines()
    bad = m["cases"][5]["id"]
    assert lines[:-1] == [f"{folder / 'manifest.json'}: manifest entry cases[1] not an object (a int)",
                          f"{folder / 'manifest.json'}: manifest entry cases[2] has no string field 'id'",
                          f"{folder / 'manifest.json'}: manifest entry cases[3]: case {CASE!r} is listed twice",
                          f"{folder / 'manifest.json'}: manifest entry {bad!r} (cases[5]) field 'outputs': Input should "
                          "be a valid dictionary (got 'none')"], lines
    assert lines[-1].startswith("golden check: 4 problem(s)") and "Traceback" not in out.out + out.err


def test_any_failure_while_loading_is_a_golden_error_naming_the_case(folder, monkeypatch):
    """The whole kind: an exception nobody foresaw while loading (a MemoryError, a kit bug) is a GoldenError."""
    def oom(*a, **k):
        raise MemoryError("cannot allocate 20 GB")
    monkeypatch.setattr(golden, "_verify_against_reference", oom)
    with pytest.raises(GoldenError, match=r"manifest.json: the golden of case 'rope-tiny-half' cannot be loaded: "
                                          r"MemoryError: cannot allocate 20 GB"):
        golden.load(by_id()[CASE], folder)


def test_the_suite_books_a_broken_golden_as_a_kit_error_and_goes_on(run_suite, monkeypatch, folder, tmp_path):
    """A conforming adapter (torch) on a folder where rope-tiny-half's manifest entry has a field of the wrong
    type (an AttributeError booked under ROPE-PAIR-HALF before) and alibi-slopes-8's load fails with a
    MemoryError (booked under ALIBI-SLOPES before): two kit errors naming the file, the field and the case,
    no failure of either clause, the other tests run and pass, and the run fails."""
    from posenc.harness import failure
    _edit(folder, lambda e: e.update(outputs={"q": [1, 1, 1, 8], "k": e["outputs"]["k"]}))
    verify = golden._verify_against_reference

    def oom_for_slopes(case, path, g):
        if case.id == "alibi-slopes-8":
            raise MemoryError("cannot allocate 20 GB")
        return verify(case, path, g)
    monkeypatch.setattr(golden, "_verify_against_reference", oom_for_slopes)
    monkeypatch.setattr(registry, "kit_golden_dir", lambda: folder)
    failure._manifest.cache_clear()
    failure.load_golden.cache_clear()
    rep = tmp_path / "r.json"
    try:
        r = run_suite("torch", "--dtype", "float32", "--report-json", str(rep), "-k",
                      "test_golden and (rope-tiny-half or alibi-slopes-8 or rope-llama3-8b or alibi-slopes-12)")
    finally:
        failure._manifest.cache_clear()
        failure.load_golden.cache_clear()
    out = r.stdout.str()
    assert r.ret == 1, out[-3000:]
    assert "2 kit error(s)" in out, out[-3000:]
    assert f"manifest entry 'rope-tiny-half' (cases[0]) field 'outputs.q'" in out
    assert "the golden of case 'alibi-slopes-8' cannot be loaded: MemoryError" in out
    assert "AttributeError" not in out
    recs = {x["case"]: x for x in json.loads(rep.read_text())["results"]}
    for case_id, why in (("rope-tiny-half", "field 'outputs.q'"), ("alibi-slopes-8", "MemoryError")):
        assert recs[case_id]["outcome"] == "error" and recs[case_id]["violated"] == [], recs[case_id]
        assert why in recs[case_id]["reason"] and "manifest.json" in recs[case_id]["reason"], recs[case_id]
    assert recs["rope-llama3-8b"]["outcome"] == "passed" and recs["alibi-slopes-12"]["outcome"] == "passed"
    for clause in ("ROPE-PAIR-HALF", "ALIBI-SLOPES"):  # the per-clause summary: no failure booked
        row = next(ln.split() for ln in out.splitlines() if ln.startswith(clause + " "))
        assert row[2] == "0", (clause, row)


def test_any_failure_reading_the_expectation_file_is_named_in_one_line(run_suite, monkeypatch, tmp_path):
    """The expectation file's errors stop the run before any test (no line of it excuses a failure, so none
    is charged to the adapter): an ExpectationError names file and field; any other exception while the kit
    reads it is named the same way, as the kit's, never an INTERNALERROR traceback."""
    from posenc.conformance import expectations as exp
    p = tmp_path / "exp.yaml"
    p.write_text("format: 2\nexpected_failures: []\n")

    def broken(raw, path):
        raise TypeError("'NoneType' object is not subscriptable")
    monkeypatch.setattr(exp, "parse", broken)
    r = run_suite("torch", "--expectations", str(p), "-k", "test_golden and rope-tiny-half")
    err = r.stderr.str()
    assert r.ret == 4, err
    assert (f"posenc kit error reading expectation file {p}: TypeError: 'NoneType' object is not subscriptable"
            in err), err
    assert "INTERNALERROR" not in err + r.stdout.str() and "Traceback" not in err + r.stdout.str()


@pytest.mark.parametrize("edit,says", [
    (lambda e: e["inputs"]["q"].update(dtype="object"), "input 'q' is float64[1, 1, 1, 8], the manifest says object"),
    (lambda e: e["inputs"]["q"].update(shape=[1000000, 1000000, 1000000]), "the manifest says float64[1000000, 1000000"),
], ids=["input-dtype", "input-shape"])
def test_the_manifests_input_shapes_and_dtypes_are_the_arrays(folder, edit, says):
    """The hostile review: an input's declared dtype or shape was never compared with the array."""
    _edit(folder, edit)
    assert says in _only_problem(folder)


def test_a_generated_inputs_description_and_the_store_limit_are_the_kits(folder):
    m = json.loads((folder / "manifest.json").read_text())
    case_id, name = next((e["id"], n) for e in m["cases"] for n, i in e["inputs"].items() if i.get("generated"))
    _edit(folder, lambda e: e["inputs"][name]["generated"].update(shape=[1, 2, 3]), case_id)
    assert "the manifest's 'generated'" in _only_problem(folder, case_id)
    shutil.rmtree(folder)
    shutil.copytree(golden.GOLDEN_DIR, folder)
    m = json.loads((folder / "manifest.json").read_text())
    m["store_limit"] = 0
    (folder / "manifest.json").write_text(json.dumps(m))
    problems = golden.check(folder)
    assert len(problems) == 1 and "store_limit 0 is not the kit's" in problems[0], problems


@pytest.fixture
def never_opened(monkeypatch):
    """Fail a test that opens any path in ``paths`` (a FIFO opened blocking would hang the run)."""
    paths: list[Path] = []
    real = os.open

    def guarded(path, *a, **k):
        if any(os.path.abspath(path) == os.path.abspath(p) for p in paths):
            raise AssertionError(f"opened {path}")
        return real(path, *a, **k)
    monkeypatch.setattr(os, "open", guarded)
    return paths


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_golden_file_that_is_a_fifo_or_a_folder_is_named_never_opened(folder, never_opened, kind):
    """The hostile review: both were reported as "golden file missing"."""
    path = folder / f"{CASE}.npz"
    path.unlink()
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    never_opened.append(path)
    what = "a FIFO" if kind == "fifo" else "a folder"
    with pytest.raises(GoldenError, match=rf"{CASE}.npz: not a regular file: {what} \(the golden file is never read"):
        golden.load(by_id()[CASE], folder)
    assert f"not a regular file: {what}" in _only_problem(folder)


def test_a_missing_golden_file_and_a_dangling_link_are_missing(folder):
    (folder / f"{CASE}.npz").unlink()
    with pytest.raises(GoldenError, match=rf"{CASE}.npz: golden file missing$"):
        golden.load(by_id()[CASE], folder)
    os.symlink(folder / "gone.npz", folder / f"{CASE}.npz")
    with pytest.raises(GoldenError, match=rf"{CASE}.npz: golden file missing \(a symlink \(to .*gone.npz\), dangling\)"):
        golden.load(by_id()[CASE], folder)


@pytest.mark.parametrize("target", ["/etc/passwd", "copy"])
def test_a_manifest_that_is_a_symlink_is_refused(folder, tmp_path, never_opened, target):
    """Refused, naming the file -- even a link to a valid golden manifest (never followed out of the folder)."""
    manifest = folder / "manifest.json"
    if target == "copy":
        target = str(tmp_path / "elsewhere.json")
        shutil.copy(manifest, target)
    manifest.unlink()
    os.symlink(target, manifest)
    never_opened.append(target)
    with pytest.raises(GoldenError, match=rf"manifest.json: the manifest is a symlink \(to {target}\): refused, never "
                                          r"followed"):
        golden.read_manifest(folder)
    assert golden.check(folder) == [str(pytest.raises(GoldenError, golden.read_manifest, folder).value)]
    with pytest.raises(GoldenError, match=r"manifest.json: the manifest is a symlink"):
        golden.load(by_id()[CASE], folder)


def test_a_manifest_that_is_a_fifo_is_named_never_opened(folder, never_opened):
    manifest = folder / "manifest.json"
    manifest.unlink()
    os.mkfifo(manifest)
    never_opened.append(manifest)
    with pytest.raises(GoldenError, match=r"manifest.json: not a regular file: a FIFO"):
        golden.read_manifest(folder)


def test_a_duplicate_cases_key_is_refused_naming_key_and_line(folder):
    """The hostile review: a second ``"cases": []`` gave 288 "no golden; regenerate" lines, the duplicate unsaid."""
    text = (folder / "manifest.json").read_text().rstrip()
    assert text.endswith("}")
    lines = text.count("\n") + 1
    (folder / "manifest.json").write_text(text[:-1].rstrip() + ',\n "cases": []\n}\n')
    problems = golden.check(folder)
    assert len(problems) == 1, problems[:3]
    assert re.search(rf"manifest.json: line {lines} column 2: duplicate key 'cases' \(first at line \d+ column 2\)",
                     problems[0]), problems


def test_a_duplicate_key_inside_an_entry_is_refused(folder):
    """The last of two ``sha256`` keys won silently: the manifest said one thing to one reader, another to another."""
    text = (folder / "manifest.json").read_text()
    m = json.loads(text)
    good = m["cases"][0]["sha256"]
    (folder / "manifest.json").write_text(text.replace(f'"sha256": "{good}"', f'"sha256": "{"0" * 64}",\n'
                                                      f'  "sha256": "{good}"', 1))
    line = text[:text.index(good)].count("\n") + 2
    with pytest.raises(GoldenError, match=rf"manifest.json: line {line} column 3: duplicate key 'sha256' \(first at "
                                          rf"line {line - 1} column \d+\)"):
        golden.read_manifest(folder)


@pytest.mark.parametrize("text, says", [
    ('{"a": 1, "a": 2}', "line 1 column 10: duplicate key 'a' (first at line 1 column 2)"),
    ('{"a": {"b": [1, {"c": 1,\n "c": 2}]}}', "line 2 column 2: duplicate key 'c' (first at line 1 column 18)"),
    ('{"\\u0061": 1, "a": 2}', "line 1 column 15: duplicate key 'a' (first at line 1 column 2)"),
])
def test_the_strict_json_reader_names_the_duplicate(text, says):
    with pytest.raises(gm.DuplicateKey) as ei:
        gm.loads_strict(text)
    assert str(ei.value).startswith(says), str(ei.value)
    assert gm.loads_strict('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}') == {"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}


@pytest.mark.parametrize("limit", [1000, 50000])
@pytest.mark.parametrize("depth", [65, 3000, 200000])
def test_a_manifest_nested_too_deep_is_named_whatever_the_recursion_limit(folder, limit, depth):
    """A tampered manifest nested deeper than any manifest is (64 levels, ``posenc.spec.files.JSON_DEPTH``) is a
    GoldenError naming the file -- never a RecursionError out of the JSON reader, and never read at one recursion
    limit (Hypothesis raises it while it runs) and refused at another; 64 levels still read."""
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        (folder / "manifest.json").write_text('{"format": ' + "[" * depth + "]" * depth + "}")
        with pytest.raises(GoldenError, match=r"manifest.json: not a golden manifest: its JSON is nested deeper "
                                              r"than 64 levels"):
            golden.read_manifest(folder)
        assert golden.check(folder) == [str(pytest.raises(GoldenError, golden.read_manifest, folder).value)]
        assert gm.loads_strict('{"a": ' + "[" * 63 + "]" * 63 + "}") == {"a": json.loads("[" * 63 + "]" * 63)}
    finally:
        sys.setrecursionlimit(old)


def test_a_duplicate_key_in_a_long_manifest_is_located():
    """Lines and columns far into a long manifest (the line search was quadratic in the text -- 80,000 keys took
    half a minute -- and is a binary search over the newlines now; its speed is not asserted here)."""
    body = ",\n".join(f'  "k{i}": {i}' for i in range(100000))
    with pytest.raises(gm.DuplicateKey, match=r"line 100002 column 3: duplicate key 'k5' \(first at line 7 column 3\)"):
        gm.loads_strict("{\n" + body + ',\n  "k5": 1\n}')

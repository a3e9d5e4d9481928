"""Expectation files of format 2 (keyed by case, check and dtypes), their conversion from the old
format, drafting from a report, and the ``--report-json`` schema (docs/report-json.md)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import posenc.conformance
from posenc import cli
from posenc.tools import matrix
from posenc.conformance import expectation_drafts as drafts
from posenc.conformance import expectations as exp
from posenc.spec import load_spec

BROKEN = str(Path(__file__).resolve().parent / "broken_adapters.py")
SHIPPED = Path(posenc.conformance.__file__).resolve().parent.parent / "adapters" / "expectations"
SCHEMA = Path(posenc.conformance.__file__).resolve().parent / "report_schema.json"


def _torch() -> str:
    import torch
    return torch.__version__


def line(case="rope-tiny-half", check="golden", dtypes=("float32",), clause="ROPE-PAIR-HALF",
         divergence="DIV-ROPE-PAIRING-SWAPPED", evidence="deliberately broken adapter", version=None) -> dict:
    return {"case": case, "check": check, "dtypes": list(dtypes), "clause": clause, "divergence": divergence,
            "evidence": evidence, "library": "torch", "library_version": version or _torch()}


def write(tmp_path, *lines: dict, name="exp.yaml") -> str:
    p = tmp_path / name
    p.write_text(exp.dump(list(lines), "# a test file"))
    return str(p)


# ---- the format and its API -------------------------------------------------------------------


def test_lookup_is_by_case_check_and_dtype(tmp_path):
    e = exp.load(Path(write(tmp_path, line(dtypes=["bfloat16", "float16"]))), load_spec(), {"torch": _torch()})
    assert len(e) == 1 and e.path.name == "exp.yaml"
    assert e.lookup("rope-tiny-half", "golden", "float16").divergence == "DIV-ROPE-PAIRING-SWAPPED"
    assert e.lookup("rope-tiny-half", "golden", "float32") is None
    assert e.lookup("rope-tiny-half", "relative", "float16") is None
    assert exp.Expectations().lookup("rope-tiny-half", "golden", "float16") is None


def test_excuse_generated_needs_a_named_diagnosed_divergence():
    named = exp.Expectation(**line(dtypes=["bfloat16"]))
    unnamed = exp.Expectation(**line(case="b", dtypes=["bfloat16"], divergence="DIV-UNNAMED-X"))
    e = exp.Expectations([unnamed, named])
    found = ("DIV-ROPE-PAIRING-SWAPPED",)
    assert e.excuse_generated({"ROPE-PAIR-HALF", "ROPE-ANGLE"}, "bfloat16", found) is named
    assert e.excuse_generated({"ROPE-PAIR-HALF"}, "float32", found) is None  # another dtype
    assert e.excuse_generated({"ROPE-ANGLE"}, "bfloat16", found) is None  # another clause
    assert e.excuse_generated({"ROPE-PAIR-HALF"}, "bfloat16", ("DIV-ROPE-BF16-ANGLE-PRODUCT",)) is None
    assert e.excuse_generated({"ROPE-PAIR-HALF"}, "bfloat16", ("DIV-UNNAMED-X",)) is None  # never unnamed


def test_excuse_generated_keeps_a_golden_lines_forms():
    """A golden line recorded for one call form (``forms: [packed]``) excuses a generated example only when that
    example ran through the form: a primary-path failure with the same divergence stays a failure."""
    from types import SimpleNamespace
    packed = exp.Expectation(**line(dtypes=["bfloat16"]), forms=["packed"])
    e = exp.Expectations([packed])
    found = ("DIV-ROPE-PAIRING-SWAPPED",)
    clauses = {"ROPE-PAIR-HALF"}
    primary = SimpleNamespace(op="rope.apply", params=None)
    through = SimpleNamespace(op="rope.apply_packed", params=None)
    other = SimpleNamespace(op="rope.apply_offset", params=None)
    assert e.excuse_generated(clauses, "bfloat16", found) is None  # no case: the primary's
    assert e.excuse_generated(clauses, "bfloat16", found, case=primary) is None
    assert e.excuse_generated(clauses, "bfloat16", found, case=other) is None
    assert e.excuse_generated(clauses, "bfloat16", found, case=through) is packed
    both = exp.Expectation(**line(dtypes=["bfloat16"]), forms=["primary", "packed"])
    assert exp.Expectations([both]).excuse_generated(clauses, "bfloat16", found, case=primary) is both


def test_overlapping_lines_name_both_indices(tmp_path):
    p = write(tmp_path, line(dtypes=["float32", "bfloat16"]), line(case="other"),
              line(dtypes=["bfloat16"], divergence="DIV-ROPE-BF16-ANGLE-PRODUCT"))
    with pytest.raises(exp.ExpectationError, match=r"expected_failures\.0 and expected_failures\.2: .*bfloat16"):
        exp.load(Path(p), load_spec(), {"torch": _torch()})
    p = write(tmp_path, line(dtypes=["float32"]), line(dtypes=["bfloat16"], divergence="DIV-ROPE-BF16-ANGLE-PRODUCT"))
    assert len(exp.load(Path(p), load_spec(), {"torch": _torch()})) == 2  # disjoint dtypes: fine


def test_old_format_is_rejected_with_the_convert_command(tmp_path):
    p = tmp_path / "old.yaml"
    p.write_text('expected_failures:\n  - test_id: "test_golden[float32-rope-tiny-half@ROPE-PAIR-HALF]"\n')
    with pytest.raises(exp.ExpectationError) as e:
        exp.load(p, load_spec(), {})
    assert str(p) in str(e.value) and f"posenc expectations convert {p}" in str(e.value)
    assert "test_id" in str(e.value)


def test_key_of_items_with_and_without_a_case():
    case = SimpleNamespace(id="rope-tiny-half")
    item = SimpleNamespace(originalname="test_golden", name="test_golden[float32-rope-tiny-half@X]",
                           callspec=SimpleNamespace(params={"dtype": "float32", "case": case}, id="float32-rope-tiny-half@X"))
    assert exp.key_of(item) == ("rope-tiny-half", "golden", "float32")
    item = SimpleNamespace(originalname="test_prop", name="test_prop[bfloat16-gen-rope@ROPE-ANGLE]",
                           callspec=SimpleNamespace(params={"dtype": "bfloat16", "seed": 3}, id="bfloat16-gen-rope@ROPE-ANGLE"))
    assert exp.key_of(item) == ("gen-rope", "prop", "bfloat16")
    item = SimpleNamespace(originalname="test_x", name="test_x", callspec=None)
    assert exp.key_of(item) == (None, "x", None)


# ---- convert --------------------------------------------------------------------------------------

OLD = """# Known divergences of a test adapter.
# Second comment line.

expected_failures:
  # an inner comment, dropped
  - test_id: "test_golden[bfloat16-rope-tiny-half@ROPE-PAIR-HALF+ROPE-ANGLE]"
    clause: ROPE-PRECISION
    divergence: DIV-ROPE-BF16-ANGLE-PRODUCT
    evidence: "src.py:1"
    library: torch
    library_version: "2.0"
  - test_id: "test_relative[float16-rope-tiny-half@ROPE-ANGLE]"
    clause: ROPE-ANGLE
    divergence: DIV-UNNAMED-X
    evidence: "src.py:2"
    library: torch
    library_version: "2.0"
  - test_id: "test_golden[float16-rope-tiny-half@ROPE-PAIR-HALF+ROPE-ANGLE]"
    clause: ROPE-PRECISION
    divergence: DIV-ROPE-BF16-ANGLE-PRODUCT
    evidence: "src.py:1"
    library: torch
    library_version: "2.0"
  - test_id: "test_golden[float32-rope-tiny-half@ROPE-PAIR-HALF+ROPE-ANGLE]"
    clause: ROPE-PRECISION
    divergence: DIV-ROPE-BF16-ANGLE-PRODUCT
    evidence: "another line: not merged"
    library: torch
    library_version: "2.0"
"""


def test_convert_merges_dtypes_and_keeps_the_leading_comments(tmp_path):
    text, n_old, n_new = drafts.convert_text(OLD)
    assert (n_old, n_new) == (4, 3)
    assert text.startswith("# Known divergences of a test adapter.\n# Second comment line.\nformat: 2\n")
    assert "inner comment" not in text
    got = yaml.safe_load(text)["expected_failures"]
    assert [(g["case"], g["check"], g["dtypes"]) for g in got] == [
        ("rope-tiny-half", "golden", ["bfloat16", "float16"]), ("rope-tiny-half", "relative", ["float16"]),
        ("rope-tiny-half", "golden", ["float32"])]
    assert got[0]["evidence"] == "src.py:1" and got[0]["library_version"] == "2.0"
    with pytest.raises(exp.ExpectationError, match="already has `format: 2`"):
        drafts.convert_text(text)
    with pytest.raises(exp.ExpectationError, match="is not test_<check>"):
        drafts.convert_text('expected_failures:\n  - {test_id: "test_golden[rope]", clause: A, divergence: B, '
                         'evidence: c, library: d, library_version: "1"}\n')


def test_convert_command_rewrites_in_place(tmp_path, capsys):
    p = tmp_path / "old.yaml"
    p.write_text(OLD)
    assert cli.main(["expectations", "convert", str(p)]) == 0
    assert "4 line(s) of format 1 -> 3 line(s) of format 2" in capsys.readouterr().out
    assert len(exp.parse(yaml.safe_load(p.read_text()), p)) == 3
    before = p.read_text()
    assert cli.main(["expectations", "convert", str(p)]) == 0  # already converted: left alone
    assert "already format 2, unchanged" in capsys.readouterr().out and p.read_text() == before
    p.write_text("format: 3\nexpected_failures: []\n")
    assert cli.main(["expectations", "convert", str(p)]) == 2


@pytest.mark.parametrize("path", sorted(SHIPPED.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_files_are_format_2(path):
    entries = exp.parse(yaml.safe_load(path.read_text()), path)
    exp.Expectations(entries, path)  # no overlapping lines
    spec = load_spec()
    assert all(e.clause in spec.clauses and (e.divergence in spec.divergences or not e.named) for e in entries)
    dumped = [dict(e.model_dump(), dtypes=list(e.dtypes)) for e in entries]
    assert len(exp.merge(dumped)) == len(entries)  # no two lines differ only by dtype


# ---- strictness through real runs -------------------------------------------------------------


def _outcomes(r) -> dict:
    return {k: v for k, v in r.parseoutcomes().items() if k != "deselected"}


def test_duplicate_dtypes_do_not_run_twice_nor_call_lines_stale(run_suite, tmp_path):
    p = write(tmp_path, line(dtypes=["float32", "bfloat16"]))
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_golden and rope-tiny-half", "--dtype", "float32,float32",
                  "--expectations", p)
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]


def test_a_line_for_a_dtype_not_run_is_not_stale(run_suite, tmp_path):
    p = write(tmp_path, line(dtypes=["bfloat16"]))
    r = run_suite("torch", "-k", "test_golden and rope-tiny-half", "--expectations", p)
    assert r.ret == 0, r.stderr.str()[-2000:]


def test_an_unknown_check_is_stale(run_suite, tmp_path):
    p = write(tmp_path, line(check="no_such_check"))
    r = run_suite("torch", "--expectations", p)
    assert r.ret == 4 and "expected_failures.0: case 'rope-tiny-half', check 'no_such_check'" in r.stderr.str()
    assert "stale line" in r.stderr.str()


def test_an_unnamed_line_never_excuses_a_named_diagnosis(run_suite, tmp_path):
    p = write(tmp_path, line(divergence="DIV-UNNAMED-SOMETHING"))
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_golden and rope-tiny-half", "--expectations", p)
    out = r.stdout.str()
    assert r.ret == 1 and "an unnamed line never excuses a named divergence" in out, out[-2000:]
    assert "DIV-ROPE-PAIRING-SWAPPED" in out


def test_an_unnamed_line_excuses_an_undiagnosed_failure(run_suite, tmp_path):
    """A failure no known divergence reproduces (OPT positions +1 on decode steps: inferred, not
    catalogued) is what an unnamed line records."""
    p = write(tmp_path, line(case="opt-125m-positions-cache", check="cache_equals_prefill",
                             clause="LEARNED-OPT-POSITIONS", divergence="DIV-UNNAMED-OPT-DECODE-PLUS-ONE"))
    r = run_suite(f"{BROKEN}:CacheOffByOne", "-k", "test_cache_equals_prefill and opt-125m-positions-cache",
                  "--expectations", p)
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]


def test_a_named_line_excuses_an_oracle_free_failure_it_diagnoses(run_suite, tmp_path):
    """The pairing probe's failure is diagnosed on the probe's own calls: a named line records it,
    an unnamed one no longer may, and a line naming another divergence is refused."""
    probe = dict(check="pairing_probe", clause="ROPE-PAIR-HALF")
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_pairing_probe and rope-tiny-half",
                  "--expectations", write(tmp_path, line(**probe)))
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_pairing_probe and rope-tiny-half",
                  "--expectations", write(tmp_path, line(**probe, divergence="DIV-UNNAMED-PAIRS")))
    assert r.ret == 1 and "an unnamed line never excuses a named divergence" in r.stdout.str()
    r = run_suite(f"{BROKEN}:PairingSwapped", "-k", "test_pairing_probe and rope-tiny-half",
                  "--expectations", write(tmp_path, line(**probe, divergence="DIV-ROPE-TAIL-ROTATED")))
    assert r.ret == 1 and "but the output matches DIV-ROPE-PAIRING-SWAPPED" in r.stdout.str(), r.stdout.str()[-2000:]


# ---- the report, its schema, init from it ------------------------------------------------------


def _report(run_suite, tmp_path, adapter, *args) -> tuple:
    out = tmp_path / "report.json"
    r = run_suite(adapter, "--report-json", str(out), *args)
    return r, json.loads(out.read_text())


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
          "integer": int, "number": (int, float)}


def _structural(value, schema: dict, root: dict, where: str = "report") -> None:
    """A small validator for the JSON Schema keywords report_schema.json uses (jsonschema is not
    a dependency of the kit): $ref, type, const, enum, oneOf, required, properties,
    additionalProperties, items, uniqueItems."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(isinstance(value, _TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
                 for t in types)
        assert ok, f"{where}: {value!r} is not {types}"
    assert "const" not in schema or value == schema["const"], f"{where}: {value!r} != {schema['const']!r}"
    assert "enum" not in schema or value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "oneOf" in schema:
        hits = 0
        for sub in schema["oneOf"]:
            try:
                _structural(value, sub, root, where)
                hits += 1
            except AssertionError:
                pass
        assert hits == 1, f"{where}: {value!r} matches {hits} of oneOf"
    if isinstance(value, dict):
        missing = set(schema.get("required", ())) - set(value)
        assert not missing, f"{where}: missing {sorted(missing)}"
        for k, v in value.items():
            sub = schema.get("properties", {}).get(k, schema.get("additionalProperties"))
            if isinstance(sub, dict):
                _structural(v, sub, root, f"{where}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            _structural(v, schema["items"], root, f"{where}[{i}]")
        assert not schema.get("uniqueItems") or len(set(map(json.dumps, value))) == len(value), where


def _check_schema(report: dict) -> None:
    schema = json.loads(SCHEMA.read_text())
    try:
        import jsonschema
    except ImportError:
        _structural(report, schema, schema)
        doc = (SCHEMA.parent.parent / "docs" / "report-json.md").read_text()
        fields = set(schema["properties"]) | set(schema["$defs"]["record"]["properties"])
        assert all(f"| `{f}` |" in doc for f in fields)  # every field documented
        return
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(report)


def test_the_structural_check_catches_a_bad_report():
    schema = json.loads(SCHEMA.read_text())
    good = {"report_format": 1, "adapter": "a", "framework": "f", "versions": {}, "device": "cpu",
            "dtypes": ["float32"], "spec_version": "0", "exit_status": 0, "expectations": None, "examples": 6,
            "results": []}
    _structural(good, schema, schema)
    _structural({**good, "complete": False}, schema, schema)
    for bad in ({**good, "report_format": 2}, {**good, "dtypes": ["float8"]}, {**good, "exit_status": "0"},
                {**good, "complete": "no"},
                {k: v for k, v in good.items() if k != "results"}, {**good, "results": [{"test_id": "x"}]}):
        with pytest.raises(AssertionError):
            _structural(bad, schema, schema)


def test_report_validates_against_its_schema_and_feeds_the_matrix(run_suite, tmp_path):
    p = write(tmp_path, line(dtypes=["float32"]))
    r, rep = _report(run_suite, tmp_path, f"{BROKEN}:PairingSwapped", "-k", "rope-tiny-half or sin-interleaved-d8",
                     "--dtype", "float32,bfloat16", "--expectations", p)
    _check_schema(rep)
    assert rep["report_format"] == 1 and rep["expectations"] == p and rep["examples"] == 6 and rep["complete"] is True
    by = {(x["check"], x["case"], x["dtype"]): x for x in rep["results"]}
    div = by[("golden", "rope-tiny-half", "float32")]
    assert div["outcome"] == "diverges" and div["expected_reason"] == "deliberately broken adapter"
    assert div["diagnosis"][0]["divergence"] == "DIV-ROPE-PAIRING-SWAPPED"
    failed = by[("golden", "rope-tiny-half", "bfloat16")]
    assert failed["outcome"] == "failed" and not failed["raised"] and failed["expected_reason"] is None
    assert failed["diagnosis"][0]["violates"] and isinstance(failed["diagnosis"][0]["ratio"], float)
    assert by[("golden", "sin-interleaved-d8", "float32")]["outcome"] == "passed"
    m = matrix.aggregate([rep])  # posenc matrix still reads it
    assert m["cells"]["bfloat16"]["ROPE-PAIR-HALF"][rep["adapter"]]["verdict"].startswith("FAIL ")
    assert "`broken-pairing-swapped`" in matrix.markdown(m)


def test_default_expectation_file_is_reported_relative_to_the_kit(run_suite, tmp_path):
    _, rep = _report(run_suite, tmp_path, "torchtune", "-k", "test_golden and rope-tiny-interleaved")
    assert rep["expectations"] == "adapters/expectations/torchtune.yaml"
    _check_schema(rep)


def test_init_drafts_a_file_that_records_the_run(run_suite, tmp_path, capsys):
    args = ("-k", "(test_golden or test_pairing_probe) and rope-tiny-half", "--dtype", "float32,bfloat16")
    r, rep = _report(run_suite, tmp_path, f"{BROKEN}:PairingSwapped", *args)
    assert r.ret == 1
    out = tmp_path / "draft.yaml"
    assert cli.main(["expectations", "init", "--from-report", str(tmp_path / "report.json"), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Known divergences of the broken-pairing-swapped adapter")
    assert "fill in every `evidence:`" in text
    got = {(e.check, e.divergence): e for e in exp.parse(yaml.safe_load(text), out)}
    golden = got[("golden", "DIV-ROPE-PAIRING-SWAPPED")]
    assert golden.dtypes == ("float32", "bfloat16") and golden.evidence == exp.TODO_EVIDENCE
    assert golden.library == "torch" and golden.library_version == rep["versions"]["torch"]
    # the probe's failure is diagnosed on its own calls (one line per check, both dtypes merged)
    assert got[("pairing_probe", "DIV-ROPE-PAIRING-SWAPPED")].dtypes == ("float32", "bfloat16")
    assert cli.main(["expectations", "init", "--from-report", str(tmp_path / "report.json"), "--out", str(out)]) == 2
    missing = tmp_path / "no-such-folder" / "draft.yaml"  # one line naming --out, not a traceback
    assert cli.main(["expectations", "init", "--from-report", str(tmp_path / "report.json"), "--out", str(missing)]) == 2
    assert f"--out {missing}: cannot write it" in capsys.readouterr().err
    r = run_suite(f"{BROKEN}:PairingSwapped", *args, "--expectations", str(out))  # an unedited draft is refused
    assert r.ret == 4 and "a draft line of `posenc expectations init`" in r.stderr.str() + r.stdout.str()
    filled = text.replace(exp.TODO_EVIDENCE, "tests/broken_adapters.py::PairingSwapped").replace(
        exp.FILL_ME, "DIV-UNNAMED-PROBE")
    out.write_text(filled)
    r = run_suite(f"{BROKEN}:PairingSwapped", *args, "--expectations", str(out))  # filled in, it explains the run
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 4}, r.stdout.str()[-2000:]


def test_init_leaves_an_undiagnosed_failure_to_fill_in(run_suite, tmp_path):
    args = ("-k", "test_cache_equals_prefill and opt-125m-positions-cache")
    r, _ = _report(run_suite, tmp_path, f"{BROKEN}:CacheOffByOne", *args)
    assert r.ret == 1
    out = tmp_path / "draft.yaml"
    assert cli.main(["expectations", "init", "--from-report", str(tmp_path / "report.json"), "--out", str(out)]) == 0
    text = out.read_text()
    (e,) = exp.parse(yaml.safe_load(text), out)
    assert (e.check, e.divergence, e.clause) == ("cache_equals_prefill", exp.FILL_ME, "LEARNED-OPT-POSITIONS")
    out.write_text(text.replace(exp.TODO_EVIDENCE, "tests/broken_adapters.py::CacheOffByOne").replace(
        exp.FILL_ME, "DIV-UNNAMED-OPT-DECODE"))
    r = run_suite(f"{BROKEN}:CacheOffByOne", *args, "--expectations", str(out))
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]


def test_init_picks_the_wrapped_library_and_skips_what_no_line_can_excuse():
    rec = {"outcome": "failed", "case": "c", "check": "golden", "dtype": "float16", "clauses": ["A"],
           "violated": ["A"], "diagnosis": [], "raised": False, "reason": "x"}
    report = {"report_format": 1, "adapter": "hf-transformers", "framework": "torch",
              "versions": {"torch": "2.13.0", "transformers": "5.24.0"}, "spec_version": "0.3.0",
              "results": [rec, {**rec, "dtype": "float32", "raised": True},
                          {**rec, "dtype": "bfloat16", "reason": "[XPASS(strict)] expected"}]}
    text, n = drafts.draft_from_report(report)
    entries = exp.parse(yaml.safe_load(text), "draft")
    assert n == 1 and entries[0].library == "transformers" and entries[0].dtypes == ("float16",)
    assert "Left out: 1 failure(s)" in text
    with pytest.raises(exp.ExpectationError, match="report_format"):
        drafts.draft_from_report({"results": []})


def test_init_names_a_tie_by_what_the_report_names_elsewhere_and_says_what_it_left_out(tmp_path, capsys):
    """Three divergences reproduce a NaN output equally (an x-transformers trial): the draft names the one
    the same report names alone at that dtype, not the catalogue's first.  The failures left out are
    printed, not only counted in the file's header."""
    rec = {"outcome": "failed", "case": "c", "check": "golden", "dtype": "float16", "clauses": ["A"],
           "violated": ["A"], "raised": False, "reason": "x", "test_id": "test_golden[float16-c@A]"}
    tie = [{"divergence": d, "violates": ["A"], "ratio": 0.0} for d in ("DIV-X", "DIV-Y", "DIV-Z")]
    report = {"report_format": 1, "adapter": "a", "framework": "torch", "versions": {"torch": "2.13.0"},
              "spec_version": "0.5.0", "results": [
                  {**rec, "check": "cache_equals_prefill", "diagnosis": tie},
                  {**rec, "diagnosis": [{"divergence": "DIV-Y", "violates": ["A"], "ratio": 0.2}]},
                  {**rec, "check": "generated", "case": "rope.apply", "diagnosis": [], "inferred": ["q: 3 of 8 elements wrong"],
                   "test_id": "test_generated[float16-rope.apply]"}]}
    text, n = drafts.draft_from_report(report)
    assert {e.check: e.divergence for e in exp.parse(yaml.safe_load(text), "draft")} == {
        "cache_equals_prefill": "DIV-Y", "golden": "DIV-Y"}
    # the tie is said in the line's TODO evidence (a litgpt trial: init named the first of three unsaid),
    # and a line whose evidence still starts with the TODO is refused as a draft
    ev = {e.check: e.evidence for e in exp.parse(yaml.safe_load(text), "draft")}
    assert "a tie: DIV-X, DIV-Z reproduce this output as well as DIV-Y" in ev["cache_equals_prefill"]
    assert "tie" not in ev["golden"]
    # a tie is not broken for a divergence the same report's contradicted list refutes at that dtype
    refuted = {**report, "contradicted": [{"divergence": "DIV-Y", "dtype": "float16", "failures": 1, "case": "c",
                                           "golden": "passed"}]}
    text, _ = drafts.draft_from_report(refuted)
    assert {e.check: e.divergence for e in exp.parse(yaml.safe_load(text), "draft")}["cache_equals_prefill"] == "DIV-X"
    rep = tmp_path / "r.json"
    rep.write_text(json.dumps(report))
    assert cli.main(["expectations", "init", "--from-report", str(rep), "--out", str(tmp_path / "d.yaml")]) == 0
    err = capsys.readouterr().err
    assert "not drafted: test_generated[float16-rope.apply]: no divergence reproduces it and the inference " \
           "states no finding" in err


def test_a_contradicted_diagnosis_is_in_the_report_and_fits_the_schema(run_suite, tmp_path):
    r, rep = _report(run_suite, tmp_path, f"{BROKEN}:OffByOneWhenLong", "-k", "test_golden and rope-")
    assert r.ret == 1
    c = {x["divergence"]: x for x in rep["contradicted"]}["DIV-ROPE-POSITIONS-OFF-BY-ONE"]
    assert (c["dtype"], c["case"], c["golden"]) == ("float32", "rope-tiny-half", "passed") and c["failures"] > 1
    _check_schema(rep)


def test_init_never_writes_through_a_link(tmp_path, capsys):
    """--out naming a dangling link created the link's target (it "exists" only through the link)."""
    report = tmp_path / "report.json"
    rec = {"outcome": "failed", "case": "c", "check": "golden", "dtype": "float32", "clauses": ["A"], "violated": ["A"],
           "raised": False, "reason": "x", "test_id": "test_golden[float32-c@A]",
           "diagnosis": [{"divergence": "DIV-Y", "violates": ["A"], "ratio": 0.2}]}
    report.write_text(json.dumps({"report_format": 1, "adapter": "a", "framework": "torch", "spec_version": "0.5.0",
                                  "versions": {"torch": "2.13.0"}, "results": [rec]}))
    target, link = tmp_path / "elsewhere.yaml", tmp_path / "draft.yaml"
    link.symlink_to(target)
    rc = cli.main(["expectations", "init", "--from-report", str(report), "--out", str(link)])
    assert rc == 2 and "(a link): not overwritten" in capsys.readouterr().err
    assert not target.exists()


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    """600 bytes of nested YAML aliases expand to 10**7 values: reading, validating or quoting them in an
    error took 4.6 GB and ended in SIGABRT.  The strict reader counts the expanded values first."""
    from posenc.spec import read_yaml
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    with pytest.raises(yaml.YAMLError, match="alias bomb"):  # refused from the node graph, never expanded
        read_yaml("\n".join(lines))
    assert read_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}  # an alias or two: read as before


@pytest.mark.parametrize("text, says", [
    ("[" * 100000 + "]" * 100000, "nested deeper than 64 levels"),
    ('{"results": ' + "[" * 70 + "]" * 70 + "}", "nested deeper than 64 levels"),
    ('{"results": [', "Expecting value"),
    ('{"results": 3}', "not a --report-json report"),
])
def test_init_names_a_report_it_cannot_read_never_a_traceback(tmp_path, capsys, text, says):
    """``posenc expectations init --from-report``: malformed, too deeply nested (at any recursion limit: a
    RecursionError out of the JSON reader used to escape) or foreign JSON is exit status 2 naming the file."""
    from posenc import cli
    report = tmp_path / "report.json"
    report.write_text(text)
    assert cli.main(["expectations", "init", "--from-report", str(report)]) == 2
    err = capsys.readouterr().err
    assert str(report) in err and says in err, err


@pytest.mark.timeout(30)  # a blocking read of the FIFO would hang
def test_init_never_reads_a_fifo_as_a_report(tmp_path, capsys):
    import os
    from posenc import cli
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    assert cli.main(["expectations", "init", "--from-report", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert str(fifo) in err and "not a regular file" in err, err

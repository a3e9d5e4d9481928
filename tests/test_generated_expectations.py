"""Findings seen only in generated cases can be recorded (issue 27): an expectation line with ``check:
generated`` records a divergence by operation, dtype and a condition on the drawn parameters, named or
unnamed with the finding the inference states.  The planted bugs (tests/generated_only_adapters.py)
fire only on a non-integer θ, which no golden case has: every golden test passes, generated ones fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import posenc.conformance
from posenc import cli
from posenc.conformance import expectation_drafts as drafts
from posenc.conformance import expectations as exp
from posenc.spec import load_spec

HERE = Path(__file__).resolve().parent
PLANTED = f"{HERE / 'generated_only_adapters.py'}:FractionalThetaPath"
CONFORMANCE_DIR = Path(posenc.conformance.__file__).resolve().parent
ROPE_GENERATED = ("-k", "test_generated and rope")


def _torch() -> str:
    import torch
    return torch.__version__


def _outcomes(r) -> dict:
    return {k: v for k, v in r.parseoutcomes().items() if k != "deselected"}


def _line(**kw) -> dict:
    base = {"check": "generated", "operation": "rope.apply", "where": {}, "dtypes": ["float32"],
            "clause": "ROPE-ANGLE", "divergence": "DIV-UNNAMED-POSITIONS-FROM-THREE",
            "finding": "positions are the specified ones +3 on every token", "evidence": "planted",
            "library": "torch", "library_version": _torch()}
    return {**base, **kw}


def _write(tmp_path, *lines, name="exp.yaml") -> str:
    p = tmp_path / name
    p.write_text(exp.dump(list(lines)))
    return str(p)


def test_the_planted_bugs_show_only_in_generated_cases(run_suite):
    r = run_suite(PLANTED, "-k", "(test_golden or test_pairing_probe) and rope-", "--dtype", "float32")
    assert r.ret == 0 and _outcomes(r).get("failed") is None, r.stdout.str()[-2000:]
    r = run_suite(PLANTED, *ROPE_GENERATED, "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and "inferred: positions are the specified ones +3 on every token" in out, out[-3000:]
    assert "    DIV-ROPE-PAIRING-SWAPPED (violates" in out


def test_init_drafts_generated_lines_that_record_the_run(run_suite, tmp_path):
    """The user's path: report, `posenc expectations init`, fill in only the evidence and the unnamed
    line's name, rerun green at the default number of generated cases, every dtype."""
    report = tmp_path / "report.json"
    r = run_suite(PLANTED, *ROPE_GENERATED, "--dtype", "all", "--report-json", str(report))
    assert r.ret == 1
    draft = tmp_path / "draft.yaml"
    assert cli.main(["expectations", "init", "--from-report", str(report), "--out", str(draft)]) == 0
    text = draft.read_text()
    lines = exp.parse(yaml.safe_load(text), draft)
    by_op = {e.operation: e for e in lines}
    assert all(e.generated and e.case is None for e in lines)
    assert by_op["rope.apply_with_cos_sin"].divergence == "DIV-ROPE-PAIRING-SWAPPED"
    assert by_op["rope.apply_with_cos_sin"].clause == "ROPE-PAIR-HALF"  # the case's own family's clause
    assert by_op["rope.apply"].divergence == exp.FILL_ME
    assert by_op["rope.apply"].finding == "positions are the specified ones +3 on every token"
    assert by_op["rope.apply"].clause.startswith("ROPE-")
    assert by_op["rope.apply"].dtypes == ("float64", "float32", "bfloat16", "float16")
    filled = text.replace(exp.TODO_EVIDENCE, "tests/generated_only_adapters.py").replace(
        exp.FILL_ME, "DIV-UNNAMED-POSITIONS-FROM-THREE")
    draft.write_text(filled)
    r = run_suite(PLANTED, *ROPE_GENERATED, "--dtype", "all", "--expectations", str(draft))
    out = r.stdout.str()
    assert r.ret == 0 and "failed" not in _outcomes(r) and _outcomes(r)["xfailed"] == 16, out[-3000:]
    assert "stale" not in out


def test_init_drafts_golden_and_invariant_lines_that_load_and_record_the_run(run_suite, tmp_path):
    """An attention-factor bug on golden and invariant tests whose cases have no attention-factor clause: init
    drafts each line under a clause its test checks (the loader refuses any other: a litgpt rerun's draft did
    not load), with the finding; filled in, the rerun is green."""
    report, draft = tmp_path / "report.json", tmp_path / "draft.yaml"
    k = ("-k", "rope-llama3-8b and not generated", "--dtype", "float32,bfloat16")
    adapter = f"{HERE / 'generated_only_adapters.py'}:FactorOfDefault"
    assert run_suite(adapter, *k, "--report-json", str(report)).ret == 1
    assert cli.main(["expectations", "init", "--from-report", str(report), "--out", str(draft)]) == 0
    lines = exp.parse(yaml.safe_load(draft.read_text()), draft)
    assert lines and all(e.finding and e.finding.startswith("attention factor 1.25 where") for e in lines)
    draft.write_text(draft.read_text().replace(exp.TODO_EVIDENCE, "planted").replace(exp.FILL_ME, "DIV-UNNAMED-F"))
    r = run_suite(adapter, *k, "--expectations", str(draft))
    assert r.ret == 0 and "failed" not in _outcomes(r) and _outcomes(r)["xfailed"] >= len(lines), r.stdout.str()[-3000:]


def test_a_line_excuses_only_what_it_explains(run_suite, tmp_path):
    # another finding: the failures stay
    r = run_suite(PLANTED, "-k", "test_generated and rope.apply]", "--dtype", "float32", "--expectations",
                  _write(tmp_path, _line(finding="positions are the specified ones +2 on every token")))
    assert r.ret == 1 and _outcomes(r)["failed"] == 1, r.stdout.str()[-2000:]
    assert ("expected_failures.0 (generated rope.apply, DIV-UNNAMED-POSITIONS-FROM-THREE) covers this case but does "
            "not explain it: no inferred line says 'positions are the specified ones +2 on every token'") in r.stdout.str()
    # a finding that only the fallback's element counts would match is no finding
    r = run_suite(PLANTED, "-k", "test_generated and rope.apply]", "--dtype", "float32", "--expectations",
                  _write(tmp_path, _line(finding="elements wrong")))
    assert r.ret == 1 and _outcomes(r)["failed"] == 1, r.stdout.str()[-2000:]
    # an unnamed line never excuses a named divergence
    r = run_suite(PLANTED, "-k", "test_generated and apply_with_cos_sin", "--dtype", "float32", "--expectations",
                  _write(tmp_path, _line(operation="rope.apply_with_cos_sin", clause="ROPE-PAIR-HALF",
                                         finding="pairs applied the other way")))
    assert r.ret == 1 and _outcomes(r)["failed"] == 1
    # a named line excuses the failures its divergence is diagnosed for, not another divergence's
    named = _line(operation="rope.apply_with_cos_sin", clause="ROPE-PAIR-HALF", divergence="DIV-ROPE-TAIL-ROTATED",
                  finding=None)
    r = run_suite(PLANTED, "-k", "test_generated and apply_with_cos_sin", "--dtype", "float32", "--expectations",
                  _write(tmp_path, named))
    assert r.ret == 1 and _outcomes(r)["failed"] == 1
    r = run_suite(PLANTED, "-k", "test_generated and apply_with_cos_sin", "--dtype", "float32", "--expectations",
                  _write(tmp_path, {**named, "divergence": "DIV-ROPE-PAIRING-SWAPPED"}))
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]
    # a condition the failing cases do not meet excuses nothing (every failing case has a fractional θ,
    # and the rope.apply cases drawn here are never of rope_type yarn and dynamic at once)
    r = run_suite(PLANTED, "-k", "test_generated and rope.apply]", "--dtype", "float32", "--expectations",
                  _write(tmp_path, _line(where={"rope_type": "longrope", "head_dim": 3})))
    out = r.stdout.str()
    assert r.ret == 1 and "not exercised" in out and "stale" not in out, out[-2000:]


def test_a_line_whose_cases_all_pass_is_stale_serial_and_under_xdist(pytester, tmp_path):
    p = _write(tmp_path, _line())
    for extra in (("-p", "no:xdist"), ("-n", "2")):
        r = pytester.runpytest_subprocess(str(CONFORMANCE_DIR), "--adapter", "torch", "-p", "no:cacheprovider",
                                          "--import-mode=importlib", *extra, *ROPE_GENERATED, "--dtype", "float32",
                                          "--expectations", p, "--report-json", str(tmp_path / "r.json"))
        out = r.stdout.str()
        assert r.ret == 1 and "drawn case(s) it covers all passed: stale line" in out, (extra, out[-2000:])
        rep = json.loads((tmp_path / "r.json").read_text())
        assert len(rep["lines_stale"]) == 1 and rep["lines_not_exercised"] == []
    # a condition no drawn case meets: not exercised, never stale, the run passes
    p = _write(tmp_path, _line(where={"head_dim": 3}))
    for extra in (("-p", "no:xdist"), ("-n", "2")):
        r = pytester.runpytest_subprocess(str(CONFORMANCE_DIR), "--adapter", "torch", "-p", "no:cacheprovider",
                                          "--import-mode=importlib", *extra, *ROPE_GENERATED, "--dtype", "float32",
                                          "--expectations", p, "--report-json", str(tmp_path / "r.json"))
        out = r.stdout.str()
        assert r.ret == 0 and "not exercised" in out and "stale" not in out, (extra, out[-2000:])
        rep = json.loads((tmp_path / "r.json").read_text())
        assert rep["lines_stale"] == [] and len(rep["lines_not_exercised"]) == 1


def test_conditions_and_findings_match_as_documented():
    from posenc.spec.models import RopeParams
    p = RopeParams(head_dim=8, rope_theta=10000.5, rope_type="yarn", factor=4.0, original_max_position_embeddings=64,
                   truncate=True)
    e = exp.Expectation(**_line(where={"rope_type": ["yarn", "longrope"], "factor": 4, "truncate": True,
                                       "beta_fast": None}))
    assert e.covers("rope.apply", p, "float32")
    assert not e.covers("rope.apply", p, "bfloat16")  # another dtype
    assert not e.covers("rope.cos_sin", p, "float32")  # another operation
    assert not exp.Expectation(**_line(where={"factor": 8})).covers("rope.apply", p, "float32")
    assert not exp.Expectation(**_line(where={"no_such_field": 1})).covers("rope.apply", p, "float32")
    assert not exp.Expectation(**_line(where={"truncate": 1})).covers("rope.apply", p, "float32")  # bool is not 1
    assert e.explains((), ["Positions are the specified ones  +3 on every token (frequencies ...)"])
    assert not e.explains(("DIV-ROPE-POSITIONS-OFF-BY-ONE",), ["positions are the specified ones +3 on every token"])
    star = exp.Expectation(**_line(finding="θ (rope_theta) 10000 where * is specified"))
    assert star.explains((), ["θ (rope_theta) 10000 where 148.413 is specified"])
    assert not star.explains((), ["θ (rope_theta) 20000 where 148.413 is specified"])
    assert drafts.draft_finding("θ (rope_theta) 296.826 where 148.413 is specified (residual: 0.1)") == \
        "θ (rope_theta) 296.826 where * is specified"
    # fact for fact: a finding of one bug never excuses a line that states a second one too
    two = "attention factor 1.25 where 1 is specified (cos and sin have magnitude 1.25; x); positions are the " \
          "specified ones +3 on every token"
    one = exp.Expectation(**_line(finding="attention factor 1.25 where * is specified"))
    assert one.explains((), [two.split("; positions")[0]]) and not one.explains((), [two])
    assert not e.explains((), [two])  # the second fact alone does not cover the first
    both = drafts.draft_finding(two)
    assert both == "attention factor 1.25 where * is specified; positions are the specified ones +3 on every token"
    assert exp.Expectation(**_line(finding=both)).explains((), [two])
    assert not exp.Expectation(**_line(finding=both)).explains((), [two + "; frequencies × 2"])
    # a last part that is only "*" says so explicitly: those facts, then any others (none included)
    more = exp.Expectation(**_line(finding="attention factor 1.25 where * is specified; *"))
    assert more.explains((), [two]) and more.explains((), [two.split("; positions")[0]])
    assert not more.explains((), ["positions are the specified ones +3 on every token; attention factor 1.25 where 1 "
                                  "is specified"])  # the facts it names come first


@pytest.mark.parametrize("bad, message", [
    ({"case": "rope-tiny-half"}, "a generated line has no case"),
    ({"operation": None}, "needs the operation"),
    ({"finding": None}, "needs the finding"),
    ({"divergence": "DIV-ROPE-PAIRING-SWAPPED"}, "only an unnamed line has one"),
    ({"where": {"a b": 1}}, "is not a parameter name"),
    ({"where": {"factor": []}}, "non-empty list"),
    ({"check": "golden", "case": "rope-tiny-half", "where": None}, "operation: only a generated line"),
    ({"check": "golden", "case": "rope-tiny-half", "operation": None, "where": {"factor": 2}}, "where: only a generated line"),
    ({"finding": "e"}, "says too little"),
    ({"finding": "* *"}, "says too little"),
    ({"finding": "q: * of *"}, "says too little"),
    ({"where": {"factor": __import__("datetime").date(2020, 1, 1)}}, "factor: a value"),
    ({"where": {"rope_theta": float("nan")}}, "NaN equals no value"),
    ({"finding": "* where * is specified"}, "says too little"),
    ({"finding": "θ * where it is unset (the rule's default applies)"}, "says too little"),
    ({"finding": "positions are the specified ones +3 on every token; *; frequencies × 2"}, "says too little"),
    ({"finding": "*p*o*s*i*t*i*o*n*s*a*r*e*"}, "says too little"),  # one letter at a time: matches nearly anything
])
def test_malformed_generated_lines_are_refused_naming_the_field(tmp_path, bad, message):
    path = tmp_path / "bad.yaml"  # written as is (exp.dump leaves out the fields a line may not have)
    line = {k: v for k, v in _line(**bad).items() if v is not None}
    line["library_version"] = str(line["library_version"])  # torch.__version__ is a str subclass
    path.write_text(yaml.safe_dump({"format": 2, "expected_failures": [line]}, allow_unicode=True))
    with pytest.raises(exp.ExpectationError, match=message):
        exp.load(path, load_spec(), {"torch": _torch()})


def test_an_unknown_where_key_is_refused_with_the_nearest_name(tmp_path):
    from posenc import registry
    with pytest.raises(exp.ExpectationError, match="where: 'rope_tyep': not a parameter of rope.apply's cases "
                                                   ".did you mean 'rope_type'"):
        exp.load(Path(_write(tmp_path, _line(where={"rope_tyep": "yarn"}))), registry.spec(), {"torch": _torch()})
    ok = exp.load(Path(_write(tmp_path, _line(where={"rope_type": "yarn", "factor": 4}))), registry.spec(),
                  {"torch": _torch()})
    assert len(ok) == 1


def test_a_list_valued_or_nested_where_key_is_refused(tmp_path):
    """A YAML list is read as alternative values: a condition on mrope_section, short_factor or a nested
    parameter set (attention.probs' rope) could never hold, so it is refused at load, naming the key."""
    from posenc import registry
    spec = registry.spec()
    for op, key, val in (("mrope.apply", "mrope_section", [16, 24, 24]), ("rope.apply", "short_factor", [1.0, 2.0]),
                         ("attention.probs", "rope", None)):
        clause = {"mrope.apply": "MROPE-SECTIONS", "rope.apply": "ROPE-ANGLE", "attention.probs": "SCALE-YARN-SOFTMAX-SCALE"}[op]
        with pytest.raises(exp.ExpectationError, match=f"where: '{key}': a list-valued or nested parameter"):
            exp.load(Path(_write(tmp_path, _line(operation=op, clause=clause, where={key: val}))), spec, {"torch": _torch()})
    assert len(exp.load(Path(_write(tmp_path, _line(operation="mrope.apply", clause="MROPE-SECTIONS",
                                                    where={"layout": "interleaved"}))), spec, {"torch": _torch()})) == 1


def test_an_unnamed_golden_line_without_a_finding_never_excuses_nan():
    line = exp.parse({"format": 2, "expected_failures": [{k: v for k, v in _line(
        check="golden", case="rope-llama3-8b", operation=None, where=None, finding=None).items() if v is not None}]},
        Path("x.yaml"))[0]
    assert line.explains((), ["q: 3 of 64 elements wrong; worst |err|/bound 12"])
    assert not line.explains((), ["q: 64 of 64 elements wrong, 64 NaN/inf"])
    assert not line.explains(("DIV-ROPE-PAIRING-SWAPPED",), ["q: 3 of 64 elements wrong"])


def test_init_drafts_the_finding_of_an_unnamed_golden_line():
    rec = {"outcome": "failed", "case": "rope-llama3-8b", "check": "golden", "dtype": "float32",
           "clauses": ["ROPE-ANGLE"], "violated": ["ROPE-ANGLE"], "diagnosis": [], "raised": False, "reason": "x",
           "inferred": ["positions are the specified ones +3 on every token"]}
    report = {"report_format": 1, "adapter": "mine", "framework": "torch", "versions": {"torch": "2.13.0"},
              "spec_version": "0.5.0", "results": [rec]}
    text, n = drafts.draft_from_report(report)
    assert n == 1 and 'finding: "positions are the specified ones +3 on every token"' in text, text


def test_an_unknown_operation_or_another_familys_clause_is_refused(tmp_path):
    from posenc import registry
    spec = registry.spec()
    with pytest.raises(exp.ExpectationError, match="unknown operation 'rope.aply' .did you mean 'rope.apply'"):
        exp.load(Path(_write(tmp_path, _line(operation="rope.aply"))), spec, {"torch": _torch()})
    with pytest.raises(exp.ExpectationError, match="ALIBI-SLOPES is neither a clause of rope.apply's family"):
        exp.load(Path(_write(tmp_path, _line(clause="ALIBI-SLOPES"))), spec, {"torch": _torch()})


def test_unsupported_reasons_are_clipped_at_a_word_keeping_the_count():
    from posenc.conformance.generated import _clip
    long = "mylib has no input for " + "beta_fast and beta_slow " * 10
    assert _clip(long + "(and 2 more like it, other values)").endswith(" … (and 2 more like it, other values)")
    assert _clip(long).endswith(" …") and len(_clip(long)) <= 162 and " beta_" in _clip(long)
    assert _clip("no half (and no interleaved) pairing") == "no half (and no interleaved) pairing"


def test_an_unnamed_golden_line_with_a_finding_excuses_only_what_it_says(run_suite, tmp_path):
    shifted = f"{HERE / 'generated_only_adapters.py'}:ShiftedEverywhere"
    golden = _line(check="golden", case="rope-llama3-8b", operation=None, where=None)
    r = run_suite(shifted, "-k", "test_golden and rope-llama3-8b and not scattered", "--dtype", "float32", "--expectations",
                  _write(tmp_path, golden))
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]
    r = run_suite(shifted, "-k", "test_golden and rope-llama3-8b and not scattered", "--dtype", "float32", "--expectations",
                  _write(tmp_path, {**golden, "finding": "positions are the specified ones -1 on every token"}))
    assert r.ret == 1 and "but no inferred line matches its finding" in r.stdout.str(), r.stdout.str()[-2000:]


def test_a_finding_of_one_bug_does_not_excuse_a_second(run_suite, tmp_path):
    """The line recorded for ShiftedEverywhere's +3 (as init drafts it) meets an implementation with that bug
    and a second (cos and sin × 1.25): the inference states both, the line explains only one, the run fails."""
    golden = _line(check="golden", case="rope-llama3-8b", operation=None, where=None)
    k = ("-k", "test_golden and rope-llama3-8b and not scattered", "--dtype", "float32")
    r = run_suite(f"{HERE / 'generated_only_adapters.py'}:ShiftedAndScaled", *k, "--expectations", _write(tmp_path, golden))
    assert r.ret == 1 and "but no inferred line matches its finding" in r.stdout.str(), r.stdout.str()[-2000:]
    both = {**golden, "finding": "attention factor 1.25 where * is specified; positions are the specified ones +3 on "
                                 "every token"}
    r = run_suite(f"{HERE / 'generated_only_adapters.py'}:ShiftedAndScaled", *k, "--expectations", _write(tmp_path, both))
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]


def test_init_merges_across_dtypes_only_findings_that_agree_to_the_dtypes_resolution():
    """A value read off at each dtype's resolution ("1.261" at float32, "1.26" at bfloat16) merges, as *; two
    bugs (+3 and -1) never do; a number every dtype agrees on stays (hostile review: both were starred)."""
    b = {"check": "generated", "operation": "rope.apply", "clause": "ROPE-ANGLE"}
    two = exp.merge([dict(b, dtypes=["float32"], finding="positions are the specified ones +3 on every token"),
                     dict(b, dtypes=["float16"], finding="positions are the specified ones -1 on every token")])
    assert [m["finding"] for m in two] == ["positions are the specified ones +3 on every token",
                                           "positions are the specified ones -1 on every token"]
    one = exp.merge([dict(b, dtypes=[d], finding=f"pair 0 × {v}, pair 1 × 0.6")
                     for d, v in (("float32", "0.5"), ("bfloat16", "0.499"), ("float16", "0.4995"))])
    assert [(m["finding"], m["dtypes"]) for m in one] == [("pair 0 × *, pair 1 × 0.6", ["float32", "bfloat16", "float16"])]


@pytest.mark.parametrize("inferred, clause", [
    ("attention factor 1.25 where 1 is specified (cos and sin have magnitude 1.25)", "ROPE-ATTENTION-FACTOR"),
    ("θ (rope_theta) 296.826 where 148.413 is specified", "ROPE-INV-FREQ"),
    ("beta_fast 32 where 16 is specified", "SCALE-YARN-RAMP"),
    ("factor 8 where 4 is specified", "SCALE-YARN-FACTOR"),
    ("positions are the specified ones +3 on every token", "ROPE-ANGLE"),
    ("half pairs applied where interleaved pairs are specified", "ROPE-PAIR-HALF"),  # no parameter: the first
])
def test_init_drafts_an_unnamed_failure_under_the_clause_of_what_the_inference_found(inferred, clause):
    """Not the case's first clause (a pairing's) for a magnitude bug (hostile review): the clause of the parameter
    the inference found a value for, one of the test's own first (a YaRN case's SCALE-YARN-FACTOR, not
    SCALE-LINEAR), else of their families (ROPE-ATTENTION-FACTOR on a case without it)."""
    own = ["ROPE-PAIR-HALF", "ROPE-ANGLE", "ROPE-INV-FREQ", "SCALE-YARN-RAMP", "SCALE-YARN-FACTOR"]
    rec = {"check": "generated", "clauses": own, "violated": own, "diagnosis": [], "inferred": [inferred]}
    assert drafts.own_clause(rec) == clause
    # a golden or invariant line may name only a clause its test checks (the loader refuses another): its own
    probe = {**rec, "check": "pairing_probe", "clauses": ["ROPE-PAIR-HALF"], "violated": ["ROPE-PAIR-HALF"]}
    assert drafts.own_clause(probe) == "ROPE-PAIR-HALF"
    # a later fact names it where the first names a clause the test does not check (hostile review)
    golden = {**rec, "check": "golden", "clauses": own[:3], "violated": own[:3], "inferred": [
        "attention factor 1.25 where 1 is specified; the inverse frequencies are not the specified ones: pair 0 × 0.5"]}
    assert drafts.own_clause(golden) == "ROPE-INV-FREQ"
    named = {**rec, "diagnosis": [{"divergence": "DIV-ROPE-PAIRING-SWAPPED"}], "violated": ["ROPE-PAIR-HALF"]}
    assert drafts.own_clause(named) == "ROPE-PAIR-HALF"  # a named failure: its divergence's clause
    # a named failure the run counted under a clause the test does not list (bf16 angles seen by a pairing case's
    # relative check): that clause, as the failing run's summary said (a new user's draft put it under ROPE-PAIR-HALF)
    bf16 = {**probe, "check": "relative", "diagnosis": [{"divergence": "DIV-ROPE-BF16-ANGLE-PRODUCT"}],
            "violated": ["ROPE-PRECISION"]}
    assert drafts.own_clause(bf16) == "ROPE-PRECISION"
    assert drafts.own_clause({**bf16, "violated": ["ALIBI-SLOPES"]}) == "ROPE-PAIR-HALF"  # never another family's
    assert drafts.own_clause({**bf16, "diagnosis": []}) == "ROPE-PAIR-HALF"  # unnamed: only the test's own


def test_a_finding_recorded_at_float32_holds_at_bfloat16(run_suite, tmp_path):
    """An attention factor of 1.25 read off bfloat16 outputs is said 1.25, not 1.249 (the digits bfloat16
    resolves): one line at both dtypes records it, green."""
    line = _line(divergence="DIV-UNNAMED-FACTOR-1-25", clause="ROPE-ATTENTION-FACTOR", where={"rope_type": "default"},
                 dtypes=["float32", "bfloat16"], finding="attention factor 1.25 where * is specified",
                 library="numpy", library_version=np.__version__)
    r = run_suite(f"{HERE / 'generated_only_adapters.py'}:FactorOfDefault", "-k", "test_generated and rope.apply",
                  "--dtype", "float32,bfloat16", "--expectations", _write(tmp_path, line))
    assert r.ret == 0 and _outcomes(r).get("xfailed") == 2 and "failed" not in _outcomes(r), r.stdout.str()[-3000:]


def test_init_leaves_out_a_generated_failure_the_inference_only_counts():
    rec = {"outcome": "failed", "case": "rope.apply", "check": "generated", "dtype": "float32",
           "clauses": ["ROPE-ANGLE"], "violated": ["ROPE-ANGLE"], "diagnosis": [], "raised": False, "reason": "x",
           "inferred": ["q: 2 of 4 elements wrong; worst |err|/bound 7.5e+04", "closest fit: θ 3 (residual 9)"]}
    report = {"report_format": 1, "adapter": "mine", "framework": "torch", "versions": {"torch": "2.13.0"},
              "spec_version": "0.4.0", "results": [rec]}
    text, n = drafts.draft_from_report(report)
    assert n == 0 and "Left out: 1 failure(s)" in text and "closest fit are not a finding" in text


def test_where_values_compare_as_the_field_holds_them():
    from posenc.spec.models import RopeParams
    p = RopeParams(head_dim=8, rope_theta=10000.0, rope_type="linear", factor=4.0)
    assert exp.Expectation(**_line(where={"rope_theta": "1e4"})).covers("rope.apply", p, "float32")  # YAML 1.1 string
    assert exp.Expectation(**_line(where={"head_dim": 8.0})).covers("rope.apply", p, "float32")
    assert not exp.Expectation(**_line(where={"head_dim": "eight"})).covers("rope.apply", p, "float32")
    big = RopeParams(head_dim=8, rope_theta=float(2 ** 53))
    assert not exp.Expectation(**_line(where={"head_dim": 2 ** 53 + 1})).covers("rope.apply", big, "float32")


def test_a_golden_line_does_not_excuse_what_generated_lines_scope(run_suite, tmp_path):
    """Where the file has generated lines for an operation and dtype, its golden lines no longer excuse
    that operation's generated failures: the generated lines' conditions decide."""
    golden = _line(check="golden", case="rope-tiny-half", operation=None, where=None, finding=None,
                   clause="ROPE-PAIR-HALF", divergence="DIV-ROPE-PAIRING-SWAPPED")
    scoped = _line(operation="rope.apply_with_cos_sin", where={"rope_type": "yarn"}, clause="ROPE-PAIR-HALF",
                   divergence="DIV-ROPE-PAIRING-SWAPPED", finding=None)
    k = ("-k", "test_generated and apply_with_cos_sin", "--dtype", "float32")
    r = run_suite(PLANTED, *k, "--expectations", _write(tmp_path, golden))
    assert r.ret == 0 and _outcomes(r) == {"xfailed": 1}, r.stdout.str()[-2000:]  # the golden line alone
    r = run_suite(PLANTED, *k, "--expectations", _write(tmp_path, golden, scoped))
    assert r.ret == 1 and _outcomes(r) == {"failed": 1}, r.stdout.str()[-2000:]


def test_a_line_at_a_dtype_the_adapter_does_not_run_is_reported_not_exercised(run_suite, tmp_path):
    only32 = f"{HERE / 'generated_only_adapters.py'}:TorchFloat32Only"
    r = run_suite(only32, "-k", "test_generated and rope.apply]", "--dtype", "float32,float16", "--expectations",
                  _write(tmp_path, _line(dtypes=["float16"])))
    out = r.stdout.str()
    assert r.ret == 0 and "not exercised" in out and "or the adapter supports none" in out, out[-2000:]


def test_two_different_failures_in_one_generated_test_are_reported_as_one(run_suite, tmp_path):
    """Hypothesis's ExceptionGroup (two distinct failures) never reaches the report: one failure, the
    first found, shrunk, with its own clauses and a reason that says what failed."""
    report = tmp_path / "report.json"
    r = run_suite(f"{HERE / 'generated_only_adapters.py'}:TwoFailures", "-k", "test_generated and rope.apply",
                  "--dtype", "float32", "--report-json", str(report))
    out = r.stdout.str()
    assert r.ret == 1 and "ExceptionGroup" not in out and "distinct failures" not in out, out[-3000:]
    rec = next(x for x in json.loads(report.read_text())["results"] if x["check"] == "generated")
    assert rec["outcome"] == "failed" and rec["reason"].startswith("generated case"), rec["reason"]
    assert not rec["reason"].lstrip().startswith("+"), rec["reason"]

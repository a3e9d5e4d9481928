"""Call forms (issue 30): rope.apply reached through the calling conventions kernels have -- per-row offsets,
int32 positions, a token-major layout, a packed buffer with cu_seqlens, strided views, an in-place write --
each golden of rope.apply judged through every form its case can be put in, and a broken adapter per form
that the kit catches."""

from __future__ import annotations

from pathlib import Path

import pytest

from posenc.spec.document import Operation

HERE = Path(__file__).resolve().parent
BROKEN = HERE / "broken_form_adapters.py"
FORMS = ("offset", "row_offsets", "int32", "tokens", "token_major", "packed", "strided", "inplace")


def _outcomes(r) -> dict:
    return {k: v for k, v in r.parseoutcomes().items() if k != "deselected"}


@pytest.mark.parametrize("adapter", ["torch", "numpy"])
@pytest.mark.parametrize("isolation", ["none", "process"])
def test_the_ports_pass_every_form(run_suite, adapter, isolation):
    r = run_suite(adapter, "-k", "call_form", "--dtype", "float32,bfloat16", "--posenc-isolation", isolation)
    out = r.stdout.str()
    assert r.ret == 0 and set(_outcomes(r)) == {"passed"} and _outcomes(r)["passed"] >= 2 * 8 * 20, out[-3000:]


def test_every_form_is_collected_and_only_for_cases_it_can_express(pytester):
    from posenc.conformance.collect import form_params
    ids = [p.id for p in form_params()]
    for form in FORMS:
        assert any(f"~{form}@" in i for i in ids), form
    # rope-llama3-8b-scattered has rows whose positions are not offset + t: no offset or packed form of it
    assert not any(i.startswith("rope-llama3-8b-scattered~row_offsets@") for i in ids)
    assert not any(i.startswith("rope-llama3-8b-scattered~packed@") for i in ids)
    assert any(i.startswith("rope-llama3-8b-scattered~token_major@") for i in ids)


@pytest.mark.parametrize("adapter, form, words", [
    ("IgnoresOffsets", "row_offsets", "    DIV-ROPE-ARANGE-POSITIONS (violates"),
    ("ReadsAsHeadMajor", "token_major", "    DIV-ROPE-LAYOUT-MISREAD (violates ROPE-CALL-FORM"),
    ("Int32ReadAsInt16", "int32", "positions are the specified ones -65536"),
    ("PackedNoRestart", "packed", "    DIV-ROPE-PACKED-NO-RESTART (violates ROPE-CALL-FORM"),
    ("WritesNextHead", "inplace", "element(s) outside its in-place output 'q'"),
    ("InplaceOnACopy", "inplace", "q and k are returned unrotated"),
    ("InplaceRebinds", "inplace", "q and k are returned unrotated"),
    ("ReadsStorageAsContiguous", "strided", "    DIV-ROPE-STRIDES-IGNORED (violates ROPE-CALL-FORM"),
    ("OffsetTwice", "offset", "rope.apply passes this case: the failure is rope.apply_offset's own (ROPE-CALL-FORM)"),
    ("DocumentsOfTheFirstLength", "packed", "fails case rope-cache-offset-shared"),
    ("Int32Low20Bits", "int32", "fails case rope-offset-past-2-20"),
])
def test_each_form_catches_its_broken_adapter(run_suite, adapter, form, words):
    r = run_suite(f"{BROKEN}:{adapter}", "-k", f"call_form and {form}", "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and _outcomes(r).get("failed", 0) >= 1 and words in out, out[-3000:]
    # the same adapter's primary goldens pass: the bug is the form's
    r = run_suite(f"{BROKEN}:{adapter}", "-k", "test_golden and rope-", "--dtype", "float32")
    assert r.ret == 0, r.stdout.str()[-3000:]


@pytest.mark.parametrize("adapter, family, form, words", [
    ("MRopeTokenPositionsTransposed", "mrope", "tokens",
     "mrope.apply passes this case: the failure is mrope.apply_tokens's own (ROPE-CALL-FORM)"),
    ("MRopeReadsAsHeadMajor", "mrope", "token_major", "    DIV-ROPE-LAYOUT-MISREAD (violates ROPE-CALL-FORM"),
    ("MRopeInt32ReadAsInt16", "mrope", "int32", "fails case mrope-qwen2-vl-long"),
    ("AxialReadsStorageAsContiguous", "axial", "strided", "    DIV-ROPE-STRIDES-IGNORED (violates ROPE-CALL-FORM"),
    ("AxialWritesNextHead", "axial", "inplace", "element(s) outside its in-place output 'q'"),
    ("HiddenHeadsMinorFirst", "rope-apply-cos-sin", "hidden",
     "rope.apply_with_cos_sin passes this case: the failure is rope.apply_with_cos_sin_hidden's own"),
    ("CacheReadByTokenIndex", "rope-apply-cos-sin", "cache",
     "rope.apply_with_cos_sin passes this case: the failure is rope.apply_with_cos_sin_cache's own"),
])
def test_each_form_of_the_other_rotations_catches_its_broken_adapter(run_suite, adapter, family, form, words):
    """M-RoPE's and axial RoPE's forms (tokens at positions [A, N], token-major, int32, strided, in place) and
    rope.apply_with_cos_sin's (heads folded into the hidden size, cos/sin caches gathered at position_ids) judge
    the same way: the broken form fails, named, and the same adapter's primary goldens pass."""
    r = run_suite(f"{BROKEN}:{adapter}", "-k", f"call_form and {family}- and {form}", "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and _outcomes(r).get("failed", 0) >= 1 and words in out, out[-3000:]
    r = run_suite(f"{BROKEN}:{adapter}", "-k", f"test_golden and {family}-", "--dtype", "float32")
    assert r.ret == 0, r.stdout.str()[-3000:]


def test_a_form_the_adapter_does_not_declare_is_unsupported_never_called(run_suite):
    r = run_suite("jax", "-k", "call_form and rope-tiny-half", "--dtype", "float32")
    out = r.stdout.str()
    assert "does not serve call form rope.apply_inplace" in out and "failed" not in _outcomes(r), out[-3000:]


@pytest.mark.parametrize("bad, words", [
    ({"form_of": "rope.apply"}, "form_of and form go together"),
    ({"writes": ["position_ids"]}, "each is an input and an output"),
    ({"views": ["q"], "writes": ["q"], "returns": ["k"]}, "an input the operation does not write"),
])
def test_a_malformed_form_declaration_is_refused(bad, words):
    base = dict(name="rope.apply_x", title="t", method="rope", args=["params"], call="apply",
                call_args=["q", "k", "position_ids"], returns=["q", "k"],
                inputs=[{"name": "q", "kind": "float", "shape": "[B, H, T, D]"},
                        {"name": "k", "kind": "float", "shape": "[B, H, T, D]"},
                        {"name": "position_ids", "kind": "int", "shape": "[B, T]"}],
                outputs=[{"name": "q", "kind": "float", "shape": "[B, H, T, D]"},
                         {"name": "k", "kind": "float", "shape": "[B, H, T, D]"}], clauses=["ROPE-ANGLE"])
    with pytest.raises(ValueError, match=words):
        Operation(**{**base, **bad})


def test_the_worked_example_passes_through_the_forms_it_declares(run_suite):
    """docs/example_forms_adapter.py (the README's worked example of call_forms): its goldens pass through
    tokens and packed, the forms it does not declare are unsupported, never failed."""
    example = HERE.parent / "docs" / "example_forms_adapter.py"
    r = run_suite(str(example), "-k", "rope-tiny-half or rope-llama3-8b", "--dtype", "float32", "-vv")
    out = r.stdout.str()
    assert r.ret == 0 and "failed" not in _outcomes(r), out[-3000:]
    for form in ("tokens", "packed"):
        assert f"rope-llama3-8b~{form}@ROPE-CALL-FORM] PASSED" in out, out[-3000:]
    assert "does not serve call form rope.apply_strided" in out


def test_a_call_form_that_is_not_one_is_a_usage_error(pytester, run_suite):
    """A typo in call_forms (or a primary operation) would leave a form silently unchecked: refused, naming
    the known forms."""
    f = pytester.path / "typo_adapter.py"
    f.write_text("from posenc.adapters.torch_adapter import TorchAdapter\n\n"
                 "class Typo(TorchAdapter):\n    name = 'typo'\n    call_forms = ('rope.apply_packd', 'rope.apply')\n\n"
                 "ADAPTER = Typo\n")
    r = run_suite(str(f), "-k", "rope-tiny-half", "--dtype", "float32")
    err = r.stderr.str() + r.stdout.str()
    assert r.ret != 0 and "call_forms 'rope.apply_packd', 'rope.apply': not a call form" in err, err[-2000:]


def test_a_form_only_failure_is_counted_under_the_forms_clause(run_suite):
    """A form whose primary passes (an offset added twice: the output is rope.apply's at positions + offset) is
    named with the divergence it reproduces, but counted under ROPE-CALL-FORM, not the primary's ROPE-ANGLE."""
    r = run_suite(f"{BROKEN}:OffsetTwice", "-k", "call_form and offset", "--dtype", "float32")
    out = r.stdout.str()
    summary = out[out.index("posenc conformance:"):]
    assert r.ret == 1 and "\nROPE-CALL-FORM " in summary and "\nROPE-ANGLE " not in summary, summary[-3000:]
    assert "(violates ROPE-CALL-FORM)" in out and "(violates ROPE-ANGLE)" not in out, out[-3000:]


@pytest.mark.parametrize("adapter, select, words", [
    ("DeclaresFormsItLacks", "call_form and packed and rope-tiny-half",
     "declares call form rope.apply_packed (call_forms) but its prepared rope object (_OnlyApply) has no "
     "apply_packed() method"),
    ("DeclaresCacheFormItLacks", "call_form and rope-apply-cos-sin-half",
     "declares call form rope.apply_with_cos_sin_cache (call_forms) but defines no rope_apply_with_cos_sin_cache() "
     "method"),
])
def test_a_declared_form_without_its_method_fails(run_suite, adapter, select, words):
    """call_forms promises the method -- of the prepared object, or the adapter's own for a form of an adapter
    method: without it a failure naming the method, never an unsupported case the run counts as nothing."""
    r = run_suite(f"{BROKEN}:{adapter}", "-k", select, "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and words in out, out[-3000:]


def test_a_generated_line_naming_a_form_operation_is_refused(run_suite, tmp_path):
    """Generated examples run under the primary's test ID: a line naming a form operation would never be met;
    refused, pointing to forms:."""
    f = tmp_path / "exp.yaml"
    f.write_text("format: 2\nexpected_failures:\n  - check: generated\n    operation: rope.apply_packed\n"
                 "    dtypes: [float32]\n    clause: ROPE-CALL-FORM\n    divergence: DIV-ROPE-PACKED-NO-RESTART\n"
                 "    evidence: a test\n    library: torch\n    library_version: 2.13.0+cpu\n")
    r = run_suite(f"{BROKEN}:PackedNoRestart", "--expectations", str(f), "-k", "rope-tiny-half", "--dtype", "float32")
    err = r.stderr.str() + r.stdout.str()
    assert r.ret != 0 and "write operation: rope.apply with forms: [packed]" in err, err[-2000:]


def test_the_oracle_free_checks_run_through_the_forms_served(run_suite):
    """Each case's oracle-free checks make their rope.apply calls through one served form the case picks
    (shared, never multiplied): a kernel that ignores its per-row offsets fails them, counted under
    ROPE-CALL-FORM since the same checks pass on its rope.apply; the port passes them through every form."""
    r = run_suite(f"{BROKEN}:IgnoresOffsets", "-k", "test_pairing_probe", "--dtype", "float32")
    out = r.stdout.str()
    summary = out[out.index("posenc conformance:"):]
    assert r.ret == 1 and "ran through call form rope.apply_row_offsets, this case's among the check's cases" in out, out[-3000:]
    assert "rope.apply passes this check on" in out and "\nROPE-CALL-FORM " in summary, summary[-3000:]
    r = run_suite("torch", "-k", "test_pairing_probe or test_relative or test_pair_norm or cache_equals_prefill",
                  "--dtype", "float32,bfloat16")
    assert r.ret == 0, r.stdout.str()[-3000:]


@pytest.mark.parametrize("adapter, form", [
    ("StaleDecodeOffset", "rope.apply_offset"),  # a one-token call at the cache length before the token counted
    ("RowOffsetsFirstCall", "rope.apply_row_offsets"),  # the first call's dynamic frequencies kept
    ("InplaceFirstCall", "rope.apply_inplace"),  # the same in the in-place write (vLLM's decode path)
])
def test_cache_equals_prefill_decodes_through_every_form_served(run_suite, adapter, form):
    """A decode loop carries state from call to call, which a golden (one call) cannot see: cache_equals_prefill
    runs the loop on rope.apply and again through every served form the steps can be put in, each on its own
    prepared object -- a bug of one form's state fails there, as the form's own (ROPE-CALL-FORM), with the
    torch port's whole call_forms declared too (the form is not left to the case's pick)."""
    r = run_suite(f"{BROKEN}:{adapter}", "-k", "cache_equals_prefill", "--dtype", "float32")
    out = r.stdout.str()
    summary = out[out.index("posenc conformance:"):]
    assert r.ret == 1 and f", through {form}" in out, out[-3000:]
    assert f"rope.apply passes the same decode steps: the failure is {form}'s own" in out, out[-3000:]
    assert "\nROPE-CALL-FORM " in summary, summary[-3000:]


def test_each_check_uses_every_form_one_of_its_cases_can_take():
    """The served forms are spread over a check's cases, not left to a hash of each case's ID: every form that
    some case of the check can be put in is used by one (the offset form, which only single-row cases take,
    was never picked by the hash), and no form takes more than two cases beyond another."""
    from collections import Counter
    from posenc import registry
    from posenc.adapters.torch_adapter import TorchAdapter
    from posenc.conformance.collect import _form_inputs, check_form, params, with_invariant
    from posenc.harness.generation import form_candidates
    a = TorchAdapter()
    seen_offset = False
    for chk in registry.checks().values():
        ps = params(chk.select, chk.clauses) if chk.select is not None else with_invariant(chk.invariant, tuple(chk.handlers))
        cases = [p.values[0] for p in ps if p.values[0].op == "rope.apply"]
        if not cases:
            continue
        memo: dict = {}
        used = Counter(check_form(a, c, cases, memo) for c in cases)
        possible = {f for c in cases for f in form_candidates(a, c.op, c.params, _form_inputs(c))}
        assert set(used) == possible, (chk.name, possible - set(used))
        assert max(used.values()) - min(used.values()) <= 2 or len(cases) < len(possible), (chk.name, used)
        seen_offset |= "rope.apply_offset" in used
    assert seen_offset


@pytest.mark.parametrize("forms,excused", [("[packed]", True), ("[tokens]", False), ("[primary]", False)])
def test_a_generated_line_with_forms_covers_the_examples_run_through_them(run_suite, tmp_path, forms, excused):
    """A generated line's ``forms:`` is judged on the form each drawn example ran through: a bug of the packed
    entry alone, recorded for ``forms: [packed]``, excuses the examples that went through it (counted under
    ROPE-CALL-FORM, the form's own: rope.apply passes them) and the line is exercised; recorded for another
    form, or the primary, it excuses nothing (hostile review)."""
    import torch
    f = tmp_path / "gen.yaml"
    f.write_text("format: 2\nexpected_failures:\n  - check: generated\n    operation: rope.apply\n    dtypes: [float32]\n"
                 f"    forms: {forms}\n    clause: ROPE-CALL-FORM\n    divergence: DIV-ROPE-PACKED-NO-RESTART\n"
                 f"    evidence: a test\n    library: torch\n    library_version: \"{torch.__version__}\"\n")
    r = run_suite(f"{BROKEN}:PackedOnlyNoRestart", "-k", "test_generated and rope.apply]", "--dtype", "float32",
                  "--expectations", str(f), "--posenc-examples", "40")  # several examples through each of nine forms
    out = r.stdout.str()
    if excused:
        assert r.ret == 0 and r.parseoutcomes().get("xfailed") == 1, out[-3000:]
        assert "not exercised" not in out and "stale" not in out, out[-3000:]
    else:
        assert r.ret == 1 and "rope.apply passes this example: the failure is rope.apply_packed's own" in out, out[-3000:]


def _line(tmp_path, divergence: str, clause: str, extra: str = "") -> str:
    import torch
    f = tmp_path / "exp.yaml"
    f.write_text(f"format: 2\nexpected_failures:\n  - case: rope-llama3-8b\n    check: golden\n    dtypes: [float32]\n"
                 f"    clause: {clause}\n    divergence: {divergence}\n{extra}    evidence: a test\n    library: torch\n"
                 f"    library_version: \"{torch.__version__}\"\n")
    return str(f)


def test_a_cases_line_excuses_its_form_tests_with_the_same_divergence(run_suite, tmp_path):
    """The case's recorded bug seen through every form (a kernel whose forms all call its apply): its line
    books the form tests as expected too, so a user who records a real bug stays green."""
    exp = _line(tmp_path, "DIV-ROPE-PAIRING-SWAPPED", "ROPE-PAIR-HALF")
    r = run_suite(f"{HERE / 'broken_adapters.py'}:PairingSwapped",
                  "--expectations", exp, "-k", "rope-llama3-8b and not scattered and (test_golden or call_form)",
                  "--dtype", "float32")
    o = _outcomes(r)
    assert r.ret == 0 and o.get("xfailed", 0) >= 7 and not o.get("failed"), r.stdout.str()[-3000:]


def test_a_forms_line_records_a_bug_of_one_form(run_suite, tmp_path):
    """A bug of the packed form alone: recorded with forms: [packed] on the case's line (strict: that test); the
    case's cache_equals_prefill, which decodes through the packed form too, sees it and is recorded by a line of
    that check with forms: [packed] -- a line of it without forms: (the operation's own call) does not excuse a
    failure the kit calls the form's own."""
    exp = _line(tmp_path, "DIV-ROPE-PACKED-NO-RESTART", "ROPE-CALL-FORM", "    forms: [packed]\n")
    text = Path(exp).read_text()
    check_line = text[text.index("  - case:"):].replace("check: golden", "check: cache_equals_prefill")
    Path(exp).write_text(text + check_line)
    sel = ("-k", "rope-llama3-8b and not scattered", "--dtype", "float32")
    r = run_suite(f"{BROKEN}:PackedNoRestart", "--expectations", exp, *sel)
    o = _outcomes(r)
    assert r.ret == 0 and o.get("xfailed") == 2 and not o.get("failed"), r.stdout.str()[-3000:]
    Path(exp).write_text(text + check_line.replace("    forms: [packed]\n", ""))
    r = run_suite(f"{BROKEN}:PackedNoRestart", "--expectations", exp, *sel)
    out = r.stdout.str()
    assert r.ret == 1 and "but the failure is call form rope.apply_packed's own (the operation itself passes): " \
        "record it with forms: [packed]" in out, out[-3000:]


def test_a_decode_step_failing_on_rope_apply_too_is_not_blamed_on_the_form(run_suite):
    """cache_equals_prefill's steps go through the case's form too, but a decode step off by one in rope.apply
    itself fails the same check called directly: rope.apply's failure, counted under ROPE-ANGLE, never
    ROPE-CALL-FORM, whatever form the case picks."""
    r = run_suite(f"{BROKEN}:DecodeOffByOne", "-k", "cache_equals_prefill and rope-cache-offset-shared", "--dtype",
                  "float32")
    out = r.stdout.str()
    summary = out[out.index("posenc conformance:"):]
    assert r.ret == 1 and "\nROPE-ANGLE " in summary, out[-3000:]
    assert "\nROPE-CALL-FORM " not in summary, summary


def test_a_form_unsupported_for_a_case_leaves_its_checks_on_rope_apply(run_suite):
    """A varlen kernel with no path for partial or scaled RoPE: the case's checks that picked the packed form
    make those calls on rope.apply instead of becoming unsupported (the form's own tests count it)."""
    sel = "rope-condense-interleaved-partial and not call_form and not test_golden"
    port = _outcomes(run_suite("torch", "-k", sel, "--dtype", "float32"))
    r = run_suite(f"{BROKEN}:PackedScaledUnsupported", "-k", sel, "--dtype", "float32")
    assert r.ret == 0 and _outcomes(r) == port, (port, r.stdout.str()[-3000:])

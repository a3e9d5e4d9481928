"""The divergence catalogue: every (current) divergence is caught *and named* at each of its
dtypes -- by a golden case, through the adapter path (``MutantAdapter``), and by the generated
cases of at least one of its operations."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from posenc import families
from posenc.adapters import Unsupported
from posenc.adapters.reference_adapter import MutantAdapter
from posenc.harness import golden
from posenc.harness.generation import drawn_examples, example_golden
from posenc.harness.diagnosis import caught_outputs, diagnose, seen_through
from posenc.harness.runner import compare_outputs, run_case, run_in_form
from posenc.registry.forms import form_of

from posenc.spec.errors import AdapterError
from posenc import registry

SPEC = families.spec()
CURRENT = sorted(SPEC.operation_divergences)
#: observable only on rows outside the table, which no golden can hold (see test_reference)
ONLY_OUT_OF_RANGE = {"lookup_clamped", "lookup_take_unchecked"}
PAIRS = [(d, dt) for d in CURRENT for dt in SPEC.divergences[d].dtypes]


@functools.lru_cache(maxsize=1)
def _goldens():
    m = golden.read_manifest()
    return [golden.load(c, manifest=m) for c in families.all_cases()]


def _fails(g, out, dtype) -> bool:
    return not all(c.ok for c in compare_outputs(g, out, dtype))


@pytest.mark.parametrize("div_id,dtype", PAIRS, ids=[f"{d}-{t}" for d, t in PAIRS])
def test_golden_catches_and_names(div_id, dtype):
    """Some golden case run through ``MutantAdapter(div_id)`` at ``dtype`` fails, and the
    diagnosis names ``div_id`` among the divergences that reproduce the output."""
    d = SPEC.divergences[div_id]
    if d.mutant in ONLY_OUT_OF_RANGE:
        pytest.skip(f"{d.mutant}: observable out of range only (the row_range check and tests/test_reference.py)")
    adapter = MutantAdapter(div_id)
    ops = set(registry.mutants()[d.mutant])
    caught, named = [], []
    for g, _ in seen_through(_goldens(), ops):  # a form's mutant: the goldens put through the form
        if dtype not in adapter.dtypes:
            continue
        try:
            out = run_case(adapter, g, dtype, "cpu") if g.form is None else run_in_form(adapter, g, g.form, dtype, "cpu")
        except Unsupported:
            continue
        except AdapterError:  # a mutant form of another shape for this case: not a value verdict
            continue
        if not _fails(g, out, dtype):
            continue
        caught.append(g.case.id)
        if div_id in [m.divergence for m in diagnose(SPEC, g, out, dtype)]:
            named.append(g.case.id)
            break
    assert caught, f"{div_id}: no golden case of {sorted(ops)} catches MutantAdapter at {dtype}"
    assert named, f"{div_id}: caught at {dtype} by {caught[:5]}, but the diagnosis never names it"


EXAMPLES = 300


@functools.lru_cache(maxsize=None)
def _examples(op: str, dtype: str):
    """The first EXAMPLES cases the suite's generator draws for ``op`` at ``dtype``, with goldens."""
    return [example_golden(c, seed) for c, seed in drawn_examples(op, dtype, EXAMPLES)]


def _caught_on(d, g, dtype) -> bool:
    out = registry.run_mutant(d.mutant, g.case.op, g.case.params, g.inputs, dtype)
    if out is None or any(np.shape(out[k]) != g.outputs[k].shape for k in out if k in g.outputs):
        return False
    return _fails(g, {k: np.asarray(v) for k, v in out.items()}, dtype)


#: Known gaps of the generators (strict xfail: fixed, they fail and must be removed). None today:
#: DIV-SCALE-DYNAMIC-STALE at bfloat16 was one until the draws stopped depending on the literals of
#: the modules loaded (generated._no_local_constants).
KNOWN_GAPS: dict = {}
GEN_PAIRS = [pytest.param(d, t, id=f"{d}-{t}", marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(d, t)])]
                          if (d, t) in KNOWN_GAPS else []) for d, t in PAIRS]


@pytest.mark.parametrize("div_id,dtype", GEN_PAIRS)
def test_generated_cases_catch(div_id, dtype):
    """Among the first EXAMPLES cases the suite's generators draw (``--posenc-examples``) for one
    of the divergence's operations at ``dtype``, one puts its mutant out of tolerance."""
    d = SPEC.divergences[div_id]
    if d.mutant in ONLY_OUT_OF_RANGE:
        pytest.skip(f"{d.mutant}: observable out of range only, where the reference raises (the row_range check)")
    gens = families.generators()
    mops = registry.mutants()[d.mutant]
    ops = sorted({op for op in mops if op in gens} | {f.primary for op in mops if (f := form_of(op)) and f.primary in gens})
    assert ops, f"{div_id}: none of its operations {sorted(mops)} has a generator (nor is a call form of one that has)"
    for op in ops:
        for k, (g, _) in enumerate(seen_through(_examples(op, dtype), mops)):
            if caught_outputs(d, g, dtype) is not None:
                print(f"{div_id} at {dtype}: caught by generated example #{k} of {op}")
                return
    pytest.fail(f"{div_id} ({d.mutant}) is never caught at {dtype} by the first {EXAMPLES} generated cases of {ops}")


def test_a_mutant_has_a_form_wherever_its_bug_shows_or_a_registered_reason():
    """Names that hold: a divergence whose mutant has a form for an operation has one for every
    operation built on it (spec ``builds_on``, transitively: ``rope.cos_sin_calls`` is
    ``rope.cos_sin`` called again), or a reason registered with ``registry.no_form``, which a
    failure no divergence reproduces names.  Every registered reason covers some divergence."""
    missing = {op: sorted(d for d, r in registry.no_form_reasons(op).items() if not r) for op in SPEC.operations}
    assert not {op: ds for op, ds in missing.items() if ds}, "a form, or registry.no_form(op, reason, mutant)"
    for op, entries in registry.NO_FORMS.items():
        used = {SPEC.divergences[d].mutant for d in registry.no_form_reasons(op)}
        for names, reason in entries:
            assert used if not names else set(names) <= used, f"no_form({op!r}, ...{names}): stale ({reason})"


def test_every_divergence_a_golden_catches_shares_a_clause_with_it():
    """Names that hold: a case's clauses include every clause its parameters exercise, so a divergence
    its golden catches (at any of the divergence's dtypes) always violates one of them, and a failure
    of that golden can be booked under a clause the bug breaks (each family's ``@case_clauses`` rule,
    applied by ``add_cases``: e.g. a YaRN golden lists ROPE-ATTENTION-FACTOR and ROPE-INV-FREQ, an axial
    one with two axes AXIAL-AXIS-ORDER)."""
    by_op: dict[str, list] = {}
    for d in CURRENT:
        for op in registry.mutants().get(SPEC.divergences[d].mutant, {}):
            by_op.setdefault(op, []).append(SPEC.divergences[d])
    disjoint = sorted(
        f"{g.case.id} {g.case.clauses} caught by {d.id} {d.violates}"
        for g in _goldens() for d in by_op.get(g.case.op, [])
        if not set(d.violates) & set(g.case.clauses) and any(caught_outputs(d, g, dt) is not None for dt in d.dtypes))
    assert not disjoint, "\n".join(disjoint)


@pytest.mark.parametrize("op", sorted(families.generators()))
def test_every_divergence_a_generated_case_catches_shares_a_clause_with_it(op):
    """The same for the generated cases: among the first 40 float32 examples of ``op``, each one a
    divergence's mutant puts out of tolerance lists a clause that divergence violates."""
    divs = [SPEC.divergences[d] for d in CURRENT if op in registry.mutants().get(SPEC.divergences[d].mutant, {})]
    disjoint = sorted({
        f"{d.id} {d.violates} caught by a generated case with clauses {g.case.clauses}"
        for g in _examples(op, "float32")[:40] for d in divs
        if "float32" in d.dtypes and not set(d.violates) & set(g.case.clauses) and _caught_on(d, g, "float32")})
    assert not disjoint, "\n".join(disjoint)


def test_the_forms_for_operations_built_on_others_are_the_same_bug():
    """The forms added where a bug shows (issue 27): on rope.cos_sin_calls each call of the sequence is
    what the mutant's rope.cos_sin form gives on that call's positions."""
    from posenc.registry import run_mutant
    g = golden.load(next(c for c in families.all_cases() if c.op == "rope.cos_sin_calls" and c.params.rope_type == "default"))
    for div in ("DIV-ROPE-BF16-ANGLES", "DIV-ROPE-BF16-INV-FREQ", "DIV-ROPE-EXPONENT-HEAD-DIM", "DIV-ROPE-FACTOR-IGNORED"):
        fns = registry.mutants()[SPEC.divergences[div].mutant]
        calls = fns["rope.cos_sin_calls"](g.case.params, g.inputs, "bfloat16")
        for key in (k for k in g.inputs if k.startswith("position_ids.")):
            one = fns["rope.cos_sin"](g.case.params, {"position_ids": g.inputs[key]}, "bfloat16")
            k = key.rsplit(".", 1)[1]
            assert np.array_equal(calls[f"cos.{k}"], one["cos"]) and np.array_equal(calls[f"sin.{k}"], one["sin"]), div


def test_a_failure_nothing_reproduces_names_the_divergences_it_was_not_compared_with():
    from posenc.harness.failure import ConformanceFailure, assert_conforms, not_tried_lines
    assert not_tried_lines("rope.apply") == []
    lines = not_tried_lines("layers.apply")
    assert len(lines) == 1 and lines[0].startswith("not compared on layers.apply (no mutant form: layers.apply checks which")
    assert "DIV-ROPE-" in lines[0] and " more" in lines[0]
    g = golden.load(next(c for c in families.all_cases() if c.op == "layers.apply"))
    wrong = {n: np.asarray(v) * 1.5 for n, v in g.outputs.items() if not n.endswith(".compared")}
    with pytest.raises(ConformanceFailure) as e:
        assert_conforms(MutantAdapter("DIV-ROPE-PAIRING-SWAPPED"), g, wrong, "float32")
    assert "no known divergence reproduces this output" in str(e.value.msg)
    assert "not compared on layers.apply (no mutant form:" in str(e.value.msg)


def test_a_reference_subclass_that_changes_the_params_of_a_prepared_operation_gets_them():
    """``compute`` of a prepared operation (rope.apply) receives the state made from the prepared parameters; a
    subclass that plants a bug by passing other parameters with that state (hostile review: attention_factor
    1.25) gets a state made from its own, not its change silently dropped (the run passed, the line stale)."""
    from posenc.adapters.reference_adapter import ReferenceAdapter
    from posenc.harness.runner import run_op

    class Factor(ReferenceAdapter):
        def compute(self, op, params, inputs, dtype, state=None):
            if op == "rope.apply":
                params = params.model_copy(update={"attention_factor": 1.25})
            return super().compute(op, params, inputs, dtype, state)

    from posenc.harness.failure import load_golden
    g = load_golden("rope-llama3-8b")
    x = {n: g.inputs[n] for n in ("q", "k", "position_ids")}
    got = run_op(Factor(), "rope.apply", g.case.params, x, "float64", "cpu")
    want = families.reference_of("rope.apply").fn(g.case.params.model_copy(update={"attention_factor": 1.25}), x)
    np.testing.assert_allclose(got["q"], want["q"], rtol=1e-12)
    same = run_op(ReferenceAdapter(), "rope.apply", g.case.params, x, "float64", "cpu")  # unchanged: the state kept
    np.testing.assert_allclose(same["q"], g.outputs["q"], rtol=1e-12)

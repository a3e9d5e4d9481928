"""Several divergences reproducing one output (issue 9, item 4): the failure ranks them (closest
first) and names, for the closest and each other, a golden case that tells them apart, or says
that none does.  The catalogue is checked for it: every pair of divergences that reproduce each
other's output on some golden case is told apart by another golden case at that dtype, unless it
is listed below with the reason no case can.
"""

from __future__ import annotations

import collections
import functools

import pytest

from posenc import families
from posenc.harness.diagnosis import _match, mutant_outputs, separating_case
from posenc.harness.runner import compare_outputs
from posenc.harness.failure import load_golden, separation_lines
from posenc.spec import load_spec

SPEC = load_spec()

#: Pairs no output can tell apart at a dtype, with the reason (none today).
INDISTINGUISHABLE: dict[frozenset, str] = {}


@functools.lru_cache(maxsize=None)
def _goldens():
    return [load_golden(c.id) for c in families.all_cases()]


def co_matching(dtype: str) -> set[tuple[str, str, str]]:
    """``(a, b, case)``: ``a``'s mutant output is caught on golden ``case`` and ``b``'s mutant reproduces it."""
    found = set()
    divs = list(SPEC.operation_divergences.values())
    for g in _goldens():
        forms = [d for d in divs if g.case.op in families.mutants().get(d.mutant, {})]
        for a in forms:
            if dtype not in a.dtypes:
                continue
            out = mutant_outputs(a, g, dtype)
            if out is None:
                continue
            try:
                if all(c.ok for c in compare_outputs(g, out, dtype)):
                    continue
            except Exception:  # noqa: BLE001 - another shape: no comparison, no co-match
                continue
            found |= {(a.id, b.id, g.case.id) for b in forms if b.id != a.id and _match(b, g, out, dtype)}
    return found


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_co_matching_pair_is_told_apart_by_a_golden_case(dtype):
    pairs = collections.defaultdict(set)
    for a, b, case in co_matching(dtype):
        pairs[frozenset((a, b))].add(case)
    assert pairs, "no two divergences coincide anywhere: the check would test nothing"
    goldens = _goldens()
    unseparated = {}
    for pair, cases in sorted(pairs.items(), key=lambda kv: sorted(kv[0])):
        a, b = sorted(pair)
        sep = separating_case(SPEC, a, b, goldens, dtype)
        if sep is None and pair not in INDISTINGUISHABLE:
            unseparated[f"{a} / {b}"] = sorted(cases)
        if sep is not None:
            assert sep not in cases
    assert not unseparated, f"pairs that coincide (on the cases listed) and no golden case tells apart: {unseparated}"


def test_a_case_where_one_reproduces_the_others_output_does_not_tell_them_apart():
    """At bfloat16 on rope-tiny-partial-half the tail-rotated mutant, judged by its own pair norms, reproduces
    the split-head mutant's output (not the other way round): an adapter with the split-head bug learns
    nothing from rerunning that case, so it is not the case named to tell the two apart (it was, and the
    co-matching check above failed on it)."""
    from posenc.harness.diagnosis import caught_outputs
    a, b = "DIV-ROPE-PARTIAL-SPLIT-HEAD-DIM", "DIV-ROPE-TAIL-ROTATED"
    g = load_golden("rope-tiny-partial-half")
    assert _match(SPEC.divergences[b], g, caught_outputs(SPEC.divergences[a], g, "bfloat16"), "bfloat16")
    assert separating_case(SPEC, a, b, [g], "bfloat16") is None
    assert separating_case(SPEC, a, b, _goldens(), "bfloat16") not in (None, g.case.id)


def test_the_failure_names_the_case_that_tells_two_divergences_apart():
    """LongRoPE at initialisation and 'always the long factors' coincide when the configured
    context exceeds the original on every call: the failure ranks both and points at the case
    where only one of them reproduces the output."""
    case = next(c for c in families.all_cases() if c.id == "scale-longrope-at-init")
    lines = separation_lines(case, ["DIV-SCALE-LONGROPE-AT-INIT", "DIV-SCALE-LONGROPE-ALWAYS-LONG"], "float32")
    assert lines[0].startswith("  these cases tell them apart")
    assert "DIV-SCALE-LONGROPE-AT-INIT / DIV-SCALE-LONGROPE-ALWAYS-LONG: case scale-longrope-" in lines[1]
    assert separation_lines(next(iter(families.all_cases())), ["DIV-ROPE-PAIRING-SWAPPED"], "float32") == []


def test_a_planted_mutant_failure_shows_the_ranking_and_the_separating_case(pytester, tmp_path, run_suite):
    adapter = tmp_path / "mutant_adapter.py"
    adapter.write_text("from posenc.adapters.reference_adapter import MutantAdapter\n"
                       "ADAPTER = lambda: MutantAdapter('DIV-SCALE-LONGROPE-AT-INIT')\n")
    r = run_suite(str(adapter), "-k", "test_golden and scale-longrope-switch")
    text = r.stdout.str()
    assert r.ret == 1, text[-3000:]
    assert "the output matches known divergence(s), closest first:" in text
    assert "these cases tell them apart" in text and "DIV-SCALE-LONGROPE-AT-INIT / " in text


def test_the_long_prefill_case_by_hand():
    """scale-longrope-long-prefill from the LongRoPE formula, written out here: 20 positions > 16
    take the long factors; cos/sin scaled by sqrt(1 + ln(64 / 16) / ln 16) = sqrt(1.5)."""
    import math

    import numpy as np
    g = load_golden("scale-longrope-long-prefill")
    for m in (0, 7, 19):
        for k in (0, 3, 7):
            angle = m * 10000.0 ** (-2 * k / 16) / (1.0 + 3 * k)
            assert g.outputs["cos"][0, m, k] == pytest.approx(math.sqrt(1.5) * math.cos(angle), rel=1e-12, abs=1e-12)
            assert g.outputs["sin"][0, m, k] == pytest.approx(math.sqrt(1.5) * math.sin(angle), rel=1e-12, abs=1e-12)
    assert np.isclose(math.sqrt(1 + math.log(4) / math.log(16)), math.sqrt(1.5))


def test_the_separating_case_named_is_one_the_adapter_runs(run_suite, tmp_path):
    """The same bug in an adapter that reports contexts no longer than the original unsupported:
    both cases that tell the two divergences apart are of that kind, so the hint names none to
    rerun; it says which case would, and that the adapter does not run it."""
    adapter = tmp_path / "extended_only.py"
    adapter.write_text(
        "from posenc.adapters import Unsupported\n"
        "from posenc.adapters.reference_adapter import MutantAdapter\n"
        "class ExtendedOnly(MutantAdapter):\n"
        "    def compute(self, op, params, inputs, dtype, state=None):\n"
        "        if getattr(params, 'max_position_embeddings', None) == getattr(params, 'original_max_position_embeddings', 0):\n"
        "            raise Unsupported('only extended contexts')\n"
        "        return super().compute(op, params, inputs, dtype, state)\n"
        "ADAPTER = lambda: ExtendedOnly('DIV-SCALE-LONGROPE-AT-INIT')\n")
    r = run_suite(str(adapter), "-k", "test_golden and scale-longrope-switch")
    text = r.stdout.str()
    assert r.ret == 1, text[-3000:]
    assert "DIV-SCALE-LONGROPE-AT-INIT / DIV-SCALE-LONGROPE-ALWAYS-LONG: no case this adapter runs at float32 " \
           "(case scale-longrope-at-init-original-length would" in text
    assert "ALWAYS-LONG: case scale-longrope-at-init-original-length" not in text

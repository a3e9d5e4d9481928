"""Generated cases in the conformance suite: they catch what the goldens cannot (an adapter
that memorised the goldens), shrink and print a replayable case, are deterministic, count
unsupported examples, and every generator draws valid cases of its operation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import families
from posenc.harness.generation import SEEDS, example_golden

HOSTILE = Path(__file__).resolve().parent / "memorising_adapter.py"


def test_memorising_adapter_passes_goldens_and_fails_generated(run_suite):
    r = run_suite(f"{HOSTILE}:Memorising", "-k", "golden or generated", "-p", "no:randomly")
    out = r.stdout.str()
    assert r.ret == 1, out[-3000:]
    failed = re.findall(r"FAILED \S+::(test_\w+)\[", out)
    assert failed and set(failed) == {"test_generated"}, failed  # every golden passes
    assert "DIV-ROPE-PAIRING-SWAPPED" in out  # and the generated failure is named


def test_failure_prints_a_replayable_shrunk_case(run_suite, tmp_path):
    r = run_suite(f"{HOSTILE}:Memorising", "-k", "generated and rope.apply and not cos")
    out = r.stdout.str()
    assert "generated case (shrunk; input values seed" in out
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "replay the shrunk case in Python:" in ln) + 1
    snippet = []
    for ln in lines[start:]:
        if not ln.startswith("    "):
            break
        snippet.append(ln[4:])
    code = "\n".join(snippet)
    assert "print(replay(case" in code
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "<snippet>", "exec"), {})  # noqa: S102 - the kit's own printed snippet
    assert "fails" in buf.getvalue() and "DIV-ROPE-PAIRING-SWAPPED" in buf.getvalue(), buf.getvalue()
    assert re.search(r"posenc rerun.*\n.*test_generated\[float32-rope\.apply\]", out)


def _snippets(out: str) -> list[str]:
    return re.findall(r"case = Case\(.*\n.*\n", out)


def test_deterministic_by_default_and_seedable(run_suite):
    a = run_suite(f"{HOSTILE}:Memorising", "-k", "generated and rope.apply").stdout.str()
    b = run_suite(f"{HOSTILE}:Memorising", "-k", "generated and rope.apply").stdout.str()
    assert _snippets(a) and _snippets(a) == _snippets(b)
    c = run_suite("numpy", "-v", "-k", "generated", "--posenc-seed", "7", "--posenc-examples", "3")
    assert c.ret == 0 and "posenc generated cases: 3 per operation and dtype, seed 7" in c.stdout.str()


def test_header_names_the_example_count(run_suite):
    r = run_suite("numpy", "-v", "-k", "generated and alibi")
    assert "posenc generated cases: 6 per operation and dtype, seed 0 (deterministic" in r.stdout.str()


def test_zero_examples_collects_no_generated_test(run_suite):
    r = run_suite("numpy", "-k", "generated", "--posenc-examples", "0")
    assert r.ret != 0 and "no tests ran" in r.stdout.str() or "deselected" in r.stdout.str()
    assert "test_generated" not in r.stdout.str().split("posenc conformance")[0].split("deselected")[-1]


def test_unsupported_examples_are_counted_not_passed(run_suite):
    r = run_suite(f"{HOSTILE}:NothingRope", "-k", "generated and rope.apply and not cos")
    out = r.stdout.str()
    assert "unsupported: this adapter has no RoPE" in out
    assert re.search(r"1 skipped", out), out[-2000:]


def test_partly_unsupported_operation_still_checks_the_rest(run_suite, tmp_path):
    report = tmp_path / "r.json"
    r = run_suite(f"{HOSTILE}:NoInterleaved", "-k", "generated and rope.apply and not cos",
                  "--posenc-examples", "12", "--report-json", str(report))
    assert r.ret == 0, r.stdout.str()[-2000:]
    import json
    rec = json.loads(report.read_text())["results"]
    assert rec and rec[0]["outcome"] == "passed"


@pytest.mark.parametrize("op", sorted(families.generators()))
def test_every_generator_draws_valid_cases(op):
    """Each drawn case is one the reference computes, with the operation's declared output
    shapes, and clauses the operation serves; 25 examples per operation."""
    served = set(families.operation(op).clauses)
    seen = set()

    @settings(max_examples=25, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.tuples(st.composite(lambda draw: families.generators()[op](draw))(), SEEDS))
    def check(example):
        c, seed = example
        assert c.op == op and set(c.clauses) <= served
        g = example_golden(c, seed)
        assert all(np.all(np.isfinite(v)) for v in g.outputs.values() if np.asarray(v).dtype.kind == "f")
        seen.add(repr((c.params, c.inputs)))

    check()
    assert len(seen) >= 5, f"{op}: only {len(seen)} distinct cases in 25 examples"


def _expectation_file(tmp_path, divergence: str) -> str:
    import torch

    from posenc.conformance import expectations as exp
    p = tmp_path / "exp.yaml"
    p.write_text(exp.dump([{"case": "rope-tiny-half", "check": "golden", "dtypes": ["float32"], "clause": "ROPE-PAIR-HALF",
                            "divergence": divergence, "evidence": "planted", "library": "torch",
                            "library_version": torch.__version__}], "# test"))
    return str(p)


BROKEN = Path(__file__).resolve().parent / "broken_adapters.py"


def test_generated_failure_excused_by_the_diagnosed_divergence_only(run_suite, tmp_path):
    """A generated failure diagnosed as the divergence an expectation line records (for one of its
    clauses, at its dtype) is the expected divergence; with a line for another divergence it fails."""
    import json
    report = tmp_path / "r.json"
    ok = run_suite(f"{BROKEN}:PairingSwapped", "-k", "(rope-tiny-half and golden) or generated and rope.apply and not cos",
                   "--expectations", _expectation_file(tmp_path, "DIV-ROPE-PAIRING-SWAPPED"), "--report-json", str(report))
    assert ok.ret == 0, ok.stdout.str()[-3000:]
    gen = [r for r in json.loads(report.read_text())["results"] if r["case"] == "rope.apply"]
    assert len(gen) == 1, gen
    assert gen[0]["outcome"] == "diverges" and gen[0]["divergence"] == "DIV-ROPE-PAIRING-SWAPPED"
    assert gen[0]["generated"]["excused"] >= 1
    other = run_suite(f"{BROKEN}:PairingSwapped", "-k", "generated and rope.apply and not cos",
                      "--expectations", _expectation_file(tmp_path, "DIV-ROPE-TAIL-ROTATED"))
    assert other.ret == 1 and "generated case (shrunk" in other.stdout.str()


def test_a_partly_supported_generated_test_counts_only_what_passed(run_suite, tmp_path):
    """The README's example adapter does plain half pairing only: its generated rope.apply test
    passes on those draws, and the summary and the report credit ROPE-PAIR-HALF with the pass,
    never ROPE-PAIR-INTERLEAVED or a scaling clause (those are unsupported)."""
    import json
    example = Path(__file__).resolve().parent.parent / "docs" / "example_adapter.py"
    out = tmp_path / "r.json"
    r = run_suite(str(example), "--report-json", str(out), "-k", "test_generated and rope.apply and not cos")
    rows = {ln.split()[0]: [int(v) for v in ln.split()[1:]] for ln in r.stdout.str().splitlines()
            if re.fullmatch(r"[A-Z0-9-]+( +\d+){4}", ln.strip())}
    assert rows["ROPE-PAIR-HALF"][0] == 1, rows
    for clause in ("ROPE-PAIR-INTERLEAVED", "SCALE-YARN-RAMP", "ROPE-PARTIAL"):
        assert rows[clause][0] == 0 and rows[clause][3] == 1, (clause, rows[clause])
    rec = next(x for x in json.loads(out.read_text())["results"] if x["test_id"].startswith("test_generated"))
    assert rec["outcome"] == "passed" and rec["counted"]["ROPE-PAIR-HALF"] == "passed"
    assert rec["counted"]["ROPE-PAIR-INTERLEAVED"] == "unsupported"
    assert rec["generated"]["unsupported"] > 0


def test_the_draws_do_not_depend_on_the_modules_loaded(tmp_path, monkeypatch):
    """Hypothesis biases draws towards literals of the local modules loaded in the process; the
    suite turns that off, so an adapter's (or any) module full of constants changes no drawn case."""
    import importlib
    from posenc.harness.generation import drawn_examples, replay_snippet

    def drawn():
        return [replay_snippet(c, s, "x", "float32", "cpu") for op in ("rope.cos_sin_calls", "alibi.bias")
                for c, s in drawn_examples(op, "float32", 60)]
    before = drawn()
    (tmp_path / "posenc_constants_probe.py").write_text(
        "VALUES = [" + ", ".join(str(v) for v in (3, 7, 65505, 131071, 4097, 8191, 123457.0, 0.3333, 1e7)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("posenc_constants_probe")
    assert drawn() == before

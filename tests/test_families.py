"""Families register themselves: a made-up family defined entirely in tests/toy_family (spec,
parameter model, reference, mutant, golden case, check, inference model) is installed by entry point
only, and the kit -- spec list and show, goldens, the conformance suite, the numpy adapter, the
diagnosis and the inference -- picks it up without an edit.  Each test runs twice: on the toy written
against the public façades (with posenc's deprecation warnings as errors) and on the toy as it was
written for spec 0.4.0 (tests/toy_family_0_4, unchanged: its deprecated imports still work)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc.conformance
from posenc import families, registry
from posenc.registry import all_cases
from posenc.spec.errors import SpecError

TESTS = Path(__file__).resolve().parent
TOY = TESTS / "toy_family"
KIT_CONFORMANCE = Path(posenc.conformance.__file__).resolve().parent
#: posenc's own deprecation warnings (their messages start with the module's name) as errors
STRICT = "error:posenc:DeprecationWarning"


def _install_toy(tmp_path_factory, folder: str):
    """The toy of ``tests/<folder>`` on a PYTHONPATH with a dist-info declaring its ``posenc.families``
    entry point, its goldens regenerated into its copy; the toy written against the façades runs with
    posenc's deprecation warnings as errors.  ``(root, env)``."""
    root = tmp_path_factory.mktemp(folder)
    for f in (TESTS / folder).glob("*"):
        if f.is_file():
            shutil.copy(f, root / f.name)
    dist = root / "posenc_toy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: posenc-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[posenc.families]\ntoy = posenc_toy\n")
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "POSENC_TOY_GOLDEN": str(root / "golden")}
    if folder == "toy_family":
        env["PYTHONWARNINGS"] = STRICT
    r = _run(env, "posenc", "golden", "regenerate", "--family", "toy")
    assert r.returncode == 0 and "wrote 1 golden files" in r.stdout, r.stdout + r.stderr
    return root, env


@pytest.fixture(scope="module", params=["toy_family", "toy_family_0_4"])
def toy_env(request, tmp_path_factory):
    """The toy written against the façades, then the toy as written for spec 0.4.0."""
    return _install_toy(tmp_path_factory, request.param)


def _run(env, *cmd, cwd=None):
    exe = shutil.which(cmd[0]) or cmd[0]
    return subprocess.run([exe, *cmd[1:]], env=env, capture_output=True, text=True, cwd=cwd, timeout=300)


def _pytest(env, *args):
    return _run(env, sys.executable, "-m", "pytest", str(KIT_CONFORMANCE), "-p", "no:cacheprovider", *args)


def test_toy_family_is_listed_and_shown(toy_env):
    root, env = toy_env
    r = _run(env, "posenc", "spec", "list", "toy")
    assert r.returncode == 0, r.stderr
    assert "TOY-RAMP" in r.stdout and "DIV-TOY-RAMP-OFF-BY-ONE" in r.stdout and "toy.ramp" in r.stdout
    r = _run(env, "posenc", "spec", "show", "TOY-RAMP")
    assert r.returncode == 0, r.stderr
    for text in ("toy.ramp: adapter method toy_ramp", "reference posenc_toy.ramp", "toy-ramp-tiny",
                 "test_toy_ramp_linear", "DIV-TOY-RAMP-OFF-BY-ONE"):
        assert text in r.stdout, (text, r.stdout)
    assert _run(env, "posenc", "golden", "check", "--family", "toy").returncode == 0
    r = _run(env, "posenc", "spec", "show", "TOY-RAMP", "--url")
    assert r.returncode == 2 and "registered outside the kit" in r.stderr


def test_toy_family_ids_can_be_cited(toy_env, tmp_path):
    """cite-check knows a registered family's IDs (from its own file: no kept snapshots of it)."""
    root, env = toy_env
    src = tmp_path / "ramp.py"
    src.write_text("# posenc: TOY-RAMP@0.3.0\n# posenc: DIV-TOY-RAMP-OFF-BY-ONE\n# posenc: TOY-RAMP@0.2.0\n"
                   "# posenc: TOY-RAMPS@0.3.0\n", encoding="utf-8")
    r = _run(env, "posenc", "cite-check", "--format", "json", str(src))
    assert r.returncode == 1, r.stderr
    found = {(f["line"], f["code"]) for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"}
    assert found == {(3, "meaning-changed"), (4, "unknown-id")}, r.stdout


def test_toy_golden_is_the_hand_derived_ramp(toy_env):
    root, env = toy_env
    with np.load(root / "golden" / "toy-ramp-tiny.npz", allow_pickle=False) as z:
        pe = z["output/pe"]
    assert pe[0, 2].tolist() == [2.5, 5.0, 7.5, 10.0]  # 0.5 * (i + 1) * 5
    assert pe[1, 0].tolist() == [3.5, 7.0, 10.5, 14.0]


def test_toy_family_runs_on_the_numpy_adapter(toy_env):
    root, env = toy_env
    r = _pytest(env, "--adapter", "numpy", "--dtype", "float32,bfloat16", "-k", "toy", "-v")
    out = r.stdout
    assert r.returncode == 0, out[-3000:]
    assert "test_golden[float32-toy-ramp-tiny@TOY-RAMP] PASSED" in out
    assert "test_toy_ramp_linear[bfloat16-toy-ramp-tiny@TOY-RAMP] PASSED" in out
    assert "TOY-RAMP" in out.split("posenc conformance")[-1]  # the per-clause summary counts it


def test_toy_mutant_adapter_fails_with_the_divergence_named(toy_env):
    root, env = toy_env
    r = _pytest(env, "--adapter", str(root / "toy_mutant_adapter.py"), "-k", "toy")
    out = r.stdout
    assert r.returncode == 1, out[-3000:]
    assert "TOY-RAMP: mutant-div-toy-ramp-off-by-one fails case toy-ramp-tiny (float32)" in out
    assert "DIV-TOY-RAMP-OFF-BY-ONE (violates TOY-RAMP)" in out


def test_a_bug_outside_the_toys_catalogue_gets_the_toys_inference(tmp_path_factory):
    """The toy registers an inference model (``@families.inference``): an adapter whose ramp has another
    slope, which no divergence of the toy reproduces, fails with what the toy's model says it is."""
    root, env = _install_toy(tmp_path_factory, "toy_family")
    r = _pytest(env, "--adapter", str(root / "toy_slope_adapter.py"), "-k", "toy and test_golden")
    out = r.stdout
    assert r.returncode == 1, out[-3000:]
    assert "diagnosis: no known divergence reproduces this output" in out, out[-3000:]
    assert "inferred: the ramp's slope is 1 where 0.5 is specified (TOY-RAMP)" in out, out[-3000:]


def test_other_adapters_report_the_toy_operation_unsupported(toy_env):
    root, env = toy_env
    r = _pytest(env, "--adapter", "torch", "-k", "toy", "-rs")
    assert r.returncode == 1, r.stdout[-2000:]  # nothing checked: a run that checks nothing fails
    assert "adapter 'torch' does not implement toy_ramp" in r.stdout


def test_the_kit_without_the_toy_has_no_toy():
    """Nothing of the toy leaks into the kit's own registry (it is only in the subprocesses)."""
    assert "toy" not in families.FAMILIES and all(not c.id.startswith("toy") for c in all_cases())


def test_the_legacy_toy_is_kept_as_it_was_written():
    """tests/toy_family_0_4 is the toy family as written for spec 0.4.0, byte for byte: the proof that
    code written against the old module paths keeps working for a release."""
    import hashlib
    digest = {f.name: hashlib.sha256(f.read_bytes()).hexdigest()[:16] for f in (TESTS / "toy_family_0_4").glob("*.py")}
    assert digest == {"posenc_toy.py": "196a9c3460e6784f", "toy_mutant_adapter.py": "724d1c899ed15ebf"}


def test_every_kit_family_registers_all_its_parts():
    families.load_modules()
    spec = families.spec()
    ops = set(spec.operations)
    assert set(families.REFERENCES) == ops
    for d in spec.divergences.values():  # every divergence has a registered mutant for some operation
        if d.level == "model":  # or, for a model-level one, a registered model mutant
            assert d.mutant in families.model_mutants(), d.id
            continue
        assert families.mutants().get(d.mutant), d.id
        assert set(families.mutants()[d.mutant]) <= ops, d.id
    # every operation has golden cases; a call form, those of its primary put in the form (test_call_form)
    from posenc.conformance.collect import form_params
    assert {c.op for c in all_cases()} | {p.values[1] for p in form_params()} == ops
    checks = families.checks()
    declared = {inv for c in spec.clauses.values() for inv in c.invariants}
    assert declared - {"shift"} <= {c.invariant for c in checks.values()}


def test_operation_table_shapes_match_every_golden():
    """Every declared output shape expression gives the shape of every golden output (the
    goldens come from the reference, the table from the spec files: two sources)."""
    from posenc.harness import golden
    from posenc.spec.shapes import output_shapes
    for case in all_cases():
        g = golden.load(case)
        want = {n: v.shape for n, v in g.outputs.items() if not n.endswith(".compared") and v.ndim}
        got = output_shapes(families.operation(case.op), case.params, g.inputs)
        assert {n: s for n, s in got.items() if s} == {n: s for n, s in want.items()}, case.id


def test_every_case_serves_clauses_its_operation_declares():
    for case in all_cases():
        assert set(case.clauses) <= set(families.operation(case.op).clauses), case.id


def test_a_wrong_shape_is_a_malformed_output(run_suite, tmp_path):
    """The runner checks every output against the operation table before comparing: a table
    transposed to [B, D, T] is named as a malformed output, never compared."""
    f = tmp_path / "transposed.py"
    f.write_text(
        "import numpy as np\n"
        "from posenc.adapters.numpy_adapter import NumpyAdapter\n"
        "class Transposed(NumpyAdapter):\n"
        "    name = 'transposed'\n"
        "    def sinusoidal(self, position_ids, params, *, dtype, device):\n"
        "        return np.swapaxes(NumpyAdapter().sinusoidal(position_ids, params, dtype=dtype, device=device), 1, 2)\n"
        "ADAPTER = Transposed\n")
    r = run_suite(str(f), "-k", "test_golden and sin-interleaved-d8")
    out = r.stdout.str()
    assert r.ret == 1, out
    assert "transposed.sinusoidal.table: output 'pe' has shape [2, 8, 5], the operation table says [2, 5, 8]" in out


def test_operation_declarations_are_validated(tmp_path):
    """A calling convention naming an input the operation does not have is a spec error naming it."""
    import yaml

    from posenc.spec import SPEC_DIR, load_spec
    from posenc.spec.errors import SpecError
    for f in SPEC_DIR.glob("*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    d = yaml.safe_load((tmp_path / "rope.yaml").read_text())
    d["operations"][3]["call_args"] = ["q", "k", "positions"]
    (tmp_path / "rope.yaml").write_text(yaml.safe_dump(d))
    with pytest.raises(SpecError, match=r"rope.yaml: operations.3: .*'positions' is neither an input"):
        load_spec(tmp_path)


def test_spec_show_walks_the_one_id_thread(capsys):
    from posenc import cli
    assert cli.main(["spec", "show", "rope-partial"]) == 0
    out = capsys.readouterr().out
    for text in ("ROPE-PARTIAL  (posenc spec", "operations:",
                 "rope.apply: adapter method rope -> apply; reference posenc.families.rope.rope_outputs[rope.apply]",
                 "rope-neox-20b (rope.apply): test_golden[<dtype>-rope-neox-20b@ROPE-PAIR-HALF+ROPE-PARTIAL+ROPE-INV-FREQ+ROPE-ANGLE+ROPE-PRECISION]",
                 "test_passthrough_tail (passthrough_tail): rope.apply",
                 "DIV-ROPE-TAIL-ROTATED (mutant rope_tail_rotated)"):
        assert text in out, (text, out)
    assert cli.main(["spec", "show", "DIV-ROPE-TAIL-ROTATED"]) == 0
    out = capsys.readouterr().out
    assert "mutant function: posenc.families.rope.rope_tail_rotated" in out and "rope-neox-20b" in out
    assert cli.main(["spec", "show", "Rope.Apply"]) == 0
    out = capsys.readouterr().out
    assert "call: apply" in out and "reference: posenc.families.rope.rope_outputs[rope.apply]" in out
    assert cli.main(["spec", "show", "rope.aply"]) == 2
    assert "did you mean rope.apply" in capsys.readouterr().err


def test_spec_list_groups_each_family_in_run_order(capsys):
    from posenc import cli
    assert cli.main(["spec", "list"]) == 0
    out = capsys.readouterr().out
    heads = [line.split(" ")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert heads == list(families.KIT_ORDER)
    assert "  operations:\n    rope.inv_freq" in out


def test_mutant_adapter_names_an_unknown_divergence():
    from posenc.adapters.reference_adapter import MutantAdapter
    from posenc.spec.errors import UsageError
    assert MutantAdapter("div-rope-tail-rotated").divergence == "DIV-ROPE-TAIL-ROTATED"
    with pytest.raises(UsageError, match="did you mean DIV-ROPE-TAIL-ROTATED"):
        MutantAdapter("DIV-ROPE-TAIL-ROTATE")


@pytest.mark.parametrize("divergence, case", [
    ("DIV-ROPE-PAIRING-SWAPPED", "rope-llama4-interleaved"), ("DIV-LEARNED-OPT-NO-OFFSET", "opt-125m-rows"),
    ("DIV-ALIBI-SLOPES-NON-POW2", "alibi-slopes-6"), ("DIV-T5-REL-SIGN", "t5-base-bias-decoder-prefill"),
    ("DIV-AXIAL-CORNER-COORDINATES", "axial-eomt-dinov3-grid-3x5"),
])
def test_mutant_adapters_of_kit_divergences_fail_named(run_suite, tmp_path, divergence, case):
    """The generated mutant adapter of a real divergence fails its golden with that divergence named."""
    f = tmp_path / "mut.py"
    f.write_text(f"from posenc.adapters.reference_adapter import MutantAdapter\n"
                 f"def ADAPTER():\n    return MutantAdapter({divergence!r})\n")
    r = run_suite(str(f), "-k", f"test_golden and {case}")
    out = r.stdout.str()
    assert r.ret == 1 and f"{divergence} (violates" in out, out[-2000:]


@pytest.mark.parametrize("shape, message", [
    ("[B, T, __import__('os').getpid()]", "Call is not allowed"),
    ("[B, T, params.__class__]", "Attribute is not allowed"),
    ("[B, T, pair_dim // ]", "invalid syntax"),
    ("[B, T, pair_dim ** 2]", "Pow is not allowed"),
])
def test_shape_expressions_are_checked_when_the_spec_loads(tmp_path, shape, message):
    import yaml

    from posenc.spec import SPEC_DIR, load_spec
    from posenc.spec.errors import SpecError
    for f in SPEC_DIR.glob("*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    d = yaml.safe_load((tmp_path / "rope.yaml").read_text())
    d["operations"][1]["outputs"][0]["shape"] = shape
    (tmp_path / "rope.yaml").write_text(yaml.safe_dump(d))
    with pytest.raises(SpecError, match=rf"rope.yaml: operations.1.*{message}"):
        load_spec(tmp_path)


def test_shape_evaluation_errors_are_shape_errors():
    from posenc.spec.shapes import ShapeError, evaluate
    for expr, env in (("[n // 0]", {"n": 4}), ("[R[5]]", {"R": (1, 2)}), ("[*R] * 100000000", {"R": (1,)}),
                      ("[nosuch]", {})):
        with pytest.raises(ShapeError):
            evaluate(expr, env)


def test_numpy_subclass_can_call_super():
    """Generated methods are real methods: an override calling super() reaches the reference."""
    from posenc.adapters.numpy_adapter import NumpyAdapter
    from posenc.spec.models import SinusoidalParams

    class Doubled(NumpyAdapter):
        def sinusoidal(self, position_ids, params, *, dtype, device):
            return 2 * super().sinusoidal(position_ids, params, dtype=dtype, device=device)
    p = SinusoidalParams(dim=4)
    one = NumpyAdapter().sinusoidal(np.array([[3]]), p, dtype="float64", device="cpu")
    assert np.array_equal(Doubled().sinusoidal(np.array([[3]]), p, dtype="float64", device="cpu"), 2 * one)
    a = NumpyAdapter()
    a.lookup = "mine"  # an instance attribute is not shadowed
    assert a.lookup == "mine"
    assert NumpyAdapter().position_ids(rule="decode", device="cpu", batch=1, seq_len=2, cache_length=3).tolist() == [[3, 4]]


def test_a_property_error_inside_an_adapter_is_not_unsupported():
    from posenc.adapters import Adapter

    class Typo(Adapter):
        @property
        def rope(self):
            return self._rope_impl
    with pytest.raises(AttributeError, match="_rope_impl"):
        Typo().rope
    assert not hasattr(Typo(), "no_such_method")


def test_a_factory_that_returns_none_fails(run_suite, tmp_path):
    f = tmp_path / "noreturn.py"
    f.write_text("from posenc.adapters.numpy_adapter import NumpyAdapter\n"
                 "class NoReturn(NumpyAdapter):\n    name = 'noreturn'\n"
                 "    def t5_bias(self, params, weights, *, dtype, device):\n        pass\n"
                 "ADAPTER = NoReturn\n")
    r = run_suite(str(f), "-k", "test_golden and t5-base-bias-encoder")
    out = r.stdout.str()
    assert r.ret == 1 and "t5_bias() must return a callable, got NoneType" in out, out[-2000:]


def test_regenerating_one_kit_family_keeps_the_whole_folder(tmp_path):
    from posenc import cli
    from posenc.harness import golden
    d = tmp_path / "g"
    shutil.copytree(golden.GOLDEN_DIR, d)
    assert cli.main(["golden", "regenerate", "--family", "t5", "--dir", str(d)]) == 0
    assert golden.check(d) == []
    assert len(list(d.glob("*.npz"))) == len(list(golden.GOLDEN_DIR.glob("*.npz")))


def test_mutant_of_a_call_sequence_is_replayed(run_suite, tmp_path):
    """DIV-SCALE-DYNAMIC-STALE exists only for rope.cos_sin_calls: the generated adapter replays the
    calls made on its prepared object, so the stale theta shows."""
    f = tmp_path / "stale.py"
    f.write_text("from posenc.adapters.reference_adapter import MutantAdapter\n"
                 "def ADAPTER():\n    return MutantAdapter('DIV-SCALE-DYNAMIC-STALE')\n")
    r = run_suite(str(f), "-k", "test_golden and scale-dynamic-per-call")
    out = r.stdout.str()
    assert r.ret == 1 and "DIV-SCALE-DYNAMIC-STALE (violates" in out, out[-2000:]


def test_select_tests_by_clause_and_family(run_suite):
    r = run_suite("numpy", "--clause", "rope-partial", "--collect-only")
    out = r.stdout.str()
    assert r.ret == 0 and "test_golden[float32-rope-neox-20b@ROPE-PAIR-HALF+ROPE-PARTIAL+ROPE-INV-FREQ+ROPE-ANGLE+ROPE-PRECISION]" in out
    assert "rope-llama3-8b@" not in out and "test_passthrough_tail[float32-rope-neox-20b@ROPE-PARTIAL]" in out
    assert run_suite("numpy", "--clause", "rope-partial").ret == 0
    r = run_suite("numpy", "--family", "t5", "--clause", "ALIBI-MPT", "--collect-only")
    out = r.stdout.str()
    assert r.ret == 0 and "t5-base-bias-decoder@" in out and "alibi-mpt-7b@" in out and "alibi-causal-12@" not in out
    r = run_suite("numpy", "--clause", "ROPE-PARTIALL")
    assert r.ret == 4 and "did you mean ROPE-PARTIAL" in r.stderr.str()
    r = run_suite("numpy", "--family", "ropee")
    assert r.ret == 4 and "did you mean rope" in r.stderr.str()


def test_clause_selection_does_not_call_expectation_lines_stale(run_suite):
    """A selection, like -k, leaves the other tests' expectation lines alone."""
    r = run_suite("hf-transformers", "--clause", "ROPE-PAIR-HALF", "--dtype", "float32")
    assert r.ret == 0, r.stdout.str()[-2000:]


def test_a_failure_prints_a_rerun_command_that_works(run_suite, tmp_path):
    import re
    f = tmp_path / "mut.py"
    f.write_text("from posenc.adapters.reference_adapter import MutantAdapter\n"
                 "def ADAPTER():\n    return MutantAdapter('DIV-ROPE-TAIL-ROTATED')\n")
    r = run_suite(str(f), "-k", "test_golden and rope-neox-20b", "--dtype", "bfloat16")
    out = r.stdout.str()
    assert r.ret == 1, out[-2000:]
    cmd = re.search(r"^(pytest \S+test_golden\.py::test_golden\S+ .*)$", out, re.M).group(1)
    assert "--adapter" in cmd and "--dtype bfloat16" in cmd and "--device cpu" in cmd
    import shlex
    rerun = subprocess.run([sys.executable, "-m", *shlex.split(cmd)], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 1 and "1 failed" in rerun.stdout, rerun.stdout[-2000:]


def test_an_operation_without_a_reference_names_its_spec_file_and_modules(monkeypatch):
    families.load_modules()
    monkeypatch.delitem(families.REFERENCES, "layers.apply")
    monkeypatch.setitem(registry._LOADED, "modules", False)  # load again: the modules are imported already
    with pytest.raises(SpecError, match=r"layers\.apply \(declared in layer_types\.yaml; no @reference in "
                                        r"posenc\.families\.layer_types"):
        families.load_modules()


def test_a_namespace_has_one_clause_rule_and_every_case_gets_it():
    """``@case_clauses``: a second rule for a namespace is a SpecError naming the first; a namespace
    without a rule adds nothing; the registered rules reach the golden cases (a YaRN golden of
    ``rope.apply`` carries the scaling's clauses it did not list itself)."""
    from posenc.registry import clause_rules

    def other(p, op):
        return ["ROPE-ANGLE"]
    with pytest.raises(SpecError, match=r"two clause rules for operations rope\.\*: .*rope_clauses.*other"):
        registry.case_clauses("rope")(other)
    assert clause_rules.RULES["rope"] is not other
    # a rule for a namespace no other family's module owns: refused at load, naming the owner
    saved = dict(clause_rules.RULES)
    try:
        clause_rules.RULES.pop("t5", None)
        registry.case_clauses("t5")(other)
        with pytest.raises(SpecError, match=r"registered for operations t5\.\*, which t5 declares: only that "
                                             r"family's modules \(posenc\.families\.t5"):
            clause_rules.check_owners(registry.spec(), registry.FAMILIES)
    finally:
        clause_rules.RULES.clear()
        clause_rules.RULES.update(saved)
    clause_rules.check_owners(registry.spec(), registry.FAMILIES)
    assert registry.exercised(None, "nosuch.op") == []
    yarn = registry.cases_by_id()["scale-yarn-qwen2.5"]
    assert {"SCALE-YARN-RAMP", "ROPE-ATTENTION-FACTOR", "ROPE-PRECISION"} <= set(yarn.clauses)

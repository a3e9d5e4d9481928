"""ROPE-TABLE-DTYPE (issue 30, part 3): an adapter's cos/sin tables in float32 beside bfloat16 / float16 q and
k (FlashInfer, TransformerEngine, torchtune) or in the activation dtype (transformers) -- both pass, the kit
hands rope.apply_with_cos_sin its tables in the declared dtype and checks the dtype of every table it is given;
a table rounded below float32 beside float32 q and k fails, named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posenc import families, registry
from posenc.harness.golden import load
from posenc.harness.runner import run_case
from posenc.spec.errors import AdapterError
from posenc.spec.shapes import table_dtype

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "table_dtype_adapters.py"
TABLE_TESTS = "cos_sin or cos-sin"


def _outcomes(r) -> dict:
    return {k: v for k, v in r.parseoutcomes().items() if k != "deselected"}


def test_the_policy_gives_float32_only_at_half_precision():
    class F32:
        table_dtype = "float32"

    class Default:
        pass
    assert [table_dtype(F32(), d) for d in ("bfloat16", "float16", "float32", "float64")] == \
        ["float32", "float32", "float32", "float64"]
    assert [table_dtype(Default(), d) for d in ("bfloat16", "float16", "float32", "float64")] == \
        ["bfloat16", "float16", "float32", "float64"]


def test_every_table_is_an_input_or_output_of_kind_table():
    """The operations whose cos / sin are tables declare them so: the policy reaches all of them."""
    kinds = {(o.name, io.name): io.kind for o in registry.spec().operations.values()
             for io in (*o.inputs, *o.outputs) if io.name in ("cos", "sin")}
    assert kinds and set(kinds.values()) == {"table"}, kinds
    assert {op for op, _ in kinds} >= {"rope.cos_sin", "rope.cos_sin_calls", "rope.apply_with_cos_sin",
                                       "mrope.cos_sin", "axial.cos_sin"}


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_float32_tables_pass_where_activation_tables_pass(run_suite, tmp_path, isolation):
    """Both policies conform: the float32-table port passes every table golden and generated case at all four
    dtypes, in both isolation modes, and its report says its policy."""
    rep = tmp_path / "report.json"
    r = run_suite(f"{ADAPTERS}:Float32Tables", "-k", TABLE_TESTS, "--dtype", "all", "--posenc-isolation", isolation,
                  "--report-json", str(rep))
    out = r.stdout.str()
    assert r.ret == 0 and set(_outcomes(r)) == {"passed"} and _outcomes(r)["passed"] >= 4 * 20, out[-3000:]
    assert json.loads(rep.read_text())["table_dtype"] == "float32"


def test_the_kit_hands_given_tables_in_the_declared_dtype():
    """rope.apply_with_cos_sin gets float32 cos / sin beside bfloat16 q and k from a float32-policy adapter
    (the adapter asserts it), and the activation dtype from the others."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("table_dtype_adapters", ADAPTERS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    case = next(c for c in families.all_cases() if c.id == "rope-apply-cos-sin-table")
    seen = {}

    class Spy(mod.Float32Tables):
        def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
            seen[str(q.dtype)] = str(cos.dtype)
            return super().rope_apply_with_cos_sin(q, k, cos, sin, params)
    for dt in ("bfloat16", "float16", "float32"):
        run_case(Spy(), load(case), dt, "cpu")
    assert seen == {"torch.bfloat16": "torch.float32", "torch.float16": "torch.float32",
                    "torch.float32": "torch.float32"}, seen


def test_a_table_not_in_the_declared_dtype_is_a_contract_error():
    """Declaring float32 tables and handing the activation dtype is refused, naming the policy and the clause."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("table_dtype_adapters", ADAPTERS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    case = next(c for c in families.all_cases() if c.id == "rope-cos-sin-table")
    with pytest.raises(AdapterError, match=r"table 'cos' has dtype bfloat16; at bfloat16 the adapter's table policy "
                                           r"\(table_dtype 'float32'\) gives float32 \(ROPE-TABLE-DTYPE"):
        run_case(mod.DeclaresFloat32GivesActivation(), load(case), "bfloat16", "cpu")
    run_case(mod.DeclaresFloat32GivesActivation(), load(case), "float32", "cpu")  # float32: the same either way
    with pytest.raises(AdapterError, match=r"table 'cos' has dtype float32; at float16 the adapter's table policy "
                                           r"\(table_dtype 'activation'\) gives float16 \(ROPE-TABLE-DTYPE: declare "
                                           r"table_dtype = 'float32'"):
        run_case(mod.UndeclaredFloat32(), load(case), "float16", "cpu")


def test_an_unknown_policy_is_a_usage_error(run_suite):
    r = run_suite(f"{ADAPTERS}:BadPolicy", "-k", "rope-cos-sin-table", "--dtype", "float32")
    err = r.stderr.str() + r.stdout.str()
    assert r.ret != 0 and "table_dtype must be one of 'activation', 'float32'" in err and "got 'bfloat16'" in err, err[-2000:]


@pytest.mark.parametrize("k", ["rope-cos-sin-table", "rope-apply-cos-sin-table", "rope-llama3-8b and test_golden"])
def test_a_table_rounded_below_float32_is_named(fails_naming, k):
    """A bfloat16 table beside float32 q and k -- handed out, handed in and rounded by the kernel, or held
    inside rope.apply -- fails its golden and is named DIV-ROPE-TABLE-NARROWER."""
    fails_naming(f"{ADAPTERS}:NarrowTables", f"{k} and float32", "DIV-ROPE-TABLE-NARROWER")


def test_the_narrow_table_passes_where_the_policy_allows_it(run_suite):
    """At bfloat16 a bfloat16 table is the activation dtype's (transformers' policy): the same adapter passes."""
    r = run_suite(f"{ADAPTERS}:NarrowTables", "-k", "rope-cos-sin-table or rope-apply-cos-sin-table",
                  "--dtype", "bfloat16")
    assert r.ret == 0 and set(_outcomes(r)) == {"passed"}, r.stdout.str()[-2000:]


def test_the_matrix_records_each_adapters_policy():
    from posenc.tools import matrix
    rep = {"adapter": "x", "framework": "torch", "versions": {}, "expectations": None, "exit_status": 0,
           "examples": 6, "table_dtype": "float32", "results": [], "dtypes": ["float32"], "complete": True}
    m = matrix.aggregate([rep])
    assert m["adapters"][0]["table_dtype"] == "float32"
    assert "| 6 | float32 | 0 |" in matrix.markdown(m)

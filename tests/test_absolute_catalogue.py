"""The absolute and bias families' divergence catalogue (learned, sinusoidal, ALiBi, T5): each
new mutant *is* the wrong behaviour its divergence names (hand-checked values), keras-hub's real
outputs are named by the divergences that replaced its unnamed expectation lines, and the goldens
cover every parameter field of these families at two or more values (one not a default) and
every enum value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posenc import families
from posenc.registry.cases import pos
from posenc.reference import alibi, sinusoidal, t5

from posenc.spec.models import AlibiParams, LookupParams, SinusoidalParams, T5Params
from posenc.spec.ranges import is_library_default
from posenc import registry

ROOT = Path(__file__).resolve().parent.parent
SPEC = families.spec()

NEW = {
    "learned": ["DIV-LEARNED-OPT-OFFSET-TWICE", "DIV-LEARNED-ROBERTA-OFFSET-TWICE", "DIV-LEARNED-CACHE-IGNORED",
                "DIV-LEARNED-TAKE-UNCHECKED"],
    "sinusoidal": ["DIV-SIN-COMPUTE-DTYPE", "DIV-SIN-POSITIONS-IN-DTYPE", "DIV-SIN-FAIRSEQ-CACHE-IGNORED"],
    "alibi": ["DIV-ALIBI-SLOPES-NEXT-POW2", "DIV-ALIBI-SLOPES-EXTRA-NOT-STRIDED", "DIV-ALIBI-SLOPES-COMPUTE-DTYPE"],
    "t5": ["DIV-T5-LOG-IN-DTYPE"],
}
ALL_NEW = [d for ids in NEW.values() for d in ids]


@pytest.mark.parametrize("div_id", ALL_NEW)
def test_new_divergences_are_declared_for_0_4_0(div_id):
    d = SPEC.divergences[div_id]
    assert d.since == "0.4.0" and d.mutant in registry.mutants() and not d.superseded_by
    assert any(e.startswith("https://") or "::" in e for e in d.evidence), d.evidence


def test_enough_divergences_cite_tracker_threads():
    """At least five of the new divergences cite a real issue / pull-request thread."""
    threads = [d for d in ALL_NEW
               if any("/issues/" in e or "/pull/" in e for e in SPEC.divergences[d].evidence)]
    assert len(threads) >= 5, threads


# ---- the mutants are the wrong behaviours ------------------------------------------------------


def test_opt_offset_twice():
    out = registry.run_mutant("opt_offset_twice", "learned.opt_rows", None, {"positions": pos([-1, 0, 5])})
    assert out["rows"].tolist() == [[3, 4, 9]]  # + 4, where the spec says + 2 (1, 2, 7)


def test_roberta_offset_twice():
    from posenc.spec.registry import model_params
    rb = model_params("roberta-base", vocab_size=89)
    x = {"input_ids": pos([1, 1, 0, 9, 2], [0, 9, 9, 9, 2]), "cache_length": np.asarray(0)}
    out = registry.run_mutant("roberta_offset_twice", "learned.roberta_positions", rb, x)
    assert out["positions"].tolist() == [[3, 3, 4, 5, 6], [4, 5, 6, 7, 8]]  # spec: [[1,1,2,3,4],[2,3,4,5,6]]


def test_learned_cache_ignored_restarts_the_rows():
    from posenc.spec.registry import model_params
    gpt2 = model_params("gpt2", vocab_size=5)
    rng = np.random.default_rng(0)
    x = {"wte": rng.normal(size=(5, 3)), "wpe": rng.normal(size=(1024, 3)), "input_ids": pos([1, 2]),
         "cache_length": np.asarray(7)}
    out = registry.run_mutant("learned_cache_ignored", "learned.gpt2", gpt2, x)["embeddings"]
    np.testing.assert_array_equal(out, x["wte"][[[1, 2]]] + x["wpe"][[[0, 1]]])  # rows 0, 1 instead of 7, 8
    assert registry.run_mutant("learned_cache_ignored", "learned.gpt2", gpt2, {**x, "cache_length": np.asarray(0)}) is None


def test_take_unchecked_wraps_and_fills_nan():
    table = np.arange(8, dtype=np.float64).reshape(4, 2)
    out = registry.run_mutant("lookup_take_unchecked", "learned.lookup", LookupParams(num_rows=4, dim=2),
                      {"table": table, "rows": np.array([[1, -1, 4]])})["embeddings"]
    np.testing.assert_array_equal(out[0, :2], table[[1, 3]])  # -1 reads the last row
    assert np.isnan(out[0, 2]).all()  # one past the end: NaN (JAX's take)
    clamped = registry.run_mutant("lookup_clamped", "learned.lookup", None, {"table": table, "rows": np.array([[-1]])})
    np.testing.assert_array_equal(clamped["embeddings"][0, 0], table[0])  # the clamp reads row 0: -1 separates them


def test_sin_positions_in_dtype():
    p = SinusoidalParams(dim=8)
    x = {"position_ids": pos([2049, 65520, 257])}
    f16 = registry.run_mutant("sin_positions_in_dtype", "sinusoidal.table", p, x, "float16")["pe"][0]
    np.testing.assert_allclose(f16[0], sinusoidal.table(pos([2048]), p)[0, 0], atol=1e-12)
    assert np.isnan(f16[1]).all()  # 65520 is inf in float16
    np.testing.assert_allclose(f16[2], sinusoidal.table(pos([257]), p)[0, 0], atol=1e-12)  # exact in float16
    bf = registry.run_mutant("sin_positions_in_dtype", "sinusoidal.table", p, x, "bfloat16")["pe"][0]
    np.testing.assert_allclose(bf[2], sinusoidal.table(pos([256]), p)[0, 0], atol=1e-12)  # 257 -> 256
    assert registry.run_mutant("sin_positions_in_dtype", "sinusoidal.table", p, x, "float32") is None


def test_sin_compute_dtype_rounds_511_to_512():
    p = SinusoidalParams(dim=16)
    out = registry.run_mutant("sin_compute_dtype", "sinusoidal.table", p, {"position_ids": pos([511, 512])}, "bfloat16")["pe"]
    np.testing.assert_array_equal(out[0, 0], out[0, 1])
    assert registry.run_mutant("sin_compute_dtype", "sinusoidal.table", p, {"position_ids": pos([511])}, "float64") is None


def test_sin_fairseq_cache_ignored():
    p = SinusoidalParams(dim=8, layout="concat", variant="fairseq", padding_idx=1)
    x = {"input_ids": pos([1, 4, 4], [7, 8, 1]), "cache_length": np.asarray(200)}
    out = registry.run_mutant("sin_fairseq_cache_ignored", "sinusoidal.fairseq_positions", p, x)
    assert out["positions"].tolist() == [[1, 2, 3], [2, 3, 1]]  # spec: [[1, 202, 203], [202, 203, 1]]


def test_alibi_head_count_mutants():
    p6 = AlibiParams(num_heads=6)
    nxt = registry.run_mutant("alibi_slopes_next_pow2", "alibi.slopes", p6, {})["slopes"]
    np.testing.assert_array_equal(nxt, 2.0 ** -np.arange(1, 7))
    ns = registry.run_mutant("alibi_slopes_extra_not_strided", "alibi.slopes", p6, {})["slopes"]
    np.testing.assert_array_equal(ns, [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.25])
    np.testing.assert_array_equal(alibi.slopes(p6), [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125])
    for name in ("alibi_slopes_next_pow2", "alibi_slopes_extra_not_strided"):
        assert registry.run_mutant(name, "alibi.slopes", AlibiParams(num_heads=8), {}) is None


def test_alibi_slopes_compute_dtype():
    p = AlibiParams(num_heads=12)
    bf = registry.run_mutant("alibi_slopes_compute_dtype", "alibi.slopes", p, {}, "bfloat16")["slopes"]
    assert bf[8] == 0.70703125 and alibi.slopes(p)[8] == 2 ** -0.5
    np.testing.assert_array_equal(bf[:8], alibi.slopes(p)[:8])  # powers of two are exact
    assert registry.run_mutant("alibi_slopes_compute_dtype", "alibi.slopes", p, {}, "float32") is None


def test_t5_log_in_dtype_matches_torch_bf16():
    """The mutant's buckets are torch's with the relative positions cast to bfloat16 / float16."""
    import math

    import torch

    from posenc.families.t5 import buckets_in_dtype

    def torch_buckets(rel, p, dt):
        nb, ret = p.num_buckets, torch.zeros_like(rel)
        if p.bidirectional:
            nb //= 2
            ret += (rel > 0).long() * nb
            n = rel.abs()
        else:
            n = -torch.min(rel, torch.zeros_like(rel))
        e = nb // 2
        large = e + (torch.log(n.to(dt) / e) / math.log(p.max_distance / e) * (nb - e)).to(torch.long)
        return ret + torch.where(n < e, n, torch.min(large, torch.full_like(large, nb - 1)))

    rel = torch.arange(-2000, 2001)
    for p in (T5Params(), T5Params(bidirectional=False), T5Params(num_buckets=33, max_distance=100),
              T5Params(num_buckets=64, max_distance=256)):
        for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
            np.testing.assert_array_equal(buckets_in_dtype(rel.numpy(), p, name), torch_buckets(rel, p, dt).numpy())
    got = buckets_in_dtype(np.array([-16, 16]), T5Params(), "bfloat16")
    assert got.tolist() == [9, 25] and t5.buckets(np.array([-16, 16]), T5Params()).tolist() == [10, 26]


# ---- keras-hub: the unnamed expectation lines are named now -------------------------------------
KERAS_IDS = {"DIV-SIN-COMPUTE-DTYPE", "DIV-ALIBI-SLOPES-COMPUTE-DTYPE", "DIV-LEARNED-TAKE-UNCHECKED"}


def test_keras_hub_torch_failures_are_named(tmp_path):
    """keras-hub on torch, without its expectation file: every failure of the sinusoidal, ALiBi and
    learned families is diagnosed as one of the three divergences that name its old unnamed lines
    (SinePositionEncoding, AlibiBias, PositionEmbedding's take), and each of them appears."""
    pytest.importorskip("keras_hub")
    exp = tmp_path / "none.yaml"
    exp.write_text("format: 2\nexpected_failures: []\n")
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "conformance"), "--adapter", "keras-hub-torch",
           "--family", "sinusoidal,alibi,learned", "--dtype", "all", "-q", "-p", "no:cacheprovider",
           "--expectations", str(exp), "--report-json", str(report)]
    subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900,
                   env={**os.environ, "KERAS_BACKEND": "torch"})
    results = json.loads(report.read_text())["results"]
    failed = [r for r in results if r["outcome"] == "failed"]
    assert failed
    named = {r["test_id"]: {m["divergence"] for m in r["diagnosis"]} for r in failed}
    unnamed = [t for t, ds in named.items() if not ds & KERAS_IDS]
    assert not unnamed, unnamed
    assert set().union(*named.values()) >= KERAS_IDS


# ---- coverage of the parameter fields -----------------------------------------------------------
FAMILIES = ("learned", "sinusoidal", "alibi", "t5", "position_ids", "nope")


def _values_by_field():
    seen: dict[tuple[str, str], list] = {}
    for c in families.all_cases():
        if c.id.startswith("gen-"):
            continue
        model = type(c.params).__name__
        for field in type(c.params).model_fields:
            v = getattr(c.params, field)
            seen.setdefault((model, field), [])
            if v not in seen[(model, field)]:
                seen[(model, field)].append(v)
    return seen


def _owned():
    for fam in FAMILIES:
        for model, fields in SPEC.families[fam].parameters.items():
            for field, rng in fields.items():
                yield fam, model, field, rng


@pytest.mark.parametrize("fam,model,field,rng", list(_owned()), ids=lambda v: v if isinstance(v, str) else "")
def test_goldens_cover_each_parameter_field(fam, model, field, rng):
    """Two or more golden values per field, one of them not a listed default; every enum value."""
    seen = _values_by_field().get((model, field), [])
    if not seen:
        pytest.skip(f"{model} is not used by a golden case")
    values = [v for v in seen if v is not None] or seen
    if rng.values is not None:
        assert set(rng.values) <= set(seen), f"{model}.{field}: goldens use {seen}, not all of {rng.values}"
        return
    assert len(values) >= 2, f"{model}.{field}: goldens use only {values}"
    assert any(not is_library_default(rng, v) for v in values), f"{model}.{field}: only defaults {values}"


# ---- every new divergence is told apart from the others of its family ------------------------------


def _goldens():
    from posenc.harness import golden
    m = golden.read_manifest()
    return [golden.load(c, manifest=m) for c in families.all_cases() if not c.id.startswith("gen-")]


@pytest.mark.parametrize("div_id", [d for d in ALL_NEW if d != "DIV-LEARNED-TAKE-UNCHECKED"])
def test_new_divergence_is_separated_from_its_family(div_id):
    """For every other divergence Y of the family, some golden case at one of div_id's dtypes
    rejects div_id's mutant output and the diagnosis of that output does not name Y (so a
    failure can be attributed to div_id alone somewhere)."""
    from posenc.harness.diagnosis import diagnose
    from posenc.harness.runner import compare_outputs

    d = SPEC.divergences[div_id]
    prefix = div_id.split("-")[1]
    others = {o for o in SPEC.current_divergences if o.split("-")[1] == prefix and o != div_id}
    unseparated = set(others)
    for g in _goldens():
        if g.case.op not in registry.mutants()[d.mutant]:
            continue
        for dtype in d.dtypes:
            out = registry.run_mutant(d.mutant, g.case.op, g.case.params, g.inputs, dtype)
            if out is None:
                continue
            out = {k: np.asarray(v) for k, v in out.items()}
            if all(c.ok for c in compare_outputs(g, out, dtype)):
                continue
            named = {m.divergence for m in diagnose(SPEC, g, out, dtype)}
            assert div_id in named, (g.case.id, dtype, named)
            unseparated -= unseparated - named
        if not unseparated:
            return
    assert not unseparated, f"{div_id} reproduces {sorted(unseparated)} on every golden case that catches it"

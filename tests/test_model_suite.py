"""The model-level suite (spec family model, MODEL-*): pytest conformance --model NAME.

Every plumbing bug kind of tests/model_bugs.py, patched into the real transformers modules, fails
the scenario that must catch it, and the diagnosis names its divergence; the unpatched models pass;
the plugin's options, reports and isolation work for models as for adapters.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from posenc import families  # noqa: E402
from posenc.adapters import load_model_adapter  # noqa: E402
from posenc.conformance import model_suite  # noqa: E402
from posenc.harness.failure import ConformanceFailure  # noqa: E402
from posenc.harness.model_run import Facts, Run  # noqa: E402
from posenc.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _load_bugs():
    import importlib.util
    spec = importlib.util.spec_from_file_location("posenc_model_bugs", ROOT / "tests" / "model_bugs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


model_bugs = _load_bugs()
EXAMPLE = ROOT / "docs" / "example_model_adapter.py"


def _check(adapter, clause: str, attn: str = "eager", dtype: str = "float32"):
    info = model_suite.model_info(adapter)
    sc = families.scenarios()[clause]

    def run(name, dt, at, device):
        return model_suite.run_scenario(adapter, name, dt, at, device)
    return model_suite.check(adapter, info, attn, sc, dtype, "cpu", run)


@pytest.mark.parametrize("bug", model_bugs.BUGS, ids=lambda b: b.__name__)
def test_every_patched_plumbing_bug_is_caught_and_named(bug):
    """The scenario fails naming its clause, and the diagnosis names the bug's divergence."""
    div, clause = bug.expect
    for attn in ("eager", "sdpa"):
        with pytest.raises(ConformanceFailure) as e:
            _check(bug(), clause, attn)
        assert e.value.msg.startswith(f"{clause}: hf:{bug.model_type}+{bug.__name__} fails scenario")
        assert div in e.value.divergences, (attn, e.value.divergences, e.value.msg)
        assert f"diagnosis: the run matches known divergence(s)" in e.value.msg


def test_a_failure_names_the_layer_row_first_wrong_position_and_what_the_model_did():
    with pytest.raises(ConformanceFailure) as e:
        _check(model_bugs.DecodeOffByOneLlama(), "MODEL-DECODE")
    msg = e.value.msg
    assert "decode step 0, layer 0: row 0 token 0: the rotation is that of position 21 where the rule gives 20 (ROPE-ANGLE)" in msg
    assert "decode step 0: row 0: 21 (rule: 20); row 1: 21 (rule: 20)" in msg
    assert "inferred: +1 on the forward passes after the cache" in msg
    assert "DIV-POS-CACHE-OFF-BY-ONE (violates POS-DECODE)" in msg
    assert "POS-DECODE" in e.value.violated


def test_inferred_descriptions_without_a_known_divergence():
    """Positions no mutant reproduces still get a description: the positions used, row by row."""
    with pytest.raises(ConformanceFailure) as e:
        _check(_Shift3(), "MODEL-DECODE")
    assert not e.value.divergences
    assert "no known divergence reproduces the run" in e.value.msg
    assert "inferred: +3 on the forward passes after the cache" in e.value.msg


class _Shift3(model_bugs._Bugged):
    """Positions +3 after the cache: no divergence of the catalogue."""

    def bug(self):
        import torch
        from transformers.models.llama import modeling_llama as m

        def make(forward):
            def patched(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, **kw):
                past = cache.get_seq_length() if cache is not None else 0
                if position_ids is None and past:
                    position_ids = torch.arange(input_ids.shape[1])[None] + past + 3
                return forward(self, input_ids, attention_mask, position_ids, cache, **kw)
            return patched
        return model_bugs._wrap(m.LlamaModel, "forward", make)


@pytest.mark.parametrize("arch", ["llama", "gpt2", "phi3"])
def test_unpatched_models_pass_every_scenario_that_applies(arch):
    """At float32, eager: every scenario passes but those transformers itself fails (recorded in
    adapters/expectations/models/hf-<arch>.yaml, named as recorded)."""
    from posenc.conformance import expectations
    ad = load_model_adapter(f"hf:{arch}")
    exp = expectations.load(ROOT / "adapters" / "expectations" / "models" / f"hf-{arch}.yaml", load_spec(),
                            ad.versions())
    for clause, sc in families.scenarios().items():
        if sc.not_applicable(model_suite.model_info(ad)):
            continue
        line = exp.lookup(f"eager-{sc.name}", "model", "float32")
        if line is None:
            _check(ad, clause)
        else:
            with pytest.raises(ConformanceFailure) as e:
                _check(ad, clause)
            assert line.divergence in e.value.divergences


def test_facts_positions_are_needs_a_visible_difference():
    """A mutant whose positions equal the clause's in a run has no form there (None), and the
    -1 of an unrotated token is position 0 for a rope probe only."""
    call = {"positions": np.array([[5]]), "valid": np.array([[True]]), "cache_length": 5, "attention_mask": None,
            "documents": None, "static": 0, "step": None}
    f = Facts(calls=[call], used=[np.array([[5]])], used_from=["rope"])
    assert f.positions_are(lambda c: None) is None
    f = Facts(calls=[call], used=[np.array([[-1]])], used_from=["rope"])
    assert f.positions_are(lambda c: np.array([[0]])) is True
    f = Facts(calls=[call], used=[np.array([[-1]])], used_from=["table"])
    assert f.positions_are(lambda c: np.array([[0]])) is False


@pytest.mark.parametrize("own", model_bugs.OWN, ids=lambda b: b.expect[0])
def test_transformers_own_dynamic_ntk_is_named_and_every_pass_rotates_as_the_grow_policy_gives(own):
    """Dynamic NTK beyond its context: the failures are transformers' own (named), never the
    oracle's -- every pass's rotation is SCALE-DYNAMIC-GROW's theta' for the passes before it."""
    div, clause = own.expect
    for attn in ("eager", "sdpa"):
        with pytest.raises(ConformanceFailure) as e:
            _check(own(), clause, attn)
        assert div in e.value.divergences, (attn, e.value.divergences, e.value.msg)
        # counted under its own scenario, never under the other scenarios the divergence violates
        assert [c for c in e.value.violated if c.startswith("MODEL-")] == [clause], e.value.violated
        oracle = [ln for ln in e.value.msg.splitlines() if ln.strip().startswith("[oracle]")]
        assert all("the cached keys the attention reads" in ln for ln in oracle), oracle


def test_the_dynamic_oracle_follows_the_policy_of_the_parameters():
    """MODEL-DECODE on transformers' dynamic NTK passes with its own policy (grow_until_reset: the
    prefill after the longer reference keeps the reference's theta'), and fails with per_call,
    which the same passes break: the oracle reads the policy, it does not accept any theta'."""
    ad = model_bugs.DynamicNTKLlama()
    assert ad.encodings()["rope"].dynamic_policy == "grow_until_reset"
    _check(ad, "MODEL-DECODE")
    per_call = model_bugs.DynamicNTKLlama()
    enc = per_call.encodings()
    per_call.encodings = lambda: {**enc, "rope": enc["rope"].model_copy(update={"dynamic_policy": "per_call"})}
    with pytest.raises(ConformanceFailure) as e:
        _check(per_call, "MODEL-DECODE")
    assert "the positions are right, the rotation is not" in e.value.msg


def test_every_model_divergence_is_reproduced_by_a_patched_bug():
    """The catalogue's model-level divergences are each planted and named at least once (the
    padded-rows NaN and the packed crossing by transformers itself: see the matrix; dynamic NTK's by
    transformers itself on a dynamic config)."""
    planted = {b.expect[0] for b in model_bugs.BUGS} | {b.expect[0] for b in model_bugs.OWN}
    spec = load_spec()
    model_level = {d for d, v in spec.current_divergences.items() if v.level == "model"}
    recorded = set()
    for f in (ROOT / "adapters" / "expectations" / "models").glob("*.yaml"):
        recorded |= {line.split(":", 1)[1].strip() for line in f.read_text().splitlines()
                     if line.strip().startswith("divergence:")}
    assert model_level <= planted | recorded, model_level - planted - recorded


def _pytest(*args, cwd=None, env=None):
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "conformance"), "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd or ROOT, env=dict(os.environ, **(env or {})))


def test_plugin_runs_a_patched_model_names_it_and_reports_json(tmp_path):
    report = tmp_path / "r.json"
    p = _pytest("--model", f"{ROOT / 'tests' / 'model_bugs.py'}:DecodeOffByOneLlama", "-k", "eager-decode or sdpa-decode",
                "--report-json", str(report))
    assert p.returncode == 1, p.stdout[-2000:]
    assert "DIV-POS-CACHE-OFF-BY-ONE" in p.stdout and "posenc rerun" in p.stdout and "--model" in p.stdout
    rep = json.loads(report.read_text())
    assert rep["model"]["architecture"] == "llama" and rep["model"]["attn_implementations"] == ["eager", "sdpa"]
    bad = [r for r in rep["results"] if r["outcome"] == "failed"]
    assert {r["case"] for r in bad} == {"eager-decode", "sdpa-decode"}
    assert all(r["check"] == "model" and r["diagnosis"][0]["divergence"] == "DIV-POS-CACHE-OFF-BY-ONE" for r in bad)


def test_na_and_unsupported_are_reported_never_passed(tmp_path):
    report = tmp_path / "r.json"
    p = _pytest("--model", str(EXAMPLE), "--report-json", str(report))
    assert p.returncode == 0, p.stdout[-3000:]
    rep = json.loads(report.read_text())
    out = {r["case"]: (r["outcome"], r["reason"]) for r in rep["results"]}
    assert out["default-longrope-switch"][0] == "n/a" and "LongRoPE" in out["default-longrope-switch"][1]
    assert out["default-generate"] == ("unsupported", out["default-generate"][1])
    assert "needs generate" in out["default-generate"][1]
    assert out["default-decode"][0] == "passed"
    assert "n/a" in p.stdout  # the summary's column


def test_a_twin_that_raises_is_in_the_json_report(tmp_path):
    """What a scenario ran without (its float64 twin raised) reaches the record's partly_unsupported, not the
    terminal summary alone; a scenario checked in full has null there."""
    path = _variant(tmp_path, "twin_raises", ("        twin = TinyDecoder(torch.float64)\n",
                                              "        raise RuntimeError('no float64 here')\n"))
    report = tmp_path / "r.json"
    p = _pytest("--model", str(path), "--dtype", "float32", "-k", "default-decode", "--report-json", str(report),
                cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:]
    (rec,) = [r for r in json.loads(report.read_text())["results"] if r["case"] == "default-decode"]
    assert rec["outcome"] == "passed" and "checked without" in rec["partly_unsupported"]
    assert "no float64 here" in rec["partly_unsupported"], rec["partly_unsupported"]
    p = _pytest("--model", str(EXAMPLE), "--dtype", "float32", "-k", "default-decode", "--report-json", str(report),
                cwd=tmp_path)
    assert p.returncode == 0 and all(r["partly_unsupported"] is None for r in json.loads(report.read_text())["results"])


def test_the_example_model_adapter_fails_when_its_positions_ignore_the_cache(tmp_path):
    src = EXAMPLE.read_text().replace("else (keep.long().cumsum(-1) - 1).clamp(min=0)[:, past:])",
                                      "else (keep.long().cumsum(-1) - 1).clamp(min=0)[:, past:] - past)")
    assert src != EXAMPLE.read_text()
    bad = tmp_path / "bad_model.py"
    bad.write_text(src)
    p = _pytest("--model", str(bad), "-k", "decode", cwd=tmp_path)
    assert p.returncode == 1
    assert "DIV-MODEL-POSITIONS-RESTART-AFTER-CACHE" in p.stdout, p.stdout[-3000:]


def test_model_and_adapter_are_mutually_exclusive_and_bad_models_are_usage_errors(tmp_path):
    p = _pytest("--model", "hf:llama", "--adapter", "torch")
    assert p.returncode == 4 and "mutually exclusive" in p.stderr
    p = _pytest("--model", "hf:no_such_model")
    assert p.returncode == 4 and "no tiny configuration of 'no_such_model'" in p.stderr
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "bert_generation"}))
    p = _pytest("--model", str(cfg))
    assert p.returncode == 4 and "model_type 'bert_generation'" in p.stderr


def test_a_crash_inside_the_model_fails_that_test_and_the_run_goes_on(tmp_path):
    mod = tmp_path / "crashing.py"
    mod.write_text(EXAMPLE.read_text() + "\n\nimport os\n"
                   "class Crashing(TinyModelAdapter):\n"
                   "    def build(self, **kw):\n"
                   "        m = super().build(**kw)\n"
                   "        old = m.forward\n"
                   "        def forward(*a, **k):\n"
                   "            if k.get('cache') is not None:\n"
                   "                os._exit(3)\n"
                   "            return old(*a, **k)\n"
                   "        m.forward = forward\n"
                   "        return m\n")
    report = tmp_path / "r.json"
    p = _pytest("--model", f"{mod}:Crashing", "-k", "prefill or decode", "--report-json", str(report), cwd=tmp_path)
    assert p.returncode == 1
    rep = json.loads(report.read_text())
    out = {r["case"]: r for r in rep["results"]}
    assert out["default-decode"]["outcome"] == "failed" and "exit status 3" in out["default-decode"]["reason"]
    assert out["default-prefill"]["outcome"] == "passed"


def test_model_check_cli_on_a_published_config(tmp_path):
    cfg = tmp_path / "config.json"  # Llama 3.1 8B's published config (llama3 scaling), as written
    cfg.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
        "rope_theta": 500000.0, "vocab_size": 128256, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}))
    p = subprocess.run([sys.executable, "-m", "posenc.cli", "model-check", str(cfg), "--report-json",
                        str(tmp_path / "r.json")], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "config:config.json (llama, transformers 5.24.0)" in p.stdout
    assert re.search(r"^left-pad-mask-only +diverges: DIV-POS-LEFT-PAD-IGNORED", p.stdout, re.M), p.stdout
    rep = json.loads((tmp_path / "r.json").read_text())
    from posenc.adapters.hf_model import from_config_file
    enc = from_config_file(cfg).encodings()["rope"]
    assert (enc.head_dim, enc.rope_type, enc.factor, enc.original_max_position_embeddings) == (128, "llama3", 8.0, 8192)
    assert rep["exit_status"] == 0


def test_tiny_configs_carry_the_registry_entries_parameters():
    """The oracle's parameters (the kit's import of each tiny config) are the named model's, shrunk
    by the documented rule (architectures.expected_encoding)."""
    import importlib
    archs = importlib.import_module("posenc.adapters.hf_model.architectures")
    for mt in archs.architectures():
        enc = load_model_adapter(f"hf:{mt}").encodings()
        want = archs.expected_encoding(mt)
        got = next(enc[k] for k in ("nope", "mrope", "rope", "rope.full_attention", *enc) if k in enc)
        for k, v in want.items():
            assert getattr(got, k) == (tuple(v) if isinstance(v, list) else v), (mt, k, getattr(got, k), v)
    phi = load_model_adapter("hf:phi3").encodings()["rope"]
    assert phi.original_max_position_embeddings == 32 and phi.max_position_embeddings == 1024
    assert len(phi.long_factor) == 8 and phi.long_factor[0] == pytest.approx(1.08) and phi.long_factor[-1] == pytest.approx(64.84)


def test_mrope_position_rule_and_the_text_row_by_hand():
    """MODEL-MROPE-POSITIONS' rule on hand-derived rows (Qwen2-VL section 2.1), and the text row the
    hf: adapter derives from packed [3, B, T] positions (each token's index in its document)."""
    from posenc.adapters.hf_model import _document_index
    from posenc.families.model import mrope_positions
    a = mrope_positions([("text", 2), ("image", (1, 2, 3)), ("text", 2)])
    assert a.tolist() == [[0, 1, 2, 2, 2, 2, 2, 2, 5, 6],
                          [0, 1, 2, 2, 2, 3, 3, 3, 5, 6],
                          [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]]
    b = mrope_positions([("image", (2, 1, 2)), ("text", 1)])  # starts with the image: two frames of 1 x 2
    assert b.tolist() == [[0, 0, 1, 1, 2], [0, 0, 0, 0, 2], [0, 1, 0, 1, 2]]
    packed = np.concatenate([a, b, a], axis=1)[:, None]
    assert _document_index(packed).tolist() == [list(range(10)) + list(range(5)) + list(range(10))]


def test_scenario_drivers_record_plain_data():
    """What crosses from the worker is plain data: arrays, numbers, strings, lists and dicts."""
    ad = load_model_adapter("hf:gpt2")
    r = Run(ad.build(dtype="float32", device="cpu", attn_implementation="sdpa"), model_suite.model_info(ad))
    families.scenarios()["MODEL-DECODE"].run(r)

    def plain(x):
        if isinstance(x, dict):
            return all(isinstance(k, str) and plain(v) for k, v in x.items())
        if isinstance(x, list):
            return all(plain(v) for v in x)
        return x is None or isinstance(x, (np.ndarray, int, float, str, bool))
    assert plain(r.trace())


def test_probes_that_describe_other_tensors_than_the_model_used_fail(tmp_path):
    """A model whose rope probes report the right rotation while its attention reads q and k rotated
    at other positions (a uniform shift its logits cannot show) is caught by the probes' consistency."""
    old = "            if cache is not None:\n                kr, v"
    new = ("            qr, kr = self.rope(q, pos + 3), self.rope(k, pos + 3)  # what the model really uses\n"
           + old)
    assert old in EXAMPLE.read_text()
    bad = tmp_path / "lying.py"
    bad.write_text(EXAMPLE.read_text().replace(old, new))
    p = _pytest("--model", str(bad), "-k", "prefill and not chunked", cwd=tmp_path)
    assert p.returncode == 1, p.stdout[-2000:]
    assert "the attention reads another q than the rotation's output its rope probe reports" in p.stdout


_variants = runpy.run_path(str(ROOT / "tests" / "example_variants.py"))  # the example's edited variants
_variant, _GENERATE = _variants["variant"], _variants["GENERATE"]


def test_correct_variants_pass_and_seed_and_expectations_are_the_kits(tmp_path):
    """An attention probe with an additive float mask (-1e9 where masked, no probs: the contract
    allows it) is read as the attention reads it; --posenc-seed reaches the model suite (header,
    other tokens); a user's model named like an hf: one gets no expectation file of transformers'."""
    additive = _variant(tmp_path, "additive", ("\"mask\": allowed, \"scaling\": D ** -0.5,\n                              \"probs\": att}",
                                               "\"mask\": torch.where(allowed, 0.0, -1e9).to(q.dtype), \"scaling\": D ** -0.5}"))
    p = _pytest("--model", str(additive), "-k", "packed or mask-only or left-pad", cwd=tmp_path)
    assert p.returncode == 0 and "MODEL-PACKED" in p.stdout, p.stdout[-3000:]
    named = _variant(tmp_path, "named", ("\"tiny-decoder\", \"torch\"", "\"hf-llama\", \"torch\""))
    p = _pytest("--model", str(named), "--posenc-seed", "5", "-k", "prefill and not chunked", "-v", cwd=tmp_path)
    assert p.returncode == 0 and "posenc expectations: none" in p.stdout and "posenc seed 5" in p.stdout, p.stdout[-3000:]
    ad = load_model_adapter(str(EXAMPLE))
    traces = [model_suite.run_scenario(ad, "prefill", "float32", "default", "cpu", seed) for seed in (0, 0, 5)]
    ids = [t["calls"][0]["probes"][0]["q_in"] for t in traces]
    assert np.array_equal(ids[0], ids[1]) and not np.array_equal(ids[0], ids[2])


def test_a_second_checkout_of_the_suite_is_filtered_as_the_installed_one(tmp_path):
    """--model collects only test_model.py, --adapter everything but it, in any copy of the suite's
    folder (a source checkout beside an installed kit)."""
    from posenc.conformance import plugin
    suite = tmp_path / "conformance"
    suite.mkdir()
    (suite / "plugin.py").write_text("")

    class Config:
        def __init__(self, model):
            self.model = model

        def getoption(self, name):
            return self.model if name == "--model" else None
    assert plugin.pytest_ignore_collect(suite / "test_golden.py", Config("hf:llama")) is True
    assert plugin.pytest_ignore_collect(suite / "test_model.py", Config("hf:llama")) is None
    assert plugin.pytest_ignore_collect(suite / "test_model.py", Config(None)) is True
    assert plugin.pytest_ignore_collect(tmp_path / "test_model.py", Config(None)) is None  # not the suite's folder


def test_model_check_configs_are_shrunk_or_refused_by_name():
    """A model_type that is not a name is refused; LongRoPE without original_max_position_embeddings
    (transformers reads max_position_embeddings) and a float dynamic context are shrunk; a
    vision-language config keeps its M-RoPE and gets the kit's tiny vision tower, as wide as its text."""
    from posenc.adapters.hf_model.architectures import tiny_from_config
    with pytest.raises(ValueError, match="model_type \\['llama'\\]"):
        tiny_from_config({"model_type": ["llama"]})
    base = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096}
    lr = tiny_from_config({**base, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 64,
                                                     "long_factor": [2.0] * 64}})
    assert lr["_posenc_context_shrink"] == ("longrope", 128, 32) and lr["max_position_embeddings"] == 32
    dy = tiny_from_config({**base, "max_position_embeddings": 4096.0, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    assert dy["_posenc_context_shrink"] == ("dynamic", 256, 16) and dy["max_position_embeddings"] == 16
    vl = tiny_from_config({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 28,
                           "rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
                           "vocab_size": 152064, "image_token_id": 151655,
                           "vision_config": {"depth": 32, "embed_dim": 1280, "hidden_size": 3584}})
    assert vl["text_config"]["rope_scaling"]["mrope_section"] == [16, 24, 24] and vl["text_config"]["hidden_size"] == 256
    assert vl["vision_config"]["depth"] == 1 and vl["vision_config"]["hidden_size"] == 256 and vl["image_token_id"] == 90


def test_the_example_with_a_greedy_generate_passes_generate(tmp_path):
    """The reference for the generate variants below: the example with a correct generate passes."""
    p = _pytest("--model", str(_variant(tmp_path, "generating", *_GENERATE)), "-k", "generate", cwd=tmp_path)
    assert p.returncode == 0 and "MODEL-GENERATE" in p.stdout, p.stdout[-3000:]


@pytest.mark.parametrize("edits,expect", [
    # a model that writes into the arrays it is handed: the kit's own copies stay right, the write is the failure
    ([("        keep = torch.ones(", "        if position_ids is not None:\n            torch.as_tensor(position_ids).add_(1)\n"
       "        keep = torch.ones(")], "the model modified its input 'position_ids' in place"),
    # probes that are all NaN cannot pass the oracle
    ([("\"q_in\": q, \"k_in\": k,", "\"q_in\": q * float('nan'), \"k_in\": k,")], "q_in is not finite at real tokens"),
    # probes() of another shape than a list of dicts
    ([("        return [self.seen] if all_passes else self.seen", "        return {'probes': self.seen}")],
     "probes() must return a list of dicts"),
    # what the model raises, SystemExit included, fails the test it was raised in, cleanly
    ([("        b, t, past =", "        if cache is not None:\n            raise SystemExit(0)\n        b, t, past =")],
     "SystemExit"),
    # logits of the last token only (logits_to_keep=1): the shape is the adapter's error, named
    ([("        return x @ self.out, (new", "        return (x @ self.out)[:, -1:], (new")],
     "logits of shape [2, 1, 64], but the pass fed [B, T] = [2, 32]"),
    # logits that are NaN everywhere fail even a scenario without pairs of logits
    ([("        return x @ self.out, (new", "        return x @ self.out * float('nan'), (new")],
     "prefill: the logits are not finite at real tokens"),
    # layer_types that name no set for layer 1: the oracle cannot check it, and says so
    ([("    encodings = lambda self: {\"rope\": ROPE}",
       "    encodings = lambda self: {\"rope.full\": ROPE, \"layer_types\": (\"full\",)}")],
     "layer 1 rotates q and k, but encodings() gives no RoPE set for it"),
    # generate whose sequences carry a token before a decoder's prompt
    ([*_GENERATE, ("        return np.concatenate([ids, new], 1)", "        return np.concatenate([ids[:, :1], ids, new], 1)")],
     "sequences hold 1 token(s) before the prompt"),
    # generate that reports one forward pass for its steps
    ([*_GENERATE, ("        return self.passes if all_passes else self.seen", "        return [[]] if all_passes else self.seen")],
     "probes(all_passes=True) lists 1 forward passes"),
    # generate whose tokens are not its step logits' argmax
    ([*_GENERATE, ("        return np.concatenate([ids, new], 1)", "        return np.concatenate([ids, new + 1], 1)")],
     "greedy tokens must be the argmax of the step logits returned"),
    # generate whose step logits are made up (all zero: any token is an argmax) and probes empty
    ([*_GENERATE, ("        return np.concatenate([ids, new], 1), np.stack(steps, 1)",
                   "        self.passes = [[] for _ in steps]\n        return np.concatenate([ids, new], 1), 0 * np.stack(steps, 1)")],
     "every step == a forward pass of its prompt and the tokens generated before it"),
], ids=["inputs-modified", "nan-probes", "probes-dict", "system-exit", "last-logits-only", "nan-logits", "short-layer-types",
        "generate-lead-token", "generate-one-pass", "generate-not-argmax", "generate-made-up-logits"])
def test_hostile_models_get_clean_named_failures(tmp_path, edits, expect):
    report = tmp_path / "r.json"
    p = _pytest("--model", str(_variant(tmp_path, "hostile", *edits)), "--report-json", str(report), cwd=tmp_path)
    assert p.returncode == 1, p.stdout[-2000:]
    assert expect in p.stdout, p.stdout[-3000:]
    assert "Traceback" not in p.stdout and json.loads(report.read_text())["complete"] is True


_VARLEN = [  # the example read as a varlen model: its documents from cu_seqlens alone, never from positions
    ("            doc = torch.cat([torch.zeros(b, 1, dtype=torch.long), (pos[:, 1:] != pos[:, :-1] + 1).long()], 1).cumsum(1)\n"
     "            allowed = allowed & (doc[:, None, :, None] == doc[:, None, None, :])\n",
     "            if cu_seqlens is not None:\n"
     "                doc = (torch.arange(t)[None, :, None] >= torch.as_tensor(cu_seqlens)[None, None, 1:-1]).sum(-1)\n"
     "                allowed = allowed & (doc[:, None, :, None] == doc[:, None, None, :])\n"),
    ("                use_cache=False):", "                use_cache=False, cu_seqlens=None):"),
    ("\"position_ids\", \"inputs_embeds\", \"attention_mask\")", "\"position_ids\", \"inputs_embeds\", \"attention_mask\", \"cu_seqlens\")"),
]


def test_cu_seqlens_reach_a_varlen_model_and_a_model_that_drops_them_fails(tmp_path):
    """MODEL-PACKED hands cu_seqlens to a model that declares them: a model that reads its documents
    from them passes; one that declares them and ignores them attends across documents, named."""
    good = _pytest("--model", str(_variant(tmp_path, "varlen", *_VARLEN)), "-k", "packed", cwd=tmp_path)
    assert good.returncode == 0 and "MODEL-PACKED" in good.stdout, good.stdout[-3000:]
    dropped = [(_VARLEN[0][0], "            pass  # cu_seqlens dropped\n"), *_VARLEN[1:]]
    bad = _pytest("--model", str(_variant(tmp_path, "varlen_dropped", *dropped)), "-k", "packed", cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout[-3000:]
    assert "a token attends to another document" in bad.stdout and "DIV-MODEL-PACKED-CROSS-DOCUMENT" in bad.stdout


@pytest.mark.parametrize("edits,expect", [
    ([("    encodings = lambda self: {\"rope\": ROPE}", "    encodings = lambda self: {}")],
     "declares 'rope' probes but encodings() gives none"),
    ([("    encodings = lambda self: {\"rope\": ROPE}", "    encodings = lambda self: {\"rotary\": ROPE}")],
     "encodings() names its RopeParams 'rotary'"),
    ([("name, framework, architecture, kind, vocab_size, pad_token_id = \"tiny-decoder\", \"torch\", \"tiny\", \"decoder\", V, 0",
       "name, framework, architecture, kind, vocab_size, pad_token_id = \"tiny-decoder\", \"torch\", \"tiny\", \"decoder\", V, 'x'")],
     "pad_token_id must be None or an integer"),
], ids=["no-rope-parameters", "misnamed-parameters", "pad-id"])
def test_a_model_description_the_oracle_cannot_use_is_a_usage_error(tmp_path, edits, expect):
    p = _pytest("--model", str(_variant(tmp_path, "described", *edits)), cwd=tmp_path)
    assert p.returncode == 4 and expect in p.stderr, p.stderr[-2000:]


def test_generate_must_return_every_step(tmp_path):
    """A generate that returns fewer steps than asked cannot hide the late ones."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("tiny_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    class Short:
        def __init__(self, m):
            self.m = m

        def generate(self, ids, attention_mask, max_new_tokens, use_cache):
            return np.concatenate([ids, ids[:, :max_new_tokens - 2]], 1), np.zeros((ids.shape[0], max_new_tokens - 2, mod.V))

        def probes(self, all_passes=False):
            return []
    info = model_suite.model_info(mod.TinyModelAdapter())
    r = Run(Short(None), info)
    from posenc.spec.errors import AdapterError
    with pytest.raises(AdapterError, match=r"sequences must be \[B, T \+ 6\]"):
        r.generate("g", np.full((2, 5), 4), np.ones((2, 5), np.int64), 6, use_cache=True)


def test_attn_selects_and_is_validated_and_a_rerun_line_runs():
    p = _pytest("--model", "hf:llama", "--attn", "eager", "-k", "left-pad-mask-only")
    assert p.returncode == 0 and "1 xfailed" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
    p = _pytest("--model", "hf:llama", "--attn", "bogus")
    assert p.returncode == 4 and "--attn 'bogus': unknown bogus" in p.stderr
    p = _pytest("--model", "hf:llama", "--attn", ",")
    assert p.returncode == 4 and "no name" in p.stderr
    node = f"{ROOT / 'conformance' / 'test_model.py'}::test_model[float32-sdpa-decode@MODEL-DECODE+POS-DECODE]"
    p = subprocess.run([sys.executable, "-m", "pytest", node, "--model", "hf:llama", "-q", "-p", "no:cacheprovider"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.parametrize("bias_max", [16, 8])
def test_transformers_mpt_ignores_alibi_bias_max_and_the_run_names_it(tmp_path, bias_max):
    """A published-shape MPT config with attn_config.alibi_bias_max 16: transformers 5.24's MptModel.forward
    builds its ALiBi tensor with the default 8 (DIV-ALIBI-BIAS-MAX-IGNORED, named from the bias probes); at 8
    the same config passes."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "mpt", "d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4,
                               "max_seq_len": 2048, "vocab_size": 50432,
                               "attn_config": {"alibi": True, "alibi_bias_max": bias_max}}))
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "conformance"), "--model", str(cfg), "--dtype", "float32", "-q",
           "-p", "no:cacheprovider", "-k", "prefill and not chunked", "--expectations", "none"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ), timeout=600)
    if bias_max == 8:
        assert p.returncode == 0, p.stdout[-3000:]
    else:
        assert p.returncode == 1 and "DIV-ALIBI-BIAS-MAX-IGNORED" in p.stdout, p.stdout[-3000:]

"""The model suite against hostile and careless model adapters (issue 28): a model that ignores its
rotation or leaves k unrotated and reports no attention probe, vacuous or reused probe arrays, a model
that writes into what the kit hands it, a bug from position 40 or 1000 on, a hang, a NumPy layer index.

Each is the example model adapter (docs/example_model_adapter.py) with text edits, run by a real
``pytest conformance --model`` process."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


_variants = runpy.run_path(str(ROOT / "tests" / "example_variants.py"))  # the example's edited variants
_variant = _variants["variant"]

#: no attention probe: only the rope probes tell the kit anything, so the logits must show the rotation's use
NO_ATTENTION = [
    ("            self.seen.append({\"kind\": \"attention\", \"layer\": i, \"q\": qr, \"k\": kr, \"mask\": allowed, "
     "\"scaling\": D ** -0.5,\n                              \"probs\": att})\n", ""),
    ("probes, dtypes, num_layers = (\"rope\", \"attention\")", "probes, dtypes, num_layers = (\"rope\",)"),
]
#: the attention reads q and k before the rotation its probes report
IGNORES_ROTATION = [("            if cache is not None:\n                kr, v",
                     "            qr, kr = q, k  # the rotation is computed for the probes, then dropped\n"
                     "            if cache is not None:\n                kr, v")]
#: the attention reads the rotated q and the unrotated k (cached unrotated too)
K_UNROTATED = [("            if cache is not None:\n                kr, v",
                "            kr = k  # k is left unrotated\n            if cache is not None:\n                kr, v")]


def _run(tmp_path: Path, model: Path, *args: str, dtype: str = "float32"):
    return _variants["run_model"](tmp_path, model, *args, dtype=dtype)


def _outcomes(report: dict) -> dict[str, str]:
    return _variants["outcomes"](report, "")


@pytest.mark.parametrize("edits,expect", [
    (IGNORES_ROTATION, "the logits did not change"),
    (K_UNROTATED, "== positions 0 ..: row 0 token 1: max |logit difference|"),
], ids=["ignores-rotation", "k-unrotated"])
def test_a_model_that_does_not_use_its_rotation_fails_without_attention_probes(tmp_path, edits, expect):
    """Without attention probes nothing tied the rotation the probes report to what the attention reads:
    such a model passed every scenario.  MODEL-POSITION-SHIFT's logits now show it; the same edits with
    the attention probes kept are caught by the probes' consistency too."""
    p, report = _run(tmp_path, _variant(tmp_path, "hostile", *NO_ATTENTION, *edits))
    assert p.returncode == 1, p.stdout[-3000:]
    assert expect in p.stdout, p.stdout[-3000:]
    outcomes = _outcomes(report)
    assert outcomes["default-position-shift"] == "failed", outcomes
    honest, report = _run(tmp_path, _variant(tmp_path, "honest", *NO_ATTENTION), "-k", "position-shift")
    assert honest.returncode == 0, honest.stdout[-3000:]
    assert _outcomes(report) == {"default-position-shift": "passed"}


def test_a_model_without_position_ids_is_told_rotation_use_is_not_checked(tmp_path):
    model = _variant(tmp_path, "no_ids", *NO_ATTENTION, ("(\"cache\", \"position_ids\", \"inputs_embeds\", \"attention_mask\")",
                                                         "(\"cache\", \"inputs_embeds\", \"attention_mask\")"))
    p, report = _run(tmp_path, model, "-k", "position-shift or default-prefill")
    assert p.returncode == 0, p.stdout[-3000:]
    rec = next(r for r in report["results"] if r["case"] == "default-position-shift")
    assert rec["outcome"] == "unsupported" and "whether the attention uses its positional encoding" in rec["reason"], rec


@pytest.mark.parametrize("start,with_probes", [(40, True), (40, False), (1000, True)],
                         ids=["from-40", "from-40-no-probes", "from-1000"])
def test_a_rotation_wrong_from_a_far_position_on_fails(tmp_path, start, with_probes):
    """Positions clamped at ``start`` (a cos/sin table too short): no scenario reached past a few dozen.
    The rope probes are checked at positions in the thousands, and without any probe the shifted logits
    show a bug from 40 on."""
    edits = [("        ang = pos[:, None, :, None].double() * self.inv",
              f"        ang = pos.clamp(max={start - 1})[:, None, :, None].double() * self.inv")]
    if not with_probes:
        edits += [*NO_ATTENTION, ("            self.seen.append({\"kind\": \"rope\", \"layer\": i, \"q_in\": q, \"k_in\": k, "
                                  "\"q_out\": qr, \"k_out\": kr})\n", ""), ("probes, dtypes, num_layers = (\"rope\",)", "probes, dtypes, num_layers = ()")]
    p, report = _run(tmp_path, _variant(tmp_path, "clamped", *edits), "-k", "position-shift")
    assert p.returncode == 1, p.stdout[-3000:]
    assert _outcomes(report) == {"default-position-shift": "failed"}
    assert re.search(r"\[oracle\] positions (6[4-9]|\d{3,}) \.\." if with_probes else r"every position \+ \d\d ==", p.stdout), \
        p.stdout[-3000:]


def test_empty_probes_are_refused(tmp_path):
    """Rope probes with no head ([B, 0, T, D]) would make the oracle compare nothing."""
    edits = [("\"q_in\": q, \"k_in\": k, \"q_out\": qr, \"k_out\": kr}",
              "\"q_in\": q[:, :0], \"k_in\": k[:, :0], \"q_out\": qr[:, :0], \"k_out\": kr[:, :0]}")]
    p, report = _run(tmp_path, _variant(tmp_path, "empty", *edits), "-k", "prefill and not chunked")
    assert p.returncode == 1 and "'q_in' of shape [2, 0, 32, 16] is empty" in p.stdout, p.stdout[-3000:]


def test_an_honest_model_that_reuses_its_probe_buffers_passes(tmp_path):
    """A model that writes each pass's attention mask into one preallocated buffer (a static-cache kernel
    does) reports views of it: the kit keeps a copy of every probe array, integer and boolean too (it
    recorded them by reference, so the later passes rewrote the earlier passes' masks)."""
    edits = [("        self.seen, new = [], []",
              "        self.seen, new = [], []\n"
              "        if not hasattr(self, 'buf'):\n"
              "            self.buf = torch.zeros(4, 1, 256, 1600, dtype=torch.bool)\n"
              "        view = self.buf[:b, :, :t, :past + t]\n"
              "        view.copy_(allowed.expand(b, 1, t, past + t))\n"),
             ("\"mask\": allowed, \"scaling\": D ** -0.5,\n                              \"probs\": att}",
              "\"mask\": view, \"scaling\": D ** -0.5}")]  # no probs: the kit's attention reads the mask
    p, report = _run(tmp_path, _variant(tmp_path, "reuses", *edits))
    assert p.returncode == 0, p.stdout[-3000:]
    assert "failed" not in _outcomes(report).values()


@pytest.mark.parametrize("index", ["np.int64(i)", "np.uint8(i)", "torch.tensor(i)"])
def test_a_numpy_or_tensor_integer_layer_index_is_a_layer_index(tmp_path, index):
    edits = [("\"kind\": \"rope\", \"layer\": i,", f"\"kind\": \"rope\", \"layer\": {index},"),
             ("import torch\n", "import numpy as np\nimport torch\n")]
    p, report = _run(tmp_path, _variant(tmp_path, "np_layer", *edits), "-k", "prefill or decode")
    assert p.returncode == 0, p.stdout[-3000:]
    outcomes = _outcomes(report)
    assert "failed" not in outcomes.values() and outcomes["default-decode"] == "passed", outcomes


#: a greedy generate through the example's own cache that writes into the mask it was handed
_GENERATE = [(old, new.replace("        self.passes = passes\n", "        self.passes = passes\n        attention_mask[:] = 1  # WRITES\n"))
             for old, new in _variants["GENERATE"]]


@pytest.mark.parametrize("edits,select,expect", [
    ([("        return self.emb[torch.as_tensor(input_ids)]",
       "        out = self.emb[torch.as_tensor(input_ids)].clone()\n        input_ids[:] = 3\n        return out")],
     "inputs-embeds", "embed(): the model modified its input 'input_ids' in place"),
    (_GENERATE, "default-generate", "generate(): the model modified its input 'attention_mask' in place"),
    ([g if g[0] != "    def embed(self, input_ids):" else (g[0], g[1].replace("attention_mask[:] = 1", "ids[:, 0] = 5"))
      for g in _GENERATE], "default-generate", "generate(): the model modified its input 'input_ids' in place"),
], ids=["embed", "generate-mask", "generate-ids"])
def test_a_model_that_writes_into_what_it_is_handed_fails_named(tmp_path, edits, select, expect):
    """embed() and generate() get copies, checked afterwards: a write is the model's failure, named (and
    the kit's own arrays stay right, so the write cannot hide the model's bug)."""
    p, report = _run(tmp_path, _variant(tmp_path, "writer", *edits), "-k", select)
    assert p.returncode == 1 and expect in p.stdout, p.stdout[-3000:]
    assert "Traceback" not in p.stdout


def test_a_model_hang_names_the_model_the_scenario_and_the_crash(tmp_path):
    edits = [("        b, t, past =", "        if position_ids is not None and int(torch.as_tensor(position_ids).max()) > 2900:\n"
              "            import time\n            time.sleep(600)\n        b, t, past =")]
    p, report = _run(tmp_path, _variant(tmp_path, "hangs", *edits), "-k", "position-shift or prefill",
                     "--posenc-timeout", "30")
    assert p.returncode == 1, p.stdout[-3000:]
    assert ("tiny-decoder did not finish test_model[float32-default-position-shift@MODEL-POSITION-SHIFT+POS-PREFILL] "
            "within 30 s (--posenc-timeout)") in p.stdout, p.stdout[-3000:]
    assert "counts as crash 1 of 3" in p.stdout
    assert _outcomes(report)["default-prefill"] == "passed"


# ---- the hostile review's attacks (issue 28) ----------------------------------------------------------

#: the example with a partial rotary: 8 of its 16 dims rotated, the rope probe reporting that slice
PARTIAL = [
    ("ROPE = RopeParams(head_dim=D, rope_theta=10000.0)", "ROPE = RopeParams(head_dim=D, rotary_dim=8, rope_theta=10000.0)"),
    ("        self.inv = ROPE.rope_theta ** -(torch.arange(0, D, 2, dtype=torch.float64) / D)",
     "        self.inv = ROPE.rope_theta ** -(torch.arange(0, 8, 2, dtype=torch.float64) / 8)"),
    ("    def rope(self, x, pos):  # x [B, H, T, D], pos [B, T]\n",
     "    def rope(self, x, pos):  # x [B, H, T, D], pos [B, T]\n        return torch.cat([self.rope8(x[..., :8], pos), x[..., 8:]], -1)\n\n"
     "    def rope8(self, x, pos):\n"),
    ("\"q_in\": q, \"k_in\": k, \"q_out\": qr, \"k_out\": kr}",
     "\"q_in\": q[..., :8], \"k_in\": k[..., :8], \"q_out\": qr[..., :8], \"k_out\": kr[..., :8]}"),
]


def test_a_partial_rotary_layer_that_attends_unrotated_fails_with_honest_probes(tmp_path):
    """The rope probe covers the rotated slice, the attention probe the whole head: the consistency check
    compares the slice (it skipped every such model)."""
    honest, _ = _run(tmp_path, _variant(tmp_path, "partial", *PARTIAL), "-k", "prefill or decode")
    assert honest.returncode == 0, honest.stdout[-3000:]
    bad = PARTIAL + [("            if cache is not None:\n                kr, v",
                      "            if i == 1:\n                qr, kr = q, k\n            if cache is not None:\n                kr, v")]
    p, _ = _run(tmp_path, _variant(tmp_path, "partial_bad", *bad), "-k", "default-prefill")
    assert p.returncode == 1 and "layer 1: the attention reads another q than the rotation's output" in p.stdout, \
        p.stdout[-3000:]


def test_a_pinned_vocabulary_entry_sets_no_logits_scale(tmp_path):
    """A token suppressed at -1e9 in every row made the logits bound 1e9-wide: an honest model with one
    passes, and the same model attending to pads fails left-pad as it does without the pin."""
    pin = [("        return x @ self.out, (new", "        out = x @ self.out\n        out[..., 1] = -1e9\n        return out, (new")]
    honest, report = _run(tmp_path, _variant(tmp_path, "pinned", *pin))
    assert honest.returncode == 0, honest.stdout[-3000:]
    pads = pin + [("        keep = torch.ones(b, past + t, dtype=torch.bool) if attention_mask is None else "
                   "torch.as_tensor(attention_mask) > 0", "        keep = torch.ones(b, past + t, dtype=torch.bool)"),
                  *NO_ATTENTION]
    p, report = _run(tmp_path, _variant(tmp_path, "pinned_pads", *pads), "-k", "left-pad")
    assert p.returncode == 1, p.stdout[-3000:]
    assert _outcomes(report)["default-left-pad-mask-only"] == "failed"


@pytest.mark.parametrize("edits,expect", [
    ([("\"kind\": \"rope\", \"layer\": i,", "\"kind\": [\"rope\"], \"layer\": i,")], "unknown probe kind"),
    ([("\"scaling\": D ** -0.5,\n                              \"probs\": att}", "}")],
     "'scaling' must be the softmax scale (a positive number), required without 'probs'"),
], ids=["kind-list", "no-scaling"])
def test_attention_and_kind_contract_breaks_are_the_models_failure(tmp_path, edits, expect):
    """Probes outside the contract were kit errors ("a kit bug: report it") or silently checked nothing."""
    p, report = _run(tmp_path, _variant(tmp_path, "contract", *edits), "-k", "packed or mask-only")
    assert p.returncode == 1 and expect in p.stdout, p.stdout[-3000:]
    assert "kit error" not in p.stdout and "a kit bug" not in p.stdout


def test_attention_probes_of_other_keys_are_not_read_and_said(tmp_path):
    """An attention probe holding only some keys (a sliding window's, a cross-attention's source) cannot give
    the mass across documents or on pads: not read (it crashed the kit, or counted 0 as checked), and said
    where no probe of the run could be read."""
    edits = [("\"k\": kr, \"mask\": allowed, \"scaling\": D ** -0.5,\n                              \"probs\": att}",
              "\"k\": kr[:, :, -4:], \"mask\": allowed[..., -4:], \"scaling\": D ** -0.5, \"probs\": att[..., -4:]}")]
    p, report = _run(tmp_path, _variant(tmp_path, "few_keys", *edits), "-k", "packed or mask-only")
    assert "kit error" not in p.stdout and "a kit bug" not in p.stdout, p.stdout[-3000:]
    assert "no attention probe of the run holds the pass's keys" in p.stdout, p.stdout[-3000:]


def test_nan_attention_probabilities_are_a_failure_not_a_pass(tmp_path):
    edits = [("\"probs\": att}", "\"probs\": att * float('nan')}")]
    p, _ = _run(tmp_path, _variant(tmp_path, "nan_probs", *edits), "-k", "packed")
    assert p.returncode == 1 and "the attention probabilities of a real token are not finite" in p.stdout, \
        p.stdout[-3000:]


def test_a_twin_raising_a_base_exception_is_said_not_failed(tmp_path):
    edits = [("    def float64_twin(self):", "    def float64_twin(self):\n        raise GeneratorExit('boom')\n\n"
              "    def _unused_twin(self):")]
    p, report = _run(tmp_path, _variant(tmp_path, "twin_boom", *edits), "-k", "batch")
    assert p.returncode == 0, p.stdout[-3000:]
    assert "float64_twin() raised GeneratorExit: boom" in p.stdout


def test_a_description_that_changes_when_the_scenario_runs_fails(tmp_path):
    """encodings() that told the driver (in the worker) another story than the run's validated one."""
    edits = [("    encodings = lambda self: {\"rope\": ROPE}  # noqa: E731",
              "    def encodings(self):\n        import inspect\n"
              "        if any(f.function == 'run_scenario' for f in inspect.stack()):\n"
              "            return {\"rope\": RopeParams(head_dim=D, rope_theta=500000.0)}\n        return {\"rope\": ROPE}")]
    p, _ = _run(tmp_path, _variant(tmp_path, "two_faced", *edits), "-k", "default-prefill")
    assert p.returncode == 1 and "the model described itself" in p.stdout, p.stdout[-3000:]


def test_a_model_error_names_the_pass_and_the_positions(tmp_path):
    edits = [("        b, t, past =", "        if position_ids is not None and int(torch.as_tensor(position_ids).max()) > 2900:\n"
              "            raise IndexError('index out of range in self')\n        b, t, past =")]
    p, _ = _run(tmp_path, _variant(tmp_path, "short_table", *edits), "-k", "position-shift")
    assert p.returncode == 1, p.stdout[-3000:]
    assert re.search(r"positions \d{4} \.\. \(positions up to \d{4}\): the model raised IndexError: index out of range "
                     r"in self; a model that takes fewer positions declares max_positions", p.stdout), p.stdout[-3000:]


def test_generate_steps_must_be_forward_passes_of_what_it_generated(tmp_path):
    """Step logits made up after step 0 (all zero: any token is an argmax, with or without a cache alike)."""
    edits = [*_GENERATE, ("        attention_mask[:] = 1  # WRITES\n", ""),
             ("        return np.concatenate([ids, new], 1), np.stack(steps, 1)",
              "        steps = [steps[0]] + [0 * s for s in steps[1:]]\n"
              "        return np.concatenate([ids, new], 1), np.stack(steps, 1)")]
    p, _ = _run(tmp_path, _variant(tmp_path, "made_up", *edits), "-k", "default-generate")
    assert p.returncode == 1, p.stdout[-3000:]
    assert "every step == a forward pass of its prompt and the tokens generated before it" in p.stdout


def test_what_a_model_without_attention_probes_leaves_unchecked_is_said(tmp_path):
    p, report = _run(tmp_path, _variant(tmp_path, "no_attention", *NO_ATTENTION), "-k", "position-shift")
    assert p.returncode == 0, p.stdout[-3000:]
    assert "whether every layer's attention reads its rotation" in p.stdout, p.stdout[-3000:]


def test_the_table_gather_is_checked_where_the_probe_gives_the_table():
    """A table probe whose output is not the table's row its rows name (wpe[pos + 1] added, rows saying pos)."""
    from posenc.harness.model_oracles import oracle_table
    from posenc.spec.params_absolute import GPT2EmbeddingParams
    table = np.arange(40.0).reshape(10, 4)
    rows = np.array([[0, 1, 2]])
    call = {"label": "prefill", "positions": rows, "valid": np.ones((1, 3), bool)}
    enc = {"embeddings": GPT2EmbeddingParams(vocab_size=16, n_positions=10, n_embd=4)}
    good = {"kind": "table", "rows": rows, "output": table[rows], "table": table}
    assert oracle_table(call, good, enc)[0] is None
    bad = dict(good, output=table[rows + 1])
    prob = oracle_table(call, bad, enc)[0]
    assert prob is not None and "the gather itself is wrong" in prob.text, prob


def test_a_layer_that_reports_no_rope_probe_fails_where_the_model_says_how_many_it_has(tmp_path):
    """Rope probes of layer 0 only, layer 1 rotating with another theta: nothing checked layer 1.  With
    num_layers (the example declares it) the missing layer fails the run; without it, as before."""
    edits = [("            self.seen.append({\"kind\": \"rope\", \"layer\": i,",
              "            if i == 0:\n                self.seen.append({\"kind\": \"rope\", \"layer\": i,"),
             ("\"q_in\": q, \"k_in\": k, \"q_out\": qr, \"k_out\": kr})\n",
              "\"q_in\": q, \"k_in\": k, \"q_out\": qr, \"k_out\": kr})\n            if i == 1:\n                qr, kr = q, k\n"),
             *NO_ATTENTION]
    p, _ = _run(tmp_path, _variant(tmp_path, "layer0_only", *edits), "-k", "default-prefill")
    assert p.returncode == 1, p.stdout[-3000:]
    assert "layer(s) [1] of the model's 2 rotate q and k (encodings()) but reported no rope probe" in p.stdout
    undeclared = [*edits, ("probes, dtypes, num_layers = (\"rope\",), (\"float64\", \"float32\"), L",
                           "probes, dtypes = (\"rope\",), (\"float64\", \"float32\")")]
    p, _ = _run(tmp_path, _variant(tmp_path, "layer0_undeclared", *undeclared), "-k", "default-prefill")
    assert p.returncode == 0, p.stdout[-3000:]

"""The keras-hub adapters really run keras-hub: patch a wrapped keras-hub method with a wrong
behaviour and watch the conformance run fail (and pass without the patch).

The Keras backend is fixed per process, so every check runs in a subprocess: one on JAX with
the patches (``pytest.main`` in-process, once unpatched and once per patch), and one smoke run
each on TensorFlow and torch; the torch process also asks the JAX adapter for Keras and must
get the backend-clash ``UsageError``.  The three processes start together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import posenc.conformance

CONFORMANCE_DIR = str(Path(posenc.conformance.__file__).resolve().parent)
ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter: argv = backend, JSON list of [label, -k selection, patch name or null].
SCRIPT = r'''
import json, sys
backend, plan, conformance = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
from posenc.adapters import keras_hub_adapter as kh
out = {"keras_imported_early": "keras" in sys.modules}
adapter = {"jax": kh.JAX_ADAPTER, "tensorflow": kh.TENSORFLOW_ADAPTER, "torch": kh.TORCH_ADAPTER}[backend]
out["versions"] = adapter.versions()  # imports Keras under the backend
import pytest
from keras import ops
from keras_hub.src.layers.modeling.alibi_bias import AlibiBias
from keras_hub.src.layers.modeling.position_embedding import PositionEmbedding
from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding
from keras_hub.src.layers.modeling.sine_position_encoding import SinePositionEncoding


def interleaved_rotation(self, tensor, cos_emb, sin_emb):
    """Pairs (2i, 2i+1) against keras-hub's cat(c, c) cos layout."""
    x1, x2 = tensor[..., 0::2], tensor[..., 1::2]
    rot = ops.reshape(ops.stack((-x2, x1), axis=-1), ops.shape(tensor))
    return tensor * cos_emb + rot * sin_emb


orig_cos_sin = RotaryEmbedding._compute_cos_sin_embedding
orig_positions = RotaryEmbedding._compute_positions
orig_sine = SinePositionEncoding.call
orig_pos = PositionEmbedding.call
PATCHES = {
    "RotaryEmbedding._apply_rotary_pos_emb": (RotaryEmbedding, "_apply_rotary_pos_emb", interleaved_rotation),
    "RotaryEmbedding._compute_cos_sin_embedding": (  # positions ignored: arange(T)
        RotaryEmbedding, "_compute_cos_sin_embedding",
        lambda self, inputs, start_index=0, positions=None: orig_cos_sin(self, inputs, start_index, None)),
    "RotaryEmbedding._compute_positions": (  # start_index ignored: every call from position 0
        RotaryEmbedding, "_compute_positions", lambda self, inputs, start_index=0: orig_positions(self, inputs, 0)),
    "SinePositionEncoding.call": (  # positions off by one
        SinePositionEncoding, "call",
        lambda self, inputs, start_index=0, positions=None: orig_sine(self, inputs, start_index, positions + 1)),
    "PositionEmbedding.call": (  # rows off by one (clamped into the table)
        PositionEmbedding, "call",
        lambda self, inputs, start_index=0, positions=None: orig_pos(
            self, inputs, start_index, ops.minimum(positions + 1, self.sequence_length - 1))),
    "AlibiBias._get_slopes": (  # the power-of-two rule for every head count
        AlibiBias, "_get_slopes", lambda self, n: [2.0 ** (-self.alibi_bias_max * (k + 1) / n) for k in range(n)]),
}


class Collect:
    def __init__(self):
        self.counts, self.failures = {}, []

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            kind = "xfailed" if hasattr(report, "wasxfail") else report.outcome
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if report.failed:
                self.failures.append(str(report.longrepr)[-1500:])


runs = []
for label, select, patch in plan:
    mp = pytest.MonkeyPatch()
    if patch:
        mp.setattr(*PATCHES[patch][:2], PATCHES[patch][2])
    c = Collect()
    try:
        rc = pytest.main([conformance, "--adapter", adapter.name, "-q", "-p", "no:cacheprovider",
                          "--import-mode=importlib", "--posenc-isolation", "none", "-k", select], plugins=[c])
    finally:
        mp.undo()
    runs.append({"label": label, "rc": int(rc), "counts": c.counts, "failures": c.failures})
out["runs"] = runs
if backend == "torch":
    from posenc.spec.errors import UsageError
    try:
        kh.JAX_ADAPTER.versions()
        out["clash"] = None
    except UsageError as e:
        out["clash"] = str(e)
print("@@RESULT@@" + json.dumps(out))
'''

ROPE = "test_golden and rope-llama3-8b-scattered"
OFFSET = "test_call_form and rope-cache-offset-shared"  # its offset form: the layer's start_index
SIN = "test_golden and sin-interleaved-d8"
LOOKUP = "test_golden and lookup-gpt2-wpe"
ALIBI = "test_golden and (alibi-slopes-6 or alibi-slopes-12)"
#: (label, -k selection, patch, divergence the diagnosis must name or None)
PATCHED = [
    ("rotation", ROPE, "RotaryEmbedding._apply_rotary_pos_emb", None),
    ("positions", ROPE, "RotaryEmbedding._compute_cos_sin_embedding", "DIV-ROPE-ARANGE-POSITIONS"),
    ("start_index", OFFSET, "RotaryEmbedding._compute_positions", "DIV-ROPE-ARANGE-POSITIONS"),
    ("sine", SIN, "SinePositionEncoding.call", None),
    ("lookup", LOOKUP, "PositionEmbedding.call", None),
    ("alibi", ALIBI, "AlibiBias._get_slopes", "DIV-ALIBI-SLOPES-NON-POW2"),
]
BASELINE = " or ".join(f"({s})" for s in (ROPE, OFFSET, SIN, LOOKUP, ALIBI))
SMOKE = ("test_golden and (rope-neox-20b or scale-yarn-gpt-oss or sin-interleaved-d8 or lookup-gpt2-wpe "
         "or gpt2-small-cache or alibi-mpt-7b or pos-decode)")
PLANS = {
    "jax": [["baseline", BASELINE, None]] + [[label, sel, patch] for label, sel, patch, _ in PATCHED],
    "tensorflow": [["smoke", SMOKE, None]],
    "torch": [["smoke", SMOKE, None]],
}


@pytest.fixture(scope="module")
def results():
    """Start the three backend processes together; ``{backend: result dict}``."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("KERAS_BACKEND", None)
    procs = {b: subprocess.Popen([sys.executable, "-c", SCRIPT, b, json.dumps(plan), CONFORMANCE_DIR], cwd=ROOT,
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for b, plan in PLANS.items()}
    out = {}
    for b, p in procs.items():
        text, _ = p.communicate(timeout=600)
        marker = [line for line in text.splitlines() if line.startswith("@@RESULT@@")]
        assert p.returncode == 0 and marker, f"{b} process failed (rc {p.returncode}):\n{text[-3000:]}"
        out[b] = json.loads(marker[-1][len("@@RESULT@@"):])
    return out


def _run(res: dict, label: str) -> dict:
    return next(r for r in res["runs"] if r["label"] == label)


@pytest.mark.parametrize("backend", sorted(PLANS))
def test_adapter_is_lazy_and_reports_versions(results, backend):
    """Importing the adapter module does not import Keras; versions() names the three libraries."""
    res = results[backend]
    assert res["keras_imported_early"] is False
    assert res["versions"]["keras-hub"] == "0.32.0"
    assert set(res["versions"]) == {"keras-hub", "keras", backend}


def test_unpatched_jax_passes(results):
    run = _run(results["jax"], "baseline")
    assert run["rc"] == 0 and run["counts"].get("passed", 0) >= 5 and not run["counts"].get("failed"), run


@pytest.mark.parametrize("label,select,patch,divergence", PATCHED, ids=[p[2] for p in PATCHED])
def test_patched_keras_hub_fails_the_suite(results, label, select, patch, divergence):
    run = _run(results["jax"], label)
    assert run["rc"] == 1 and run["counts"].get("failed", 0) >= 1, run
    if divergence:
        assert any(f"    {divergence} (violates" in f for f in run["failures"]), run["failures"]


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_smoke_other_backends(results, backend):
    run = _run(results[backend], "smoke")
    assert run["rc"] == 0 and run["counts"].get("passed", 0) >= 8 and not run["counts"].get("failed"), run


def test_backend_clash_is_a_usage_error(results):
    """Keras is imported with torch in that process: the JAX adapter must refuse, naming both."""
    msg = results["torch"]["clash"]
    assert msg and "'torch'" in msg and "'jax'" in msg, msg

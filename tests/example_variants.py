"""The example model adapter (docs/example_model_adapter.py) with text edits: the careless and hostile
variants the model suite's tests run (tests/test_model_suite.py, tests/test_model_hostile.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example_model_adapter.py"


def variant(tmp_path, name: str, *edits) -> Path:
    """The example model adapter with ``(old, new)`` text edits, written to ``tmp_path/name.py``."""
    src = EXAMPLE.read_text()
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return path


#: the example with a greedy generate through its own KV cache (one forward pass a step, probes kept per pass)
GENERATE = [
    ("import torch\n", "import numpy as np\nimport torch\n"),
    ("    def embed(self, input_ids):", """    def generate(self, input_ids, *, attention_mask, max_new_tokens, use_cache):
        ids, mask, steps, passes, cache = np.asarray(input_ids), np.asarray(attention_mask), [], [], None
        new = np.zeros((ids.shape[0], 0), np.int64)
        feed = ids
        for s in range(max_new_tokens):
            full = np.concatenate([mask, np.ones((ids.shape[0], s), np.int64)], 1)
            pos = (full.cumsum(-1) - 1).clip(min=0)[:, -feed.shape[1]:]
            logits, cache = self.forward(feed, attention_mask=full, position_ids=pos, cache=cache, use_cache=True)
            passes.append(self.seen)
            steps.append(np.asarray(logits[:, -1], np.float64))
            feed = steps[-1].argmax(-1)[:, None]
            new = np.concatenate([new, feed], 1)
        self.passes = passes
        return np.concatenate([ids, new], 1), np.stack(steps, 1)

    def embed(self, input_ids):"""),
    ("        return [self.seen] if all_passes else self.seen", "        return self.passes if all_passes else self.seen"),
    ("(\"cache\", \"position_ids\", \"inputs_embeds\", \"attention_mask\")",
     "(\"cache\", \"position_ids\", \"inputs_embeds\", \"attention_mask\", \"generate\")"),
]


def run_model(tmp_path, model: Path, *args: str, dtype: str = "float32"):
    """``pytest conformance --model MODEL`` in a real process (``args`` added): ``(completed process, report
    JSON or None)``."""
    report = tmp_path / f"{model.stem}.json"
    cmd = [sys.executable, "-m", "pytest", str(EXAMPLE.parents[1] / "conformance"), "--model", str(model), "--dtype",
           dtype, "-q", "-p", "no:cacheprovider", "--report-json", str(report), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ), timeout=900)
    return p, json.loads(report.read_text()) if report.exists() else None


def outcomes(report: dict, prefix: str = "") -> dict[str, str]:
    """``{case: outcome}`` of a report, ``prefix`` (an attention implementation's ``default-``) taken off."""
    return {r["case"].removeprefix(prefix): r["outcome"] for r in report["results"]}

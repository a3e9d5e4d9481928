"""How the kit says what is wrong, over its own broken adapters (issue 27): each failure of each
class of ``tests/broken_adapters.py`` and ``tests/broken_scaling_adapters.py`` counted as

* **named**: the diagnosis names a catalogued divergence;
* **inferred**: no divergence reproduces it, and the inference says what the output is (a fitted
  parameter, the positions used, a precision, ...), not a "closest fit";
* **counted**: only where the output is wrong (elements, rows, positions) or a closest fit;
* **raised**: the adapter raised or returned a malformed output (no verdict on the values).

Each class runs the conformance suite in its own process (``--report-json``, ``-n 0``).

    python bench/census_broken.py [--dtype float32] [--jobs 2] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from posenc.harness.inference import is_finding

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "tests" / "broken_adapters.py", ROOT / "tests" / "broken_scaling_adapters.py"]


def adapter_classes(path: Path) -> list[str]:
    """The public classes of a broken-adapter file (a leading underscore marks a helper)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]


def kind(rec: dict) -> str:
    if rec.get("raised"):
        return "raised"
    if rec.get("diagnosis"):
        return "named"
    return "inferred" if any(is_finding(s) for s in rec.get("inferred") or []) else "counted"


def run_one(path: Path, name: str, dtype: str) -> tuple[str, Counter]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "conformance"), "--adapter", f"{path}:{name}",
                        "--dtype", dtype, "-q", "-p", "no:cacheprovider", "--report-json", str(report)],
                       cwd=ROOT, capture_output=True, text=True)
        if not report.exists():
            return name, Counter({"no report": 1})
        recs = json.loads(report.read_text())["results"]
    return name, Counter(kind(r) for r in recs if r["outcome"] == "failed")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    work = [(p, n) for p in FILES for n in adapter_classes(p) if not only or n in only]
    total: Counter = Counter()
    with ThreadPoolExecutor(a.jobs) as pool:
        for name, c in pool.map(lambda pn: run_one(*pn, a.dtype), work):
            total.update(c)
            print(f"{name:40s} " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())), flush=True)
    print(f"\nall {len(work)} classes at {a.dtype}: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))


if __name__ == "__main__":
    main()

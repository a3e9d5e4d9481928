#!/usr/bin/env python3
"""Per-test verdicts before and after a change: every run of the matrices, compared record by record.

The matrices aggregate per cell, so a change that moves a verdict from one test to another of the
same cell does not show there.  This script runs, each in its own process, ``pytest <suite>
--report-json`` for every adapter of ``docs/conformance-matrix.json`` plus ``numpy`` and the
README's example adapter (``docs/example_adapter.py``), and every model of ``docs/model-matrix.json``
plus the example model adapter (``docs/example_model_adapter.py``), at ``--dtype all``; then it
compares two such folders of reports test by test: test ID, outcome, divergence, violated clauses,
the diagnosed divergences and, for an unsupported / n/a test, its reason.

    python scripts/compare_verdicts.py run --out /tmp/before [--jobs 2] [--suite conformance]
    ... change the code ...
    python scripts/compare_verdicts.py run --out /tmp/after
    python scripts/compare_verdicts.py diff /tmp/before /tmp/after

``diff`` exits 1 when any record differs (naming each), when a run is missing on either side or
ended without a report; 0 when every run gives the same verdicts.  The runs are read from the
docs' JSON (data), so the script does not depend on the kit's module layout: the same script runs
on both sides of a refactor.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The fields of a record that make a verdict (docs/report-json.md).
FIELDS = ("outcome", "divergence", "violated", "clauses")


def runs(root: Path) -> list[tuple[str, str, str]]:
    """(report file stem, option, value) of every run: adapters, then models."""
    docs = root / "docs"
    adapters = [a["adapter"] for a in json.loads((docs / "conformance-matrix.json").read_text())["adapters"]]
    models = [m["model"] for m in json.loads((docs / "model-matrix.json").read_text())["models"]]
    out = [(name, "--adapter", name) for name in ["numpy", *adapters]]
    out.append(("example_adapter", "--adapter", str(docs / "example_adapter.py")))
    out += [(m.replace(":", "-"), "--model", m) for m in models]
    out.append(("example_model_adapter", "--model", str(docs / "example_model_adapter.py")))
    return out


def _run_one(suite: Path, out: Path, stem: str, option: str, value: str, cpu: int) -> tuple[str, int, float]:
    report = out / f"{stem}.json"
    cmd = [sys.executable, "-m", "pytest", str(suite), option, value, "--dtype", "all", "-q",
           "-p", "no:cacheprovider", "--import-mode=importlib", "--report-json", str(report)]
    t0 = time.monotonic()
    env = dict(os.environ, POSENC_CPU=str(cpu))
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=out, env=env)
    (out / f"{stem}.log").write_text(proc.stdout + proc.stderr)
    return stem, proc.returncode, time.monotonic() - t0


def run(a) -> int:
    root = Path(a.root).resolve()
    suite = (root / a.suite).resolve()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    todo = runs(root)
    if a.only:
        todo = [r for r in todo if r[0] in a.only.split(",")]
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futures = [ex.submit(_run_one, suite, out, stem, opt, val, cpus[i % len(cpus)])
                   for i, (stem, opt, val) in enumerate(todo)]
        for f in futures:
            stem, rc, secs = f.result()
            print(f"{stem}: exit {rc} in {secs:.0f} s", flush=True)
    return 0


def verdicts(report: dict) -> dict[str, dict]:
    """test ID -> the fields of its verdict (the reason only where it is the verdict's reason)."""
    out = {}
    for r in report["results"]:
        v = {k: r.get(k) for k in FIELDS}
        v["diagnosis"] = [m["divergence"] for m in r.get("diagnosis") or ()]
        if r["outcome"] in ("unsupported", "n/a"):
            v["reason"] = r.get("reason")
        out[r["test_id"]] = v
    return out


def diff(a) -> int:
    before, after = Path(a.before), Path(a.after)
    stems = sorted({p.stem for p in before.glob("*.log")} | {p.stem for p in after.glob("*.log")})
    problems = 0
    compared = 0
    for stem in stems:
        sides = []
        for folder in (before, after):
            path = folder / f"{stem}.json"
            sides.append(json.loads(path.read_text()) if path.is_file() else None)
        if None in sides:
            which = " and ".join(str(f) for f, s in zip((before, after), sides) if s is None)
            print(f"{stem}: no report in {which}")
            problems += 1
            continue
        b, c = (verdicts(s) for s in sides)
        for tid in sorted(set(b) | set(c)):
            if b.get(tid) != c.get(tid):
                problems += 1
                print(f"{stem}: {tid}\n  before: {b.get(tid)}\n  after:  {c.get(tid)}")
        if sides[0]["exit_status"] != sides[1]["exit_status"]:
            problems += 1
            print(f"{stem}: exit status {sides[0]['exit_status']} before, {sides[1]['exit_status']} after")
        compared += len(b)
    print(f"{len(stems)} runs, {compared} records compared, {problems} difference(s)")
    return 1 if problems or not stems else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every adapter and model, writing one report per run into --out")
    r.add_argument("--out", required=True)
    r.add_argument("--root", default=str(ROOT), help="the checkout whose docs list the runs (default: this one)")
    r.add_argument("--suite", default="conformance", help="the suite's folder, relative to --root")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--only", default="", help="a comma list of report stems to run (default: all)")
    d = sub.add_parser("diff", help="compare two folders of reports test by test")
    d.add_argument("before")
    d.add_argument("after")
    a = p.parse_args(argv)
    return run(a) if a.cmd == "run" else diff(a)


if __name__ == "__main__":
    sys.exit(main())

"""Running the suite from the tools: one ``pytest`` process per adapter or model, its ``--report-json``
read back (the tools use the suite only through its public outputs: running it, reading its report).

The suite is found by package (:func:`suite_dir`: where ``posenc.conformance`` is installed, without
importing it), so the runs work from a checkout and from a wheel alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SUITE_PACKAGE = "posenc.conformance"
_SUMMARY = re.compile(r"\d+ (passed|failed|skipped|xfailed|errors?|deselected)\b.* in [\d.]+s")


def suite_dir() -> Path:
    """The folder of the installed suite (:data:`SUITE_PACKAGE`), found by package: pytest runs it
    by path, so its test IDs and rerun lines name its files."""
    spec = importlib.util.find_spec(SUITE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the suite {SUITE_PACKAGE} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def run_adapter(name: str, dtype: str, workdir: Path, device: str = "cpu",
                cpu: int | None = None, option: str = "--adapter") -> tuple[dict | None, str, float]:
    """One conformance run in a fresh process; returns (report or None, output, seconds).
    ``cpu``: the CPU its pytest process and adapter worker share (``POSENC_CPU``; parallel jobs get
    different ones); ``option``: ``--adapter`` or ``--model`` (a model of the model matrix)."""
    out = workdir / f"{name.replace(':', '-')}.json"
    cmd = [sys.executable, "-m", "pytest", str(suite_dir()), option, name, "--dtype", dtype,
           "--device", device, "-q", "-rfE", "-p", "no:cacheprovider", "--import-mode=importlib",
           "--report-json", str(out)]
    t0 = time.monotonic()
    env = dict(os.environ, **({"POSENC_CPU": str(cpu)} if cpu is not None else {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env)
    text = proc.stdout + proc.stderr
    report = json.loads(out.read_text()) if out.is_file() else None
    if report is not None:
        report["exit_status"] = proc.returncode
    return report, text, time.monotonic() - t0


def run_all(jobs_list: list[tuple[str, str]], dtype: str, device: str, jobs: int) -> list[tuple]:
    """Every ``(name, option)`` of ``jobs_list`` run by :func:`run_adapter`, ``jobs`` at a time, each
    job slot pinned to its own CPU: ``[(name, option, report, output, seconds)]`` in order."""
    with tempfile.TemporaryDirectory() as tmp:
        slots: queue.Queue[int] = queue.Queue()
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        for k in range(max(1, jobs)):
            slots.put(k)

        def one(job):
            n, option = job
            k = slots.get()  # a job slot: parallel runs pin themselves to different CPUs
            try:
                return (n, option, *run_adapter(n, dtype, Path(tmp), device, cpus[k % len(cpus)] if jobs > 1 else None,
                                                option))
            finally:
                slots.put(k)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, jobs_list))


def run_summary(text: str) -> str:
    """pytest's summary line of a run's output (``12 passed in 3.4s``)."""
    return next((ln.strip("= ") for ln in reversed(text.splitlines()) if _SUMMARY.search(ln)), "(no summary)")


def version_label(v: str) -> str:
    """A version without its local label (``2.13.0+cpu`` -> ``2.13.0``): the matrix must not
    depend on which build of a pinned release a machine has."""
    return str(v).split("+", 1)[0]

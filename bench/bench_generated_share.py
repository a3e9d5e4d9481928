"""What the generated cases add to ``posenc matrix`` (issue 9's budget: at most 5 minutes of wall
time across all adapters): per registered adapter, the wall time of ``pytest conformance --adapter
A --dtype all -k test_generated`` less that of its collection alone (``--collect-only``, the same
start-up), measured in one run; prints each and the sum (one job) and the sum over ``--jobs``.

    python bench/bench_generated_share.py [--jobs 2] [--adapter NAME ...]
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent / "conformance"


_SLOTS: "queue.Queue[int]" = queue.Queue()


def _wall(adapter: str, cpu: int, *extra: str) -> float:
    cmd = [sys.executable, "-m", "pytest", str(SUITE), "--adapter", adapter, "--dtype", "all", "-q",
           "-p", "no:cacheprovider", *extra]
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, POSENC_CPU=str(cpu)))
    return time.perf_counter() - t


def one(adapter: str) -> tuple[str, float, float]:
    k = _SLOTS.get()  # parallel jobs on different CPUs, as posenc matrix runs them
    try:
        cpus = sorted(os.sched_getaffinity(0))
        cpu = cpus[k % len(cpus)]
        return adapter, _wall(adapter, cpu, "-k", "test_generated"), _wall(adapter, cpu, "--collect-only")
    finally:
        _SLOTS.put(k)


def main() -> None:
    from posenc.tools.matrix import default_adapters
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--adapter", action="append", default=None)
    a = ap.parse_args()
    names = a.adapter or default_adapters()
    for k in range(a.jobs):
        _SLOTS.put(k)
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        rows = list(pool.map(one, names))
    total = 0.0
    for name, gen, base in rows:
        total += max(0.0, gen - base)
        print(f"{name:24s} generated tests {gen:6.1f} s, collection alone {base:5.1f} s: +{max(0.0, gen - base):6.1f} s")
    print(f"generated cases add {total:.0f} s in one job, about {total / max(1, a.jobs):.0f} s of wall time "
          f"with --jobs {a.jobs} (measured in this run)")


if __name__ == "__main__":
    main()

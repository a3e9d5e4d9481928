"""Cost of crash isolation (issue 10): ``pytest conformance --adapter A --dtype all`` with the
adapter in its worker process (``--posenc-isolation process``, the default) and in pytest's own
process (``none``), run alternately in one session; prints each pair's wall times and the median
ratio.  Wall-clock figures are printed, never asserted.

    python bench/bench_isolation.py [--adapter torch] [--rounds 3] [--dtype all]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent / "conformance"


def run(adapter: str, dtype: str, isolation: str) -> float:
    cmd = [sys.executable, "-m", "pytest", str(SUITE), "--adapter", adapter, "--dtype", dtype, "-q",
           "-p", "no:cacheprovider", "--posenc-isolation", isolation]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", default="torch")
    ap.add_argument("--dtype", default="all")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    ratios = []
    for k in range(a.rounds):
        iso, none = run(a.adapter, a.dtype, "process"), run(a.adapter, a.dtype, "none")
        ratios.append(iso / none)
        print(f"round {k + 1}: isolated {iso:6.2f} s, in-process {none:6.2f} s, ratio {iso / none:.3f}", flush=True)
    print(f"pytest conformance --adapter {a.adapter} --dtype {a.dtype}: isolation costs "
          f"{(statistics.median(ratios) - 1) * 100:+.0f} % (median ratio {statistics.median(ratios):.3f} "
          f"of {a.rounds} rounds)")


if __name__ == "__main__":
    main()

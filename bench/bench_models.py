"""Per-architecture time of the model-level suite (budget: 15 s per architecture at float32 on 2
cores, all its scenarios, eager and sdpa; the whole model matrix within 6 minutes in CI).

    python bench/bench_models.py [--dtype float32] [--arch llama,gpt2]

Runs ``pytest conformance --model hf:<arch> --dtype D`` once per architecture in a fresh process
(start-up, imports and the worker included) and prints each wall time, the sum, and each as a
ratio of the fastest, measured in this one run (nothing is asserted).
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    from posenc.adapters.hf_model.architectures import architectures
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--arch", default=",".join(architectures()))
    a = ap.parse_args()
    times = {}
    for arch in a.arch.split(","):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "conformance"), "--model", f"hf:{arch}",
                            "--dtype", a.dtype, "-q", "-p", "no:cacheprovider"], capture_output=True, text=True)
        times[arch] = time.perf_counter() - t0
        last = (p.stdout.strip().splitlines() or ["?"])[-1]
        print(f"{arch:14s} {times[arch]:6.1f} s  (exit {p.returncode}; {last})", flush=True)
    fastest = min(times.values())
    print(f"total {sum(times.values()):.1f} s for {len(times)} architectures at {a.dtype}; "
          + ", ".join(f"{k} {v / fastest:.2f}x" for k, v in sorted(times.items(), key=lambda kv: -kv[1])[:5]))


if __name__ == "__main__":
    main()

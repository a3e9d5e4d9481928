"""Benchmark: RoPE apply through each built-in adapter, as ratios to the NumPy reference.

    python bench/bench_rope.py [--repeat 20]

Prints the median time per call of each adapter at Llama-3-8B head shapes (B 1, Hq 32, Hk 8,
T 512, D 128) and its ratio to the reference, all measured in this one run.  Nothing here is
asserted: performance is reported, never tested against wall-clock limits.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from posenc.adapters import Unsupported, load_adapter
from posenc.spec.models import RopeParams


def measure(adapter_name: str, dtype: str, repeat: int) -> float:
    a = load_adapter(adapter_name)
    p = RopeParams(head_dim=128, rope_theta=500000.0)
    rng = np.random.default_rng(0)
    q = a.from_numpy(rng.standard_normal((1, 32, 512, 128)), dtype, "cpu")
    k = a.from_numpy(rng.standard_normal((1, 8, 512, 128)), dtype, "cpu")
    pid = a.from_numpy(np.arange(512)[None], "int64", "cpu")
    op = a.rope(p, dtype=dtype, device="cpu")
    op.apply(q, k, pid)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        op.apply(q, k, pid)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    for dtype in ("float32", "bfloat16"):
        base = measure("numpy", dtype, args.repeat)
        print(f"{dtype}: numpy reference {base * 1e3:.2f} ms/call")
        for name in ("torch", "hf-transformers"):
            try:
                t = measure(name, dtype, args.repeat)
            except Unsupported as e:
                print(f"  {name:16s} unsupported: {e.reason}")
                continue
            print(f"  {name:16s} {t * 1e3:8.2f} ms/call   {t / base:6.3f} x reference")


if __name__ == "__main__":
    main()

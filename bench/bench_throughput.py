"""Benchmark: case throughput of the reference and of each adapter, as ratios to the reference.

    python bench/bench_throughput.py [--quick] [--dtype float32] [--passes 2] [ADAPTER ...]

Prints, all measured in this one run:

(a) the reference's throughput on the golden cases: cases per second computing the outputs and the
    error scales (``posenc.families.reference_of(op).fn(params, inputs)`` then ``.scales(...)``, as
    ``posenc.harness.golden`` does), per family and overall;
(b) for each adapter named on the command line (default: numpy torch jax jax-jit tensorflow; one
    that is not installed is reported and skipped), the cases per second of
    ``posenc.harness.runner.run_case(adapter, golden, dtype, device)`` over every golden case,
    and the ratio to the reference's rate.  Pass 1 is cold (it includes what a framework does the
    first time it sees a shape: JAX compiles every primitive or jitted kernel per shape and dtype,
    tf.function traces); later passes are warm, and the best of them is reported.  A case the adapter
    reports unsupported (``posenc.adapters.Unsupported``) is counted apart and not timed; any other
    exception is counted as an error;
(c) the same for the generated (property-based) cases of ``posenc.harness.generation`` when that
    module is there: ``--generated N`` cases drawn per operation by its Hypothesis strategies,
    derandomized (the same cases on every run); the reference's time is ``example_golden`` (inputs
    materialised and outputs and scales computed on the fly).

Ratios are ``adapter cases/s / reference cases/s``: above 1 the adapter is faster than the
reference.  Nothing here is asserted: performance is reported, never tested against wall-clock
limits (timings on a shared machine are noisy; compare the ratios of one run).
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections import defaultdict
from typing import Callable, Optional

from posenc import families
from posenc.adapters import Unsupported, load_adapter
from posenc.harness import golden as _golden
from posenc.registry import all_cases
from posenc.harness.runner import run_case

DEFAULT_ADAPTERS = ("numpy", "torch", "jax", "jax-jit", "tensorflow")
ALL_DTYPES = ("float32", "float64", "bfloat16", "float16")


def load_goldens(every: int = 1) -> list:
    """Every golden case (every ``every``-th with ``--quick``), loaded (and verified) as the suite does."""
    manifests: dict = {}
    out = []
    for i, case in enumerate(all_cases()):
        if i % every:
            continue
        directory = _golden.golden_dir(case)
        if directory not in manifests:
            manifests[directory] = _golden.read_manifest(directory)
        out.append(_golden.load(case, directory, manifest=manifests[directory]))
    return out


def family(op: str) -> str:
    return families.family_of(op).name


def reference_rates(goldens: list, repeat: int) -> dict[str, tuple[int, float]]:
    """``{family: (cases, seconds per pass)}`` (best of ``repeat``) and ``"all"``."""
    best: dict[str, float] = defaultdict(lambda: float("inf"))
    count: dict[str, int] = defaultdict(int)
    for g in goldens:
        count[family(g.case.op)] += 1
    for _ in range(repeat):
        spent: dict[str, float] = defaultdict(float)
        for g in goldens:
            ref = families.reference_of(g.case.op)
            t0 = time.perf_counter()
            ref.fn(g.case.params, g.inputs)
            ref.scales(g.case.params, g.inputs)
            spent[family(g.case.op)] += time.perf_counter() - t0
        for f, s in spent.items():
            best[f] = min(best[f], s)
    out = {f: (count[f], best[f]) for f in count}
    out["all"] = (sum(count.values()), sum(best.values()))
    return out


def adapter_passes(adapter, goldens: list, dtypes: tuple[str, ...], passes: int,
                   run: Callable = None) -> dict:
    """Time ``run(adapter, golden, dtype)`` over every golden and dtype, ``passes`` times.

    Returns ``{"cold": s, "warm": s or None, "cases": n, "unsupported": n, "errors": n}`` where the
    times are seconds per pass over the supported, error-free cases."""
    run = run or (lambda a, g, dt: run_case(a, g, dt, "cpu"))
    times, cases, unsupported, errors = [], 0, 0, 0
    for k in range(passes):
        spent, n, uns, err = 0.0, 0, 0, 0
        for dt in dtypes:
            for g in goldens:
                t0 = time.perf_counter()
                try:
                    run(adapter, g, dt)
                except Unsupported:
                    uns += 1
                    continue
                except Exception:  # noqa: BLE001 - reported as a count; the suite says what failed
                    err += 1
                    continue
                spent += time.perf_counter() - t0
                n += 1
        times.append(spent)
        if k == 0:
            cases, unsupported, errors = n, uns, err
    return {"cold": times[0], "warm": min(times[1:]) if len(times) > 1 else None,
            "cases": cases, "unsupported": unsupported, "errors": errors}


def rate(n: int, seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None or seconds <= 0 else n / seconds


def fmt(x: Optional[float], width: int = 10, spec: str = ".1f") -> str:
    return f"{'-':>{width}}" if x is None else f"{x:{width}{spec}}"


def print_adapter_table(title: str, ref_rate: float, rows: list[tuple[str, Optional[dict], str]]) -> None:
    print(f"\n{title}")
    print(f"  {'adapter':22s} {'cases':>6s} {'unsup':>6s} {'errors':>6s} {'cold c/s':>10s} {'x ref':>8s}"
          f" {'warm c/s':>10s} {'x ref':>8s}")
    for name, r, note in rows:
        if r is None:
            print(f"  {name:22s} {note}")
            continue
        cold, warm = rate(r["cases"], r["cold"]), rate(r["cases"], r["warm"])
        print(f"  {name:22s} {r['cases']:6d} {r['unsupported']:6d} {r['errors']:6d} {fmt(cold)} "
              f"{fmt(cold and cold / ref_rate, 8, '.3g')} {fmt(warm)} {fmt(warm and warm / ref_rate, 8, '.3g')}")


def draw_generated(per_op: int) -> Optional[list]:
    """``[(case, seed)]``: ``per_op`` derandomized draws of every operation's generator, or ``None``
    when ``posenc.harness.generation`` is not there."""
    try:
        gen = importlib.import_module("posenc.harness.generation")
    except ImportError:
        return None
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    drawn = []
    for op, fn in families.generators().items():
        got = []
        strategy = st.tuples(st.composite(lambda draw, fn=fn: fn(draw))(), gen.SEEDS)

        @settings(max_examples=per_op, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
        @given(strategy)
        def collect(example):
            if len(got) < per_op:
                got.append(example)

        collect()
        drawn += got
    return drawn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("adapters", nargs="*", default=list(DEFAULT_ADAPTERS),
                    help=f"adapters to time (default: {' '.join(DEFAULT_ADAPTERS)})")
    ap.add_argument("--dtype", default="float32", help="float32 (default), a comma list, or all")
    ap.add_argument("--passes", type=int, default=2, help="passes over the cases per adapter (1 = cold only)")
    ap.add_argument("--repeat", type=int, default=3, help="passes of the reference (best is reported)")
    ap.add_argument("--generated", type=int, default=4, help="generated cases drawn per operation (0: none)")
    ap.add_argument("--quick", action="store_true",
                    help="every 4th golden case, float32, 2 passes, 1 generated case per operation")
    args = ap.parse_args()
    dtypes = ALL_DTYPES if args.dtype == "all" else tuple(args.dtype.split(","))
    every, per_op = 1, args.generated
    if args.quick:
        every, dtypes, args.passes, args.repeat, per_op = 4, ("float32",), 2, 1, min(per_op, 1)

    goldens = load_goldens(every)
    ref = reference_rates(goldens, args.repeat)
    n_all, s_all = ref["all"]
    print(f"(a) reference (NumPy float64) on {n_all} golden cases: outputs + error scales, best of {args.repeat}")
    print(f"  {'family':16s} {'cases':>6s} {'ms/case':>9s} {'cases/s':>10s}")
    for f, (n, s) in sorted(ref.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        print(f"  {f:16s} {n:6d} {s / n * 1e3:9.3f} {n / s:10.1f}")
    ref_rate = n_all / s_all  # per dtype: the reference computes once, whatever the adapter's dtype

    adapters = []
    for name in args.adapters:
        try:
            adapters.append((name, load_adapter(name), ""))
        except Exception as e:  # noqa: BLE001 - a framework that is not installed is reported
            adapters.append((name, None, f"not available: {type(e).__name__}: {e}"))

    rows = []
    for name, a, note in adapters:
        if a is None:
            rows.append((name, None, note))
            continue
        rows.append((name, adapter_passes(a, goldens, dtypes, args.passes), ""))
    print_adapter_table(f"(b) run_case over {len(goldens)} golden cases x {','.join(dtypes)} on cpu, "
                        f"cases/s per pass (cold: pass 1; warm: best of passes 2..{args.passes}); "
                        f"x ref = ratio to the reference's {ref_rate:.1f} cases/s", ref_rate, rows)

    # (c) generated cases (posenc.harness.generation, property-based)
    drawn = draw_generated(per_op) if per_op > 0 else []
    if drawn is None:
        # TODO(generated cases): posenc.harness.generation is not installed; once it is, this
        # times its drawn cases like (b) (see draw_generated).
        print("\n(c) generated cases: posenc.harness.generation is not there (TODO hook: draw_generated)")
        return
    if not drawn:
        print("\n(c) generated cases: none drawn (--generated 0 or no generator registered)")
        return
    from posenc.harness.generation import example_golden
    t0 = time.perf_counter()
    gens = [example_golden(c, seed) for c, seed in drawn]
    g_ref_rate = len(gens) / (time.perf_counter() - t0)
    print(f"\n(c) reference on {len(gens)} generated cases ({per_op} per operation, derandomized): inputs + "
          f"outputs + error scales {g_ref_rate:.1f} cases/s")
    rows = [(name, None, note) if a is None else (name, adapter_passes(a, gens, dtypes, args.passes), "")
            for name, a, note in adapters]
    print_adapter_table(f"    run_case over {len(gens)} generated cases x {','.join(dtypes)}; x ref = ratio "
                        f"to the reference's {g_ref_rate:.1f} cases/s", g_ref_rate, rows)


if __name__ == "__main__":
    main()

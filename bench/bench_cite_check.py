"""Benchmark: ``posenc cite-check`` throughput on generated large files.

    python bench/bench_cite_check.py [--mb 20]

Writes, in a temporary folder, a Python file, a C++ file and one long comment line of near-miss IDs,
each about ``--mb`` megabytes full of citations and bare IDs, scans each with
:func:`posenc.tools.cite_check.check_paths` and prints MB/s.  Nothing here is asserted:
performance is reported, never tested against wall-clock limits.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from posenc.tools.cite_check import check_paths


def generate(folder: Path, mb: float) -> dict[str, Path]:
    size = int(mb * 1e6)
    rng = random.Random(0)
    py_unit = ('def f{i}(x):\n    """posenc: ROPE-PAIR-HALF@0.4.0, see DIV-ROPE-BF16-ANGLES"""\n'
               '    return x + {i}  # ROPE-PAIR-HALFF, posenc: ROPE-PAIR-INTERLEAVED\n')
    cc_unit = ('// posenc: ROPE-PAIR-HALF@0.4.0\nint f{i}(int x) {{ const char* s = "// posenc: X"; '
               'char c = \'"\'; return x + {i}; /* ROPE-PAIR-HALFF */ }}\n')
    out = {}
    for name, unit in (("big.py", py_unit), ("big.cpp", cc_unit)):
        parts, n, i = [], 0, 0
        while n < size:
            s = unit.format(i=i)
            parts.append(s)
            n, i = n + len(s), i + 1
        (folder / name).write_text("".join(parts), encoding="utf-8")
        out[name] = folder / name
    tokens, n = [], 0
    while n < size:
        t = f"ROPE-PAIR-HALF{rng.choice('ABCDEFGHIJ')}{rng.randrange(100000)}"
        tokens.append(t)
        n += len(t) + 1
    (folder / "line.md").write_text(" ".join(tokens) + "\n", encoding="utf-8")
    out["line.md (one line of near-miss IDs)"] = folder / "line.md"
    # one line of citations among URLs (each bare ID was compared with every URL and citation: quadratic)
    unit = "posenc: ROPE-PAIR-HALF see https://x.org/ROPE-PAIR-HALF ROPE-PAIR-HALFF www.y.org/a "
    (folder / "cites.md").write_text(unit * (size // len(unit)) + "\n", encoding="utf-8")
    out["cites.md (one line of citations and URLs)"] = folder / "cites.md"
    unit = "x = /['\"`]/.test(s) / 2; (/[/[ "  # regular-expression literals and divisions on one line
    (folder / "regex.js").write_text(unit * (size // len(unit)) + "// posenc: ROPE-PAIR-HALF\n", encoding="utf-8")
    out["regex.js (one line of JS regex literals)"] = folder / "regex.js"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of each generated file in MB (default 20)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp), a.mb)
        check_paths([next(iter(files.values())).parent / "warm-up.md"])  # load the spec once
        for label, path in files.items():
            mb = path.stat().st_size / 1e6
            t0 = time.perf_counter()
            rep = check_paths([path])
            dt = time.perf_counter() - t0
            print(f"{label:40s} {mb:7.1f} MB  {dt:7.2f} s  {mb / dt:7.2f} MB/s  "
                  f"({rep.count('error')} errors, {rep.count('warning')} warnings)")


if __name__ == "__main__":
    main()

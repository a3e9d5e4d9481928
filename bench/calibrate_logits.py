"""The model tolerance rule's calibration: for every hf:* architecture, attention implementation,
dtype and scenario of the unpatched models, the worst |a - b| / (eps(dtype) * scale) over the
logits pairs each scenario compares (posenc.spec.tolerance.K_LOGITS is set to about 4x the worst),
and below float64 the same over the pairs of the run's float64 twin (the pairs the rule judges
there, under K_LOGITS["float64"]), printed as "float64 twin of <dtype>".

    python bench/calibrate_logits.py [--arch llama,...] [--dtype float32,...]
"""

import argparse
import time
from pathlib import Path
import warnings

import numpy as np
from posenc import families
from posenc.adapters import Unsupported, load_model_adapter
from posenc.adapters.hf_model import architectures
from posenc.harness.model_run import Run
from posenc.spec import read_yaml
from posenc.spec.tolerance import K_LOGITS, logits_eps

EXPECTATIONS = Path(__file__).resolve().parents[1] / "adapters" / "expectations" / "models"


def recorded(arch: str) -> set[tuple[str, str]]:
    """``(test case, dtype)`` of the model's recorded divergences (left out: their logits differ by the bug)."""
    path = EXPECTATIONS / f"hf-{arch}.yaml"
    if not path.exists():
        return set()
    lines = read_yaml(path.read_text()).get("expected_failures") or []
    return {(e["case"], d) for e in lines for d in e["dtypes"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default=",".join(architectures()))
    ap.add_argument("--dtype", default="float64,float32,bfloat16,float16")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    dtypes = a.dtype.split(",")
    worst = {d: (0.0, "") for d in dtypes}
    for arch in a.arch.split(","):
        ad = load_model_adapter(f"hf:{arch}")
        info = ad.info()
        skip = recorded(arch)
        t0 = time.perf_counter()
        for dtype in dtypes:
            for attn in ad.attn_implementations:
                try:
                    model = ad.build(dtype=dtype, device="cpu", attn_implementation=attn)
                except Unsupported as e:
                    print(f"{arch} {dtype} {attn}: unsupported ({e})")
                    continue
                for clause, sc in families.scenarios().items():
                    if sc.not_applicable(info) or sc.missing(info) or (f"{attn}-{sc.name}", dtype) in skip:
                        continue
                    model = ad.build(dtype=dtype, device="cpu", attn_implementation=attn)  # afresh, as the suite does
                    runs = [(dtype, Run(model, info))]
                    if dtype != "float64" and "float64" not in ad.arch.unsupported:
                        runs.append((f"float64 twin of {dtype}", Run(model.float64_twin(), info)))
                    for key, r in runs:
                        sc.run(r)
                        u = logits_eps("float64" if key != dtype else dtype)
                        for p in r.pairs:
                            if not (np.isfinite(p["a"]).all() and np.isfinite(p["b"]).all()):
                                continue  # judged for being finite, and a twin's non-finite pair falls back
                            scale = np.maximum(np.abs(p["a"]).max(-1), np.abs(p["b"]).max(-1))
                            ratio = float((np.abs(p["a"] - p["b"]).max(-1) / (u * scale)).max())
                            if ratio > worst.setdefault(key, (0.0, ""))[0]:
                                worst[key] = (ratio, f"{arch} {attn} {clause} {p['label']}")
        print(f"{arch}: {time.perf_counter() - t0:.1f} s")
    for d, (r, where) in worst.items():
        k = K_LOGITS[d if d in K_LOGITS else "float64"]
        print(f"{d}: worst {r:.1f} x eps (K_LOGITS {k:g}, {k / max(r, 1e-9):.1f}x margin) at {where}")


if __name__ == "__main__":
    main()

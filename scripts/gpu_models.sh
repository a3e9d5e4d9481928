#!/usr/bin/env bash
# The model-level suite on a CUDA machine: every hf: architecture at every dtype, eager, sdpa and
# sdpa with torch's flash and memory-efficient kernels forced (--attn), on --device cuda.  Writes
# the reports and a model matrix into ./gpu-models (commit as docs/model-matrix-cuda.{md,json}).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-models}
mkdir -p "$out"
models=$(python -c "from posenc.conformance.model_matrix import default_models; print(' '.join(default_models()))")
for m in $models; do
  pytest conformance --model "$m" --device cuda --dtype all --attn eager,sdpa,sdpa-flash,sdpa-efficient -q \
    -p no:cacheprovider --report-json "$out/${m//:/-}.json" > "$out/${m//:/-}.log" 2>&1 || true
  tail -n 1 "$out/${m//:/-}.log"
done
python - "$out" <<'PY'
import json, sys
from pathlib import Path
from posenc.conformance import model_matrix
out = Path(sys.argv[1])
reports = [json.loads(p.read_text()) for p in sorted(out.glob("hf-*.json"))]
m = model_matrix.aggregate(reports, "cuda")
for name, text in model_matrix.render(m).items():
    (out / name.replace("model-matrix", "model-matrix-cuda")).write_text(text)
print("wrote", out)
PY

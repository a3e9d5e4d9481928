#!/usr/bin/env bash
# Every adapter that declares a CUDA device, on the GPU, at every dtype: one process per adapter,
# one matrix at the end (Markdown + JSON in $OUT, default ./gpu-matrix).  For machines with a GPU;
# CI never runs it.  Usage: scripts/gpu_conformance.sh [cuda|cuda:N] [OUT]
# Needs the kit installed with the frameworks' GPU builds (e.g. pip install -e ".[all]" plus
# jax[cuda12]); an adapter whose framework sees no GPU stops with a usage error, reported in the matrix.
set -euo pipefail
device=${1:-cuda}
out=${2:-gpu-matrix}
mapfile -t adapters < <(python - "$device" <<'PY'
import sys
from posenc.adapters import load_adapter, registered
from posenc.conformance.plugin import normalize_device
kind = normalize_device(sys.argv[1]).split(":")[0]
for name in sorted(registered()):
    if name != "numpy" and kind in load_adapter(name).devices:
        print(name)
PY
)
echo "GPU conformance on $device: ${adapters[*]}"
args=()
for a in "${adapters[@]}"; do args+=(--adapter "$a"); done
posenc matrix --device "$device" --out "$out" "${args[@]}"

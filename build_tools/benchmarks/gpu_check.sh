#!/usr/bin/env bash
# Check benchtrail's GPU path on a CUDA machine in one command (well under 5 minutes), installing
# nothing: device and versions, a CUDA-event check of a calibrated torch.cuda._sleep, the cuda-smoke
# preset through benchtrail's stages, and the paired detector's A/A and δ = 2% rates on the GPU.
#
# Usage: [PYTHON=/path/to/python3] bash build_tools/benchmarks/gpu_check.sh [--output-dir DIR]
#            [--full-sampling] [--trials N] [--seed N] [--budget-s S]
#
# Runs from this checkout with whatever Python and torch the machine has (benchtrail need not be
# installed): PYTHONPATH gets the checkout's build_tools and root, which the worker processes
# (python -m benchtrail.worker) inherit. Exit codes (docs/gpu.md): 0 all well, 1 a module is missing
# or bad usage, 2 not a GPU, 3 CUDA-event time of a calibrated sleep off by more than 10%,
# 4 a cuda-smoke case not ok, 5 detector A/A alert rate above 20%, 6 the cuda-smoke stage ran past
# its time budget.
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
    echo "gpu_check: no Python interpreter '$python'; set PYTHON=/path/to/python3" >&2
    exit 1
fi
export PYTHONPATH="$repo/build_tools:$repo${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" "$repo/build_tools/benchmarks/gpu_check.py" "$@"

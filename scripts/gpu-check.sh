#!/usr/bin/env bash
# On a machine with a CUDA GPU: runs the GPU-marked tests (`pytest -m gpu`: memory snapshot written,
# 16-mixed used, the fused GAT layer against GATConv when pylibcugraphops is installed), then the
# throughput bench on the real large GAT on the GPU (and, with --emulate, the accelerator emulation), and
# prints the figures. Refuses to run where there is no GPU (CI and the development machines skip
# the GPU tests with a stated reason instead).
#
#   bash scripts/gpu-check.sh [--reps N] [--emulate]   (default 5; needs scripts/bootstrap.sh first)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=5
emulate=0
while (($#)); do
  case $1 in
    --reps) reps=${2:?--reps needs a number}; shift 2 ;;
    --emulate) emulate=1; shift ;;
    *) echo "gpu-check: unknown argument $1 (expected --reps N, --emulate)" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: --reps $reps: expected a positive integer" >&2; exit 2; }
cd "$REPO/python"
[[ -x .venv/bin/python ]] || { echo "gpu-check: no python/.venv: run scripts/bootstrap.sh first" >&2; exit 1; }
if ! .venv/bin/python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu-check: torch sees no CUDA GPU here: nothing to check (the GPU tests are skipped on CPU machines)" >&2
  exit 1
fi
.venv/bin/python -c 'import torch; print("gpu-check:", torch.cuda.get_device_name(), "| torch", torch.__version__, "| CUDA", torch.version.cuda)'
# The driver line is for the record only; torch above already proved the GPU is usable.
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi

echo "=== pytest -m gpu"
.venv/bin/python -m pytest -q -m gpu -rs

# 2048 graphs x 1 epoch, persistent workers only (the pipeline's default): on an H200 (16 cores) one
# rep of the five loader variants took 87 s with forked workers (150 s when they were spawned), so five
# reps of all five outran a 15-minute device lease beside the machine's start. The emulation is
# CPU-only and runs on any machine (bench/train-throughput/README.md); --emulate adds it here.
echo "=== bench/train-throughput --mode model (large GAT on the GPU; $reps reps)"
.venv/bin/python ../bench/train-throughput/run.py --mode model --reps "$reps" --messages 400000 --graphs 2048 \
  --epochs 1 --batch-size 64 --persistent-only

if ((emulate)); then
  echo "=== bench/train-throughput --mode emulate ($reps reps)"
  .venv/bin/python ../bench/train-throughput/run.py --mode emulate --reps "$reps"
fi

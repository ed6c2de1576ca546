#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, every GPU path of the CLI in about 10 minutes: the `base` recipe
# on Multi30k for a few minutes and its validation BLEU, a bf16 and an fp16 training step, a one-process NCCL
# torchrun, `bench --device cuda`, and a timed `translate --device cuda`. It writes one JSON to OUTDIR (default
# nbs/results/): gpu_check_<gpu>.json. --dry-run rehearses the same steps on the CPU with tiny sizes (under 2 minutes;
# tests/test_gpu_check.py runs it), writing gpu_check_dryrun.json. The steps, sizes and the JSON: tools/gpu_check.py.
#
# Usage:  ANNOTATED_TRANSFORMER_DATA=/path/to/data \
#           bash tools/gpu_check.sh [--dry-run] [--minutes M] [--budget S] [--keep] [OUTDIR]
# Env:    ANNOTATED_TRANSFORMER_DATA  the data root, a folder holding multi30k/ (required)
#         PYTHON                      the interpreter with torch (default: python, else python3)
#         GPU_CHECK_NO_INSTALL=1      skip `pip install -e .` (also skipped when the package imports from this tree)
# Exit:   0 every step passed (or was skipped with a reason), 1 a step failed, 2 no data root or no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python || command -v python3 || true)}"
[ -n "$PY" ] || { echo "gpu_check: no python or python3 on PATH (or set \$PYTHON)" >&2; exit 2; }
for a in "$@"; do case "$a" in -h|--help) exec "$PY" tools/gpu_check.py --help;; esac; done
if [ -z "${ANNOTATED_TRANSFORMER_DATA:-}" ]; then
  echo "gpu_check: \$ANNOTATED_TRANSFORMER_DATA is not set: set it to the data root, a folder holding multi30k/" >&2
  exit 2
fi
if [ ! -d "$ANNOTATED_TRANSFORMER_DATA/multi30k" ]; then
  echo "gpu_check: \$ANNOTATED_TRANSFORMER_DATA=$ANNOTATED_TRANSFORMER_DATA holds no multi30k/ folder" >&2
  exit 2
fi
exec "$PY" tools/gpu_check.py "$@"

#!/usr/bin/env bash
# GPU proof of the Generator-schema and no-output-fake fixes (issue 12), ONE device-tool command from the repo root:
#   run(command="bash bench/gpu_sampling.sh", carry=[".whl"], kind="nvidia-h200")
# .whl/ holds flashinfer_python-0.6.3-py3-none-any.whl and apache_tvm_ffi-0.1.15.post2 (cp312).
# The patch module checked is reports/fixes/flashinfer_public_fixes.py, made here (CPU, offline) by
#   python bench/fix_coverage.py --json reports/fixes/coverage.json --emit reports/fixes/flashinfer_public_fixes.py
# Results go to $OUT (or reports/fixes/h200 when OUT is unset).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-reports/fixes/h200}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_sampling.log") 2>&1
log() { echo "[$(date -u +%T) +$((SECONDS))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || { log "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME
nvidia-smi -L
python3 -c "import torch, flashinfer; print('torch', torch.__version__, 'flashinfer', flashinfer.__version__, 'cc', torch.cuda.get_device_capability())" || exit 1
log "sampling + paged-MLA-append check: before, patch, opcheck + fake vs eager, fullgraph vs eager"
timeout 540 python3 bench/sampling_check.py --patch reports/fixes/flashinfer_public_fixes.py --out "$OUT"
log "sampling check exit=$?"

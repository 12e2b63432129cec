# Sourced by bench/gpu_fixes.sh and bench/gpu_sampling.sh (set LOG_NAME first): results folder, log,
# FlashInfer 0.6.3 + tvm-ffi from .whl/ into /tmp/site, CUDA_HOME for FlashInfer's JIT, the GPU line.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-reports/fixes/h200}
mkdir -p "$OUT"
exec > >(tee "$OUT/$LOG_NAME") 2>&1
log() { echo "[$(date -u +%T) +$((SECONDS))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || { log "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME
nvidia-smi -L
python3 -c "import torch, flashinfer; print('torch', torch.__version__, 'flashinfer', flashinfer.__version__, 'cc', torch.cuda.get_device_capability())" || exit 1

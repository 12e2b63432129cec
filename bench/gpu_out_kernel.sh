#!/usr/bin/env bash
# GPU proof of the out-kernel fix (issue 12) on SGLang's real hadamard_transform, ONE device-tool command:
#   run(command="bash bench/gpu_out_kernel.sh", carry=[".whl", ".sgl"], kind="nvidia-h200")
# .whl/ holds apache_tvm_ffi (cp312); .sgl/ holds sglang-0.5.9-py3-none-any.whl. Only sglang/jit_kernel is
# unpacked, under an empty sglang/__init__.py (the package's own __init__ pulls in the serving stack).
# The patch module checked is reports/fixes/sglang_hadamard_fix.py, made here (CPU, offline) by `fix --emit`'s
# writer for the flagship scan's hadamard site (see bench/RESULTS.md). Results go to $OUT (or reports/fixes/h200).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-reports/fixes/h200}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_out_kernel.log") 2>&1
log() { echo "[$(date -u +%T) +$((SECONDS))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/apache_tvm_ffi*.whl || { log "tvm-ffi install failed"; exit 1; }
mkdir -p /tmp/sgl && python3 - <<'PY'
import zipfile, glob
wheel = zipfile.ZipFile(glob.glob(".sgl/sglang-*.whl")[0])
for name in wheel.namelist():
    if name.startswith("sglang/jit_kernel/"):
        wheel.extract(name, "/tmp/sgl")
open("/tmp/sgl/sglang/__init__.py", "w").close()
PY
export PYTHONPATH=/tmp/sgl:/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME
nvidia-smi -L
log "out-kernel check: before, patch, fake vs eager per size, opcheck, fullgraph vs eager"
timeout 540 python3 bench/out_kernel_check.py --patch reports/fixes/sglang_hadamard_fix.py --out "$OUT"
log "out-kernel check exit=$?"

#!/usr/bin/env bash
# GLM-5-NVFP4 short capture on one (or two) H200s, in ONE device-tool command from the repo root:
#   run(command="bash bench/gpu_capture.sh", carry=[".whl"])
# .whl/ must hold flashinfer_python-0.6.3-py3-none-any.whl and an apache_tvm_ffi 0.1.x cp312 wheel
# (>= 0.1.6, not 0.1.8; flashinfer's pin), e.g. 0.1.15.post2; everything else is in the H200 image. Results (JSON, flat, <= 8 files) go to $OUT, or
# reports/capture/h200 when OUT is unset. See bench/capture.md.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-reports/capture/h200}
R=/tmp/dynacheck-capture
rm -rf "$R"; mkdir -p "$OUT" "$R"
LOG="$OUT/gpu_capture.log"
exec > >(tee "$LOG") 2>&1
log() { echo "[$(date -u +%T) +$((SECONDS))s] $*"; }
save() { cp "$R"/capture-*.json "$R"/dynacheck_fixes.py "$OUT"/ 2>/dev/null; true; }  # after each step: a
# step killed by the device's 10-minute limit still leaves the earlier results in $OUT

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || { log "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
# SGLang images set CUDA_HOME; without it flashinfer's get_cuda_path() runs `which nvcc` first (a second
# subprocess hazard on the same chain) and the innermost user frame becomes get_cuda_path.
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME
NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())")
log "GPUs: $NGPU; CUDA_HOME=$CUDA_HOME"
nvidia-smi -L
nvcc --version | tail -2
python3 -c "import torch, flashinfer; print('torch', torch.__version__, 'flashinfer', flashinfer.__version__, 'cc', torch.cuda.get_device_capability())" || exit 1

log "1/5 fp4_quantize checks (first call JIT-builds FlashInfer's sm90 fp4 module: timed in jit_build)"
timeout 240 python3 bench/capture_check.py --out "$R"; log "checks exit=$?"; save

SIZES=1,2,4,8,16
# A `dynacheck scan --format json` of sglang 0.5.9 + flashinfer 0.6.3 (made where the wheels are): when
# present, the run without the fix matches its findings to the observed break ("matches" in the JSON).
SCAN=${SCAN:-reports/glm5-scan.json}
SCAN_ARGS=(); [ -f "$SCAN" ] && SCAN_ARGS=(--scan "$SCAN")
log "2/5 capture WITHOUT fix (expect GB0007 at flashinfer.jit.cpp_ext.get_cuda_version, fatal under fullgraph)"
timeout 120 python3 -m dynacheck capture glm5-nvfp4 --batch-sizes $SIZES --out "$R" --name capture-nofix.json ${SCAN_ARGS[@]+"${SCAN_ARGS[@]}"}
log "capture without fix exit=$? (1 = break seen)"; save

log "3/5 capture WITH the emitted fix (custom_op + register_fake around flashinfer.fp4_quantize)"
timeout 200 python3 -m dynacheck capture glm5-nvfp4 --fix --batch-sizes $SIZES --out "$R" --name capture-fix.json
log "capture with fix exit=$? (0 = every size captured)"; save

log "4/5 GPU tests (fake vs eager shapes pinned against the real kernel)"
timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_fixes_emit_gpu.py; log "gpu tests exit=$?"

if [ "$NGPU" -ge 2 ]; then
  log "5/5 tensor parallel: --tp 2 over NCCL, with the fix"
  timeout 300 python3 -m dynacheck capture glm5-nvfp4 --fix --tp 2 --batch-sizes 1,8 --out "$R" --name capture-tp2-fix.json
  log "tp2 exit=$?"; save
else
  log "5/5 tensor parallel skipped: one GPU here (needs nvidia-h200-x2)"
fi

save
python3 bench/capture_table.py "$R"/capture-nofix.json "$R"/capture-fix.json "$R"/capture-tp2-fix.json 2>/dev/null
ls -la "$OUT"
log "done"

#!/usr/bin/env bash
# GPU proof of the Generator-schema and no-output-fake fixes (issue 12), ONE device-tool command from the repo root:
#   run(command="bash bench/gpu_sampling.sh", carry=[".whl"], kind="nvidia-h200")
# .whl/ holds flashinfer_python-0.6.3-py3-none-any.whl and apache_tvm_ffi-0.1.15.post2 (cp312).
# The patch module checked is reports/fixes/flashinfer_public_fixes.py, made here (CPU, offline) by
#   python bench/fix_coverage.py --json reports/fixes/coverage.json --emit reports/fixes/flashinfer_public_fixes.py
# Results go to $OUT (or reports/fixes/h200 when OUT is unset).
LOG_NAME=gpu_sampling.log
source "$(dirname "$0")/gpu_flashinfer_setup.sh"
log "sampling + paged-MLA-append check: before, patch, opcheck + fake vs eager, fullgraph vs eager"
timeout 540 python3 bench/sampling_check.py --patch reports/fixes/flashinfer_public_fixes.py --out "$OUT"
log "sampling check exit=$?"

#!/usr/bin/env bash
# DC063 on the GPU host (device tool, carry=[".whl"]): each nvidia-cudnn-frontend wheel in .whl/ is
# installed into a folder of its own and bench/cudnn_frontend_check.py runs against it; results in $OUT.
#   cp nvidia_cudnn_frontend-*-cp312-*.whl .whl/   (pip download --no-deps --only-binary=:all:
#   --python-version 3.12 --platform manylinux_2_28_x86_64 nvidia-cudnn-frontend==X -d .whl)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for wheel in .whl/nvidia_cudnn_frontend-*.whl; do
  version=$(basename "$wheel" | cut -d- -f2)
  target=/tmp/cudnn-frontend-$version
  pip install -q --no-deps --target "$target" "$wheel" || continue
  PYTHONPATH="$target:$PWD" python bench/cudnn_frontend_check.py --out "$OUT/cudnn-frontend-$version.json" \
    > "$OUT/cudnn-frontend-$version.log" 2>&1
  echo "$version rc=$?"; tail -3 "$OUT/cudnn-frontend-$version.log"
done
nvidia-smi --query-gpu=name --format=csv,noheader

#!/usr/bin/env bash
# The census on the 16-core GPU host (no GPU used): cold flagship scan against cold censuses with 2, 8 and
# 16 workers, alternating (bench/census_cores.py), and the 16-worker census's cells for a comparison with
# reports/census-sglang-0.5.9.json. One device-tool command from the repo root:
#   run(command="bash bench/gpu_census_cores.sh", carry=[".whl"])
# .whl/ holds sglang-0.5.9-py3-none-any.whl and flashinfer_python-0.6.3-py3-none-any.whl (the census's
# targets, never imported), and cp312 wheels of dynacheck's own dependencies (libcst, pyyaml, rich,
# markdown-it-py, mdurl, pygments, click, jinja2, markupsafe, packaging). Results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-census-cores}
mkdir -p "$OUT" /tmp/home
exec > >(tee "$OUT/gpu_census_cores.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  $(ls .whl/*.whl | grep -v -e sglang- -e flashinfer_python-) || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HOME=/tmp/home
nproc; python3 --version
TARGETS=.whl/sglang-0.5.9-py3-none-any.whl,.whl/flashinfer_python-0.6.3-py3-none-any.whl
python3 -m dynacheck census --offline --target .whl/sglang-0.5.9-py3-none-any.whl \
  --target .whl/flashinfer_python-0.6.3-py3-none-any.whl --jobs 16 --format json --out "$OUT/census-jobs16.json" || exit 1
python3 bench/census_cores.py --jobs 2,8,16 --repeat 3 --targets "$TARGETS" --write "$OUT/RESULTS-cores.md" \
  --command "bash bench/gpu_census_cores.sh"

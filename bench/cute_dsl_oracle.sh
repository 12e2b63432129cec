#!/usr/bin/env bash
# DC072 (cutlass.cute.compile) against the real Dynamo, where nvidia-cutlass-dsl is installed: it is not a
# dev dependency, so CI skips these tests. A throwaway venv on top of this interpreter's packages (torch,
# dynacheck) gets nvidia-cutlass-dsl 4.3.0: the 4.7 and later wheels on the index ship the DSL's libraries
# without its Python package (`import cutlass.cute` fails), so 4.3.0 is the newest that can be measured.
#
#     bash bench/cute_dsl_oracle.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-$(mktemp -d)/venv}
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q "nvidia-cutlass-dsl==4.3.0" "cuda-python>=12.8,<13"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as m, torch
print("torch", torch.__version__, "| nvidia-cutlass-dsl", m.version("nvidia-cutlass-dsl"))
PY
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -rA -k DC072 \
    tests/test_rules_oracle.py tests/test_rules_dynamo.py tests/test_rules_fixtures.py tests/test_catalog_probe.py

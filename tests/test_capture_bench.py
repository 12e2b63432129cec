"""The GPU check script's logic, run on CPU against the stand-in flashinfer (numbers need the H200)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "fixtures" / "capture" / "stub_flashinfer"

SCRIPT = """
import json, sys, torch
sys.path.insert(0, "bench")
import capture_check as cc
from dynacheck.capture.flagship import flagship_findings
from dynacheck.fixes.emit import emit_patch
dev = torch.device("cpu")
out = {"before": cc.compile_before(dev)}
ns = {"__name__": "patch"}
exec(compile(emit_patch(flagship_findings()), "patch.py", "exec"), ns)
out["shapes"] = cc.fake_shapes(dev)
out["after"] = cc.compile_after(dev)
print(json.dumps(out, default=str))
"""


@pytest.mark.slow
def test_check_script_finds_the_break_pins_fake_shapes_and_compiles_after_the_fix():
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{STUB}", PYTHONWARNINGS="ignore")
    res = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["before"]["compiled"] is False
    assert out["before"]["event"]["gb_id"] == "GB0007"
    assert "get_cuda_version" in out["before"]["chain"]
    cases = out["shapes"]["cases"]
    assert out["shapes"]["all_equal"] is True and len(cases) >= 12
    assert any(c["column_major"] for c in cases) and any(not c["swizzled"] for c in cases)
    assert all(c.get("formula_equal", True) for c in cases)
    for backend in ("eager", "inductor"):
        assert out["after"][backend] == {"compiled": True, "shapes_equal": True, "bitwise_equal": True}


def test_table_renders_sizes_breaks_and_speedups(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from capture_table import table
    finally:
        sys.path.pop(0)
    summary = {"ranks": [{"rank": 0, "gpu": "H200", "size": "full", "config": {"layers": 2, "experts": 16},
                          "quantizer": {"source": "flashinfer"},
                          "batch_sizes": [{"batch_size": 8, "compiled": True, "captured": True, "compile_s": 4.0,
                                           "capture_s": 0.5, "eager_ms": 12.0, "replay_ms": 3.0,
                                           "replay": {"max_rel": 0.0}}]}],
               "verdict": {"breaks": [{"gb_id": "GB0007", "gb_type": "t", "site": {"function": "f", "line": 3},
                                       "ranks": [0], "fatal_under_fullgraph": True}]}}
    text = table(summary)
    assert "| 8 | yes | yes | 4 | 0.5 | 12 | 3 | 4.00x | 0.0e+00 |" in text
    assert "break GB0007 `t` at `f` line 3 (ranks [0], fatal under fullgraph)" in text

"""`dynacheck capture glm5-nvfp4` on CPU: the JSON summary, the flagship break through a stand-in
flashinfer with FlashInfer's call structure, and the same run with `--fix`."""

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


def _capture(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{STUB}", PYTHONWARNINGS="ignore")
    res = subprocess.run([sys.executable, "-m", "dynacheck", "capture", "glm5-nvfp4", "--device", "cpu",
                          "--dtype", "fp32", "--batch-sizes", "2,1", "--out", str(tmp_path), *extra],
                         capture_output=True, text=True, timeout=600, env=env)
    name = "capture-fix.json" if "--fix" in extra else "capture-nofix.json"
    assert (tmp_path / name).exists(), res.stderr[-3000:]
    return res.returncode, json.loads((tmp_path / name).read_text())


@pytest.mark.slow  # over 10 s on 2 cores
def test_reference_quantizer_run_compiles_every_size_and_says_what_was_skipped(tmp_path):
    from dynacheck.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["capture", "glm5-nvfp4", "--device", "cpu", "--dtype", "fp32", "--batch-sizes", "1,3",
              "--out", str(tmp_path)])
    assert exc.value.code == 0
    summary = json.loads((tmp_path / "capture-nofix.json").read_text())
    (rank,) = summary["ranks"]
    assert [e["batch_size"] for e in rank["batch_sizes"]] == [3, 1]
    for entry in rank["batch_sizes"]:
        assert entry["compiled"] and entry["captured"] is None  # no CUDA graphs on CPU
        assert entry["pieces"] == entry["attention_ops"] + 1 == 3
        assert entry["replay"]["max_rel"] <= summary["verdict"]["tolerance"]
    assert any("CUDA graph" in s for s in rank["skipped"])
    assert rank["quantizer"]["source"] == "reference" and rank["size"] == "tiny"
    assert summary["verdict"]["captured_all"] and not summary["verdict"]["breaks"]


@pytest.mark.slow
def test_flagship_break_without_fix_and_capture_with_fix(tmp_path):
    code, before = _capture(tmp_path, "--quantizer", "flashinfer")
    assert code == 1
    verdict = before["verdict"]
    assert not verdict["captured_all"] and verdict["fatal_break"]
    (brk,) = verdict["breaks"]
    assert brk["gb_id"] == "GB0007" and brk["gb_type"] == "Attempted to call function marked as skipped"
    assert brk["site"]["function"] == "flashinfer.jit.cpp_ext.get_cuda_version"
    chain = [c.split(" ")[0] for c in brk["chain"]]
    assert chain[0] == "forward" and "apply" not in chain  # our NVFP4 linear calls fp4_quantize directly
    assert chain.index("fp4_quantize") < chain.index("get_cuda_version") < len(chain) - 1
    assert "threading.Lock()" in brk["innermost"]
    assert all(e["compiled"] is False and e["gb_id"] == "GB0007" for e in before["ranks"][0]["batch_sizes"])

    code, after = _capture(tmp_path, "--quantizer", "flashinfer", "--fix")
    assert code == 0, after["verdict"]
    assert after["fix"]["fixes"] == ["custom_op at flashinfer.fp4_quantization.fp4_quantize"]
    assert after["verdict"]["captured_all"] and not after["verdict"]["breaks"]
    for entry in after["ranks"][0]["batch_sizes"]:
        # 22 NVFP4 linears in the tiny 2-layer model, each quantizes through the custom op
        assert entry["custom_ops"]["dynacheck::fp4_quantize"] == 22
        assert entry["replay"]["max_rel"] == 0.0


def test_bad_batch_sizes_is_a_user_error():
    from dynacheck.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["capture", "glm5-nvfp4", "--batch-sizes", "1,x"])
    assert exc.value.code == 2


@pytest.mark.slow  # over 10 s on 2 cores
def test_capture_reruns_itself_under_the_recorder_and_merges_its_trace(tmp_path, monkeypatch):
    """With dynacheck.dynamic installed, the command re-executes itself through `launch.run_traced`
    (every rank inherits the recorder) and folds `merge.load_trace`'s events into the summary."""
    import types

    from dynacheck.cli import main
    from dynacheck.model import Event, Frame, ProcessInfo, TraceResult

    seen = {}

    def run_traced(command, out_dir, collect_all=False):
        seen["command"] = command
        env = dict(os.environ, DYNACHECK_TRACE_DIR=str(out_dir), PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
        return subprocess.run(command, env=env, capture_output=True, timeout=600).returncode

    def load_trace(trace_dir):
        ev = Event(kind="fullgraph_error", pid=1, rank=0, gb_id="GB0007",
                   site=Frame(file="cpp_ext.py", line=69, function="flashinfer.jit.cpp_ext.get_cuda_version"),
                   fatal_under_fullgraph=True)
        return TraceResult(command=(), processes=(ProcessInfo(pid=1, rank=0),), events=(ev,))

    pkg = types.ModuleType("dynacheck.dynamic")
    pkg.__path__ = []
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic", pkg)
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic.launch", types.SimpleNamespace(run_traced=run_traced))
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic.merge", types.SimpleNamespace(load_trace=load_trace))
    with pytest.raises(SystemExit) as exc:
        main(["capture", "glm5-nvfp4", "--device", "cpu", "--dtype", "fp32", "--batch-sizes", "1",
              "--out", str(tmp_path)])
    assert exc.value.code == 0
    assert seen["command"][-1] == "--no-recorder" and seen["command"][1:4] == ["-m", "dynacheck", "capture"]
    summary = json.loads((tmp_path / "capture-nofix.json").read_text())
    assert summary["recorder"]["used"] is True and summary["recorder"]["ranks"] == [0]
    assert summary["verdict"]["recorded_breaks"][0]["gb_id"] == "GB0007"
    assert summary["verdict"]["captured_all"]  # the child's own result is kept


def test_scan_findings_are_matched_to_the_observed_break(tmp_path):
    pytest.importorskip("dynacheck.dynamic.correlate")
    import dataclasses

    from dynacheck.capture.command import match_scan
    from dynacheck.capture.flagship import flagship_findings
    from dynacheck.model import Event, Frame, ScanResult, Site

    finding = dataclasses.replace(flagship_findings()[0], fingerprint="fp1",
                                  site=Site(file="flashinfer/jit/cpp_ext.py", line=69,
                                            function="flashinfer.jit.cpp_ext.get_cuda_version", callee="x"))
    other = dataclasses.replace(finding, fingerprint="fp2", site=Site(file="a.py", line=1, function="a.f", callee="y"),
                                chain=finding.chain[:1])  # schema: chains are non-empty
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps(ScanResult(targets=(), entries=(), findings=(finding, other)).to_dict()))
    event = Event(kind="fullgraph_error", pid=1, gb_id="GB0007", user_stack=(
        Frame(file="/tmp/site/flashinfer/jit/cpp_ext.py", line=69, function="get_cuda_version"),))
    matches = match_scan(str(scan), {"argv": [], "ranks": [{"breaks": [event.to_dict()]}]})
    assert [m["fingerprint"] for m in matches["confirmed"]] == ["fp1"]
    assert matches["predicted_only"] == 1 and matches["seen_only"] == []


def test_a_file_that_is_not_a_scan_fails_before_the_capture(tmp_path):
    from dynacheck.cli import main

    bad = tmp_path / "scan.json"
    bad.write_text('{"findings": 3}')
    with pytest.raises(SystemExit) as exc:
        main(["capture", "glm5-nvfp4", "--device", "cpu", "--scan", str(bad), "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert not (tmp_path / "capture-nofix.json").exists()

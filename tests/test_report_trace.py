"""`dynacheck report --scan --trace` on a REAL traced run (the dynamic room's CPU flagship fixture).

Skips until the dynamic room (`dynacheck.dynamic`) and its `flagship_cpu` fixture are in this tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dynacheck.cli import main

pytestmark = [pytest.mark.torch, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[1]
FLAGSHIP_CPU = REPO / "tests" / "fixtures" / "flagship_cpu"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("dynacheck.dynamic.merge", reason="the dynamic room is not in this tree")
    scan_module = pytest.importorskip("dynacheck.static.scan", reason="the static engine is not in this tree")
    if not (FLAGSHIP_CPU / "run_flagship.py").is_file():
        pytest.skip("the dynamic room's flagship_cpu fixture is not in this tree")
    out = tmp_path_factory.mktemp("report-trace")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "dynacheck", "trace", "--quiet", "--collect-all", "--out",
                           str(out / "trace"), "--", sys.executable, "-W", "ignore",
                           str(FLAGSHIP_CPU / "run_flagship.py")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scan = scan_module.scan_roots([FLAGSHIP_CPU], ["flagfx.model:Model.forward"], cache_dir=out / "cache")
    scan_file = out / "scan.json"
    scan_file.write_text(json.dumps(scan.to_dict()))
    return scan, scan_file, out / "trace"


def _report(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(["report", *args])
    return exc.value.code


def test_trace_confirms_the_probe_finding_in_every_format(traced, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    jsonschema = pytest.importorskip("jsonschema")
    from dynacheck.report.schemas import load_schema

    scan, scan_file, trace_dir = traced
    assert _report(["--scan", str(scan_file), "--trace", str(trace_dir), "--format", "json"]) == 0
    review = json.loads(capsys.readouterr().out)
    assert list(jsonschema.Draft202012Validator(load_schema("review")).iter_errors(review)) == []
    probe = next(f for f in scan.findings if f.site.function == "flagfx.probe.get_runtime_version")
    confirmed = [m for m in review["matches"] if m["status"] == "confirmed"]
    assert [m["fingerprint"] for m in confirmed] == [probe.fingerprint]

    html_file = tmp_path / "review.html"
    assert _report(["--scan", str(scan_file), "--trace", str(trace_dir), "--format", "html",
                    "--out", str(html_file)]) == 0
    html = html_file.read_text()
    pid = review["trace"]["processes"][0]["pid"]
    assert f"pid {pid}" in html and "Trace: 1 process" in html
    assert 'data-status="confirmed"' in html

    assert _report(["--scan", str(scan_file), "--trace", str(trace_dir), "--format", "terminal"]) == 0
    assert "1 confirmed, 0 predicted only" in capsys.readouterr().out

"""CUDA-graph capture failures and syncs during capture (GPU only)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "dynamic"))
from tracerun import HERE, load, trace

pytestmark = [pytest.mark.gpu, pytest.mark.torch,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_sync_and_item_during_capture_are_recorded_at_the_users_line(tmp_path):
    proc = trace(tmp_path, [str(HERE / "cuda_capture.py")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = load(tmp_path)
    cuda = [e for e in result.events if e.kind == "cuda_graph"]
    syncs = [e for e in cuda if e.gb_type == "sync during capture"]
    by_function = {e.site.function for e in syncs if e.site}
    assert "cuda_capture.sync_body" in by_function, [(e.gb_type, e.site, e.reason) for e in cuda]
    assert "cuda_capture.item_body" in by_function, [(e.gb_type, e.site, e.reason) for e in cuda]
    sync = next(e for e in syncs if e.site.function == "cuda_capture.sync_body")
    assert sync.site.line == next(n for n, line in enumerate((HERE / "cuda_capture.py").read_text().splitlines(), 1)
                                  if line.strip() == "torch.cuda.synchronize()")

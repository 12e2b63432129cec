"""An attribute built empty and filled in place (`self.archs = set()`, then `self.archs.add(...)` per
visible GPU) is not known empty: on a deployment with a GPU, where the constructor's fill runs, it is
filled; without one, a test of its emptiness waits on a run-time fact. Before, the test was open with
no fact behind it, both ways were taken unconditionally, and the FlashInfer API census named the
re-detection's `nvcc --version` as the first break of ~40 functions that never run it on a GPU host.
Real Dynamo: the compile breaks only while the set is empty."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "deploy"


def _found(scan_cache, gpu):
    spec = DeploymentSpec(framework=ROOT / "depfx.toml", gpu=gpu)
    found = scan_roots([ROOT], ["depfx.filled:check_arch"], cache_dir=scan_cache, deployment=spec).findings
    return [(f.site.callee, [(c.kind, c.text) for c in f.conditions]) for f in found]


def test_on_a_gpu_host_the_constructor_fills_it(scan_cache):
    assert _found(scan_cache, "sm100") == []


def test_without_a_gpu_the_emptiness_test_is_a_run_time_condition(scan_cache):
    assert _found(scan_cache, None) == [("subprocess.check_output", [("runtime", "not context.ARCHS")])]


@pytest.fixture
def filled(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    yield importlib.import_module("depfx.filled")
    sys.modules.pop("depfx.filled", None)


def _compiles(module) -> bool:
    torch._dynamo.reset()
    try:
        torch.compile(module.check_arch, backend="eager", fullgraph=True)(torch.ones(2))
    except torch._dynamo.exc.Unsupported:
        return False
    return True


def test_dynamo_breaks_only_while_it_is_empty(filled):
    filled.current.ARCHS = {0}  # a GPU host: filled at import
    assert _compiles(filled)
    filled.current.ARCHS = set()
    assert not _compiles(filled)

"""A cold deployment (the compile is the process's first call, as the FlashInfer API census assumes)
takes the first-call way of a registry that fills on first use: `if name not in self._specs:` holds
and its other way is never traced. A warm one keeps the site conditional ("first call only").
Real Dynamo is the oracle for both ways."""

from __future__ import annotations

import importlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "deploy"
SPEC = DeploymentSpec(framework=ROOT / "depfx.toml", gpu="sm100")


def _sites(cache: Path, cold: bool) -> dict[str, tuple]:
    found = scan_roots([ROOT], ["depfx.registry:scale"], cache_dir=cache, deployment=replace(SPEC, cold=cold)).findings
    return {f.site.callee: tuple(c.kind for c in f.conditions) for f in found}


def test_cold_takes_the_first_call_way_only(scan_cache):
    assert _sites(scan_cache, cold=True) == {"datetime.datetime.now": ()}


def test_warm_keeps_both_ways_open(scan_cache):
    sites = _sites(scan_cache, cold=False)
    assert sites["datetime.datetime.now"] == ("first_call",)
    assert "torch._dynamo.graph_break" in sites


@pytest.fixture
def registry_module(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    yield importlib.import_module("depfx.registry")
    sys.modules.pop("depfx.registry", None)


def _break(module) -> str:
    """What stops the fullgraph compile ("" when it compiles)."""
    torch._dynamo.reset()
    try:
        torch.compile(module.scale, backend="eager", fullgraph=True)(torch.ones(2))
    except torch._dynamo.exc.Unsupported as exc:
        return str(exc)
    return ""


def test_dynamo_breaks_on_the_first_call_way_and_on_the_other(registry_module):
    """Both ways break (the cold one at `datetime.now()`), so neither may be dropped as unreachable
    unless the deployment says which one runs."""
    registry_module.registry._specs.clear()
    assert "datetime.datetime'>) now" in _break(registry_module)
    registry_module.registry._specs["scale"] = "scale"
    assert "graph_break" in _break(registry_module)
    registry_module.registry._specs.clear()
    registry_module.registry._creation_times.clear()


def test_a_table_built_in_the_call_is_no_registry(scan_cache):
    """Read as one, a cold deployment took `raise ValueError` as the only way and the FlashInfer API
    census called fp4_quantize safe."""
    found = scan_roots([ROOT], ["depfx.registry:module_for"], cache_dir=scan_cache,
                       deployment=replace(SPEC, cold=True), entry_defaults=True).findings
    assert [(f.site.function.rpartition(".")[2], f.site.callee, f.conditions) for f in found] == [
        ("_sm100", "builtins.print", ())]


def test_a_constant_tuple_is_no_registry(scan_cache):
    """Read as one, a cold deployment took `raise ValueError` as the only way and everything after the
    check went unseen (the API census called fused_kda_decode safe)."""
    found = scan_roots([ROOT], ["depfx.registry:check_heads"], cache_dir=scan_cache,
                       deployment=replace(SPEC, cold=True), entry_defaults=True).findings
    assert [(f.site.callee, f.conditions) for f in found] == [("builtins.print", ())]

"""`torch.cuda.get_device_properties(...)` is the deployment's GPU: its `major`/`minor` are known, so
FlashInfer's `major * 10 + minor < 90` tests are decided (before, every site behind them was conditional
and the API census called `e2m1_and_ufp8sf_scale_to_float` safe on sm100); other fields stay open."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "deploy"


def _findings(entry: str, cache: Path, gpu: str):
    spec = DeploymentSpec(framework=ROOT / "depfx.toml", gpu=gpu)
    return scan_roots([ROOT], [f"depfx.device_props:{entry}"], cache_dir=cache, deployment=spec).findings


@pytest.mark.parametrize("gpu, sites", [("sm100", 1), ("sm90", 1), ("sm80", 0)])
def test_the_capability_decides_the_branch(scan_cache, gpu, sites):
    found = _findings("dequantize", scan_cache, gpu)
    assert [(f.rule, f.conditions) for f in found] == [("DC001", ())] * sites


def test_a_field_the_deployment_does_not_fix_stays_open(scan_cache):
    found = _findings("by_sm_count", scan_cache, "sm100")
    assert [f.rule for f in found] == ["DC001"]
    assert [(c.kind, c.text) for c in found[0].conditions] == [
        ("platform", "torch.cuda.get_device_properties(...).multi_processor_count > 100")]

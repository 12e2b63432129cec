"""`F.apply(...)` of a torch.autograd.Function subclass is a call of `F.forward(ctx, ...)`: the scan walks it,
binding the call's arguments after `ctx`, and Dynamo traces it (the oracle below)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "deploy"


def _findings(entry: str, cache: Path):
    """With a deployment given, constant arguments are bound into the callee (reach._push)."""
    spec = DeploymentSpec(framework=ROOT / "depfx.toml", gpu="sm100")
    return scan_roots([ROOT], [f"depfx.autograd_apply:{entry}"], cache_dir=cache, deployment=spec).findings


def test_apply_is_walked_into_forward(scan_cache):
    """Before, `Norm.apply` was an external `torch.autograd.Function.apply` and nothing under it was seen."""
    findings = _findings("norm_default", scan_cache)
    assert [(f.rule, [h.function for h in f.chain]) for f in findings] == [
        ("DC001", ["depfx.autograd_apply.norm_default", "depfx.autograd_apply.Norm.forward", "depfx.autograd_apply.launch"])]
    assert findings[0].chain[1].via == "autograd.Function.apply -> forward"


def test_the_arguments_bind_after_ctx(scan_cache):
    """`Norm.apply(x, 1e-5, False)` passes deterministic=False: the launch is not taken. Bound one place
    too early (x to ctx), False would have gone to `eps` and the branch stayed open."""
    assert not _findings("norm", scan_cache)


def test_a_quiet_forward_stays_quiet(scan_cache):
    assert not _findings("quiet", scan_cache)


def test_tensor_arguments_are_matched_after_ctx(scan_cache):
    """`Placed.apply(x, x.device)`: matched from ctx, the tensor seeded `device`, and `device.type == "cpu"`
    read as a branch on a tensor (a false DC110 in SGLang's gated layer norm, `device_context`); a branch
    on the tensor itself is found."""
    assert not _findings("placed", scan_cache)
    found = _findings("data_dependent", scan_cache)
    assert [(f.rule, f.outcome.gb_id, f.site.function) for f in found] == [
        ("DC110", "GB0170", "depfx.autograd_apply.DataDependent.forward")]


@pytest.mark.torch
@pytest.mark.parametrize("entry, breaks", [("norm_default", True), ("norm", False), ("quiet", False),
                                           ("placed", False), ("data_dependent", True)])
def test_dynamo_traces_the_forward(entry, breaks):
    """The oracle: fullgraph fails exactly where the scan finds the forward's subprocess call."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT))
    try:
        import depfx.autograd_apply as functions
    finally:
        sys.path.remove(str(ROOT))
    torch._dynamo.reset()
    try:
        torch.compile(getattr(functions, entry), backend="eager", fullgraph=True)(torch.ones(2))
    except Exception:  # noqa: BLE001 - Dynamo's refusal is the measurement
        failed = True
    else:
        failed = False
    assert failed is breaks

"""A caller's tensor arguments seed the callee's parameters by position, each parameter in its own
place: leaving out one annotated with another type shifted the rest (FlashInfer 0.7.4's
`fp4_quantize` read a layout string as a tensor at `batch_invariant/quantization/mx_api.py:56`).
Real Dynamo is the oracle: `Model` compiles whole, `Broken` does not."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "tensor_seeds"


@pytest.fixture
def fixture_module(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    yield importlib.import_module("tspkg.model")
    sys.modules.pop("tspkg.model", None)
    sys.modules.pop("tspkg", None)


def _compiles(module, name: str) -> bool:
    torch._dynamo.reset()
    try:
        torch.compile(getattr(module, name)(), backend="eager", fullgraph=True)(torch.randn(4, 8))
    except torch._dynamo.exc.Unsupported:
        return False
    return True


def _value_hazards(scan_cache, name: str) -> set[tuple[str, str]]:
    result = scan_roots([ROOT], [f"tspkg.model:{name}.forward"], cache_dir=scan_cache)
    return {(f.site.function.rpartition(".")[2], f.site.callee) for f in result.findings if f.unconditional}


def test_an_argument_binds_the_parameter_at_its_own_position(scan_cache, fixture_module):
    assert _compiles(fixture_module, "Model")
    assert _value_hazards(scan_cache, "Model") == set()


def test_a_required_parameter_still_takes_the_caller_s_tensor(scan_cache, fixture_module):
    """The control: the tensor passed third to a required parameter is formatted, and Dynamo breaks."""
    assert not _compiles(fixture_module, "Broken")
    assert ("scaled", 'f"{shift}"') in _value_hazards(scan_cache, "Broken")


def test_a_helper_annotated_bool_returns_no_tensor(scan_cache, fixture_module):
    """Before, `is_cpu_engine()`'s last operand, `torch.cpu.is_available()`, read as a tensor-returning torch
    call, so the test was a branch on a tensor (a false DC110 that made SGLang's gated layer norm, reached
    through `LayerNormFn.apply`, break every Qwen3-Next cell)."""
    assert _compiles(fixture_module, "DeviceTest")
    assert _value_hazards(scan_cache, "DeviceTest") == set()


def test_an_identity_test_of_a_tensor_is_a_python_bool(scan_cache, fixture_module):
    """`cu_seqlens is None`, with a tensor passed for `cu_seqlens`, read as a tensor, so `if fixed_layout:`
    was a branch on one (a false DC110, the first break the FlashInfer API census named for
    `prepare_tf32_kda_prefill`)."""
    assert _compiles(fixture_module, "IdentityTest")
    assert _value_hazards(scan_cache, "IdentityTest") == set()

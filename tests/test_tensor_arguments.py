"""Which arguments the walk evaluates to bind a callee's parameters (reach._guard_names): not those of
a parameter that can only hold a tensor. Evaluating `hidden_states` in the caller re-evaluated its
producers (`all_reduce(...)`, layer calls) at every call site, and what came back depended on what the
evaluator had memoized before: on sglang 0.5.10, Qwen3-MoE's `if hidden_states.shape[0] == 0:`
(models/qwen3_moe.py:656) read as a runtime condition when nvfp4/sm120 was walked after bf16/sm120,
and the FP4 probe under it was reported conditional (docs/census.md). A bool, a number, a string,
None or a config object cannot be passed there, so nothing the walk binds is lost; `Optional[Tensor]`
and `= None` parameters are still bound, since `residual=None` picks the branch."""

from __future__ import annotations

from pathlib import Path

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.reach import _guard_names
from dynacheck.static.scan import scan_roots
from dynacheck.static.summary import summarize

ROOT = Path(__file__).parent / "fixtures" / "tensor_args"
# arguments are bound on a given deployment only (the fork fixture's framework facts will do)
DEPLOYMENT = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu="sm90")

SOURCE = '''
from typing import Optional
import torch

def layer(hidden_states: torch.Tensor, residual: Optional[torch.Tensor], bias: torch.Tensor = None,
          scale: "torch.Tensor | None" = None, flag: bool = False, other=None):
    if hidden_states.shape[0] == 0 or residual is None or bias is None or scale is None:
        return hidden_states
    if flag or other:
        return hidden_states
    return run(hidden_states)
'''


def test_a_parameter_that_holds_only_a_tensor_is_not_bound():
    fn = summarize(SOURCE, "m", "m.py", False, defer=False).functions["layer"]
    assert _guard_names(fn) == {"residual", "bias", "scale", "flag", "other"}


def test_none_passed_for_an_optional_tensor_still_decides_the_branch(scan_cache):
    """`add_norm(x)` and `plain_norm(y, None)` never reach their subprocess call: the control for
    leaving out every tensor-annotated parameter, which reported both."""
    result = scan_roots([ROOT], ["tapkg.model:Model.forward"], cache_dir=scan_cache, deployment=DEPLOYMENT)
    assert [f.site.callee for f in result.findings] == []
    broken = scan_roots([ROOT], ["tapkg.model:Model.broken"], cache_dir=scan_cache, deployment=DEPLOYMENT)
    assert {(f.site.function, f.site.callee) for f in broken.findings} == {
        ("tapkg.model.plain_norm", "subprocess.check_output")}


def test_a_tensor_shape_is_not_decided_by_what_picked_the_tensor(scan_cache):
    """`hidden_states = all_reduce(hidden_states)` is unknown with the runtime `_GROUP` behind it; its
    shape is the traced batch's, so `if hidden_states.shape[0] != 0:` is no runtime condition (SGLang
    0.5.10's Qwen3 decoder layer, models/qwen3.py:391, under LayerCommunicator.prepare_attn). The
    control: a test on the all-reduce's own value still waits for the runtime group."""
    result = scan_roots([ROOT], ["tapkg.shapes:Layer.forward"], cache_dir=scan_cache, deployment=DEPLOYMENT)
    found = {f.site.callee: [c.text for c in f.conditions] for f in result.findings}
    assert found["subprocess.check_output"] == []
    assert any("_GROUP" in text for text in found["builtins.print"])

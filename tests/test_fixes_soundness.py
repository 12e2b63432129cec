"""A fix is offered as sound only where it can work for the function it names (issue 12's cases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.fixes.emit import category, emit_patch
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).resolve().parent / "fixtures" / "fixes" / "declfx"


@pytest.fixture(scope="module")
def by_site(tmp_path_factory):
    findings = scan_roots([ROOT], ["usermodel.hazards:MyModel.forward"],
                          cache_dir=tmp_path_factory.mktemp("cache")).findings
    return {(f.site.function.rsplit(".", 1)[-1], f.site.callee): f for f in findings}


def _fix(finding, kind):
    return next(f for f in finding.fixes if f.kind == kind)


def test_hoist_of_a_function_whose_result_depends_on_its_tensor_argument_is_unsound(by_site):
    finding = by_site[("guarded_scale", "threading.Lock.__enter__")]
    hoist = _fix(finding, "hoist")
    assert not hoist.sound and "depends on its arguments" in hoist.summary
    assert finding.fixes[0].kind == "custom_op" and finding.fixes[0].sound  # Tensor in, Tensor out


def test_custom_op_of_a_function_returning_str_is_unsound_and_a_constant_probe_comes_first(by_site):
    finding = by_site[("get_driver_version", "subprocess.check_output")]
    custom = _fix(finding, "custom_op")
    assert not custom.sound and "returns `str`" in custom.summary
    assert finding.fixes[0].kind in ("assume_constant_result", "hoist") and finding.fixes[0].sound


def test_a_hazard_in_the_compiled_entry_gets_an_edit_shown_as_code_never_a_wrapper_of_the_entry(by_site):
    finding = by_site[("forward", "builtins.print")]
    first = finding.fixes[0]
    assert first.kind in ("remove", "guard", "move_out") and first.sound
    assert 'print("step")' in first.snippet
    assert not any(f.sound and f.kind in ("custom_op", "hoist") and f.at.endswith("MyModel.forward")
                   for f in finding.fixes)
    guard = _fix(finding, "guard")
    assert guard.snippet.startswith("if not torch.compiler.is_compiling():")


def test_edits_are_listed_as_manual_in_the_patch_module(by_site):
    finding = by_site[("forward", "builtins.print")]
    assert category(finding.fixes[0]) == "manual"
    source = emit_patch([finding])
    assert f"manual, not applied: {finding.fixes[0].kind} at usermodel.hazards.MyModel.forward" in source


def test_an_item_branch_in_the_forward_is_never_fixed_by_hoisting_the_forward(by_site):
    finding = next(f for (fn, callee), f in by_site.items() if fn == "forward" and "item" in callee)
    hoist = _fix(finding, "hoist")
    assert not hoist.sound and "compiled entry itself" in hoist.summary
    assert finding.fixes[0].kind == "remove" and "torch.where" in finding.fixes[0].summary


def test_a_skeleton_carries_the_functions_real_signature(by_site):
    finding = by_site[("guarded_scale", "threading.Lock.__enter__")]
    source = emit_patch([finding])
    assert "ENABLE_FIX_1 = False" in source
    assert "def op(x: torch.Tensor) -> torch.Tensor:\n        return original(x)" in source
    assert "def _fake(x: torch.Tensor) -> torch.Tensor:" in source
    compile(source, "dynacheck_fixes.py", "exec")

"""Call resolution and Dynamo boundaries on the `resfx` fixture package (static: never imported)."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from dynacheck import model as m
from dynacheck.static.scan import scan_roots

ROOT = FIXTURES / "resolve"


@pytest.fixture(scope="module")
def forward(scan_cache):
    return scan_roots([ROOT], ["resfx.model:Model.forward"], cache_dir=scan_cache)


def _at(result, function: str, callee: str | None = None) -> list[m.Finding]:
    return [f for f in result.findings
            if f.site.function == function and (callee is None or f.site.callee == callee)]


def _one(result, function: str, callee: str | None = None) -> m.Finding:
    found = _at(result, function, callee)
    assert found, f"no finding at {function} ({callee}); have {[f.site.function for f in result.findings]}"
    return found[0]


def _hops(finding: m.Finding) -> list[tuple[str, str]]:
    return [(h.function.rpartition(".")[2], h.via) for h in finding.chain]


@pytest.mark.parametrize("function, callee, hops", [
    # absolute import
    ("resfx.util.absolute_helper", "subprocess.run", [("forward", m.VIA_ENTRY), ("absolute_helper", m.VIA_IMPORT)]),
    # relative import two levels up, from a subpackage
    ("resfx.util.rel_helper", "subprocess.call",
     [("forward", m.VIA_ENTRY), ("via_parent", m.VIA_IMPORT), ("rel_helper", m.VIA_IMPORT)]),
    # import a.b as c
    ("resfx.deep.mod.aliased", "subprocess.check_call", [("forward", m.VIA_ENTRY), ("aliased", m.VIA_IMPORT)]),
    # re-export through __init__
    ("resfx.impl.exported", "os.system", [("forward", m.VIA_ENTRY), ("exported", m.VIA_IMPORT)]),
    # try/except import fallback (the other branch rebinds the name to None)
    ("resfx.fast.kernel", "time.time", [("forward", m.VIA_ENTRY), ("kernel", m.VIA_IMPORT)]),
    # function-local import inside a self method
    ("resfx.jitlib.probe", "subprocess.getoutput",
     [("forward", m.VIA_ENTRY), ("local_import", m.VIA_SELF), ("probe", m.VIA_IMPORT)]),
    # annotated module-level dict of callables used for dispatch
    ("resfx.dispatch.handler_a", "logging.Logger.info",
     [("forward", m.VIA_ENTRY), ("dispatch", m.VIA_IMPORT), ("handler_a", m.VIA_DISPATCH)]),
    # self.method() found through the MRO: on a base class, and on a mixin
    ("resfx.model.Base.helper", "time.perf_counter", [("forward", m.VIA_ENTRY), ("helper", m.VIA_SELF)]),
    ("resfx.model.Mixin.shared", "builtins.print", [("forward", m.VIA_ENTRY), ("shared", m.VIA_SELF)]),
    # self.attr(...) where __init__ assigns an nn.Module: the call goes to forward
    ("resfx.model.Attn.forward", "logging.info", [("forward", m.VIA_ENTRY), ("forward", m.VIA_MODULE_CALL)]),
    # self.attr.method(...)
    ("resfx.model.Attn.project", "os.path.exists", [("forward", m.VIA_ENTRY), ("project", m.VIA_ATTR_TYPE)]),
    # a decorator's wrapper makes calls of its own
    ("resfx.deco.logging_wrapper.<locals>.wrapper", "builtins.print",
     [("forward", m.VIA_ENTRY), ("wrapper", m.VIA_DECORATOR)]),
])
def test_each_way_of_calling_is_followed(forward, function, callee, hops):
    finding = _one(forward, function, callee)
    assert _hops(finding) == hops
    assert finding.chain[-1].line == finding.site.line
    assert callee.rpartition(".")[2] in finding.site.code


def test_hops_carry_file_line_and_source(forward):
    finding = _one(forward, "resfx.util.rel_helper")
    entry, middle, last = finding.chain
    assert entry.file == "resfx/model.py" and "via_parent()" in entry.code
    assert middle.file == "resfx/sub/parent_rel.py" and middle.code == "rel_helper()"
    assert (last.file, last.line) == ("resfx/util.py", 9)
    assert finding.site.code == 'subprocess.call(["true"])'


def test_module_list_items_are_called_in_loops(forward):
    finding = _one(forward, "resfx.model.Block.forward", "item")
    assert finding.rule == "DC050" and finding.confidence == "medium"
    assert finding.chain[0].note == "called inside `for ... in self.blocks`"


def test_factory_lambda_builds_the_layers(scan_cache):
    result = scan_roots([ROOT], ["resfx.model:Model.via_factory"], cache_dir=scan_cache)
    finding = _one(result, "resfx.model.Block.forward")
    assert _hops(finding) == [("via_factory", m.VIA_ENTRY), ("forward", m.VIA_MODULE_CALL)]


def test_local_dispatch_table(scan_cache):
    result = scan_roots([ROOT], ["resfx.model:Model.via_local_table"], cache_dir=scan_cache)
    finding = _one(result, "resfx.dispatch.handler_b", "builtins.print")
    assert _hops(finding)[-1] == ("handler_b", m.VIA_DISPATCH)


def test_super_goes_past_the_defining_class(scan_cache):
    result = scan_roots([ROOT], ["resfx.model:Model.via_super"], cache_dir=scan_cache)
    finding = _one(result, "resfx.model.Base.forward", "datetime.datetime.now")
    assert _hops(finding) == [("via_super", m.VIA_ENTRY), ("forward", m.VIA_SUPER)]


def test_unknown_attribute_class_uses_the_hierarchy_with_low_confidence(forward):
    finding = _one(forward, "resfx.model.HazardMethod.apply", "subprocess.Popen")
    assert finding.chain[-1].via == m.VIA_HIERARCHY
    assert finding.confidence == "low"
    # MoEMethod.apply cannot take (self, x): the call's arity rules it out
    assert not _at(forward, "resfx.model.MoEMethod.apply")


def test_cache_wrappers_are_traced_through(forward):
    finding = _one(forward, "resfx.deco.cached_probe", "os.popen")
    assert "functools.cache: Dynamo traces through" in finding.chain[-1].note
    assert finding.outcome.fatal_under_fullgraph
    prewarm = [f for f in finding.fixes if f.kind == "prewarm"]
    assert prewarm and not prewarm[0].sound and "traces through" in prewarm[0].summary


def test_a_decorator_is_judged_by_its_body_not_its_name(forward):
    # identity_registrar returns `lambda x: x`: the body is traced, the lock inside breaks
    finding = _one(forward, "resfx.deco.through_identity", "threading.Lock")
    assert finding.outcome.gb_id == "GB0007"
    assert "returns the function unchanged" in finding.chain[-1].note
    # real_registrar's body reaches torch.library: opaque, nothing inside is reported
    assert not _at(forward, "resfx.deco.registered")
    # a decorator returning a wrapper object that registers the op lazily: opaque too
    assert not _at(forward, "resfx.deco.lazily_registered")
    # torch.library.custom_op itself: opaque
    assert not _at(forward, "resfx.deco.opaque_op")


def test_disable_is_itself_a_break(forward):
    finding = _one(forward, "resfx.model.Model.forward", "resfx.deco.disabled")
    assert finding.rule == "DC090"
    assert finding.outcome.gb_id == "GB0098" and finding.outcome.fatal_under_fullgraph


def test_allow_in_graph_body_runs_at_trace_time_without_breaking(forward):
    boundary = _one(forward, "resfx.model.Model.forward", "resfx.deco.in_graph")
    assert boundary.rule == "DC093"
    inside = _one(forward, "resfx.deco.in_graph", "subprocess.run")
    assert inside.outcome.kind == "trace_time" and not inside.outcome.fatal_under_fullgraph
    assert inside.severity == "warning"


def test_assume_constant_result_freezes_the_value(forward):
    inside = _one(forward, "resfx.deco.frozen", "subprocess.check_output")
    assert inside.severity == "info" and inside.outcome.kind == "trace_time"
    assert "once at trace time" in inside.outcome.detail


def test_is_compiling_branch_is_pruned_and_reported(forward):
    pruned = [f for f in _at(forward, "resfx.model.Model.forward", "builtins.print")]
    assert len(pruned) == 1
    assert pruned[0].rule == "DC095" and pruned[0].outcome.kind == "skipped_when_compiled"
    assert "skipped when compiled" in pruned[0].note


def test_every_finding_has_a_stable_fingerprint(forward, scan_cache):
    again = scan_roots([ROOT], ["resfx.model:Model.forward"], cache_dir=scan_cache)
    assert [f.fingerprint for f in again.findings] == [f.fingerprint for f in forward.findings]
    assert len({f.fingerprint for f in forward.findings}) == len(forward.findings)


def test_a_name_bound_through_global_in_a_function(scan_cache):
    result = scan_roots([ROOT], ["resfx.model:Model.via_global_binding"], cache_dir=scan_cache)
    finding = _one(result, "resfx.jitlib.probe", "subprocess.getoutput")
    assert [h for h, _ in _hops(finding)] == ["via_global_binding", "use", "probe"]


def test_a_break_inside_the_layer_loop_points_to_the_inner_fix(forward):
    loops = [f for f in forward.findings if f.rule == "DC096"]
    assert loops, "the break below `for layer in self.blocks` was not reported as a loop break"
    loop = loops[0]
    assert loop.site.function == "resfx.model.Model.forward" and "for" in loop.chain[-1].note
    first = loop.fixes[0]
    assert first.kind == "custom_op" and first.at != loop.site.function and first.sound


def test_a_clock_is_moved_out_not_frozen_at_load(forward):
    finding = _one(forward, "resfx.fast.kernel", "time.time")
    kinds = [f.kind for f in finding.fixes]
    assert "hoist" not in kinds and "move_out" in kinds
    assert "would change what it returns" in next(f for f in finding.fixes if f.kind == "move_out").summary


def test_a_call_within_one_module_is_not_labelled_an_import(scan_cache):
    result = scan_roots([ROOT], ["resfx.model:SameModule.forward"], cache_dir=scan_cache)
    finding = _one(result, "resfx.model.same_module_helper", "os.system")
    assert _hops(finding) == [("forward", m.VIA_ENTRY), ("same_module_helper", m.VIA_MODULE)]

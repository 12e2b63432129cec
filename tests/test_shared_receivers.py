"""Receivers built alike share the walk's scope (values.Evaluator.walk_scope): a census walks the same
layer, allocated with the same arguments in each model's own constructor, once per deployment
instead of once per model. The answers must be those of a walk that expands every allocation."""

from __future__ import annotations

import json
from pathlib import Path

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.report.json_out import render_json
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import values
from dynacheck.static.scan import ScanSession, scan_targets

ROOT = Path(__file__).parent / "fixtures" / "deploy"
SPEC = DeploymentSpec(framework=ROOT / "depfx.toml", gpu="sm90", platform="cuda")
MODELS = ("One", "Two", "Three", "Four")


def _census(cache, models=MODELS, layer="Linear.forward") -> tuple[list[str], dict[str, dict]]:
    """Each model's forward scanned in one session (as a census does): the allocations whose
    `Linear.forward` the walks expanded, and each scan's JSON without its timings."""
    targets = [resolve_target(str(ROOT), cache_dir=cache)]
    session = ScanSession.open(targets, cache)
    answers = {}
    for model in models:
        result = scan_targets(targets, [f"depfx.shared_layers:{model}.forward"], None, cache_dir=cache,
                              deployment=SPEC, session=session)
        answers[model] = {k: v for k, v in json.loads(render_json(result)).items() if k != "stats"}
    evaluator = session.engine(SPEC)[1]
    scopes = [v[0] for k, v in evaluator.sites.items() if k[0] == "expand"]
    owners = [s.self_cls.scope.function.qualname for s in scopes
              if s.function is not None and s.function.qualname == layer]
    return sorted(owners), answers


def _callees(answer: dict) -> set[str]:
    return {f["site"]["callee"] for f in answer["findings"]}


def test_a_layer_allocated_alike_in_two_models_is_expanded_once(scan_cache):
    owners, answers = _census(scan_cache)
    # One's, Two's and Four's `Linear(size, bias=False)` share one expansion; Three's `probe=True` has its own
    assert owners == ["BlockA.__init__", "BlockC.__init__"]
    assert [m for m in MODELS if "subprocess.run" in _callees(answers[m])] == ["Three"]


def test_the_answers_are_those_of_walks_that_expand_every_allocation(scan_cache, tmp_path, monkeypatch):
    _, shared = _census(scan_cache)
    monkeypatch.setattr(values.Evaluator, "walk_scope", values.Evaluator.function_scope)
    owners, alone = _census(tmp_path / "cache")
    # the control: One's, Four's BlockA (another allocation of it), Two's and Three's
    assert owners == ["BlockA.__init__", "BlockA.__init__", "BlockB.__init__", "BlockC.__init__"]
    assert shared == alone


def test_one_call_that_allocates_two_classes_gives_each_its_own_receiver(scan_cache, tmp_path, monkeypatch):
    """`block_class(size)` in make_block is BlockA or BlockD: the same expression and scope, two
    classes (SGLang's layer factories). Keyed by the allocation alone, BlockD's forward was expanded
    with BlockA's receiver, and the `nvcc --version` probe of its own layer was never reached
    (NemotronH's MoE layer was walked as its attention layer)."""
    _, answers = _census(scan_cache)
    assert "subprocess.check_output" in _callees(answers["Four"])
    monkeypatch.setattr(values, "_believed", lambda value: ())  # the control: the allocation alone
    _, answers = _census(tmp_path / "cache")
    assert "subprocess.check_output" not in _callees(answers["Four"])


def test_arguments_that_are_unknown_either_way_do_not_split_a_receiver(scan_cache, tmp_path, monkeypatch):
    """`Routed(size)` and `Routed(hidden)`: two unknowns, named otherwise; nothing the evaluator reads of
    the instance differs (a class or function argument binds the constructor, a constant is read by the
    partial evaluator), so one expansion serves both. `Routed(size, extra=Probe)` is its own."""
    models = ("Five", "Six", "Seven")
    owners, shared = _census(scan_cache, models, "Routed.forward")
    assert owners == ["Five.__init__", "Seven.__init__"]
    assert [m for m in models if "subprocess.run" in _callees(shared[m])] == ["Seven"]
    monkeypatch.setattr(values.Evaluator, "walk_scope", values.Evaluator.function_scope)
    owners, alone = _census(tmp_path / "cache", models, "Routed.forward")
    assert owners == ["Five.__init__", "Seven.__init__", "Six.__init__"]
    assert shared == alone


def test_a_layer_passed_only_to_getattr_is_not_bound_but_one_a_test_reads_is(scan_cache, tmp_path):
    """`flag_of(self)` returns `getattr(layer, ...)`: bound to each receiver, every linear layer of a census
    was its own node of SGLang's `use_intel_amx_backend(layer)`. `probe_if_asked(self)` tests `layer.probe`,
    so each receiver keeps its node there, and only Nine's probe runs."""
    models = ("Eight", "Nine")
    _, answers = _census(scan_cache, models)
    assert [m for m in models if "subprocess.run" in _callees(answers[m])] == ["Nine"]
    targets = [resolve_target(str(ROOT), cache_dir=tmp_path)]
    session = ScanSession.open(targets, tmp_path)
    for model in models:
        scan_targets(targets, [f"depfx.shared_layers:{model}.forward"], None, cache_dir=tmp_path,
                     deployment=SPEC, session=session)
    expanded = [v[0].function.qualname for k, v in session.engine(SPEC)[1].sites.items()
                if k[0] == "expand" and v[0].function is not None]
    assert expanded.count("flag_of") == 1
    assert expanded.count("probe_if_asked") == 2

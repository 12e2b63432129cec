"""An evaluator forked for another GPU or checkpoint format (the census walks bf16, fp8, nvfp4 and
mxfp4 on sm90, sm100 and sm120 as forks of one evaluator): it keeps only what it memoized without
reading the facts that differ, and a scan with it finds what a scan with a fresh evaluator finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.deploy.facts import GPU_FACT, QUANT_FACT, Deployment
from dynacheck.sources.resolve import resolve_target
from dynacheck.static.scan import ScanSession, scan_roots, scan_targets

ROOT = Path(__file__).parent / "fixtures" / "fork"
ENTRY = "gpufx.model:Model.forward"


def _spec(gpu: str, **more) -> DeploymentSpec:
    return DeploymentSpec(framework=ROOT / "gpufx.toml", gpu=gpu, platform="cuda", **more)


def _sites(result) -> set[tuple[str, str, bool]]:
    return {(f.site.function.rpartition(".")[2], f.site.callee, bool(f.conditions)) for f in result.findings}


def _forked(scan_cache, first: str, second: str):
    """Scan on `first`, then on `second` with an evaluator forked from the first one's."""
    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    scan_targets(targets, [ENTRY], None, cache_dir=scan_cache, deployment=_spec(first), session=session)
    parent = session.engine(_spec(first))[1]
    kept = dict(session.engine(_spec(second), fork_from=_spec(first))[1].partial._memo)  # before its scan
    result = scan_targets(targets, [ENTRY], None, cache_dir=scan_cache, deployment=_spec(second), session=session)
    return result, parent, kept


@pytest.mark.parametrize("first, second", [("sm90", "sm100"), ("sm100", "sm90")])
def test_a_forked_scan_finds_what_a_fresh_one_finds(scan_cache, first, second):
    fresh = _sites(scan_roots([ROOT], [ENTRY], cache_dir=scan_cache, deployment=_spec(second)))
    forked, _, _ = _forked(scan_cache, first, second)
    assert _sites(forked) == fresh
    # the GPU decides: a guard asked first by `first` and found memoized by `second`, and a module
    # global bound under `if is_sm100_supported():`
    on_sm100 = {("first", "subprocess.check_output", False), ("second", "builtins.print", False),
                ("run", "subprocess.run", False)}
    assert (fresh == on_sm100) == (second == "sm100") and (not fresh) == (second == "sm90")


def test_the_fork_keeps_what_read_no_gpu_fact_and_drops_the_rest(scan_cache):
    _, parent, kept = _forked(scan_cache, "sm90", "sm100")
    read_gpu = {k for k, v in parent.partial._memo.items() if v[-1] & GPU_FACT}
    assert read_gpu and not read_gpu & set(kept)
    assert kept and set(kept) == set(parent.partial._memo) - read_gpu
    assert any(v[-1] & GPU_FACT for v in parent.sites.values() if isinstance(v, tuple))  # expansions too


def test_a_fork_that_kept_what_read_the_gpu_would_answer_for_the_old_one(scan_cache, monkeypatch):
    """The control: the recorded reads are what make the fork right."""
    monkeypatch.setattr(Deployment, "fork_difference", lambda self, other: 0)
    forked, _, _ = _forked(scan_cache, "sm90", "sm100")
    assert _sites(forked) == set()  # sm90's answer


def test_only_a_deployment_that_differs_in_its_gpu_or_quantization_is_forked():
    sm90 = Deployment(gpu="sm90", platform="cuda", server_args={"quantization": None, "tp_size": 1})
    assert sm90.fork_difference(Deployment(gpu="sm100", platform="cuda", server_args=dict(sm90.server_args))) == GPU_FACT
    assert sm90.fork_difference(Deployment(gpu="sm90", platform="cuda", name="other",
                                           server_args=dict(sm90.server_args))) == 0
    fp8 = Deployment(gpu="sm100", platform="cuda", server_args={"quantization": "fp8", "tp_size": 1},
                     quantization="fp8", server_args_given=("--quantization", "fp8"))
    assert sm90.fork_difference(fp8) == GPU_FACT | QUANT_FACT
    assert sm90.fork_difference(Deployment(gpu="sm100", platform="cuda", server_args={"quantization": None, "tp_size": 2})) is None
    assert sm90.fork_difference(Deployment(gpu="sm90", platform="rocm", server_args=dict(sm90.server_args))) is None
    # `given` (a deployment was given at all) is read by the evaluator and not recorded: it must agree
    assert Deployment(gpu="sm90").fork_difference(Deployment()) is None


QUANT_ENTRY = "quantfx.model:Model.forward"


def _quant_spec(quantization: str) -> DeploymentSpec:
    args = f"--quantization {quantization} --tp-size 2" if quantization else "--tp-size 2"
    return DeploymentSpec(framework=ROOT / "quantfx.toml", gpu="sm100", platform="cuda", server_args=args)


def _quant_forked(scan_cache, chain: list[str]):
    """Scan each checkpoint format of `chain` in turn, each with an evaluator forked from the one before."""
    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    results, previous = [], None
    for quantization in chain:
        spec = _quant_spec(quantization)
        session.engine(spec, fork_from=previous)
        results.append(scan_targets(targets, [QUANT_ENTRY], None, cache_dir=scan_cache, deployment=spec,
                                    session=session))
        previous = spec
    return results, session


ON = {"": {("shared", "subprocess.run", False)},
      "fp8": {("shared", "subprocess.run", False), ("forward", "builtins.print", False),
              ("apply", "subprocess.check_output", False), ("forward", "a tensor", False)},
      "fp4": {("shared", "subprocess.run", False), ("apply", "builtins.print", False)}}


@pytest.mark.parametrize("chain", [["", "fp8", "fp4"], ["fp4", "fp8", ""], ["fp8", "", "fp4"]])
def test_a_scan_forked_across_checkpoint_formats_finds_what_a_fresh_one_finds(scan_cache, chain):
    """The quantization is read two ways: `get_args().quantization` in a branch, and the config
    class a `quant_config: Optional[QuantConfig]` parameter is pinned to (none for bf16), which
    also decides a value hazard in the same `forward` (its tensor hazards are forked too)."""
    fresh = [_sites(scan_roots([ROOT], [QUANT_ENTRY], cache_dir=scan_cache, deployment=_quant_spec(q)))
             for q in chain]
    assert fresh == [ON[q] for q in chain]
    forked, session = _quant_forked(scan_cache, chain)
    assert [_sites(r) for r in forked] == fresh
    evaluator = session.engine(_quant_spec(chain[-1]))[1]
    kept = [k for k, v in evaluator.partial._memo.items() if not v[-1] & QUANT_FACT]
    assert kept  # the fork kept what read no quantization (the `tp_size` branch of `shared`)


def test_a_fork_that_kept_what_read_the_quantization_would_answer_for_the_old_format(scan_cache, monkeypatch):
    """The control: without the recorded reads, fp8 forked from bf16 answers bf16's branch and layer method."""
    monkeypatch.setattr(Deployment, "fork_difference", lambda self, other: 0)
    forked, _ = _quant_forked(scan_cache, ["", "fp8"])
    assert _sites(forked[1]) != ON["fp8"]


def test_tensor_hazards_kept_by_a_fork_read_no_fact_it_changed(scan_cache, monkeypatch):
    """The control for the value hazards: a fork that kept every TensorHazards entry would carry
    bf16's `forward` (`limit` a float) into fp8, where `limit` is a tensor."""
    from dynacheck.static import tensors

    def keep_all(self, evaluator, compile_time, dirty):
        child = tensors.TensorHazards(evaluator, self.breaks_at, compile_time)
        child._returns, child._evals, child._nodes = dict(self._returns), dict(self._evals), dict(self._nodes)
        return child

    monkeypatch.setattr(tensors.TensorHazards, "fork", keep_all)
    forked, _ = _quant_forked(scan_cache, ["", "fp8"])
    assert ("forward", "a tensor", False) not in _sites(forked[1])


def test_findings_of_a_walk_seen_before_are_built_once_per_session(scan_cache, monkeypatch):
    """A census walks many forwards the same way on several deployments; the findings and first break
    are built once per walk signature (findings.walk_signature). A walk the GPU changes is built anew,
    and equals a scan of its own."""
    from dynacheck.static.findings import FindingBuilder

    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    ranked = []
    rank = FindingBuilder._rank  # a staticmethod: every build ranks its candidates once
    monkeypatch.setattr(FindingBuilder, "_rank", staticmethod(lambda candidates: ranked.append(1) or rank(candidates)))
    scan = lambda gpu: scan_targets(targets, [ENTRY], None, cache_dir=scan_cache,  # noqa: E731
                                    deployment=_spec(gpu), session=session)
    first, again = scan("sm100"), scan("sm100")
    assert first.findings and again.findings == first.findings and again.first_break == first.first_break
    assert len(ranked) == 1
    other = scan("sm90")
    assert len(ranked) == 2 and _sites(other) != _sites(first)
    assert _sites(other) == _sites(scan_roots([ROOT], [ENTRY], cache_dir=scan_cache, deployment=_spec("sm90")))


def test_a_fork_for_another_format_keeps_the_expansion_of_a_layer_that_reads_none(scan_cache, monkeypatch):
    """`Block`'s constructor reads the quant config (its attributes are recomputed on an fp8 -> fp4 fork),
    but the `Norm` it allocates is the same instance each time it is read (the constructor's scope is one
    object per receiver and bindings: Evaluator.method_scope), so `Norm.forward`, which reads nothing of the
    quantization, is expanded once for both formats; `Linear.forward`'s method differs and is expanded again."""
    from dynacheck.static.reach import Reacher

    expanded = []
    expansion = Reacher._expansion

    def counting(self, key, scope):
        hit = self.ev.sites.get(("expand", id(scope), key.mode))
        if not (hit is not None and hit[0] is scope):
            expanded.append(key.qualname)
        return expansion(self, key, scope)

    monkeypatch.setattr(Reacher, "_expansion", counting)
    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    results, previous = [], None
    for quantization in ("fp8", "fp4"):
        spec = _quant_spec(quantization)
        session.engine(spec, fork_from=previous)
        results.append(scan_targets(targets, ["quantfx.stacked:Stacked.forward"], None, cache_dir=scan_cache,
                                    deployment=spec, session=session))
        previous = spec
    assert expanded.count("Norm.forward") == 1 and expanded.count("Linear.forward") == 2
    callees = [{f.site.callee for f in r.findings} for r in results]
    assert callees == [{"subprocess.run", "subprocess.check_output"}, {"subprocess.run", "builtins.print"}]


def test_a_layer_handed_the_quant_config_reads_the_quantization_only_where_it_uses_it(scan_cache):
    """`Block(quant_config)` binds no class or function (a parameter read as itself is an instance, its
    pinned config class), so working out `Block`'s constructor bindings, and the `Norm` and `Linear`
    its constructor builds, read no quantization, and an fp8 -> fp4 fork keeps them (before, each
    layer below a model read it); `Linear`'s attribute `quant_method`, made by the config, reads it."""
    from dynacheck.static.classes import _binds_nothing

    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    spec = _quant_spec("fp8")
    evaluator = session.engine(spec)[1]
    scan_targets(targets, ["quantfx.stacked:Stacked.forward"], None, cache_dir=scan_cache, deployment=spec,
                 session=session)
    block = {key[2]: reads for key, (_, reads) in evaluator._attrs.items() if key[:2] == ("quantfx.stacked", "Block")}
    bindings = [reads for key, (_, reads) in evaluator._constructors.items() if key[1] == "Block"]
    method = [reads for key, (_, reads) in evaluator._attrs.items() if key[1:3] == ("Linear", "quant_method")]
    assert set(block) == {"norm", "proj"} and not any(r & QUANT_FACT for r in block.values())
    assert bindings and not any(r & QUANT_FACT for r in bindings)
    assert method and all(r & QUANT_FACT for r in method)
    init = session.index.function("quantfx.stacked", "Block.__init__")
    scope = evaluator.method_scope(session.index.module("quantfx.stacked"), init, None)
    assert _binds_nothing(("n", "quant_config"), scope)
    bound = evaluator.method_scope(session.index.module("quantfx.stacked"), init, None,
                                   (("quant_config", ()),))
    assert not _binds_nothing(("n", "quant_config"), bound)  # bound by the caller: its values are kept
    assert not _binds_nothing(("a", ("n", "quant_config"), "cls"), scope)  # an attribute may be a class


def _gpu_quant_tree(tmp_path) -> Path:
    """quantfx with a branch on the GPU too (`shared` calls nvidia-smi on sm100 only), so a chain has
    entries that read the GPU alone, the quantization alone, and neither."""
    import shutil

    root = tmp_path / "gq"
    shutil.copytree(ROOT, root)
    model = root / "quantfx" / "model.py"
    text = model.read_text().replace('''    def shared(self, x):
        if get_args().tp_size > 1:''', '''    def shared(self, x):
        if torch.cuda.get_device_capability()[0] == 10:
            subprocess.check_output(["nvidia-smi"])
        if get_args().tp_size > 1:''')
    model.write_text(text)
    return root


def _gq_spec(root: Path, gpu: str, quantization: str) -> DeploymentSpec:
    args = f"--quantization {quantization} --tp-size 2" if quantization else "--tp-size 2"
    return DeploymentSpec(framework=root / "quantfx.toml", gpu=gpu, platform="cuda", server_args=args)


GQ_CHAIN = [("sm90", ""), ("sm100", ""), ("sm90", "fp8"), ("sm100", "fp8")]


def _gq_forked(root: Path, cache: Path):
    targets = [resolve_target(str(root), cache_dir=cache)]
    session = ScanSession.open(targets, cache)
    results, evaluators, previous = [], [], None
    for gpu, quantization in GQ_CHAIN:
        spec = _gq_spec(root, gpu, quantization)
        evaluators.append(session.engine(spec, fork_from=previous)[1])
        results.append(scan_targets(targets, [QUANT_ENTRY], None, cache_dir=cache, deployment=spec, session=session))
        previous = spec
    return results, evaluators


def test_what_the_gpu_alone_decided_comes_back_on_the_next_deployment_on_that_gpu(tmp_path):
    """fp8/sm90 forks from bf16/sm100 (GPU and format differ), and gets back bf16/sm90's entries that
    read the GPU and nothing else (ScanSession.engine); its findings are a fresh scan's."""
    root = _gpu_quant_tree(tmp_path)
    fresh = [_sites(scan_roots([root], [QUANT_ENTRY], cache_dir=tmp_path / "fresh", deployment=_gq_spec(root, g, q)))
             for g, q in GQ_CHAIN]
    assert ("shared", "subprocess.check_output", False) in fresh[1] - fresh[0]  # the GPU decides it
    results, evaluators = _gq_forked(root, tmp_path / "cache")
    assert [_sites(r) for r in results] == fresh
    first, third = evaluators[0].partial._memo, evaluators[2].partial._memo
    gpu_only = {k for k, v in first.items() if v[-1] == GPU_FACT}
    back = {k for k in gpu_only if third.get(k) is first[k]}  # the same entry object: restored, not recomputed
    assert back
    assert not any(v[-1] & QUANT_FACT for k, v in first.items() if third.get(k) is v and v[-1] & GPU_FACT)


def test_entries_that_read_the_quantization_too_are_not_given_back(tmp_path, monkeypatch):
    """The control: given back whatever read the GPU, fp8/sm90 answers bf16/sm90's branch on the format."""
    from dynacheck.static.memo import Memo

    root = _gpu_quant_tree(tmp_path)
    monkeypatch.setattr(Memo, "reading_only", lambda self, facts: {k: dict.get(self, k) for k in self.readers
                                                                     if k in self})
    results, _ = _gq_forked(root, tmp_path / "cache")
    assert ("forward", "builtins.print", False) not in _sites(results[2])  # fp8's print, lost

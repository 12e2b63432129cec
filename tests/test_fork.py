"""An evaluator forked for another GPU (the census walks sm90, sm100 and sm120 of one checkpoint
format as forks of one evaluator): it keeps only what it memoized without reading the GPU, and a
scan with it finds what a scan with a fresh evaluator finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.deploy.facts import GPU_FACT, Deployment
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
    monkeypatch.setattr(Deployment, "gpu_difference", lambda self, other: 0)
    forked, _, _ = _forked(scan_cache, "sm90", "sm100")
    assert _sites(forked) == set()  # sm90's answer


def test_only_a_deployment_that_differs_in_its_gpu_is_forked():
    sm90 = Deployment(gpu="sm90", platform="cuda")
    assert sm90.gpu_difference(Deployment(gpu="sm100", platform="cuda")) == GPU_FACT
    assert sm90.gpu_difference(Deployment(gpu="sm90", platform="cuda", name="other")) == 0
    assert sm90.gpu_difference(Deployment(gpu="sm100", platform="cuda", server_args={"tp_size": 2})) is None
    assert sm90.gpu_difference(Deployment(gpu="sm90", platform="rocm")) is None
    # `given` (a deployment was given at all) is read by the evaluator and not recorded: it must agree
    assert Deployment(gpu="sm90").gpu_difference(Deployment()) is None

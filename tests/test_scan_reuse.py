"""A census scan answered by the same forward's scan on the deployment before it (static/scan_reuse.py): only
when the walk it would make is that walk, checked against what the evaluator of the new deployment says."""

from __future__ import annotations

from pathlib import Path

from dynacheck.census.run import cell_record
from dynacheck.deploy.build import DeploymentSpec
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import scan_reuse
from dynacheck.static.scan import ScanSession, scan_roots, scan_targets

ROOT = Path(__file__).parent / "fixtures" / "fork"
ENTRY = "gpufx.model:Model.forward"  # its walk takes `is_sm100_supported()`'s branches (major == 10)


def _spec(gpu: str) -> DeploymentSpec:
    return DeploymentSpec(framework=ROOT / "gpufx.toml", gpu=gpu, platform="cuda")


def _before_and_fork(cache: Path, first: str, second: str):
    """The scan of ENTRY on `first` (what it was made of), and a session whose engine for `second` is
    forked from `first`'s, as a census's next deployment is."""
    targets = [resolve_target(str(ROOT), cache_dir=cache)]
    session = ScanSession.open(targets, cache)
    kept: dict = {}
    result = scan_targets(targets, [ENTRY], None, cache_dir=cache, deployment=_spec(first), session=session,
                          keep=kept)
    before = scan_reuse.Before.of([ENTRY], kept, cell_record(result))
    session.engine(_spec(second), fork_from=_spec(first))
    return session, before


def _expansions_dropped(session, spec, before) -> int:
    """How many of the earlier walk's expansions the forked evaluator no longer holds (it must work them out)."""
    evaluator = session.engine(spec)[1]
    return sum(1 for node, expansion in before.walk.expanded if expansion is not None
               and evaluator.sites.get(("expand", id(node.scope), node.key.mode)) is None)


def test_a_walk_another_gpu_decides_alike_is_answered_by_the_scan_before(scan_cache):
    """sm100 -> sm103: the fork drops every expansion that read the GPU (the capability differs), and each,
    worked out again, is equal: the walk, and so the cell, is sm100's, as a fresh scan on sm103 says."""
    session, before = _before_and_fork(scan_cache, "sm100", "sm103")
    assert before is not None and before.value_hits is not None
    assert _expansions_dropped(session, _spec("sm103"), before) > 0  # the check had something to work out
    assert scan_reuse.unchanged(session, _spec("sm103"), before)
    fresh = scan_roots([ROOT], [ENTRY], cache_dir=scan_cache, deployment=_spec("sm103"))
    assert cell_record(fresh) == before.record


def test_a_walk_another_gpu_decides_otherwise_is_walked_again(scan_cache):
    """sm90 -> sm100: `is_sm100_supported()` turns, the nvcc probe is reached; the check says no."""
    session, before = _before_and_fork(scan_cache, "sm90", "sm100")
    assert not scan_reuse.unchanged(session, _spec("sm100"), before)
    fresh = scan_roots([ROOT], [ENTRY], cache_dir=scan_cache, deployment=_spec("sm100"))
    assert cell_record(fresh) != before.record  # the control: reusing it would have been wrong
    # the scope found changed is remembered for the deployment: a second check stops before working anything out
    assert scan_reuse.unchanged(session, _spec("sm100"), before) is False
    assert session.engine(_spec("sm100"))[1].sites.get(scan_reuse.CHANGED)


def test_a_check_that_skipped_the_expansions_would_answer_for_the_old_gpu(scan_cache, monkeypatch):
    """The control for the check itself: compare only what the entries resolve to, and sm90's record
    (nothing reached) would stand for sm100's."""
    from dynacheck.static import reach

    session, before = _before_and_fork(scan_cache, "sm90", "sm100")
    monkeypatch.setattr(reach.Reacher, "_expansion", lambda self, key, scope: next(
        e for n, e in before.walk.expanded if n.key == key))
    monkeypatch.setattr(scan_reuse, "CHANGED", ("another-table",))
    assert scan_reuse.unchanged(session, _spec("sm100"), before)  # wrongly: so the expansions are what decide


def test_a_walk_cut_short_is_not_kept_for_a_check():
    from dynacheck.static.reach import Walk

    assert scan_reuse.Before.of(["e"], {"walk": Walk(truncated=True)}, {}) is None
    assert scan_reuse.Before.of(["e"], {"walk": Walk(entry_defaults=True)}, {}) is None
    assert scan_reuse.Before.of(["e"], {}, {}) is None

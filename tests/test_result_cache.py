"""A re-scan of unchanged inputs is answered from the cache; any change to what the answer depends
on (a scanned file, a new file, the deployment, the entry) makes a fresh walk."""

from __future__ import annotations

import shutil
from pathlib import Path

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.scan import scan_roots

FIXTURE = Path(__file__).parent / "fixtures" / "deploy"
ENTRY = "depfx.model:Model.forward"


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURE, root)
    return root


def _spec(root: Path, **kw) -> DeploymentSpec:
    return DeploymentSpec(framework=root / "depfx.toml", gpu="sm120", **kw)


def _callees(result) -> set:
    return {(f.site.function, f.site.callee) for f in result.findings}


def test_an_unchanged_rescan_is_reused_and_equal(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    first = scan_roots([root], [ENTRY], cache_dir=cache, deployment=_spec(root))
    again = scan_roots([root], [ENTRY], cache_dir=cache, deployment=_spec(root))
    assert not first.stats.reused and again.stats.reused and again.stats.files_parsed == 0
    one, two = first.to_dict(), again.to_dict()
    one.pop("stats"), two.pop("stats")
    assert one == two and first.findings


def test_an_edited_file_a_new_file_or_another_deployment_walks_again(tmp_path):
    root, cache = _tree(tmp_path), tmp_path / "cache"
    scan_roots([root], [ENTRY], cache_dir=cache, deployment=_spec(root))
    other = scan_roots([root], [ENTRY], cache_dir=cache, deployment=_spec(root, env={"DEPFX_DEBUG": "1"}))
    assert not other.stats.reused and ("depfx.model.Model.forward", "builtins.print") in _callees(other)

    kernels = root / "depfx" / "kernels.py"
    kernels.write_text(kernels.read_text().replace('subprocess.check_output(["nvcc", "--version"])', "pass"))
    edited = scan_roots([root], [ENTRY], cache_dir=cache, deployment=_spec(root))
    assert not edited.stats.reused
    assert ("depfx.kernels.sm120_quantize", "subprocess.check_output") not in _callees(edited)

    (root / "depfx" / "extra.py").write_text("x = 1\n")
    assert not scan_roots([root], [ENTRY], cache_dir=cache, deployment=_spec(root)).stats.reused


def test_a_census_session_or_reuse_false_always_walks(tmp_path):
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession, scan_targets

    root, cache = _tree(tmp_path), tmp_path / "cache"
    targets = [resolve_target(str(root), cache_dir=cache)]
    scan_targets(targets, [ENTRY], cache_dir=cache, deployment=_spec(root))
    assert not scan_targets(targets, [ENTRY], cache_dir=cache, deployment=_spec(root), reuse=False).stats.reused
    session = ScanSession.open(targets, cache)
    assert not scan_targets(targets, [ENTRY], cache_dir=cache, deployment=_spec(root), session=session).stats.reused

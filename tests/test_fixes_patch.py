"""`dynacheck fix --patch`: a unified diff that `patch -p1` applies to a copy of the scanned tree;
re-scanning the copy, the fixed sites are gone and every other finding is unchanged."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dynacheck.cli import main as cli
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).resolve().parent / "fixtures" / "fixes" / "declfx"
ENTRIES = ["usermodel.model:Model.forward", "usermodel.hazards:MyModel.forward"]


def _cli(args):
    with pytest.raises(SystemExit) as exc:
        cli(args)
    return exc.value.code


def _key(finding):
    return (finding.site.file, finding.site.function, finding.site.callee, finding.rule)


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the patch program")
def test_patch_applies_to_a_copy_and_the_fixed_sites_are_gone(tmp_path, capsys):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns("__pycache__"))
    scan_json, diff = tmp_path / "scan.json", tmp_path / "fixes.diff"
    args = ["scan", "--target", str(tree), "--format", "json", "--out", str(scan_json), "--fail-on", "never",
            "--cache-dir", str(tmp_path / "cache")]
    for entry in ENTRIES:
        args += ["-e", entry]
    assert _cli(args) == 0
    assert _cli(["fix", "--patch", str(diff), "--scan", str(scan_json)]) == 0
    assert "4 source edit(s)" in capsys.readouterr().out
    text = diff.read_text()
    # the data-dependent branch: compiled, its test is never evaluated
    assert "+        if not torch.compiler.is_compiling() and (x.sum().item() > 0):" in text, text
    before = scan_roots([tree], ENTRIES, cache_dir=tmp_path / "cache").findings

    done = subprocess.run(["patch", "-p1", "-i", str(diff)], cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    after = scan_roots([tree], ENTRIES, cache_dir=tmp_path / "cache").findings

    fatal_before = {_key(f) for f in before if f.outcome.fatal_under_fullgraph}
    fatal_after = {_key(f) for f in after if f.outcome.fatal_under_fullgraph}
    gone = fatal_before - fatal_after
    assert {(file, callee) for file, _, callee, _ in gone} == {
        ("minilib/jit.py", "subprocess.check_output"),  # under the op now registered for real
        ("usermodel/hazards.py", "subprocess.check_output"),  # the probe frozen by assume_constant_result
        ("usermodel/hazards.py", "builtins.print"),  # guarded with torch.compiler.is_compiling()
        ("usermodel/hazards.py", "a tensor"),  # the branch on .item(): not taken when compiled
    }
    assert fatal_after == fatal_before - gone  # no new fatal site
    assert {_key(f) for f in before} - gone <= {_key(f) for f in after}  # every other finding is still there
    new = [f for f in after if _key(f) not in {_key(b) for b in before}]
    assert all(not f.outcome.fatal_under_fullgraph for f in new)  # e.g. "skipped when compiled", "trace time"


SHORTCUT = '''\
import torch


def top_values(x, k: int):
    if x.numel() <= k and x.max().item() > 0:
        return x.sort(descending=True).values
    return x.topk(x.numel()).values
'''


def test_branch_guard_compiles_under_fullgraph_and_a_shortcut_branch_keeps_eager_results():
    """Real Dynamo: the branch on `.item()` fails fullgraph; with the patch's edit the test is never
    evaluated when compiled, the other path runs, and for a shortcut branch the result equals eager."""
    torch = pytest.importorskip("torch")
    import libcst as cst

    from dynacheck.fixes.patch import FileEdits, _Rewrite

    rewrite = _Rewrite(FileEdits(guard_lines={5}))
    patched = cst.MetadataWrapper(cst.parse_module(SHORTCUT)).visit(rewrite).code
    assert "    if not torch.compiler.is_compiling() and (x.numel() <= k and x.max().item() > 0):\n" in patched
    assert rewrite.done == ["guard branch at line 5"]

    def load(source):
        namespace: dict = {}
        exec(compile(source, "<shortcut>", "exec"), namespace)
        return namespace["top_values"]

    x = torch.tensor([3.0, 1.0, 2.0])
    torch._dynamo.reset()
    with pytest.raises(Exception) as failed:
        torch.compile(load(SHORTCUT), fullgraph=True, backend="eager")(x, 4)
    assert "item" in str(failed.value).lower() or "data-dependent" in str(failed.value).lower()
    torch._dynamo.reset()
    fixed = load(patched)
    compiled = torch.compile(fixed, fullgraph=True, backend="eager")(x, 4)
    assert torch.equal(compiled, fixed(x, 4))  # eager takes the shortcut, compiled the general path

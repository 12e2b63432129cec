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
    assert "3 source edit(s)" in capsys.readouterr().out
    preamble = diff.read_text().split("\n\n", 1)[0]
    # the data-dependent branch's guard is not a bare call: listed for a hand edit, never dropped silently
    assert "guard at usermodel/hazards.py:21 (not a bare call" in preamble, preamble
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
    }
    assert fatal_after == fatal_before - gone  # no new fatal site
    assert {_key(f) for f in before} - gone <= {_key(f) for f in after}  # every other finding is still there
    new = [f for f in after if _key(f) not in {_key(b) for b in before}]
    assert all(not f.outcome.fatal_under_fullgraph for f in new)  # e.g. "skipped when compiled", "trace time"

"""Fix coverage (`bench/fix_coverage.py`'s measure): which fatal sites an applied fix clears, and by what."""

from __future__ import annotations

from pathlib import Path

from dynacheck.fixes.coverage import cleared
from dynacheck.fixes.patch import guarded_sites
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).resolve().parent / "fixtures" / "fixes" / "declfx"


def test_each_fatal_site_is_cleared_by_the_patch_module_or_by_the_source_edit_or_listed(tmp_path):
    result = scan_roots([ROOT], ["usermodel.model:Model.forward", "usermodel.hazards:MyModel.forward"],
                        cache_dir=tmp_path / "cache")
    rows = {(r.finding.site.file, r.finding.site.line, r.finding.site.callee): r
            for r in cleared(result.findings, guarded_sites(result.findings, result.targets))}
    branch = rows[("usermodel/hazards.py", 21, "a tensor")]
    printed = rows[("usermodel/hazards.py", 20, "builtins.print")]
    assert branch.edited and branch.applied and branch.fix is None  # `fix --patch` guards the branch
    assert printed.edited and not printed.declared
    declared = [r for r in rows.values() if r.finding.site.file.startswith("minilib/")]
    assert declared and all(r.fix is not None and r.declared and not r.edited for r in declared)
    # a lock around tensor math: the result depends on the argument (no hoist), not a bare call (no guard)
    assert not rows[("usermodel/hazards.py", 10, "threading.Lock.__enter__")].applied
    assert rows[("usermodel/hazards.py", 15, "subprocess.check_output")].fix.kind == "assume_constant_result"
    # without the source edits, the same rows are not cleared: the measure reads the patch, not the rule
    plain = {(r.finding.site.file, r.finding.site.line, r.finding.site.callee): r for r in cleared(result.findings)}
    assert not plain[("usermodel/hazards.py", 21, "a tensor")].applied

"""Baseline files are deterministic and portable; comparing sorts findings into new/fixed/changed."""

from __future__ import annotations

import json
import dataclasses
from pathlib import Path

import pytest

from dynacheck.errors import UserError
from dynacheck.gate.baseline import baseline_from_scan, compare, compare_with_previous, dumps, read_baseline, write_baseline
from dynacheck.gate.diff import compare_scans, diff_scans
from dynacheck.gate.run import judge
from dynacheck.model import Finding, Hop, Outcome, ScanResult, Site, Target


def finding(callee: str, *, line: int = 10, severity: str = "error", gb_id: str = "GB0007", status: str = "predicted") -> Finding:
    return Finding(
        rule="DC001" if callee.startswith("subprocess") else "DC020",
        title=f"calls {callee}",
        severity=severity,
        site=Site("pkg/mod.py", line, "pkg.mod.helper", callee, code=f"{callee}()"),
        chain=(Hop("pkg.mod.Model.forward", "pkg/mod.py", line - 5, "entry"), Hop("pkg.mod.helper", "pkg/mod.py", line, "import")),
        outcome=Outcome("graph_break", gb_id),
        status=status,
    )


def scan(*findings: Finding, version: str = "1.0") -> ScanResult:
    target = Target(spec="/abs/machine/path/src", name="pkg", version=version, root="/abs/machine/path/src", kind="folder")
    return ScanResult(targets=(target,), entries=("pkg.mod:Model.forward",), findings=findings)


def test_baseline_text_is_sorted_and_has_no_lines_or_machine_paths() -> None:
    text = dumps(baseline_from_scan(scan(finding("time.perf_counter"), finding("subprocess.run")), specs=("src",)))
    data = json.loads(text)
    assert text.endswith("}\n")
    assert [r["fingerprint"] for r in data["findings"]] == sorted(r["fingerprint"] for r in data["findings"])
    assert data["targets"] == [{"name": "pkg", "spec": "src", "version": "1.0"}]
    assert "/abs/machine" not in text
    assert '"line"' not in text and "pkg/mod.py" not in text
    assert data["findings"][0]["chain"][0] == "pkg.mod.Model.forward"


def test_writing_twice_gives_the_same_bytes_and_order_of_findings_does_not_matter(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    assert write_baseline(baseline_from_scan(scan(finding("a.b"), finding("subprocess.run"))), path) is True
    first = path.read_bytes()
    assert write_baseline(baseline_from_scan(scan(finding("subprocess.run"), finding("a.b"))), path) is False
    assert path.read_bytes() == first


def test_suppressed_findings_are_not_written() -> None:
    baseline = baseline_from_scan(scan(finding("a.b"), finding("subprocess.run", status="suppressed")))
    assert [r["callee"] for r in baseline.findings] == ["a.b"]


def test_round_trip_then_compare_moved_code_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    write_baseline(baseline_from_scan(scan(finding("subprocess.run"), finding("a.b"))), path)
    moved = scan(finding("subprocess.run", line=80), finding("a.b", line=3))
    comparison = compare_with_previous(read_baseline(path), moved)
    diff = comparison.diff
    assert (len(diff.added), len(diff.removed), len(diff.changed), len(diff.unchanged)) == (0, 0, 0, 2)
    assert judge(comparison, "info", moved).exit_code == 0


def test_new_fixed_changed_and_suppressed(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    write_baseline(baseline_from_scan(scan(finding("a.b"), finding("c.d", severity="warning"), finding("e.f"))), path)
    now = scan(
        finding("subprocess.run"),  # new
        finding("c.d", severity="error"),  # severity rose
        finding("e.f", status="suppressed"),  # suppressed now: not "fixed"
    )
    comparison = compare_with_previous(read_baseline(path), now)
    diff = comparison.diff
    assert [f.site.callee for f in diff.added] == ["subprocess.run"]
    assert [f.site.callee for f in diff.removed] == ["a.b"]
    assert [f.site.callee for f in diff.changed] == ["c.d"]
    assert [f.site.callee for f in diff.suppressed] == ["e.f"]
    assert diff.before == (str(path),)
    assert diff.changed[0].note == "was warning, GB0007"
    verdict = judge(comparison, "error", now)
    assert verdict.exit_code == 1
    assert {f.site.callee for f in verdict.failing} == {"subprocess.run", "c.d"}


def test_threshold_lets_lower_severities_pass() -> None:
    before, after = scan(), scan(finding("x.y", severity="warning"))
    comparison = compare_scans(before, after)
    assert len(comparison.diff.added) == 1
    assert judge(comparison, "error", after).exit_code == 0
    assert judge(comparison, "warning", after).exit_code == 1


def test_diff_scans_labels_and_outcome_change() -> None:
    before = scan(finding("subprocess.run", gb_id="GB0007"), version="0.6.2")
    after = scan(finding("subprocess.run", gb_id="GB0156"), version="0.6.3")
    diff = diff_scans(before, after)
    assert [f.outcome.gb_id for f in diff.changed] == ["GB0156"]
    assert diff.before == ("/abs/machine/path/src (0.6.2)",)


@pytest.mark.parametrize(
    ("content", "expected"),
    [("{not json", "not valid JSON"), ('{"schema_version": "99", "findings": []}', "schema version"),
     ('{"schema_version": "1", "findings": {"rule": "DC001"}}', "malformed findings"),
     ('{"schema_version": "1", "findings": [], "targets": 5}', "malformed targets"),
     ('{"schema_version": "1", "findings": [], "entries": [1]}', "malformed entries"),
     ('{"schema_version": "1", "findings": ' + "[" * 100_000 + "]" * 100_000 + "}", "too deeply")],
)
def test_bad_baseline_files_are_user_errors(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=expected):
        read_baseline(path)


def test_a_malformed_record_is_left_out_and_named_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"schema_version": "1", "findings": [{"rule": "DC001"}, {"fingerprint": "ok1"},'
                    ' {"fingerprint": "x", "chain": 5}, {"fingerprint": 7}, {"fingerprint": "ok2", "gb_id": "GB0007"}]}')
    baseline = read_baseline(path)
    assert [f["fingerprint"] for f in baseline.findings] == ["ok1", "ok2"]
    assert len(baseline.skipped) == 3 and "finding 0 left out (no fingerprint string)" in baseline.skipped[0]


def test_missing_baseline_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        read_baseline(tmp_path / "none.json")
    assert "--update-baseline" in str(info.value)


def test_unchanged_keeps_the_current_finding_with_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    write_baseline(baseline_from_scan(scan(finding("a.b"))), path)
    diff = compare(read_baseline(path), scan(finding("a.b", line=44)))
    assert diff.unchanged[0].site.line == 44
    assert diff.unchanged[0].site.file == "pkg/mod.py"


def rerouted(original: Finding, via: str, **changes) -> Finding:
    chain = (original.chain[0], Hop(via, "pkg/other.py", 3, "import"), *original.chain[1:])
    return dataclasses.replace(original, chain=chain, fingerprint="", **changes)


def test_same_site_along_another_chain_is_changed_not_new(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    write_baseline(baseline_from_scan(scan(finding("subprocess.run"))), path)
    now = scan(rerouted(finding("subprocess.run"), "pkg.layers.Linear.forward"))
    comparison = compare_with_previous(read_baseline(path), now)
    assert (len(comparison.diff.added), len(comparison.diff.removed), len(comparison.diff.changed)) == (0, 0, 1)
    assert "another chain (was via pkg.mod.Model.forward → pkg.mod.helper)" in comparison.diff.changed[0].note
    assert judge(comparison, "info", now).exit_code == 0  # same severity: not worse


def test_rerouted_and_worse_fails() -> None:
    before = scan(finding("subprocess.run", severity="warning"))
    after = scan(rerouted(finding("subprocess.run"), "pkg.layers.Linear.forward", severity="error"))
    comparison = compare_scans(before, after)
    assert len(comparison.diff.changed) == 1
    assert judge(comparison, "error", after).exit_code == 1


def test_a_suppressed_reroute_is_not_reported_as_fixed() -> None:
    before = scan(finding("subprocess.run"))
    after = scan(rerouted(finding("subprocess.run"), "pkg.x.y", status="suppressed"))
    diff = diff_scans(before, after)
    assert (len(diff.removed), len(diff.suppressed)) == (0, 1)

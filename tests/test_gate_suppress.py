"""Inline suppressions: a reason is required, suppressed findings stay in the result, marked."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.errors import UserError
from dynacheck.gate.suppress import BadSuppression, Suppression, apply_ignores, apply_suppressions, parse_suppression
from dynacheck.model import Finding, Hop, Outcome, ScanResult, Site, Target

SOURCE = """\
import subprocess


def probe():
    return subprocess.run(["nvcc", "--version"])


def forward(x):
    probe()
    return x
"""


def finding(rule: str = "DC001") -> Finding:
    return Finding(
        rule=rule,
        title="process spawn",
        severity="error",
        site=Site("pkg/mod.py", 5, "pkg.mod.probe", "subprocess.run", code=SOURCE.splitlines()[4]),
        chain=(Hop("pkg.mod.forward", "pkg/mod.py", 9, "entry"), Hop("pkg.mod.probe", "pkg/mod.py", 5, "local definition")),
        outcome=Outcome("graph_break", "GB0007", fatal_under_fullgraph=True),
    )


def scan_of(tmp_path: Path, source: str, *findings: Finding) -> ScanResult:
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "mod.py").write_text(source, encoding="utf-8")
    target = Target(spec=str(tmp_path), name="pkg", version="", root=str(tmp_path), kind="folder")
    return ScanResult(targets=(target,), entries=("pkg.mod:forward",), findings=findings or (finding(),))


def edit_line(source: str, line: int, new_text: str) -> str:
    lines = source.splitlines()
    lines[line - 1] = new_text
    return "\n".join(lines) + "\n"


def test_parse_reads_rules_and_reason() -> None:
    parsed = parse_suppression("x()  # dynacheck: ignore[DC001, DC004] probe runs once at load", "f.py", 3)
    assert parsed == Suppression(("DC001", "DC004"), "probe runs once at load", "f.py", 3)
    assert parse_suppression("x()  # an ordinary comment") is None


@pytest.mark.parametrize(
    "text", ["x()  # dynacheck: ignore[DC001]", "x()  # dynacheck: ignore[DC001]  -  ", "# dynacheck: ignore", "# dynacheck: ignore[]  why"]
)
def test_parse_flags_missing_reason_or_rules(text: str) -> None:
    assert isinstance(parse_suppression(text, "f.py", 7), BadSuppression)


def test_suppression_on_the_site_line_marks_the_finding(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 5, '    return subprocess.run(["nvcc", "--version"])  # dynacheck: ignore[DC001] load-time only')
    result = apply_suppressions(scan_of(tmp_path, source))
    (only,) = result.findings
    assert only.status == "suppressed"
    assert only.note.startswith("load-time only")
    assert "pkg/mod.py:5" in only.note


def test_comment_line_above_the_site_counts(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 4, "def probe():\n    # dynacheck: ignore[DC001] guarded by the caller")
    shifted = finding()
    shifted = Finding.from_dict({**shifted.to_dict(), "site": {**shifted.site.to_dict(), "line": 6}})
    (only,) = apply_suppressions(scan_of(tmp_path, source, shifted)).findings
    assert only.status == "suppressed" and "guarded by the caller" in only.note


def test_code_line_above_does_not_count(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 4, "def probe():  # dynacheck: ignore[DC001] this belongs to the def line")
    (only,) = apply_suppressions(scan_of(tmp_path, source)).findings
    assert only.status == "predicted"


def test_suppression_on_a_hop_line_silences_the_chain_through_it(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 9, "    probe()  # dynacheck: ignore[DC001] the probe is hoisted in production")
    (only,) = apply_suppressions(scan_of(tmp_path, source)).findings
    assert only.status == "suppressed"
    assert "hoisted in production" in only.note


def test_other_rule_is_not_silenced(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 9, "    probe()  # dynacheck: ignore[DC002] a different hazard")
    (only,) = apply_suppressions(scan_of(tmp_path, source)).findings
    assert only.status == "predicted" and only.note == ""


def test_only_the_suppressed_finding_changes(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 5, '    return subprocess.run(["nvcc", "--version"])  # dynacheck: ignore[DC001] reason')
    findings = apply_suppressions(scan_of(tmp_path, source, finding("DC001"), finding("DC007"))).findings
    assert [f.status for f in findings] == ["suppressed", "predicted"]


def test_missing_reason_is_an_error_naming_the_line(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 9, "    probe()  # dynacheck: ignore[DC001]")
    with pytest.raises(UserError) as info:
        apply_suppressions(scan_of(tmp_path, source))
    assert "pkg/mod.py:9" in str(info.value)
    assert "reason" in str(info.value)


def test_missing_source_file_is_ignored(tmp_path: Path) -> None:
    target = Target(spec="gone", name="gone", version="", root=str(tmp_path / "gone"), kind="folder")
    result = ScanResult(targets=(target,), entries=(), findings=(finding(),))
    assert apply_suppressions(result).findings[0].status == "predicted"


def test_configured_ignore_marks_not_drops() -> None:
    result = ScanResult(targets=(), entries=(), findings=(finding("DC001"), finding("DC002")))
    marked = apply_ignores(result, ("DC002",)).findings
    assert len(marked) == 2
    assert marked[0].status == "predicted"
    assert marked[1].status == "suppressed" and "ignore" in marked[1].note


def test_the_scan_note_is_kept_after_the_reason(tmp_path: Path) -> None:
    source = edit_line(SOURCE, 9, "    probe()  # dynacheck: ignore[DC001] hoisted")
    noted = Finding.from_dict({**finding().to_dict(), "note": "3 other candidates"})
    (only,) = apply_suppressions(scan_of(tmp_path, source, noted)).findings
    assert only.note == "hoisted (pkg/mod.py:9); 3 other candidates"

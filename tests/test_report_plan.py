"""The fix plan: fixes ranked by the fatal sites they clear, shown on top of the terminal report."""

from __future__ import annotations

import io

from rich.console import Console

from dynacheck.model import Finding, Fix, Hop, Outcome, ScanResult, Site
from dynacheck.report.console import render_console
from dynacheck.report.view import fix_plan


def _finding(line: int, at: str, fatal: bool = True, status: str = "predicted") -> Finding:
    site = Site("lib/m.py", line, "lib.m.f", "subprocess.run", "subprocess.run([])")
    fixes = (Fix("disable", at, "no", sound=False), Fix("custom_op", at, "wrap it"))
    return Finding("DC001", "t", "error", site, (Hop("m.forward", "m.py", 1, "entry"),),
                   Outcome("graph_break", "GB0007", fatal_under_fullgraph=fatal), fixes, status=status)


def test_the_fix_that_clears_most_fatal_sites_comes_first():
    findings = [_finding(1, "lib.m.small"), _finding(2, "lib.m.big"), _finding(3, "lib.m.big"),
                _finding(3, "lib.m.big"), _finding(4, "lib.m.quiet", fatal=False),
                _finding(5, "lib.m.hidden", status="suppressed")]
    plan = fix_plan(findings)
    assert [(p.at, p.fatal_sites, p.sites) for p in plan] == [
        ("lib.m.big", 2, 2), ("lib.m.small", 1, 1), ("lib.m.quiet", 0, 1)]
    assert all(p.kind == "custom_op" for p in plan)  # the unsound fix listed first is skipped


def test_terminal_report_opens_with_the_plan():
    scan = ScanResult(targets=(), entries=("m:forward",), findings=(_finding(2, "lib.m.big"),))
    out = io.StringIO()
    render_console(scan, Console(file=out, width=120))
    text = out.getvalue()
    assert "fix plan" in text and "custom_op at lib.m.big  1 fatal of 1 site(s)" in text
    assert text.index("fix plan") < text.index("lib/m.py:2")

"""The fix plan: which fixes clear the most fatal sites, counting each site once.

Each site counts with its first finding (its best chain) and that finding's first sound fix.
With a deployment, only findings that hold on it (no open conditions) count: a fix for a path the
server never takes is not where to start.
"""

from __future__ import annotations

from typing import Iterable

from dynacheck.model import Finding, PlanEntry


def fix_plan(findings: Iterable[Finding], unconditional_only: bool = True) -> tuple[PlanEntry, ...]:
    sites: dict[tuple[str, str], set] = {}
    fatal: dict[tuple[str, str], set] = {}
    counted: set[tuple[str, int]] = set()
    for finding in findings:
        if finding.status == "suppressed" or (unconditional_only and finding.conditions):
            continue
        site = (finding.site.file, finding.site.line)
        if site in counted:
            continue
        fix = next((f for f in finding.fixes if f.sound), None)
        if fix is None:
            continue
        counted.add(site)
        key = (fix.kind, fix.at)
        sites.setdefault(key, set()).add(site)
        if finding.outcome.fatal_under_fullgraph:
            fatal.setdefault(key, set()).add(site)
    steps = [PlanEntry(kind, at, len(s), len(fatal.get((kind, at), ()))) for (kind, at), s in sites.items()]
    steps.sort(key=lambda p: (-p.fatal_sites, -p.sites, p.kind, p.at))
    return tuple(steps)

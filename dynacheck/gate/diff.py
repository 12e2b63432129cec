"""Compare two sets of findings: what a dependency bump (or a code change) brought.

Findings are matched by fingerprint first. What is left is matched by site (rule, function
holding the call, callee): the same hazard reached along another chain, as happens when a
release moves code between modules, is `changed` with a note, not one `added` plus one
`removed`, so a version diff shows what really appeared and disappeared.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from dynacheck.gate.baseline import with_fingerprints
from dynacheck.gate.suppress import SUPPRESSED
from dynacheck.model import Diff, Finding, ScanResult, severity_rank


@dataclass(frozen=True)
class Comparison:
    diff: Diff
    previous: dict[str, Finding]  # fingerprint of a changed finding -> the finding it replaced

    def worsened(self, finding: Finding) -> bool:
        """A changed finding whose severity went up (a reroute at the same severity is not worse)."""
        old = self.previous.get(finding.fingerprint)
        return old is None or severity_rank(finding.severity) > severity_rank(old.severity)


def diff_scans(before: ScanResult, after: ScanResult) -> Diff:
    """Findings of `after` against `before`; a finding suppressed in `after` is listed as suppressed only."""
    return compare_scans(before, after).diff


def compare_scans(before: ScanResult, after: ScanResult) -> Comparison:
    return compare_findings(
        list(with_fingerprints(before).findings),
        list(with_fingerprints(after).findings),
        before_label=tuple(_label(t.spec, t.version) for t in before.targets),
        after_label=tuple(_label(t.spec, t.version) for t in after.targets),
    )


def compare_findings(
    before: Iterable[Finding],
    after: Iterable[Finding],
    *,
    before_label: tuple[str, ...] = (),
    after_label: tuple[str, ...] = (),
) -> Comparison:
    """Sort `after` into added / changed / unchanged / suppressed and `before` leftovers into removed."""
    old = _by_fingerprint(f for f in before if f.status != SUPPRESSED)
    new_all = _by_fingerprint(after)
    suppressed = [f for f in new_all.values() if f.status == SUPPRESSED]
    changed: list[Finding] = []
    unchanged: list[Finding] = []
    previous: dict[str, Finding] = {}
    unmatched: list[Finding] = []
    for key, finding in new_all.items():
        if finding.status == SUPPRESSED:
            old.pop(key, None)
        elif key not in old:
            unmatched.append(finding)
        elif _verdict(old[key]) != _verdict(finding):
            previous[key] = old.pop(key)
            changed.append(_noted(finding, previous[key], rerouted=False))
        else:
            old.pop(key)
            unchanged.append(finding)
    by_site: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
    for finding in sorted(old.values(), key=lambda f: f.fingerprint):
        by_site[_site_key(finding)].append(finding)
    for finding in suppressed:  # a suppressed hazard still accounts for its old self
        if by_site.get(_site_key(finding)):
            by_site[_site_key(finding)].pop(0)
    added: list[Finding] = []
    for finding in unmatched:
        candidates = by_site.get(_site_key(finding))
        if candidates:
            previous[finding.fingerprint] = candidates.pop(0)
            changed.append(_noted(finding, previous[finding.fingerprint], rerouted=True))
        else:
            added.append(finding)
    removed = [f for group in by_site.values() for f in group]
    diff = Diff(
        before=before_label,
        after=after_label,
        added=_ordered(added),
        removed=_ordered(removed),
        changed=_ordered(changed),
        unchanged=_ordered(unchanged),
        suppressed=_ordered(suppressed),
    )
    return Comparison(diff=diff, previous=previous)


def _noted(finding: Finding, old: Finding, *, rerouted: bool) -> Finding:
    """Say what changed in the finding's note, for renderers that show one line per finding."""
    parts = []
    if _verdict(old) != _verdict(finding):
        was = ", ".join(p for p in (old.severity, old.outcome.gb_id or old.outcome.kind) if p)
        if old.unconditional != finding.unconditional:
            was += ", conditional" if not old.unconditional else ", on the deployment"
        parts.append(f"was {was}")
    if rerouted:
        parts.append("same site, reached along another chain (was via " + " → ".join(h.function for h in old.chain) + ")")
    note = "; ".join(parts)
    return dataclasses.replace(finding, note=f"{finding.note}; {note}" if finding.note else note)


def _by_fingerprint(findings: Iterable[Finding]) -> dict[str, Finding]:
    table: dict[str, Finding] = {}
    for finding in findings:
        table.setdefault(finding.fingerprint, finding)
    return table


def _site_key(finding: Finding) -> tuple[str, str, str]:
    return (finding.rule, finding.site.function, finding.site.callee)


def _verdict(finding: Finding) -> tuple[str, str, str, bool]:
    """What a reader acts on: severity, outcome, and whether it holds on the deployment."""
    return (finding.severity, finding.outcome.kind, finding.outcome.gb_id, finding.unconditional)


def _ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Worst first, then by rule and site, so every output lists findings in one stable order."""
    return tuple(
        sorted(findings, key=lambda f: (-severity_rank(f.severity), f.rule, f.site.function, f.site.callee, f.fingerprint))
    )


def _label(spec: str, version: str) -> str:
    return f"{spec} ({version})" if version and version not in spec else spec

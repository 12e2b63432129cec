"""Compare two sets of findings by fingerprint: what a dependency bump (or a code change) brought."""

from __future__ import annotations

from collections.abc import Iterable

from dynacheck.gate.baseline import with_fingerprints
from dynacheck.gate.suppress import SUPPRESSED
from dynacheck.model import Diff, Finding, ScanResult, severity_rank


def diff_scans(before: ScanResult, after: ScanResult) -> Diff:
    """Findings of `after` against `before`; a finding suppressed in `after` is listed as suppressed only."""
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
) -> Diff:
    """Match by fingerprint; same fingerprint with another severity, outcome or GB id is `changed`."""
    old = _by_fingerprint(f for f in before if f.status != SUPPRESSED)
    new_all = _by_fingerprint(after)
    suppressed = {k: f for k, f in new_all.items() if f.status == SUPPRESSED}
    new = {k: f for k, f in new_all.items() if k not in suppressed}
    added, changed, unchanged = [], [], []
    for key, finding in new.items():
        if key not in old:
            added.append(finding)
        elif _verdict(old[key]) != _verdict(finding):
            changed.append(finding)
        else:
            unchanged.append(finding)
    removed = [f for key, f in old.items() if key not in new and key not in suppressed]
    return Diff(
        before=before_label,
        after=after_label,
        added=_ordered(added),
        removed=_ordered(removed),
        changed=_ordered(changed),
        unchanged=_ordered(unchanged),
        suppressed=_ordered(suppressed.values()),
    )


def _by_fingerprint(findings: Iterable[Finding]) -> dict[str, Finding]:
    table: dict[str, Finding] = {}
    for finding in findings:
        table.setdefault(finding.fingerprint, finding)
    return table


def _verdict(finding: Finding) -> tuple[str, str, str]:
    return (finding.severity, finding.outcome.kind, finding.outcome.gb_id)


def _ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Worst first, then by rule and site, so every output lists findings in one stable order."""
    return tuple(
        sorted(findings, key=lambda f: (-severity_rank(f.severity), f.rule, f.site.function, f.site.callee, f.fingerprint))
    )


def _label(spec: str, version: str) -> str:
    return f"{spec} ({version})" if version and version not in spec else spec

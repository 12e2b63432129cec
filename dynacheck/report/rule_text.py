"""Help text for a rule: from the catalogue when it is installed, else from the finding itself.

The catalogue is another room's data; reports only read it, and render fine without it (a scan
file from elsewhere may name rules this install does not ship).
"""

from __future__ import annotations

from dataclasses import dataclass

from dynacheck.model import Finding
from dynacheck.report import view


@dataclass(frozen=True)
class RuleText:
    id: str
    name: str  # kebab-case slug
    title: str
    severity: str
    why: str
    fixes: tuple[str, ...]
    example: str
    gb_id: str
    outcome: str


def _catalog():
    try:
        from dynacheck.catalog import load_catalog
    except ImportError:
        return None
    try:
        return load_catalog()
    except Exception:  # a broken catalogue must not stop a report from rendering
        return None


def rule_texts(findings: list[Finding]) -> dict[str, RuleText]:
    """One RuleText per rule id in the findings, in first-seen order."""
    catalog = _catalog()
    out: dict[str, RuleText] = {}
    for finding in findings:
        if finding.rule in out:
            continue
        out[finding.rule] = _from_catalog(catalog, finding) or _from_finding(finding)
    return out


def _from_finding(finding: Finding) -> RuleText:
    o = finding.outcome
    why = o.explanation or f"Dynamo reaches {finding.site.callee} and cannot trace it."
    return RuleText(
        id=finding.rule,
        name=_slug(finding.title) or finding.rule.lower(),
        title=finding.title,
        severity=finding.severity,
        why=why,
        fixes=tuple(f"{f.kind}: {f.summary}" for f in view.ordered_fixes(finding.fixes) if f.sound),
        example="",
        gb_id=o.gb_id,
        outcome=view.finding_outcome_label(finding),
    )


def _from_catalog(catalog, finding: Finding) -> RuleText | None:
    if catalog is None:
        return None
    try:
        rule = catalog.get(finding.rule)
    except Exception:
        return None
    outcome = getattr(rule, "outcome", None)
    gb_id = getattr(outcome, "gb_id", "") or finding.outcome.gb_id
    kind = getattr(outcome, "kind", "") or finding.outcome.kind
    fatal = bool(getattr(outcome, "fatal_under_fullgraph", finding.outcome.fatal_under_fullgraph))
    fixes = tuple(
        f"{getattr(f, 'kind', '')}: {getattr(f, 'text', '')}" if getattr(f, "sound", True)
        else f"not {getattr(f, 'kind', '')}: {getattr(f, 'text', '')}"
        for f in getattr(rule, "fixes", ())
    )
    return RuleText(
        id=finding.rule,
        name=getattr(rule, "name", "") or _slug(finding.title),
        title=getattr(rule, "title", "") or finding.title,
        severity=getattr(rule, "severity", "") or finding.severity,
        why=getattr(rule, "why", "") or finding.outcome.explanation,
        fixes=fixes,
        example=getattr(rule, "example", ""),
        gb_id=gb_id,
        outcome=view.outcome_label(kind, gb_id, fatal),
    )


def _slug(text: str) -> str:
    words = "".join(c.lower() if c.isalnum() else " " for c in text).split()
    return "-".join(words[:8])

"""What every renderer says the same way: labels, grouping, counts and status of findings.

Renderers differ in markup only; the words ("GB0007 graph break, fatal under fullgraph"), the order
(worst site first, shortest chain first) and the numbers in the summary come from here, so the
terminal, the HTML page and the PR comment never disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from dynacheck.fixes.plan import fix_plan as plan_fixes
from dynacheck.model import PlanEntry
from dynacheck.model import (
    VIA_HIERARCHY,
    Event,
    Finding,
    Fix,
    Hop,
    Match,
    Review,
    Site,
    confidence_rank,
    severity_rank,
)

GB_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{id}.html"

OUTCOME_WORDS = {
    "graph_break": "graph break",
    "frame_skip": "frame skipped",
    "recompile": "recompile",
    "hard_error": "hard compile error",
    "trace_time": "runs at trace time",
    "skipped_when_compiled": "skipped when compiled",
    "ok": "traceable",
}

# Statuses a reader filters by; a Match's "predicted_only" is shown as "predicted".
STATUSES = ("confirmed", "predicted", "seen_only", "suppressed")


def gb_link(gb_id: str) -> str:
    """Dynamo's public page for a graph-break id ('' when there is no id)."""
    return GB_URL.format(id=gb_id.lower()) if gb_id else ""


def outcome_words(kind: str) -> str:
    return OUTCOME_WORDS.get(kind, kind.replace("_", " "))


def outcome_label(kind: str, gb_id: str = "", fatal: bool = False) -> str:
    """'GB0007 graph break, fatal under fullgraph'."""
    text = outcome_words(kind)
    if gb_id:
        text = f"{gb_id} {text}"
    if fatal:
        text += ", fatal under fullgraph"
    return text


def finding_outcome_label(finding: Finding) -> str:
    o = finding.outcome
    return outcome_label(o.kind, o.gb_id, o.fatal_under_fullgraph)


def site_label(site: Site) -> str:
    return f"{site.file}:{site.line} {site.function}"


def hop_location(hop: Hop) -> str:
    return f"{hop.file}:{hop.line}"


def hop_is_weak(hop: Hop) -> bool:
    """A hop the reader should doubt: a class-hierarchy guess or a low-confidence resolution."""
    return hop.via == VIA_HIERARCHY or hop.confidence == "low"


def hop_why(hop: Hop) -> str:
    """'via import, high' plus the note; hierarchy fallbacks say so in words."""
    if hop.via == VIA_HIERARCHY:
        text = f"via class hierarchy fallback — {hop.confidence} confidence"
    else:
        text = f"via {hop.via}, {hop.confidence} confidence"
    if hop.note:
        text += f"; {hop.note}"
    return text


def as_reason(summary: str) -> str:
    """A fix summary read after 'because': 'Not enough alone' -> 'not enough alone' (acronyms kept)."""
    if len(summary) > 1 and summary[0].isupper() and summary[1].islower():
        return summary[0].lower() + summary[1:]
    return summary


def package_of(finding: Finding) -> str:
    """The distribution that owns the hazard site (for filtering), falling back to the top module."""
    if finding.site.package:
        return finding.site.package
    return finding.site.function.split(".", 1)[0] if finding.site.function else ""


def ordered_fixes(fixes: tuple[Fix, ...]) -> list[Fix]:
    """Sound fixes first, in the analyzer's order; unsound ones (kept to say why not) after."""
    return [f for f in fixes if f.sound] + [f for f in fixes if not f.sound]


def match_index(review: Review) -> dict[str, Match]:
    return {m.fingerprint: m for m in review.matches if m.fingerprint}


def finding_status(finding: Finding, matches: dict[str, Match]) -> str:
    """confirmed | predicted | seen_only | suppressed, trace matches overriding the scan's default."""
    if finding.status == "suppressed":
        return "suppressed"
    match = matches.get(finding.fingerprint) if finding.fingerprint else None
    if match is not None:
        return "confirmed" if match.status == "confirmed" else "predicted"
    return finding.status if finding.status in STATUSES else "predicted"


def _site_key(finding: Finding) -> tuple[str, int, str]:
    return (finding.site.file, finding.site.line, finding.site.callee)


def _finding_rank(finding: Finding) -> tuple:
    return (
        -severity_rank(finding.severity),
        not finding.outcome.fatal_under_fullgraph,
        finding.status == "suppressed",
        -confidence_rank(finding.confidence),
        finding.site.file,
        finding.site.line,
    )


@dataclass
class SiteGroup:
    """All findings that end at one hazard site, shortest chain first."""

    site: Site
    findings: list[Finding] = field(default_factory=list)

    @property
    def lead(self) -> Finding:
        return self.findings[0]


def group_by_site(findings: tuple[Finding, ...] | list[Finding]) -> list[SiteGroup]:
    """Worst sites first (severity, fatal, then surest, then file:line); inside a site, shortest chain first."""
    groups: dict[tuple[str, int, str], SiteGroup] = {}
    for finding in sorted(findings, key=_finding_rank):
        groups.setdefault(_site_key(finding), SiteGroup(finding.site)).findings.append(finding)
    for group in groups.values():
        group.findings.sort(key=lambda f: (f.status == "suppressed", len(f.chain), -confidence_rank(f.confidence)))
    return list(groups.values())


def sorted_findings(findings: tuple[Finding, ...] | list[Finding]) -> list[Finding]:
    """Flat order used by lists: the site order of group_by_site, shortest chain first."""
    return [f for group in group_by_site(findings) for f in group.findings]


@dataclass
class Summary:
    """The numbers on top of every report."""

    findings: int = 0
    sites: int = 0
    by_outcome: Counter = field(default_factory=Counter)
    by_severity: Counter = field(default_factory=Counter)
    by_status: Counter = field(default_factory=Counter)
    fatal: int = 0
    suppressed: int = 0
    has_trace: bool = False


def summarize(review: Review) -> Summary:
    """Counts by outcome and severity, fatal-under-fullgraph, and confirmed/predicted/seen-only."""
    summary = Summary(has_trace=review.trace is not None)
    findings = review.scan.findings if review.scan else ()
    matches = match_index(review)
    active = [f for f in findings if f.status != "suppressed"]
    summary.findings = len(active)
    summary.suppressed = len(findings) - len(active)
    summary.sites = len({_site_key(f) for f in active})
    for finding in active:
        summary.by_outcome[finding.outcome.kind] += 1
        summary.by_severity[finding.severity] += 1
        summary.fatal += finding.outcome.fatal_under_fullgraph
        summary.by_status[finding_status(finding, matches)] += 1
    seen = seen_only(review)
    summary.by_status["seen_only"] += len(seen)
    if summary.suppressed:
        summary.by_status["suppressed"] = summary.suppressed
    return summary


def seen_only(review: Review) -> list[tuple[Match, list[Event]]]:
    """Trace events no static finding predicted, with the match that says so."""
    if review.trace is None:
        return []
    events = review.trace.events
    out = []
    for match in review.matches:
        if match.status == "seen_only":
            out.append((match, [events[i] for i in match.events if 0 <= i < len(events)]))
    return out


def matched_events(review: Review, finding: Finding) -> list[Event]:
    """The trace events that confirm a finding (empty without a trace or a match)."""
    if review.trace is None or not finding.fingerprint:
        return []
    match = match_index(review).get(finding.fingerprint)
    if match is None:
        return []
    events = review.trace.events
    return [events[i] for i in match.events if 0 <= i < len(events)]


def summary_line(summary: Summary) -> str:
    """'3 findings at 2 sites: 2 graph break, 1 frame skipped; 3 fatal under fullgraph; 1 confirmed, ...'."""
    if summary.findings == 0 and not summary.by_status.get("seen_only"):
        text = "no findings"
    else:
        parts = ", ".join(f"{n} {outcome_words(k)}" for k, n in summary.by_outcome.most_common())
        noun = "finding" if summary.findings == 1 else "findings"
        site_noun = "site" if summary.sites == 1 else "sites"
        text = f"{summary.findings} {noun} at {summary.sites} {site_noun}"
        if parts:
            text += f": {parts}"
        text += f"; {summary.fatal} fatal under fullgraph"
    if summary.has_trace:
        s = summary.by_status
        text += f"; {s['confirmed']} confirmed, {s['predicted']} predicted only, {s['seen_only']} seen only"
    if summary.suppressed:
        text += f"; {summary.suppressed} suppressed"
    return text


PlanStep = PlanEntry  # one fix and how many hazard sites it covers (dynacheck.fixes.plan)


def fix_plan(findings: tuple[Finding, ...] | list[Finding], unconditional_only: bool = True) -> list[PlanEntry]:
    """Fixes ranked by how many fatal sites they clear: where to start."""
    return list(plan_fixes(findings, unconditional_only))

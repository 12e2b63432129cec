"""What every renderer says the same way: labels, grouping, counts and status of findings.

Renderers differ in markup only; the words ("GB0007 graph break, fatal under fullgraph"), the order
(worst site first, shortest chain first) and the numbers in the summary come from here, so the
terminal, the HTML page and the PR comment never disagree.
"""

from __future__ import annotations

from dynacheck.model import deployment_given

from collections import Counter
from dataclasses import dataclass, field

from dynacheck.fixes.plan import fix_plan as plan_fixes
from dynacheck.model import (
    VIA_HIERARCHY,
    ScanResult,
    Condition,
    Event,
    Finding,
    Fix,
    Hop,
    Match,
    PlanEntry,
    Review,
    Site,
    confidence_rank,
    severity_rank,
)

from dynacheck.report.events import (  # noqa: F401  (re-exported: renderers read events through view)
    BREAK_EVENTS,
    EVENT_WORDS,
    event_chain,
    event_is_outside,
    event_severity,
    event_text,
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


def holds(finding: Finding, scan: ScanResult | None) -> bool:
    """Whether a finding happens on the scanned deployment.

    With a deployment given (`scan.deployment` non-empty), a finding with open conditions happens only
    if a flag, env var or runtime value differs from it; without one nothing was decided, so every
    finding holds (the conditions still say what it depends on).
    """
    return not (finding.conditions and scan is not None and deployment_given(scan.deployment))


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


def diff_outcome_label(finding: Finding) -> str:
    """The outcome, and for a finding that needs another flag, env value or first call: what it needs
    (a diff between releases shows both kinds; only the first counts in its exit code)."""
    label = finding_outcome_label(finding)
    if finding.conditions:
        more = f" (+{len(finding.conditions) - 1} more)" if len(finding.conditions) > 1 else ""
        label += f"; only if {condition_label(finding.conditions[0])}{more}"
    return label


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
    conditional: int = 0  # active findings that hold only if a flag/env/runtime value differs
    has_trace: bool = False
    trace_only: bool = False  # no scan: the counts are the trace's events
    trace_text: str = ""


def summarize(review: Review) -> Summary:
    """Counts by outcome and severity, fatal-under-fullgraph, and confirmed/predicted/seen-only."""
    summary = Summary(has_trace=review.trace is not None, trace_only=review.scan is None and review.trace is not None)
    if summary.trace_only:  # the counts are the events' (side effects outside compiled regions apart)
        summary.trace_text = trace_line(review)
        for event in (e for e in review.trace.events if not event_is_outside(e)):
            summary.by_outcome[event.kind] += 1
            summary.fatal += event.fatal_under_fullgraph
    findings = review.scan.findings if review.scan else ()
    matches = match_index(review)
    active = [f for f in findings if f.status != "suppressed" and holds(f, review.scan)]
    summary.suppressed = sum(f.status == "suppressed" for f in findings)
    summary.conditional = len(findings) - len(active) - summary.suppressed
    summary.findings = len(active)
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


def seen_only(review: Review, *, outside: bool = False) -> list[tuple[Match, list[Event]]]:
    """Trace events no static finding predicted, with the match that says so, worst first.

    Side effects that ran outside any compiled region are not breaks: they are left out, or with
    `outside=True` they are the only ones returned (renderers list them apart, hidden by default).
    """
    if review.trace is None:
        return []
    events = review.trace.events
    out = []
    for match in review.matches:
        if match.status == "seen_only":
            picked = [events[i] for i in match.events if 0 <= i < len(events)]
            if picked and event_is_outside(picked[0]) == outside:
                out.append((match, picked))
    out.sort(key=lambda item: -severity_rank(event_severity(item[1][0])) if item[1] else 0)
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


# problems that say what the findings mean for the deployment, shown before them in every view: the model
# does not start on it, or the release does not compile it on that launch (the findings are an enforced one's)
DEPLOYMENT_NOTES = ("does_not_start", "piecewise_off")


def deployment_notes(scan) -> list:
    """The scan's problems of a DEPLOYMENT_NOTES kind, in order."""
    return [p for p in scan.problems if p.kind in DEPLOYMENT_NOTES] if scan is not None else []


def read_problems(scan) -> list:
    """The rest: what was skipped while reading the trees (not fatal)."""
    return [p for p in scan.problems if p.kind not in DEPLOYMENT_NOTES] if scan is not None else []


def problem_text(problem) -> str:
    """`kind in file: message`, or `kind: message` for a problem of no file (a deployment's note)."""
    return f"{problem.kind} in {problem.file}: {problem.message}" if problem.file else f"{problem.kind}: {problem.message}"


def summary_line(summary: Summary) -> str:
    """'3 findings at 2 sites: 2 graph break, 1 frame skipped; 3 fatal under fullgraph; 1 confirmed, ...'."""
    if summary.trace_only:
        return summary.trace_text or "no events seen"
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
    if summary.conditional:
        text += f"; {summary.conditional} conditional"
    if summary.suppressed:
        text += f"; {summary.suppressed} suppressed"
    return text


def condition_label(condition: Condition) -> str:
    """'get_global_server_args().enable_symm_mem (sglang/srt/layers/x.py:12)'."""
    where = f" ({condition.file}:{condition.line})" if condition.file else ""
    return f"{condition.text}{where}"


def deployment_facts(deployment: dict) -> str:
    """The facts a reader checks first: 'name glm5, gpu sm120, platform cuda, quantization modelopt_fp4', and
    how the entry is called when not as a model forward ('first call', 'required arguments only')."""
    facts = [f"{k} {deployment[k]}" for k in ("name", "gpu", "platform", "quantization") if deployment.get(k)]
    facts += [label for k, label in (("first_call", "first call"), ("required_args_only", "required arguments only"))
              if deployment.get(k)]
    return ", ".join(facts)


def deployment_label(deployment: dict) -> str:
    """The deployment facts on one line: 'gpu=sm120, quantization=modelopt_fp4, ...'."""
    parts = []
    for key, value in deployment.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
            parts.append(f"{key}: {{{value}}}")
        elif isinstance(value, (list, tuple)):
            parts.append(f"{key}={' '.join(map(str, value))}")
        else:
            parts.append(f"{key}={value}")
    return "; ".join(parts)


def sites_for_plan(groups: list[SiteGroup], plan: list, n: int) -> list[SiteGroup]:
    """`n` sites to show first: the worst site under each fix of the plan, in plan order, then the rest.

    Five sites that one fix clears say less than one site for each of five fixes.
    """
    def first_fix(group: SiteGroup) -> tuple[str, str] | None:
        fix = next((f for f in group.lead.fixes if f.sound), None)
        return (fix.kind, fix.at) if fix else None

    chosen: list[SiteGroup] = []
    for step in plan:
        group = next((g for g in groups if first_fix(g) == (step.kind, step.at) and g not in chosen), None)
        if group is not None:
            chosen.append(group)
        if len(chosen) == n:
            return chosen
    chosen += [g for g in groups if g not in chosen][:n - len(chosen)]
    return chosen


PlanStep = PlanEntry  # one fix and how many hazard sites it covers (dynacheck.fixes.plan)


def fix_plan(findings: tuple[Finding, ...] | list[Finding], unconditional_only: bool = True) -> list[PlanEntry]:
    """Fixes ranked by how many fatal sites they clear: where to start."""
    return list(plan_fixes(findings, unconditional_only))


# --- observed events (trace): the words; what an event is lives in report/events.py ---------------

def event_words(event: Event) -> str:
    """'GB0007 graph break' / 'side effect' in the renderers' words, fatal noted for breaks."""
    if event.kind in OUTCOME_WORDS or event.gb_id:
        return outcome_label(event.kind, event.gb_id, event.fatal_under_fullgraph)
    return EVENT_WORDS.get(event.kind, event.kind.replace("_", " "))


def trace_line(review: Review) -> str:
    """'3 events seen: 2 graph break (2 fatal under fullgraph), 1 side effect in compiled code; 4 outside (hidden)'."""
    trace = review.trace
    if trace is None:
        return ""
    shown = [e for e in trace.events if not event_is_outside(e)]
    outside = len(trace.events) - len(shown)
    counts = Counter(EVENT_WORDS.get(e.kind, outcome_words(e.kind)) for e in shown)
    parts = ", ".join(f"{n} {word}" for word, n in counts.most_common())
    fatal = sum(e.fatal_under_fullgraph for e in shown)
    noun = "event" if len(shown) == 1 else "events"
    text = f"{len(shown)} {noun} seen in compiled code" + (f": {parts}" if parts else "")
    text += f"; {fatal} fatal under fullgraph"
    if outside:
        text += f"; {outside} side effect(s) outside compiled regions (hidden)"
    return text


def active_processes(review: Review) -> tuple[list, int]:
    """Processes that recorded something, and how many others ran without an event (compile workers, helpers)."""
    if review.trace is None:
        return [], 0
    with_events = {e.pid for e in review.trace.events} | {p for e in review.trace.events for p in e.pids}
    active = [p for p in review.trace.processes if p.pid in with_events or p.events]
    return active, len(review.trace.processes) - len(active)

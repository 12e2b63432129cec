"""The HTML report: one self-contained file a team reviews together, rendered from Jinja2 templates.

Everything is rendered server-side with autoescape on; the inline script only filters, searches and
toggles the theme, so scanned text (which may hold `</script>`) never reaches a script context.
A Content-Security-Policy forbids any network fetch. Source lines around each hop are read now,
at render time, from the scanned trees (`source.SourceReader`), at most 7 lines a hop, and each
distinct window is written once (`source.SourcePool`) and cloned into a hop when it is opened.
"""

from __future__ import annotations

from dynacheck.model import deployment_given

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from dynacheck import __version__
from dynacheck.model import Diff, Event, Finding, Frame, Hop, Review, ScanResult
from dynacheck.report import view
from dynacheck.report.source import SourcePool, SourceReader

TEMPLATES = Path(__file__).parent / "templates"
OPEN_ROWS = 2  # site rows open on load, so the first screen shows a lead chain and its fix


@dataclass
class HopView:
    function: str
    file: str
    line: int
    why: str
    weak: bool
    src: str  # id of the hop's source window in the pool, '' when there is none
    hazard: bool = False
    via: str = ""
    confidence: str = ""


@dataclass
class ItemView:
    """One row of the findings list: a static finding or a seen-only trace event."""

    id: str
    rule: str
    title: str
    severity: str
    package: str
    outcome: str
    outcome_label: str
    status: str
    confidence: str
    site: str
    callee: str
    entry: str
    hops: list[HopView]
    fatal: bool = False
    gb_id: str = ""
    gb_link: str = ""
    gb_type: str = ""
    explanation: str = ""
    hints: tuple[str, ...] = ()
    detail: str = ""
    note: str = ""
    fixes: list[Any] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    also_reached_by: int = 0
    chain_of: str = ""  # "chain 2 of 3 to this site" when several chains end at one site
    others: list[tuple[str, list[HopView]]] = field(default_factory=list)  # (entry, hops) of the other chains
    first_fix: Any = None  # the first sound fix, shown in the row without a click
    open: bool = False  # the first rows are open: the first screen shows a chain and a fix
    conditions: list[str] = field(default_factory=list)  # "only if" these differ from the scanned deployment

    @property
    def chain_line(self) -> str:
        """The lead chain on one line, `Class.method` per hop, for the row itself (no click needed)."""
        return chain_line(h.function for h in self.hops)


def chain_line(functions) -> str:
    """Qualified function names as one line, `Class.method` each, the middle elided past seven."""
    names = [".".join([p for p in f.split(".") if p != "<locals>"][-2:]) for f in functions]
    names = [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]
    if len(names) > 7:
        names = names[:3] + ["…"] + names[-3:]
    return " → ".join(names)


def render_html(review: Review | ScanResult | None, *, diff: Diff | None = None,
                title: str = "dynacheck report", source_roots: dict[str, Path] | None = None) -> str:
    """The whole report as one HTML string (no external resources).

    `source_roots` (package -> folder) is where excerpts may be read; None trusts the scan's own
    roots, which is right only for a scan made in this process (see `source.local_roots`).
    """
    if isinstance(review, ScanResult):
        review = Review(scan=review)
    review = review or Review()
    pool = SourcePool(SourceReader(review.scan, source_roots))
    items = _items(review, pool)
    outside = [_seen_item(f"o{i}", events, match.note, pool) for i, (match, events)
               in enumerate(view.seen_only(review, outside=True), 1) if events]
    active, idle = view.active_processes(review)
    scan = review.scan
    plan = (list(scan.fix_plan) or view.fix_plan(scan.findings, unconditional_only=deployment_given(scan.deployment))
            if scan is not None else [])
    context = {
        "title": title,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "review": review,
        "scan": review.scan,
        "trace": review.trace,
        "summary": view.summarize(review),
        "summary_line": view.summary_line(view.summarize(review)),
        "deployment_notes": view.deployment_notes(review.scan),
        "read_problems": view.read_problems(review.scan),
        "outcome_words": view.outcome_words,
        "items": items,
        "sources": pool.windows,
        "filters": _filters(items),
        "processes": _processes(review),
        "idle_processes": idle,
        "outside": outside,
        "plan": plan,
        "first_break": scan.first_break if scan is not None else {},
        "first_chain": chain_line(h["function"] for h in scan.first_break.get("chain", ())) if scan is not None else "",
        "deployment": view.deployment_facts(scan.deployment) if scan is not None and scan.deployment else "",
        "deployment_all": view.deployment_label(scan.deployment) if scan is not None and scan.deployment else "",
        "diff": _diff(diff) if diff is not None else None,
        "raw_diff": diff,
    }
    return _environment().get_template("report.html.j2").render(**context)


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["plural"] = _plural
    env.filters["ticks"] = _ticks
    env.filters["reason"] = view.as_reason
    return env


def _ticks(text: str) -> Markup:
    """Escape, then show `backticked` names as code (the only markup a summary may carry)."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: keep it literal
        return Markup(str(escape(text)))
    return Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('s') else 's'}"


def _items(review: Review, reader: SourcePool) -> list[ItemView]:
    """One row per hazard site (its lead chain, the other chains inside), then the events no finding predicted."""
    matches = view.match_index(review)
    items: list[ItemView] = []
    findings = review.scan.findings if review.scan else ()
    # sites that hold on the scanned deployment first; conditional ones after, marked with their conditions
    groups = view.group_by_site([f for f in findings if view.holds(f, review.scan)])
    groups += view.group_by_site([f for f in findings if not view.holds(f, review.scan)])
    for group in groups:
        lead = group.lead
        item = _finding_item(f"f{len(items) + 1}", lead, view.finding_status(lead, matches),
                             [e for f in group.findings for e in view.matched_events(review, f)], reader)
        item.others = [(f.entry, [_hop(h, reader) for h in f.chain]) for f in group.findings[1:]]
        if not view.holds(lead, review.scan):
            item.conditions = [view.condition_label(c) for c in lead.conditions]
        if len(group.findings) > 1:
            item.chain_of = f"{len(group.findings)} chains to this site"
        items.append(item)
    for match, events in view.seen_only(review):
        if events:
            items.append(_seen_item(f"f{len(items) + 1}", events, match.note, reader))
    for item in items[:OPEN_ROWS]:
        item.open = item.status != "suppressed" and not item.conditions
    return items


def _finding_item(item_id: str, finding: Finding, status: str, events: list[Event],
                  reader: SourcePool) -> ItemView:
    o = finding.outcome
    site = finding.site
    hops = [_hop(h, reader) for h in finding.chain]
    if hops and finding.chain[-1].file == site.file and finding.chain[-1].line == site.line:
        hops[-1].hazard = True
    else:
        hops.append(HopView(site.callee, site.file, site.line, f"calls {site.callee}", False,
                            reader.ref(site.file, site.line, site.package, site.code), hazard=True))
    return ItemView(
        id=item_id, rule=finding.rule, title=finding.title, severity=finding.severity,
        package=view.package_of(finding), outcome=o.kind, outcome_label=view.finding_outcome_label(finding),
        status=status, confidence=finding.confidence, site=view.site_label(site), callee=site.callee,
        entry=finding.entry, hops=hops, fatal=o.fatal_under_fullgraph, gb_id=o.gb_id, gb_link=view.gb_link(o.gb_id),
        gb_type=o.gb_type, explanation=o.explanation, hints=o.hints, detail=o.detail, note=finding.note,
        fixes=view.ordered_fixes(finding.fixes), events=events, also_reached_by=finding.also_reached_by,
        first_fix=next((f for f in finding.fixes if f.sound), None),
    )


def _hop(hop: Hop, reader: SourcePool) -> HopView:
    return HopView(hop.function, hop.file, hop.line, view.hop_why(hop), view.hop_is_weak(hop),
                   reader.ref(hop.file, hop.line, hop.package, hop.code), via=hop.via, confidence=hop.confidence)


def _seen_item(item_id: str, events: list[Event], note: str, reader: SourcePool) -> ItemView:
    """An event no finding predicted: its user chain (library and resume frames cut), Dynamo's words, the fix."""
    event = events[0]
    hops = [_frame(f, reader) for f in view.event_chain(event)]
    if hops:
        hops[-1].hazard = True
    site = event.site
    site_label = f"{site.file}:{site.line} {site.function}" if site else "(no user frame)"
    return ItemView(
        id=item_id, rule=event.gb_id or event.kind, title=f"Seen at run time: {view.event_text(event)}",
        severity=view.event_severity(event),
        package=(reader.package_of(site.file) or _top_folder(site.file)) if site else "",
        outcome=event.kind, outcome_label=view.event_words(event), status="seen_only",
        confidence="high", site=site_label, callee=site.function if site else "", entry=event.compiled_frame,
        hops=hops, fatal=event.fatal_under_fullgraph, gb_id=event.gb_id, gb_link=view.gb_link(event.gb_id),
        gb_type=event.gb_type, explanation=event.explanation or event.reason, hints=event.hints,
        detail=event.detail, note=note, events=events, fixes=view.ordered_fixes(event.fixes),
        first_fix=next((f for f in event.fixes if f.sound), None),
    )


def _frame(frame: Frame, reader: SourcePool) -> HopView:
    return HopView(frame.function, frame.file, frame.line, "seen in the user stack", False,
                   reader.ref(frame.file, frame.line, "", frame.code))


def _top_folder(file: str) -> str:
    parts = Path(file).parts
    return parts[0] if len(parts) > 1 else ""


def _filters(items: list[ItemView]) -> dict[str, list[tuple[str, str]]]:
    """Choices for each filter: (value, label with count)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for key in ("package", "rule", "outcome", "status"):
        counts: dict[str, int] = defaultdict(int)
        for item in items:
            counts[getattr(item, key)] += 1
        label = view.outcome_words if key == "outcome" else (lambda s: s.replace("_", " "))
        out[key] = [(value, f"{label(value) or '(none)'} ({n})") for value, n in sorted(counts.items())]
    return out


def _processes(review: Review) -> list[dict[str, Any]]:
    trace = review.trace
    if trace is None:
        return []
    by_pid: dict[int, list[Event]] = defaultdict(list)
    for event in trace.events:
        by_pid[event.pid].append(event)
    rows = [{"info": p, "events": by_pid.pop(p.pid, [])} for p in trace.processes]
    rows = [r for r in rows if r["events"] or r["info"].events]  # the idle ones are counted, not listed
    for pid, events in sorted(by_pid.items()):  # events from a process with no start record
        rows.append({"info": None, "pid": pid, "events": events})
    return rows


def _diff(diff: Diff) -> dict[str, Any]:
    return {
        "before": diff.before, "after": diff.after, "notes": diff.notes,
        "hops": lambda f: [f"{view.hop_location(h)} {h.function}" for h in f.chain],
        "groups": [(name, view.sorted_findings(getattr(diff, name)))
                   for name in ("added", "changed", "removed", "suppressed")],
        "unchanged": len(diff.unchanged),
        "label": view.diff_outcome_label,
        "site": view.site_label,
    }

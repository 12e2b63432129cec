"""The terminal view: what an engineer reads before flipping `--enable-piecewise-cuda-graph`.

Grouped by hazard site, worst first; under each site the shortest chain, hop by hop, with why each
hop was believed (weak hops marked), then the fixes: sound ones first, unsound ones as "not: …".
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from dynacheck.model import Diff, Finding, Review, ScanResult, TraceResult
from dynacheck.report import view

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
STATUS_STYLE = {"confirmed": "bold red", "predicted": "yellow", "seen_only": "magenta", "suppressed": "dim"}


def render_console(review: Review | ScanResult, console: Console | None = None, *, verbose: bool = False) -> None:
    """Print a review (or a bare scan) to the terminal."""
    if isinstance(review, ScanResult):
        review = Review(scan=review)
    console = console or Console()
    scan = review.scan
    if scan is not None:
        _header(console, scan)
    if review.trace is not None:
        _trace_header(console, review.trace)
    summary = view.summarize(review)
    console.print(Text(view.summary_line(summary), style="bold"))
    if scan is not None:
        _plan(console, scan)
    matches = view.match_index(review)
    if scan is not None:
        for group in view.group_by_site(scan.findings):
            if group.lead.status == "suppressed" and not verbose:
                continue
            console.print()
            _site(console, group, matches, verbose)
    _seen_only(console, review)
    if scan is not None:
        _problems_and_stats(console, scan, verbose)


def _plan(console: Console, scan: ScanResult, top: int = 5) -> None:
    """Where to start: the fixes that clear the most fatal sites."""
    steps = view.fix_plan(scan.findings)
    if not steps:
        return
    console.print(Text("fix plan (first sound fix of each finding, most fatal sites first):", style="bold"))
    for step in steps[:top]:
        line = Text(f"  {step.kind} at ", style="")
        line.append(step.at, style="bold")
        line.append(f"  {step.fatal_sites} fatal of {step.sites} site(s)", style="dim")
        console.print(line)
    if len(steps) > top:
        console.print(Text(f"  … {len(steps) - top} more", style="dim"))


def render_diff_console(diff: Diff, console: Console | None = None, *, verbose: bool = False) -> None:
    """Print what changed between two dependency sets (or a baseline and a scan)."""
    console = console or Console()
    console.print(f"[bold]before[/] {escape(', '.join(diff.before))}")
    console.print(f"[bold]after [/] {escape(', '.join(diff.after))}")
    console.print(
        f"[bold]{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed, "
        f"{len(diff.unchanged)} unchanged, {len(diff.suppressed)} suppressed[/]"
    )
    for title, style, findings in (("added", "red", diff.added), ("changed", "yellow", diff.changed),
                                   ("removed", "green", diff.removed)):
        for finding in view.sorted_findings(findings):
            line = Text(f"{title:8} ", style=style)
            line.append(f"{finding.rule} ", style="bold")
            line.append(f"{view.site_label(finding.site)} -> {finding.site.callee}  ")
            line.append(view.finding_outcome_label(finding), style=SEVERITY_STYLE.get(finding.severity, ""))
            console.print(line)
            if verbose:
                _chain(console, finding)


def _header(console: Console, scan: ScanResult) -> None:
    targets = ", ".join(f"{t.name} {t.version}".strip() for t in scan.targets) or "(no targets)"
    console.print(f"[bold]targets[/] {escape(targets)}")
    for entry in scan.entries:
        console.print(f"[bold]entry  [/] {escape(entry)}")
    if scan.torch_version:
        console.print(f"[dim]GB ids from torch {escape(scan.torch_version)}[/]")


def _trace_header(console: Console, trace: TraceResult) -> None:
    command = " ".join(trace.command)
    processes = len(trace.processes)
    ended = "no exit code: dynacheck trace was stopped" if trace.exit_code < 0 else f"exit {trace.exit_code}"
    console.print(f"[bold]trace  [/] {escape(command)}  [dim]({processes} process{'' if processes == 1 else 'es'}, "
                  f"{len(trace.events)} event{'' if len(trace.events) == 1 else 's'}, {ended})[/]")


def _site(console: Console, group: view.SiteGroup, matches: dict, verbose: bool) -> None:
    lead = group.lead
    status = view.finding_status(lead, matches)
    head = Text()
    head.append(view.site_label(group.site), style="bold")
    head.append("  calls ")
    head.append(group.site.callee, style="bold magenta")
    console.print(head)
    rule = Text("  ")
    rule.append(f"{lead.rule} ", style="bold")
    rule.append(f"{lead.title}  ")
    rule.append(f"[{lead.severity}] ", style=SEVERITY_STYLE.get(lead.severity, ""))
    rule.append(view.finding_outcome_label(lead), style="red" if lead.outcome.fatal_under_fullgraph else "yellow")
    rule.append(f"  {status}", style=STATUS_STYLE.get(status, ""))
    console.print(rule)
    if lead.outcome.detail:
        console.print(Text(f"  {lead.outcome.detail}", style="dim"))
    if lead.note:
        console.print(Text(f"  note: {lead.note}", style="dim"))
    shown = group.findings if verbose else group.findings[:1]
    for finding in shown:
        if len(group.findings) > 1 or finding.entry != lead.entry:
            console.print(Text(f"  chain from {finding.entry} ({len(finding.chain)} hops)", style="dim"))
        _chain(console, finding)
    hidden = len(group.findings) - len(shown) + lead.also_reached_by
    if hidden > 0:
        console.print(Text(f"  … reached by {hidden} more chain(s)" + ("" if verbose else "; --verbose shows them"),
                           style="dim"))
    _fixes(console, lead)


def _chain(console: Console, finding: Finding) -> None:
    for depth, hop in enumerate(finding.chain):
        line = Text("    " + "  " * min(depth, 1))
        line.append(f"{view.hop_location(hop)} ", style="cyan")
        line.append(hop.function, style="bold" if depth == 0 else "")
        weak = view.hop_is_weak(hop)
        line.append(f"  ({view.hop_why(hop)})", style="bold yellow" if weak else "dim")
        if weak:
            line.append("  ?", style="bold yellow")
        console.print(line)
    site = finding.site
    tail = Text("      ")
    tail.append(f"{site.file}:{site.line} ", style="cyan")
    tail.append(f"{site.callee}", style="bold magenta")
    if site.code:
        tail.append(f"   {site.code.strip()}", style="dim")
    console.print(tail)


def _fixes(console: Console, finding: Finding) -> None:
    for fix in view.ordered_fixes(finding.fixes):
        line = Text("  ")
        if fix.sound:
            line.append("fix: ", style="bold green")
            line.append(f"{fix.kind} at {fix.at}: ", style="green")
            line.append(fix.summary)
        else:
            line.append("not: ", style="bold red")
            line.append(f"{fix.kind} at {fix.at} because ", style="red")
            line.append(view.as_reason(fix.summary))
        console.print(line)


def _seen_only(console: Console, review: Review) -> None:
    for match, events in view.seen_only(review):
        for event in events[:1]:
            console.print()
            where = f"{event.site.file}:{event.site.line} {event.site.function}" if event.site else "(no user frame)"
            line = Text("seen only  ", style="bold magenta")
            line.append(where, style="bold")
            line.append(f"  {view.outcome_label(event.kind, event.gb_id, event.fatal_under_fullgraph)}")
            if event.ranks:
                line.append(f"  (ranks {', '.join(map(str, event.ranks))})", style="dim")
            console.print(line)
            detail = event.reason or event.gb_type
            if detail:
                console.print(Text(f"  {detail}", style="dim"))
            if match.note:
                console.print(Text(f"  {match.note}", style="dim"))


def _problems_and_stats(console: Console, scan: ScanResult, verbose: bool) -> None:
    if scan.problems:
        console.print()
        console.print(f"[bold]{len(scan.problems)} problem(s)[/] (skipped, not fatal):")
        limit = None if verbose else 10
        for problem in scan.problems[:limit]:
            console.print(Text(f"  {problem.kind}: {problem.file}: {problem.message}", style="yellow"))
        if limit and len(scan.problems) > limit:
            console.print(Text(f"  … {len(scan.problems) - limit} more (--verbose)", style="dim"))
    s = scan.stats
    console.print()
    console.print(Text(f"parsed {s.files_parsed} of {s.files_in_trees} files in the trees "
                       f"({s.cache_hits} from cache), {s.functions_visited} functions visited, "
                       f"{s.seconds:.2f} s", style="dim"))

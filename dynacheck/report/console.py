"""The terminal view: what an engineer reads before flipping `--enable-piecewise-cuda-graph`.

Grouped by hazard site, worst first; under each site the shortest chain, hop by hop, with why each
hop was believed (weak hops marked), then the fixes: sound ones first, unsound ones as "not: …".
"""

from __future__ import annotations

from dynacheck.model import deployment_given

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from dynacheck.model import Diff, Event, Finding, Fix, Review, ScanResult, TraceResult
from dynacheck.report import view

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
STATUS_STYLE = {"confirmed": "bold red", "predicted": "yellow", "seen_only": "magenta", "suppressed": "dim"}


SITES_SHOWN = 5  # site blocks printed without -v; the fix plan already covers the rest


def render_console(review: Review | ScanResult, console: Console | None = None, *, verbose: bool = False,
                   show_conditional: bool = False, exit_reason: str = "") -> None:
    """Print a review (or a bare scan) as a summary: deployment, counts, fix plan, one block per site.

    Only findings that hold on the scanned deployment (unconditional) get site blocks; conditional ones
    are counted (listed with `show_conditional`), suppressed ones listed with `verbose`. The report ends
    with the counts again and, when given, why the exit code is what it is: the top scrolls away.
    """
    if isinstance(review, ScanResult):
        review = Review(scan=review)
    console = console or Console()
    scan = review.scan
    if scan is not None:
        _header(console, scan)
        _does_not_start(console, scan)
    if review.trace is not None:
        _trace_header(console, review.trace)
    summary = view.summarize(review)
    console.print(Text(view.summary_line(summary), style="bold"))
    if scan is not None:
        _plan(console, scan)
    matches = view.match_index(review)
    if scan is not None:
        _sites(console, scan, matches, verbose)
        _conditional(console, scan, matches, show_conditional)
    _seen_only(console, review, verbose)
    if scan is not None:
        _problems_and_stats(console, scan, verbose)
    if (scan is not None and scan.findings) or review.trace is not None:
        console.print()
        console.print(Text(view.summary_line(summary), style="bold"))
    if exit_reason:
        console.print(Text(exit_reason, style="bold red" if exit_reason.startswith("exit 1") else "bold green"),
                      soft_wrap=True)  # one line, however narrow: scripts and readers look for it last


def _sites(console: Console, scan: ScanResult, matches: dict, verbose: bool) -> None:
    """One block per site that holds on the deployment, worst first; suppressed ones only with -v."""
    groups = [g for g in view.group_by_site([f for f in scan.findings if view.holds(f, scan)])
              if verbose or g.lead.status != "suppressed"]
    plan = list(scan.fix_plan) or view.fix_plan(scan.findings, unconditional_only=deployment_given(scan.deployment))
    shown = groups if verbose else view.sites_for_plan(groups, plan, SITES_SHOWN)
    for group in shown:
        console.print()
        _site(console, group, matches, verbose)
    if len(groups) > len(shown):
        console.print()
        console.print(Text(f"… {len(groups) - len(shown)} more site(s) (above: the worst site of each fix in the "
                           "plan); "
                           "--verbose shows every site and chain (--format html for a browsable review)",
                           style="dim"))
    suppressed = sum(1 for g in view.group_by_site(scan.findings) if g.lead.status == "suppressed")
    if suppressed and not verbose:
        console.print(Text(f"{suppressed} suppressed site(s) not shown; --verbose lists them with the reasons",
                           style="dim"))


def _conditional(console: Console, scan: ScanResult, matches: dict, show: bool) -> None:
    """Findings that happen only if a flag, env var or runtime value differs: a count, or the list."""
    findings = [f for f in scan.findings if not view.holds(f, scan) and f.status != "suppressed"]
    if not findings:
        return
    groups = view.group_by_site(findings)
    console.print()
    console.print(Text(f"{len(findings)} conditional finding(s) at {len(groups)} site(s): they happen only if a "
                       "flag, env var or runtime value differs from the scanned deployment"
                       + ("" if show else "; --show-conditional lists them"), style="bold"))
    if not show:
        return
    for group in groups:
        console.print()
        _site(console, group, matches, verbose=False)
        conditions = "; ".join(view.condition_label(c) for c in group.lead.conditions)
        console.print(_indented(Text(f"only if: {conditions}", style="yellow"), 2))


def _plan(console: Console, scan: ScanResult, top: int = 5) -> None:
    """Where to start: the fixes that clear the most fatal sites."""
    steps = list(scan.fix_plan) or view.fix_plan(scan.findings, unconditional_only=deployment_given(scan.deployment))
    if not steps:
        return
    console.print(Text("fix plan (the first sound fix of each site that holds on this deployment, most fatal "
                       "sites first):", style="bold"))
    for step in steps[:top]:
        line = Text(f"{step.kind} at ", style="")
        line.append(step.at, style="bold")
        line.append(f"  {step.fatal_sites} fatal of {step.sites} site(s)", style="dim")
        console.print(_indented(line, 2))
    if len(steps) > top:
        console.print(Text(f"  … {len(steps) - top} more", style="dim"))
    first = scan.first_break
    if first:
        line = Text("Dynamo stops first at ", style="bold")
        line.append(f"{first['file']}:{first['line']} {first['callee']}", style="bold red")
        line.append(f"  ({first['rule']} {first['gb_id']}, in {first['function']}; trace order on chains that hold "
                    "on this deployment)", style="dim")
        console.print(_indented(line, 0))


def _indented(text: Text, indent: int) -> Padding:
    """A line that keeps its indentation when a narrow terminal wraps it."""
    return Padding(text, (0, 0, 0, indent))


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
    if scan.deployment:
        d = scan.deployment
        console.print(_indented(Text.assemble(("deploy ", "bold"), view.deployment_facts(d)), 0))
        if d.get("server_args"):
            console.print(_indented(Text(str(d["server_args"]), style="dim"), 7))
    if scan.torch_version:
        console.print(f"[dim]GB ids from torch {escape(scan.torch_version)}[/]")


def _trace_header(console: Console, trace: TraceResult) -> None:
    command = " ".join(trace.command)
    ended = "no exit code: dynacheck trace was stopped" if trace.exit_code < 0 else f"exit {trace.exit_code}"
    active, idle = view.active_processes(Review(trace=trace))
    processes = f"{len(active)} process{'' if len(active) == 1 else 'es'} with events"
    if idle:
        processes += f", {idle} more without (compile workers, helpers)"
    console.print(f"[bold]trace  [/] {escape(command)}  [dim]({processes}, "
                  f"{len(trace.events)} event{'' if len(trace.events) == 1 else 's'}, {ended})[/]")


def _site(console: Console, group: view.SiteGroup, matches: dict, verbose: bool) -> None:
    lead = group.lead
    status = view.finding_status(lead, matches)
    head = Text()
    head.append(view.site_label(group.site), style="bold")
    head.append("  calls ")
    head.append(group.site.callee, style="bold magenta")
    console.print(head)
    rule = Text()
    rule.append(f"{lead.rule} ", style="bold")
    rule.append(f"{lead.title}  ")
    rule.append(f"[{lead.severity}] ", style=SEVERITY_STYLE.get(lead.severity, ""))
    rule.append(view.finding_outcome_label(lead), style="red" if lead.outcome.fatal_under_fullgraph else "yellow")
    rule.append(f"  {status}", style=STATUS_STYLE.get(status, ""))
    console.print(_indented(rule, 2))
    if lead.outcome.detail:
        console.print(_indented(Text(lead.outcome.detail, style="dim"), 2))
    if lead.note:
        console.print(_indented(Text(f"note: {lead.note}", style="dim"), 2))
    shown = group.findings if verbose else group.findings[:1]
    for finding in shown:
        if len(group.findings) > 1 or finding.entry != lead.entry:
            console.print(_indented(Text(f"chain from {finding.entry} ({len(finding.chain)} hops)", style="dim"), 2))
        _chain(console, finding)
    hidden = len(group.findings) - len(shown) + lead.also_reached_by
    if hidden > 0:
        console.print(_indented(Text(f"… reached by {hidden} more chain(s)"
                                     + ("" if verbose else "; --verbose shows them"), style="dim"), 2))
    _fixes(console, lead.fixes, verbose)


def _chain(console: Console, finding: Finding) -> None:
    for depth, hop in enumerate(finding.chain):
        line = Text()
        line.append(f"{view.hop_location(hop)} ", style="cyan")
        line.append(hop.function, style="bold" if depth == 0 else "")
        weak = view.hop_is_weak(hop)
        line.append(f"  ({view.hop_why(hop)})", style="bold yellow" if weak else "dim")
        if weak:
            line.append("  ?", style="bold yellow")
        console.print(_indented(line, 4 + 2 * min(depth, 1)))
    site = finding.site
    tail = Text()
    tail.append(f"{site.file}:{site.line} ", style="cyan")
    tail.append(f"{site.callee}", style="bold magenta")
    if site.code:
        tail.append(f"   {site.code.strip()}", style="dim")
    console.print(_indented(tail, 6))


def _fixes(console: Console, all_fixes: tuple[Fix, ...], verbose: bool = True) -> None:
    """The first sound fix; with -v every fix, and the ones users ask for that would not work, with why not."""
    fixes = view.ordered_fixes(all_fixes)
    shown = fixes if verbose else [f for f in fixes if f.sound][:1] or fixes[:1]
    for fix in shown:
        line = Text()
        if fix.sound:
            line.append("fix: ", style="bold green")
            line.append(f"{fix.kind} at {fix.at}: ", style="green")
            line.append(fix.summary)
        else:
            line.append("not: ", style="bold red")
            line.append(f"{fix.kind} at {fix.at} because ", style="red")
            line.append(view.as_reason(fix.summary))
        console.print(_indented(line, 2))
    rest = [f for f in fixes if f not in shown]
    if rest:
        unsound = [f.kind for f in rest if not f.sound]
        words = f"… {len(rest) - len(unsound)} more fix(es)" if len(rest) > len(unsound) else "…"
        if unsound:
            words += f"{',' if len(rest) > len(unsound) else ''} why not {', '.join(dict.fromkeys(unsound))}"
        console.print(_indented(Text(f"{words}: --verbose", style="dim"), 2))


def _seen_only(console: Console, review: Review, verbose: bool = False) -> None:
    """Events the scan did not predict, worst first: where, what (Dynamo's words), the user chain, the fix.

    Dynamo's internal reprs (`detail`) wait for -v; side effects outside compiled regions are listed
    apart, and only with -v: they are not breaks.
    """
    for match, events in view.seen_only(review):
        _event(console, events[0], match.note, verbose)
    outside = view.seen_only(review, outside=True)
    if outside and verbose:
        console.print()
        console.print(Text(f"{len(outside)} side effect(s) outside compiled regions (not breaks; "
                           "JIT builds in eager code, imports, compile workers):", style="bold"))
        for _, events in outside:
            event = events[0]
            where = f"{event.site.file}:{event.site.line} {event.site.function}" if event.site else "(no user frame)"
            console.print(_indented(Text(f"{where}  {view.event_text(event)}", style="dim"), 2))
    elif outside:
        console.print()
        console.print(Text(f"{len(outside)} side effect(s) outside compiled regions hidden; --verbose lists them",
                           style="dim"))


def _event(console: Console, event: Event, note: str, verbose: bool) -> None:
    console.print()
    severity = view.event_severity(event)
    where = f"{event.site.file}:{event.site.line} {event.site.function}" if event.site else "(no user frame)"
    line = Text("seen only  ", style="bold magenta")
    line.append(where, style="bold")
    line.append(f"  [{severity}] ", style=SEVERITY_STYLE.get(severity, ""))
    line.append(view.event_words(event))
    if event.ranks:
        line.append(f"  (ranks {', '.join(map(str, event.ranks))})", style="dim")
    console.print(line)
    console.print(_indented(Text(view.event_text(event), style="dim"), 2))
    if event.detail and verbose:
        console.print(_indented(Text(f"dynamo: {event.detail}", style="dim"), 2))
    chain = view.event_chain(event)
    for depth, frame in enumerate(chain if len(chain) > 1 else ()):
        hop = Text()
        hop.append(f"{frame.file}:{frame.line} ", style="cyan")
        hop.append(frame.function, style="bold" if depth == 0 else "")
        console.print(_indented(hop, 4 + 2 * min(depth, 1)))
    if note:
        console.print(_indented(Text(note, style="dim"), 2))
    if event.fixes:
        _fixes(console, event.fixes, verbose)


def _does_not_start(console: Console, scan: ScanResult) -> None:
    """Before anything else: the deployment's model class cannot be built on it (static/startup.py), or the
    release does not compile it on this launch (deploy/piecewise_off.py)."""
    for problem in view.deployment_notes(scan):
        console.print(Text(problem.message, style="bold red" if problem.kind == "does_not_start" else "bold yellow"))


def _problems_and_stats(console: Console, scan: ScanResult, verbose: bool) -> None:
    problems = view.read_problems(scan)  # the deployment's notes are said first (_does_not_start)
    if problems:
        console.print()
        console.print(f"[bold]{len(problems)} problem(s)[/] (skipped, not fatal):")
        limit = None if verbose else 10
        for problem in problems[:limit]:
            console.print(Text(f"  {view.problem_text(problem)}", style="yellow"))
        if limit and len(problems) > limit:
            console.print(Text(f"  … {len(problems) - limit} more (--verbose)", style="dim"))
    s = scan.stats
    console.print()
    console.print(Text(f"parsed {s.files_parsed} of {s.files_in_trees} files in the trees "
                       f"({s.cache_hits} from cache), {s.functions_visited} functions visited, "
                       f"{s.seconds:.2f} s", style="dim"))

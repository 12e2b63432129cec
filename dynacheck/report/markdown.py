"""A short Markdown summary for a pull-request comment: counts, one row per hazard site, fixes.

Long chains would drown a comment; the table names the site, the outcome and the first fix, and
each chain sits folded in a `<details>` block. Everything from scanned code is escaped.
"""

from __future__ import annotations

import html

from dynacheck.model import Diff, Finding, Review, ScanResult
from dynacheck.report import view

MAX_ROWS = 25
MAX_DIFF_ROWS = 200  # a dependency bump's diff is reviewed whole


def render_markdown(obj: Review | ScanResult | Diff) -> str:
    if isinstance(obj, ScanResult):
        obj = Review(scan=obj)
    if isinstance(obj, Diff):
        return _diff(obj)
    return _review(obj)


def _review(review: Review) -> str:
    scan = review.scan
    out = ["## dynacheck: Dynamo hazards", ""]
    if scan is not None:
        targets = ", ".join(f"`{_code(t.name)} {_code(t.version)}`" for t in scan.targets)
        out.append(f"**Targets:** {targets or '(none)'}  ")
        out.append(f"**Entries:** {', '.join(f'`{_code(e)}`' for e in scan.entries) or '(none)'}")
        out.append("")
    out.append(f"**{_text(view.summary_line(view.summarize(review)))}**")
    out.append("")
    notes = view.deployment_notes(scan)
    out += [f"> **{'Does not start' if p.kind == 'does_not_start' else 'Not compiled'}** {_text(p.message)}"
            for p in notes] + ([""] if notes else [])
    findings = scan.findings if scan else ()
    holding = [f for f in findings if view.holds(f, scan)]
    groups = [g for g in view.group_by_site(holding) if g.lead.status != "suppressed"]
    conditional = view.group_by_site([f for f in findings if not view.holds(f, scan) and f.status != "suppressed"])
    matches = view.match_index(review)
    if groups:
        out += ["| | Rule | Site | Calls | Dynamo | Status | Fix |", "|---|---|---|---|---|---|---|"]
        for group in groups[:MAX_ROWS]:
            out.append(_row(group.lead, view.finding_status(group.lead, matches)))
        if len(groups) > MAX_ROWS:
            out.append(f"\n…and {len(groups) - MAX_ROWS} more sites (see the HTML or SARIF report).")
        out.append("")
        for group in groups[:MAX_ROWS]:  # every row shown gets its chain, folded
            out += _chain_block(group.lead)
    if conditional:
        out.append(f"**{len(conditional)} more site(s) only under other flags or env** (not counted above):")
        for group in conditional[:MAX_ROWS]:
            lead = group.lead
            only = "; ".join(view.condition_label(c) for c in lead.conditions)
            out.append(f"- `{_code(lead.site.file)}:{lead.site.line}` `{_code(lead.site.callee)}`: "
                       f"{_text(view.finding_outcome_label(lead))}, only if `{_code(only)}`")
        out.append("")
    seen = view.seen_only(review)
    if seen:
        out.append("**Seen at run time, not predicted by the scan:**")
        for _, events in seen:
            if events and events[0].site is not None:
                e = events[0]
                line = (f"- `{_code(e.site.file)}:{e.site.line}` `{_code(e.site.function)}`: "
                        f"{_text(view.event_words(e))} ({view.event_severity(e)})")
                chain = view.event_chain(e)
                if len(chain) > 1:
                    line += " via " + " → ".join(f"`{_code(f.function)}`" for f in chain)
                fix = next((f for f in e.fixes if f.sound), None)
                if fix is not None:
                    line += f"; fix: {_text(fix.kind)} at `{_code(fix.at)}`"
                out.append(line)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _diff(diff: Diff) -> str:
    out = ["## dynacheck: hazard diff", "",
           f"`{_code(', '.join(diff.before))}` → `{_code(', '.join(diff.after))}`", "",
           f"**{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed**, "
           f"{len(diff.unchanged)} unchanged, {len(diff.suppressed)} suppressed", ""]
    out += [f"> **Note** {_text(note)}" for note in diff.notes] + ([""] if diff.notes else [])
    # one row per hazard site and change: the other chains to the same site are counted, not repeated
    rows = [("🆕 added", g) for g in view.group_by_site(diff.added)]
    rows += [("✏️ changed", g) for g in view.group_by_site(diff.changed)]
    rows += [("✅ removed", g) for g in view.group_by_site(diff.removed)]
    if rows:
        out += ["| | Rule | Site | Calls | Dynamo | Fix | Chains |", "|---|---|---|---|---|---|---|"]
        for change, group in rows[:MAX_DIFF_ROWS]:
            out.append(f"| {change} | " + _cells(group.lead, with_status=False, diff=True) + f" {len(group.findings)} |")
        if len(rows) > MAX_DIFF_ROWS:
            out.append(f"\n…and {len(rows) - MAX_DIFF_ROWS} more sites (see the JSON or HTML diff).")
    return "\n".join(out).rstrip() + "\n"


def _row(finding: Finding, status: str) -> str:
    mark = {"error": "🔴", "warning": "🟠", "info": "🔵"}.get(finding.severity, "")
    return f"| {mark} | " + _cells(finding, status=status)


def _cells(finding: Finding, *, status: str = "", with_status: bool = True, diff: bool = False) -> str:
    fixes = [f for f in view.ordered_fixes(finding.fixes) if f.sound]
    fix = f"{_text(fixes[0].kind)} at `{_code(fixes[0].at)}`" if fixes else "—"
    cells = [
        f"{finding.rule}",
        f"`{_code(finding.site.file)}:{finding.site.line}` `{_code(finding.site.function)}`",
        f"`{_code(finding.site.callee)}`",
        _text(view.diff_outcome_label(finding) if diff else view.finding_outcome_label(finding)),
    ]
    if with_status:
        cells.append(status.replace("_", " "))
    cells.append(fix)
    return " | ".join(cells) + " |"


def _chain_block(finding: Finding) -> list[str]:
    lines = [f"<details><summary>{finding.rule} chain to <code>{_html(finding.site.callee)}</code> "
             f"({_hops(len(finding.chain))})</summary>", "", "<pre>"]
    for hop in finding.chain:
        weak = "  ⚠" if view.hop_is_weak(hop) else ""
        lines.append(_html(f"{view.hop_location(hop)} {hop.function}  ({view.hop_why(hop)}){weak}"))
    lines.append(_html(f"{finding.site.file}:{finding.site.line} → {finding.site.callee}"))
    lines += ["</pre>", ""]
    for fix in view.ordered_fixes(finding.fixes):
        prefix = "**Fix:**" if fix.sound else "**Not:**"
        why = ":" if fix.sound else " because"
        summary = fix.summary if fix.sound else view.as_reason(fix.summary)
        lines.append(f"{prefix} {_text(fix.kind)} at `{_code(fix.at)}`{why} {_text(summary)}")
        lines.append("")
    lines += ["</details>", ""]
    return lines


def _hops(n: int) -> str:
    return "1 hop" if n == 1 else f"{n} hops"


def _html(text: str) -> str:
    return html.escape(text, quote=False)


def _code(text: str) -> str:
    """Inside backticks only a backtick or a pipe can break out."""
    return text.replace("`", "'").replace("|", "\\|").replace("\n", " ")


def _text(text: str) -> str:
    """Plain table text: no HTML, no pipes, no newlines."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")

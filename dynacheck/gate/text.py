"""The gate's own small text and markdown views of a Diff, used when `dynacheck.report` is absent.

Deliberately plain: one line per finding, the chain on the next; the rich views live in
`dynacheck/report/`. Markdown is shaped for a pull-request comment.
"""

from __future__ import annotations

import json

from dynacheck.model import Diff, Finding

_MAX_CHAIN = 8
_MAX_UNCHANGED = 10  # a real stack has hundreds of known findings; the count says enough


def render_json(diff: Diff) -> str:
    return json.dumps(diff.to_dict(), indent=2, sort_keys=True) + "\n"


def render_terminal(diff: Diff, *, title: str = "dynacheck", show_unchanged: bool = True) -> str:
    lines = [f"{title}: {summary(diff)}"]
    lines.append(f"  before: {', '.join(diff.before) or '-'}")
    lines.append(f"  after:  {', '.join(diff.after) or '-'}")
    lines += [f"  note: {note}" for note in getattr(diff, "notes", ())]
    sections = [
        ("ADDED", diff.added),
        ("CHANGED", diff.changed),
        ("REMOVED", diff.removed),
        ("SUPPRESSED", diff.suppressed),
    ]
    if show_unchanged:
        sections.append(("UNCHANGED", diff.unchanged[:_MAX_UNCHANGED]))
    for label, findings in sections:
        for finding in findings:
            lines.append(f"{label:<10} {one_line(finding)}")
            if label in ("ADDED", "CHANGED", "REMOVED") and finding.chain:
                lines.append(f"{'':<10}   via {chain_text(finding)}")
            if finding.conditions:
                lines.append(f"{'':<10}   only if: {finding.conditions[0].text}")
            if label in ("SUPPRESSED", "CHANGED") and finding.note:
                lines.append(f"{'':<10}   {'reason' if label == 'SUPPRESSED' else 'note'}: {finding.note}")
    hidden = len(diff.unchanged) - _MAX_UNCHANGED
    if show_unchanged and hidden > 0:
        lines.append(f"{'UNCHANGED':<10} ... and {hidden} more (all listed with --format json)")
    return "\n".join(lines) + "\n"


def render_markdown(diff: Diff, *, title: str = "dynacheck") -> str:
    lines = [f"### {title}: {summary(diff)}", ""]
    lines.append(f"**Before:** {_codes(diff.before)}  ")
    lines.append(f"**After:** {_codes(diff.after)}")
    lines.append("")
    lines += [f"> **Note** {note}" for note in getattr(diff, "notes", ())] + ([""] if getattr(diff, "notes", ()) else [])
    rows = [("added", f) for f in diff.added] + [("changed", f) for f in diff.changed]
    rows += [("removed", f) for f in diff.removed] + [("suppressed", f) for f in diff.suppressed]
    if not rows:
        lines.append("No Dynamo hazards were added or removed on the compiled path.")
        return "\n".join(lines) + "\n"
    lines.append("| | Rule | Severity | Where | Calls | Dynamo |")
    lines.append("|---|---|---|---|---|---|")
    for kind, finding in rows:
        lines.append(
            f"| {kind} | {finding.rule} | {finding.severity} | `{finding.site.function}`{_place(finding)} "
            f"| `{finding.site.callee}` | {_outcome(finding)} |"
        )
    chained = [(kind, f) for kind, f in rows if kind in ("added", "changed") and f.chain]
    if chained:
        lines += ["", "<details><summary>Chains from the entry</summary>", ""]
        for kind, finding in chained:
            lines.append(f"- **{kind}** {finding.rule} `{finding.site.callee}`: {chain_text(finding, code=True)}")
        lines += ["", "</details>"]
    if diff.suppressed:
        lines += ["", "Suppressed findings are listed with their reasons in the JSON output."]
    return "\n".join(lines) + "\n"


def summary(diff: Diff) -> str:
    return (
        f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed, "
        f"{len(diff.unchanged)} unchanged, {len(diff.suppressed)} suppressed"
    )


def one_line(finding: Finding) -> str:
    return (
        f"{finding.severity:<7} {finding.rule} {finding.site.callee} in {finding.site.function}"
        f"{_place(finding)} [{_outcome(finding)}]"
    )


def chain_text(finding: Finding, *, code: bool = False) -> str:
    names = [hop.function for hop in finding.chain]
    if names and names[-1] != finding.site.function:
        names.append(finding.site.function)
    if len(names) > _MAX_CHAIN:
        names = names[:2] + [f"... {len(names) - _MAX_CHAIN + 2} more ..."] + names[-(_MAX_CHAIN - 3) :]
    if code:
        names = [f"`{n}`" if not n.startswith("...") else n for n in names]
    return " → ".join(names)


def _place(finding: Finding) -> str:
    return f" ({finding.site.file}:{finding.site.line})" if finding.site.file and finding.site.line else ""


def _outcome(finding: Finding) -> str:
    parts = [finding.outcome.gb_id or finding.outcome.kind or "?"]
    if finding.outcome.fatal_under_fullgraph:
        parts.append("fatal under fullgraph")
    return ", ".join(parts)


def _codes(values: tuple[str, ...]) -> str:
    return ", ".join(f"`{v}`" for v in values) or "-"

"""GitHub Actions workflow commands: one annotation per finding at its hazard site.

`::error file=…,line=…,title=…::message` — error, warning or notice by severity. Values are
escaped the way the runner decodes them (`%`, CR, LF always; `:` and `,` in properties too), so a
hazard line from a scanned file cannot end the command early or inject another one.
"""

from __future__ import annotations

from dynacheck.model import Diff, Finding, Review, ScanResult
from dynacheck.report import view

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def render_github(obj: Review | ScanResult | Diff) -> str:
    """One workflow command per active finding (a diff annotates added and changed ones)."""
    if isinstance(obj, ScanResult):
        obj = Review(scan=obj)
    if isinstance(obj, Diff):
        findings = [*view.sorted_findings(obj.added), *view.sorted_findings(obj.changed)]
        prefix = {f.fingerprint: "added: " for f in obj.added} | {f.fingerprint: "changed: " for f in obj.changed}
    else:
        findings = view.sorted_findings(obj.scan.findings) if obj.scan else []
        prefix = {}
    scan = obj.scan if isinstance(obj, Review) else None
    lines = [_command(f, prefix.get(f.fingerprint, ""), view.holds(f, scan)) for f in findings
             if f.status != "suppressed"]
    return "".join(line + "\n" for line in lines)


def _command(finding: Finding, prefix: str, holds: bool = True) -> str:
    site = finding.site
    title = f"{prefix}{finding.rule} {view.finding_outcome_label(finding)}"
    hops = " -> ".join(".".join(h.function.split(".")[-2:]) for h in finding.chain)
    message = f"{finding.title}: {site.function} calls {site.callee}."
    if hops:
        message += f"\nChain from the entry: {hops}"
    fixes = [f for f in view.ordered_fixes(finding.fixes) if f.sound]
    if fixes:
        message += f"\nFix: {fixes[0].kind} at {fixes[0].at}: {fixes[0].summary}"
    if not holds:  # does not happen on the scanned deployment: a notice, saying when it would
        message += "\nOnly if: " + "; ".join(view.condition_label(c) for c in finding.conditions)
    props = [f"file={_prop(site.file)}"]
    if site.line > 0:
        props.append(f"line={site.line}")
    if site.column > 0:
        props.append(f"col={site.column + 1}")
    props.append(f"title={_prop(title)}")
    level = "notice" if not holds else COMMANDS.get(finding.severity, "warning")
    return f"::{level} {','.join(props)}::{_data(message)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")

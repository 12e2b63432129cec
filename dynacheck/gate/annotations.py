"""GitHub Actions workflow commands (`::error file=...,line=...::msg`) for new and changed findings.

Only what a pull request should look at is annotated: findings the baseline does not know, and
known ones whose verdict changed. Severity maps to the annotation level.
"""

from __future__ import annotations

from dynacheck.gate.text import chain_text
from dynacheck.model import Diff, Finding

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def render_github(diff: Diff) -> str:
    lines = [annotation(f, "added") for f in diff.added] + [annotation(f, "changed") for f in diff.changed]
    return "".join(line + "\n" for line in lines)


def annotation(finding: Finding, kind: str) -> str:
    level = _LEVELS.get(finding.severity, "warning")
    props = []
    if finding.site.file:
        props.append(f"file={_escape_property(finding.site.file)}")
        if finding.site.line:
            props.append(f"line={finding.site.line}")
        if finding.site.column:
            props.append(f"col={finding.site.column}")
    props.append(f"title={_escape_property(f'dynacheck {finding.rule} ({kind})')}")
    outcome = finding.outcome.gb_id or finding.outcome.kind
    fatal = ", fatal under fullgraph" if finding.outcome.fatal_under_fullgraph else ""
    message = (
        f"{finding.title or finding.rule}: {finding.site.callee} in {finding.site.function} "
        f"[{outcome}{fatal}]\nvia {chain_text(finding)}"
    )
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")

"""SARIF 2.1.0 for code hosts: one result per finding at its hazard site, the chain as a codeFlow.

Fingerprints come from the finding (stable across line moves), so code scanning tracks a hazard
from run to run. File paths stay relative to each target's root, named by `uriBaseId`; the roots
go in `originalUriBaseIds`. A gate diff becomes results with `baselineState`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dynacheck import __version__
from dynacheck.model import Diff, Event, Finding, Hop, Review, ScanResult, Site, Target
from dynacheck.report import view
from dynacheck.report.rule_text import RuleText, rule_texts

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "dynacheckFingerprint/v1"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
BASELINE = {"added": "new", "changed": "updated", "unchanged": "unchanged", "removed": "absent"}


def render_sarif(obj: Review | ScanResult | Diff) -> str:
    return json.dumps(to_sarif(obj), indent=2, ensure_ascii=False) + "\n"


def to_sarif(obj: Review | ScanResult | Diff) -> dict[str, Any]:
    """The SARIF log for a review, a bare scan or a gate diff."""
    if isinstance(obj, ScanResult):
        obj = Review(scan=obj)
    if isinstance(obj, Diff):
        return _log(_diff_run(obj))
    return _log(_review_run(obj))


def _log(run: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _review_run(review: Review) -> dict[str, Any]:
    scan = review.scan
    findings = view.sorted_findings(scan.findings) if scan else []
    bases = _BaseIds(scan.targets if scan else ())
    texts = rule_texts(findings)
    seen = view.seen_only(review)
    for _, events in seen:
        for event in events[:1]:
            texts.setdefault(_seen_rule_id(event), _seen_rule(event))
    rule_ids = list(texts)
    matches = view.match_index(review)
    results = [_finding_result(f, rule_ids, bases, view.finding_status(f, matches), view.holds(f, review.scan))
               for f in findings]
    for match, events in seen:
        if events:
            results.append(_seen_result(events[0], match.note, rule_ids, bases, len(events)))
    run: dict[str, Any] = {
        "tool": {"driver": _driver(texts, scan.tool_version if scan else "")},
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": {},
    }
    if scan:
        run["originalUriBaseIds"] = bases.original()
        run["properties"] = {
            "targets": [f"{t.name}=={t.version}" if t.version else t.spec for t in scan.targets],
            "entries": list(scan.entries),
            "torchVersion": scan.torch_version,
        }
    if review.trace is not None:
        run["properties"]["tracedCommand"] = list(review.trace.command)
    return run


def _diff_run(diff: Diff) -> dict[str, Any]:
    groups = [("added", diff.added), ("changed", diff.changed), ("unchanged", diff.unchanged),
              ("removed", diff.removed)]
    texts = rule_texts([f for _, fs in groups for f in fs] + list(diff.suppressed))
    rule_ids = list(texts)
    bases = _BaseIds(())
    results = []
    for state, findings in groups:
        for finding in view.sorted_findings(findings):
            result = _finding_result(finding, rule_ids, bases, finding.status)
            result["baselineState"] = BASELINE[state]
            results.append(result)
    for finding in view.sorted_findings(diff.suppressed):
        results.append(_finding_result(finding, rule_ids, bases, "suppressed"))
    return {
        "tool": {"driver": _driver(texts, "")},
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": {"before": list(diff.before), "after": list(diff.after)},
    }


def _driver(texts: dict[str, RuleText], tool_version: str) -> dict[str, Any]:
    return {
        "name": "dynacheck",
        "version": tool_version or __version__,
        "rules": [_rule(t) for t in texts.values()],
    }


def _rule(text: RuleText) -> dict[str, Any]:
    help_lines = [text.why, f"Dynamo outcome: {text.outcome}."]
    if text.fixes:
        help_lines.append("Fixes, in order: " + " ".join(f"({i}) {f}" for i, f in enumerate(text.fixes, 1)))
    md = [f"**{text.title}**", "", text.why, "", f"Dynamo outcome: {text.outcome}"]
    if text.gb_id:
        md[-1] += f" ([{text.gb_id}]({view.gb_link(text.gb_id)}))"
    md += ["", *(f"{i}. {f}" for i, f in enumerate(text.fixes, 1))]
    if text.example:
        md += ["", "```python", text.example.rstrip(), "```"]
    rule: dict[str, Any] = {
        "id": text.id,
        "name": _pascal(text.name),
        "shortDescription": {"text": text.title},
        "fullDescription": {"text": text.why},
        "help": {"text": "\n".join(help_lines), "markdown": "\n".join(md).strip()},
        "defaultConfiguration": {"level": LEVELS.get(text.severity, "warning")},
        "properties": {"gb_id": text.gb_id, "tags": ["torch.compile", "dynamo"]},
    }
    if text.gb_id:
        rule["helpUri"] = view.gb_link(text.gb_id)
    return rule


def _finding_result(finding: Finding, rule_ids: list[str], bases: _BaseIds, status: str,
                    holds: bool = True) -> dict[str, Any]:
    o = finding.outcome
    fixes = view.ordered_fixes(finding.fixes)
    sound = [f for f in fixes if f.sound]
    message = (f"{finding.title}: {finding.site.callee} in {finding.site.function}, "
               f"{view.finding_outcome_label(finding)}.")
    if finding.chain:
        message += f" Reached from {finding.chain[0].function} in {len(finding.chain)} hops."
    if sound:
        message += f" Fix: {sound[0].kind} at {sound[0].at}."
    if not holds:
        message += " Only if: " + "; ".join(view.condition_label(c) for c in finding.conditions) + "."
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": rule_ids.index(finding.rule),
        # a finding that holds only under other flags/env is a note: it does not happen on this deployment
        "level": "note" if not holds else LEVELS.get(finding.severity, "warning"),
        "kind": "fail",
        "message": {"text": message},
        "locations": [_site_location(finding.site, bases)],
        "codeFlows": [_code_flow(finding, bases)],
        "properties": {
            "gb_id": o.gb_id,
            "gb_type": o.gb_type,
            "outcome": o.kind,
            "fatal_under_fullgraph": o.fatal_under_fullgraph,
            "confidence": finding.confidence,
            "status": status,
            "entry": finding.entry,
            "family": finding.family,
            "fixes": [{"kind": f.kind, "at": f.at, "summary": f.summary, "sound": f.sound} for f in fixes],
            "conditions": [c.to_dict() for c in finding.conditions],
        },
    }
    if finding.fingerprint:
        result["partialFingerprints"] = {FINGERPRINT_KEY: finding.fingerprint}
    fix_locations = [f for f in sound if f.file and f.line > 0]
    if fix_locations:
        result["relatedLocations"] = [
            {"id": i, **_physical(f.file, f.line, "", _package_of_fix(finding, f.at), bases),
             "message": {"text": f"fix here: {f.kind} — {f.summary}"}}
            for i, f in enumerate(fix_locations, 1)
        ]
    if status == "suppressed":
        from dynacheck.gate.suppress import suppression_kind

        result["suppressions"] = [{"kind": suppression_kind(finding), "status": "accepted",
                                   "justification": finding.note or ""}]
    return result


def _code_flow(finding: Finding, bases: _BaseIds) -> dict[str, Any]:
    last = len(finding.chain)
    locations = [_hop_location(hop, i, last, bases) for i, hop in enumerate(finding.chain)]
    site = finding.site
    locations.append({
        "location": {**_physical(site.file, site.line, site.code, site.package, bases, site.column),
                     "message": {"text": f"{site.callee}: {view.finding_outcome_label(finding)}"}},
        "nestingLevel": last,
        "executionOrder": last + 1,
        "importance": "essential",
    })
    return {
        "message": {"text": f"from {finding.entry or (finding.chain[0].function if finding.chain else '?')}"},
        "threadFlows": [{"locations": locations}],
    }


def _hop_location(hop: Hop, index: int, last: int, bases: _BaseIds) -> dict[str, Any]:
    return {
        "location": {**_physical(hop.file, hop.line, hop.code, hop.package, bases),
                     "message": {"text": f"{hop.function}  ({view.hop_why(hop)})"}},
        "nestingLevel": index,
        "executionOrder": index + 1,
        "importance": "essential" if index == 0 or view.hop_is_weak(hop) else "important",
        "properties": {"via": hop.via, "confidence": hop.confidence},
    }


def _seen_rule_id(event: Event) -> str:
    return event.gb_id or f"dynamo-{event.kind}"


def _seen_rule(event: Event) -> RuleText:
    label = view.outcome_label(event.kind, event.gb_id, event.fatal_under_fullgraph)
    return RuleText(id=_seen_rule_id(event), name=f"seen-at-run-time-{_seen_rule_id(event).lower()}",
                    title=f"Dynamo {label} seen at run time", severity="warning",
                    why=event.explanation or event.gb_type or "Reported by Dynamo while tracing the command.",
                    fixes=(), example="", gb_id=event.gb_id, outcome=label)


def _seen_result(event: Event, note: str, rule_ids: list[str], bases: _BaseIds, count: int) -> dict[str, Any]:
    frame = event.site
    text = f"Seen at run time, not predicted by the scan: {event.gb_type or event.kind}"
    if event.reason:
        text += f" ({event.reason})"
    result: dict[str, Any] = {
        "ruleId": _seen_rule_id(event),
        "ruleIndex": rule_ids.index(_seen_rule_id(event)),
        "level": "warning",
        "kind": "fail",
        "message": {"text": text + "."},
        "properties": {"status": "seen_only", "gb_id": event.gb_id, "pid": event.pid, "rank": event.rank,
                       "events": count, "note": note,
                       "fatal_under_fullgraph": event.fatal_under_fullgraph},
    }
    if frame is not None:
        result["locations"] = [_physical(frame.file, frame.line, frame.code, "", bases)]
    return result


def _site_location(site: Site, bases: _BaseIds) -> dict[str, Any]:
    return {**_physical(site.file, site.line, site.code, site.package, bases, site.column),
            "message": {"text": f"calls {site.callee}"}}


def _physical(file: str, line: int, code: str, package: str, bases: _BaseIds, column: int = 0) -> dict[str, Any]:
    artifact: dict[str, Any] = {"uri": Path(file).as_posix() if file else "unknown"}
    base = bases.of(package)
    if base:
        artifact["uriBaseId"] = base
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if line > 0:
        region: dict[str, Any] = {"startLine": line}
        if column > 0:
            region["startColumn"] = column + 1
        if code:
            region["snippet"] = {"text": code}
        physical["region"] = region
    return {"physicalLocation": physical}


def _package_of_fix(finding: Finding, at: str) -> str:
    for hop in finding.chain:
        if hop.function == at:
            return hop.package
    return finding.site.package


class _BaseIds:
    """uriBaseId per target distribution (e.g. FLASHINFER_PYTHON -> file:///…/site-packages/)."""

    def __init__(self, targets: tuple[Target, ...]) -> None:
        self._ids: dict[str, str] = {}
        self._uris: dict[str, str] = {}
        for target in targets:
            base = re.sub(r"[^A-Za-z0-9]+", "_", target.name).strip("_").upper() or "ROOT"
            root = Path(target.root)
            if root.is_absolute():
                self._ids[target.name] = base
                self._uris[base] = root.as_uri().rstrip("/") + "/"

    def of(self, package: str) -> str:
        return self._ids.get(package, "")

    def original(self) -> dict[str, Any]:
        return {base: {"uri": uri} for base, uri in self._uris.items()}


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part)

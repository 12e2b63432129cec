"""Baseline files: the findings a project has accepted, written so that a diff of the file reads well.

The file holds no line numbers, file paths, times or absolute paths, only what a fingerprint is
made of plus the severity and Dynamo outcome, sorted, with sorted keys and a trailing newline:
updating it twice over the same code gives the same bytes, and moving code changes nothing.
Suppressed findings are not written: their suppression comment is their record.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynacheck.errors import UserError
from dynacheck.readers import load_json_file
from dynacheck.gate.fingerprint import assign_fingerprints, fingerprint as compute_fingerprint
from dynacheck.gate.suppress import SUPPRESSED
from dynacheck.model import Condition, Diff, Finding, Hop, Outcome, ScanResult, Site

BASELINE_SCHEMA_VERSION = "1"


@dataclass(frozen=True)
class Baseline:
    targets: tuple[dict[str, str], ...]  # {"spec", "name", "version"}
    entries: tuple[str, ...]
    findings: tuple[dict[str, Any], ...]
    source: str = ""  # the file it was read from
    skipped: tuple[str, ...] = ()  # one sentence per malformed record left out when reading


def with_fingerprints(result: ScanResult) -> ScanResult:
    """Fingerprints recomputed from content and unique within the scan (see `assign_fingerprints`)."""
    return dataclasses.replace(result, findings=assign_fingerprints(result.findings))


def baseline_from_scan(result: ScanResult, specs: tuple[str, ...] | None = None) -> Baseline:
    """The accepted state: active (not suppressed) findings of a scan, one record per fingerprint."""
    result = with_fingerprints(result)
    records = {f.fingerprint: finding_record(f) for f in result.findings if f.status != SUPPRESSED}
    targets = []
    for index, target in enumerate(result.targets):
        spec = specs[index] if specs is not None and index < len(specs) else target.spec
        targets.append({"spec": spec, "name": target.name, "version": target.version})
    return Baseline(
        targets=tuple(targets),
        entries=tuple(result.entries),
        findings=tuple(records[key] for key in sorted(records)),
    )


def finding_record(finding: Finding) -> dict[str, Any]:
    return {
        "fingerprint": finding.fingerprint or compute_fingerprint(finding),
        "rule": finding.rule,
        "title": finding.title,
        "severity": finding.severity,
        "function": finding.site.function,
        "callee": finding.site.callee,
        "outcome": finding.outcome.kind,
        "gb_id": finding.outcome.gb_id,
        "fatal_under_fullgraph": finding.outcome.fatal_under_fullgraph,
        "chain": [hop.function for hop in finding.chain],
    } | ({"conditions": [{"text": c.text, "kind": c.kind} for c in finding.conditions]}
         if finding.conditions else {})


def dumps(baseline: Baseline) -> str:
    data = {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "tool": "dynacheck",
        "targets": list(baseline.targets),
        "entries": list(baseline.entries),
        "findings": list(baseline.findings),
    }
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_baseline(baseline: Baseline, path: Path) -> bool:
    """Write the file; returns False (and leaves the file alone) when the bytes would not change."""
    text = dumps(baseline)
    try:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise UserError(f"Cannot write baseline {path}: {exc.strerror or exc}.") from None
    return True


def read_baseline(path: Path) -> Baseline:
    """The baseline at `path`: a plain, size- and depth-limited JSON file; a malformed finding record
    is left out and named in `skipped` (it then counts as new, the safe direction), a malformed file
    is one UserError sentence."""
    if not path.exists():
        raise UserError(
            f"Baseline {path} does not exist.",
            "Run `dynacheck gate --update-baseline` once to record the current findings, and commit the file.",
        )
    data = load_json_file(path, "baseline", "Regenerate it with --update-baseline.")
    if not isinstance(data, dict) or data.get("schema_version") != BASELINE_SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else None
        raise UserError(
            f"Baseline {path} has schema version {str(found)[:40]!r}; this dynacheck reads {BASELINE_SCHEMA_VERSION!r}.",
            "Regenerate it with --update-baseline.",
        )
    findings, targets, entries = data.get("findings", []), data.get("targets", []), data.get("entries", [])
    if not isinstance(findings, list):
        raise UserError(f"Baseline {path} has a malformed findings list.", "Regenerate it with --update-baseline.")
    if not isinstance(targets, list) or not all(
            isinstance(t, dict) and all(isinstance(v, str) for v in t.values()) for t in targets):
        raise UserError(f"Baseline {path} has a malformed targets list.", "Regenerate it with --update-baseline.")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise UserError(f"Baseline {path} has a malformed entries list.", "Regenerate it with --update-baseline.")
    kept, skipped = [], []
    for number, record in enumerate(findings):
        problem = _record_problem(record)
        if problem:
            skipped.append(f"Baseline {path}: finding {number} left out ({problem}).")
        else:
            kept.append(record)
    return Baseline(targets=tuple(targets), entries=tuple(entries), findings=tuple(kept), source=str(path),
                    skipped=tuple(skipped))


_TEXT_FIELDS = ("rule", "title", "severity", "function", "callee", "outcome", "gb_id")


def _record_problem(record: Any) -> str:
    """What is wrong with one baseline finding record ('' when nothing)."""
    if not isinstance(record, dict):
        return "not an object"
    if not isinstance(record.get("fingerprint"), str) or not record["fingerprint"]:
        return "no fingerprint string"
    wrong = [k for k in _TEXT_FIELDS if k in record and not isinstance(record[k], str)]
    if wrong:
        return f"{wrong[0]} is not a string"
    chain = record.get("chain", [])
    if not isinstance(chain, list) or not all(isinstance(c, str) for c in chain):
        return "chain is not a list of strings"
    conditions = record.get("conditions", [])
    if not isinstance(conditions, list) or not all(
            isinstance(c, dict) and all(isinstance(v, str) for v in c.values()) for c in conditions):
        return "conditions is not a list of {text, kind}"
    if not isinstance(record.get("fatal_under_fullgraph", False), bool):
        return "fatal_under_fullgraph is not true or false"
    return ""


def finding_from_record(record: dict[str, Any]) -> Finding:
    """A Finding rebuilt from a baseline record (no files or lines: the baseline has none)."""
    return Finding(
        rule=record.get("rule", ""),
        title=record.get("title", ""),
        severity=record.get("severity", ""),
        site=Site(file="", line=0, function=record.get("function", ""), callee=record.get("callee", "")),
        chain=tuple(Hop(function=name, file="", line=0, via="") for name in record.get("chain", ())),
        outcome=Outcome(
            kind=record.get("outcome", ""),
            gb_id=record.get("gb_id", ""),
            fatal_under_fullgraph=bool(record.get("fatal_under_fullgraph", False)),
        ),
        fingerprint=record["fingerprint"],
        conditions=tuple(Condition(c.get("text", ""), "", 0, c.get("kind", "")) for c in record.get("conditions", ())),
    )


def compare(baseline: Baseline, scan: ScanResult) -> Diff:
    """Sort a scan's findings against the accepted ones: added, removed, changed, unchanged, suppressed."""
    return compare_with_previous(baseline, scan).diff


def compare_with_previous(baseline: Baseline, scan: ScanResult):
    """`compare`, keeping for each changed finding the accepted one it replaced (the gate judges with it)."""
    from dynacheck.gate.diff import compare_findings

    return compare_findings(
        [finding_from_record(r) for r in baseline.findings],
        list(with_fingerprints(scan).findings),
        before_label=(baseline.source,) if baseline.source else tuple(t.get("spec", "") for t in baseline.targets),
        after_label=tuple(t.spec for t in scan.targets),
    )

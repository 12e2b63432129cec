"""Inline suppressions and configured ignores: findings are marked, never dropped.

`# dynacheck: ignore[DC001] reason` on the hazard line, on a comment line just above it, or on
any hop line of the chain (so a call site in your own package silences the chain through it)
marks the finding `suppressed` with the reason as its note. A reason is required: a suppression
that does not say why is an error, because the next reader cannot judge it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.gate.config import check_rule_id
from dynacheck.model import Finding, ScanResult
from dynacheck.sources.text import read_source

SUPPRESSED = "suppressed"
CONFIG_IGNORE = "ignored by [tool.dynacheck] ignore"
_MARKER = re.compile(r"#\s*dynacheck\s*:\s*ignore\b(?P<rest>.*)$")
_RULES = re.compile(r"^\[(?P<rules>[^\]]*)\]\s*(?P<reason>.*)$")
_REASON_LEAD = " \t-:—–"


@dataclass(frozen=True)
class Suppression:
    rules: tuple[str, ...]  # ("*",) silences every rule
    reason: str
    file: str
    line: int

    def covers(self, rule: str) -> bool:
        return "*" in self.rules or rule in self.rules


@dataclass(frozen=True)
class BadSuppression:
    file: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.problem}"


def parse_suppression(text: str, file: str = "", line: int = 0) -> Suppression | BadSuppression | None:
    """Read one source line; None when it holds no `dynacheck: ignore` comment."""
    match = _MARKER.search(text)
    if match is None:
        return None
    parts = _RULES.match(match.group("rest").strip())
    if parts is None:
        return BadSuppression(file, line, "suppression must name rules, e.g. '# dynacheck: ignore[DC001] reason'")
    rules = tuple(r.strip() for r in parts.group("rules").split(",") if r.strip())
    if not rules:
        return BadSuppression(file, line, "suppression names no rule; write ignore[DC001] (or ignore[*])")
    reason = parts.group("reason").strip(_REASON_LEAD).strip()
    if not reason:
        return BadSuppression(file, line, f"suppression of {','.join(rules)} has no reason; say why after the ']'")
    return Suppression(rules, reason, file, line)


def apply_ignores(result: ScanResult, ignore: tuple[str, ...]) -> ScanResult:
    """Mark findings of rules the config ignores as suppressed, saying where the ignore came from."""
    if not ignore:
        return result
    findings = tuple(
        _suppress(f, f"rule {f.rule} {CONFIG_IGNORE}") if f.rule in ignore else f
        for f in result.findings
    )
    return dataclasses.replace(result, findings=findings)


def apply_suppressions(result: ScanResult) -> ScanResult:
    """Mark findings silenced by inline comments; raise UserError naming every reasonless one."""
    lines = _SourceLines(result)
    findings = []
    bad: dict[tuple[str, int], BadSuppression] = {}
    for finding in result.findings:
        found = None
        for file, line in _candidate_lines(finding, lines):
            parsed = _known_rules(parse_suppression(lines.get(file, line), file, line))
            if isinstance(parsed, BadSuppression):
                bad.setdefault((file, line), parsed)
            elif parsed is not None and parsed.covers(finding.rule) and found is None:
                found = parsed
        if found is not None and finding.status != SUPPRESSED:
            finding = _suppress(finding, f"{found.reason} ({found.file}:{found.line})")
        findings.append(finding)
    if bad:
        listed = "; ".join(str(b) for b in sorted(bad.values(), key=lambda b: (b.file, b.line)))
        raise UserError(f"Invalid dynacheck suppression: {listed}.",
                        "Every suppression names known rules (`dynacheck rules`) and gives a reason.")
    return dataclasses.replace(result, findings=tuple(findings))


def suppression_kind(finding: Finding) -> str:
    """SARIF's word for where a suppression lives: 'inSource' for a comment, 'external' for the config."""
    return "external" if CONFIG_IGNORE in finding.note else "inSource"


def _known_rules(parsed: Suppression | BadSuppression | None) -> Suppression | BadSuppression | None:
    """A suppression naming a rule the catalogue does not know silences nothing: say so instead."""
    if not isinstance(parsed, Suppression):
        return parsed
    for rule in parsed.rules:
        try:
            check_rule_id(rule, "a suppression")
        except UserError as exc:
            return BadSuppression(parsed.file, parsed.line, f"unknown rule {rule} ({exc.hint.rstrip('.')})")
    return parsed


def _suppress(finding: Finding, reason: str) -> Finding:
    """The reason leads the note; a note the scan already gave (e.g. "skipped when compiled") is kept after it."""
    note = f"{reason}; {finding.note}" if finding.note else reason
    return dataclasses.replace(finding, status=SUPPRESSED, note=note)


def _candidate_lines(finding: Finding, lines: _SourceLines) -> list[tuple[str, int]]:
    """The site line, a comment line right above it, and the same for every hop of the chain."""
    places = [(finding.site.file, finding.site.line)] + [(hop.file, hop.line) for hop in finding.chain]
    candidates: list[tuple[str, int]] = []
    for file, line in places:
        if not file or line <= 0:
            continue
        candidates.append((file, line))
        if line > 1 and lines.get(file, line - 1).lstrip().startswith("#"):
            candidates.append((file, line - 1))
    return candidates


class _SourceLines:
    """Lines of the scanned files, read once; a file that cannot be found reads as empty."""

    def __init__(self, result: ScanResult) -> None:
        self._roots = [Path(t.root) for t in result.targets if t.root]
        self._files: dict[str, list[str]] = {}

    def get(self, file: str, line: int) -> str:
        text = self._files.get(file)
        if text is None:
            text = self._files[file] = self._read(file)
        return text[line - 1] if 0 < line <= len(text) else ""

    def _read(self, file: str) -> list[str]:
        path = Path(file)
        for candidate in ([path] if path.is_absolute() else [root / path for root in self._roots]):
            try:
                return read_source(candidate).splitlines()
            except OSError:
                continue
        return []

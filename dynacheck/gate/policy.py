"""One policy for `scan`, `gate` and `report`: what to scan, what is suppressed, what fails the run.

`[tool.dynacheck]` (found by walking up from the working directory, or named with --config), inline
`# dynacheck: ignore[DC001] reason` comments and configured `ignore` rules are read here and nowhere
else, so a finding silenced for the gate is silenced in the scan and the review too. The exit code
counts only findings that hold on the scanned deployment and are not suppressed: with a deployment given
(`scan.deployment`), a finding with open conditions does not count; `include_conditional = true` counts
those too.
"""

from __future__ import annotations

from dynacheck.model import deployment_given

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dynacheck.gate.config import GateConfig, load_config
from dynacheck.model import Finding, ScanResult, severity_rank


@dataclass(frozen=True)
class ScanInputs:
    """What `dynacheck scan` scans, and where that came from (for the header line on stderr)."""

    specs: tuple[str, ...]
    entries: tuple[str, ...]
    preset: str | None
    origin: str  # "command line" | the config file | "default"


def load_policy(config_file: str | Path | None = None) -> GateConfig:
    """The project's settings (the defaults when no pyproject.toml with [tool.dynacheck] is above cwd)."""
    return load_config(config_file)


def scan_inputs(config: GateConfig, targets: Sequence[str], entries: Sequence[str], preset: str | None,
                default: tuple[Sequence[str], str]) -> ScanInputs:
    """Command line first, then the config's targets, then the embedded default (`default` = specs, preset)."""
    if targets or entries or preset:
        return ScanInputs(tuple(targets), tuple(entries), preset, "command line")
    if config.targets:
        return ScanInputs(tuple(config.target_specs_for_scan()), config.entries, config.preset, config.source)
    specs, default_preset = default
    return ScanInputs(tuple(specs), (), default_preset, "default")


def apply_policy(result: ScanResult, config: GateConfig, *, fingerprint: bool = True) -> ScanResult:
    """Fingerprints, configured ignores and inline suppressions: suppressed findings are marked, never dropped.

    A saved scan keeps its fingerprints (`fingerprint=False`): a trace's matches refer to them.
    """
    from dynacheck.gate.run import prepare
    from dynacheck.gate.suppress import apply_ignores, apply_suppressions

    if not fingerprint:
        return apply_suppressions(apply_ignores(result, tuple(config.ignore)))
    return prepare(result, config.ignore)


def counted(findings: Sequence[Finding], fail_on: str, include_conditional: bool = False,
            decided: bool = True) -> list[Finding]:
    """The findings that decide the exit code: at or above `fail_on`, not suppressed, and holding on the
    deployment (no open conditions when one was given: `decided`) unless `include_conditional`."""
    if fail_on == "never":
        return []
    threshold = severity_rank(fail_on)
    return [f for f in findings
            if f.status != "suppressed" and (include_conditional or not decided or f.unconditional)
            and severity_rank(f.severity) >= threshold]


def exit_verdict(result: ScanResult, fail_on: str, include_conditional: bool = False) -> tuple[int, str]:
    """The exit code and one sentence saying why it is what it is."""
    decided = deployment_given(result.deployment)
    failing = counted(result.findings, fail_on, include_conditional, decided)
    conditional = [f for f in result.findings if f.status != "suppressed" and decided and not f.unconditional]
    suppressed = sum(f.status == "suppressed" for f in result.findings)
    left_out = []
    if conditional and not include_conditional:
        left_out.append(f"{len(conditional)} conditional (include_conditional = true counts them)")
    if suppressed:
        left_out.append(f"{suppressed} suppressed")
    tail = f"; not counted: {', '.join(left_out)}" if left_out else ""
    if fail_on == "never":
        return 0, f"exit 0: --fail-on never{tail}."
    if failing:
        sites = len({(f.site.file, f.site.line, f.site.callee) for f in failing})
        noun = "finding" if len(failing) == 1 else "findings"
        return 1, (f"exit 1: {len(failing)} {noun} of severity {fail_on} or worse at {sites} "
                   f"site{'' if sites == 1 else 's'} (--fail-on {fail_on}){tail}.")
    return 0, f"exit 0: no finding at or above --fail-on {fail_on} holds on this deployment{tail}."

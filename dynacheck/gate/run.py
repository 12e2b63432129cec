"""The gate as a library call: scan, mark ignores and suppressions, compare with the baseline, judge.

Kept apart from the click command so tests and other rooms can call it and read the verdict.
"""

from __future__ import annotations

from dynacheck.model import deployment_given

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.gate.baseline import baseline_from_scan, compare_with_previous, read_baseline, with_fingerprints, write_baseline
from dynacheck.gate.config import GateConfig
from dynacheck.gate.diff import Comparison
from dynacheck.gate.suppress import apply_ignores, apply_suppressions
from dynacheck.model import Diff, Finding, ScanResult, severity_rank


@dataclass(frozen=True)
class GateVerdict:
    diff: Diff
    failing: tuple[Finding, ...]  # new (or worsened) findings at or above the threshold
    scan: ScanResult

    @property
    def exit_code(self) -> int:
        return 1 if self.failing else 0


def check_scan_inputs(specs: Sequence[str], entries: Sequence[str], preset: str | None) -> None:
    if not specs:
        raise UserError("No targets to scan.", "Pass --target SPEC or set targets in [tool.dynacheck].")
    if not entries and not preset:
        raise UserError(
            "No entry to scan from.", "Pass --entry module:Class.method or --preset, or set them in [tool.dynacheck]."
        )


def run_scan(specs: Sequence[str], entries: Sequence[str], preset: str | None, *, offline: bool = False,
             progress=None) -> ScanResult:
    """Call the static engine; a missing engine is a user-facing error, not a traceback."""
    check_scan_inputs(specs, entries, preset)
    try:
        scan_module = importlib.import_module("dynacheck.static.scan")
    except ModuleNotFoundError as exc:
        if exc.name in ("dynacheck.static", "dynacheck.static.scan"):
            raise UserError("The static scan engine (dynacheck.static) is not installed.") from None
        raise
    result = scan_module.scan(list(specs), entries=tuple(entries), preset=preset, offline=offline, progress=progress)
    return with_fingerprints(result)


def prepare(result: ScanResult, ignore: Sequence[str]) -> ScanResult:
    """Ignored rules and inline suppressions become `status="suppressed"` with the reason in `note`."""
    return apply_suppressions(apply_ignores(with_fingerprints(result), tuple(ignore)))


def judge(comparison: Comparison, fail_on: str, result: ScanResult, include_conditional: bool = False) -> GateVerdict:
    """Fail on new findings at or above `fail_on`, and on known ones whose severity rose to it.

    Findings that hold only under other flags or env (conditional) count only with `include_conditional`.
    """
    threshold = severity_rank(fail_on)
    diff = comparison.diff

    decided = deployment_given(result.deployment)

    def counts(f: Finding) -> bool:
        return severity_rank(f.severity) >= threshold and (include_conditional or not decided or f.unconditional)

    failing = [f for f in diff.added if counts(f)]
    failing += [f for f in diff.changed if counts(f) and comparison.worsened(f)]
    return GateVerdict(diff=diff, failing=tuple(failing), scan=result)


def gate(config: GateConfig, *, update_baseline: bool = False, offline: bool = False,
         progress=None) -> tuple[GateVerdict | None, bool]:
    """Run the gate; with `update_baseline` write the file and return (None, whether it changed)."""
    baseline_path = config.baseline_path()
    check_scan_inputs(config.targets, config.entries, config.preset)
    if not update_baseline:
        baseline = read_baseline(baseline_path)  # fail fast, before a long scan
        for sentence in baseline.skipped:
            sys.stderr.write(f"dynacheck: {sentence}\n")
    result = prepare(run_scan(config.target_specs_for_scan(), config.entries, config.preset, offline=offline,
                              progress=progress), config.ignore)
    if update_baseline:
        return None, write_baseline(baseline_from_scan(result, specs=_specs_as_written(config, result)), baseline_path)
    comparison = compare_with_previous(baseline, result)
    labelled = replace(comparison.diff, before=(baseline_display(baseline_path),), after=tuple(config.targets))
    return judge(replace(comparison, diff=labelled), config.fail_on, result, config.include_conditional), False


def _specs_as_written(config: GateConfig, result: ScanResult) -> tuple[str, ...] | None:
    """The configured specs (relative paths, not this machine's absolute ones) when they line up with the targets."""
    return tuple(config.targets) if len(config.targets) == len(result.targets) else None


def baseline_display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)

"""`dynacheck gate` (baseline check for CI) and `dynacheck diff` (two dependency sets side by side)."""

from __future__ import annotations

import dataclasses

from dynacheck.model import deployment_given

import shlex

import click

from dynacheck.errors import UserError
from dynacheck.gate.config import GATE_FORMATS, load_config, with_overrides
from dynacheck.gate.diff import compare_scans
from dynacheck.gate.output import emit, relative_to_workdir, render_diff
from dynacheck.gate.run import baseline_display, gate as run_gate, judge, run_scan
from dynacheck.gate.text import render_terminal, summary
from dynacheck.model import SEVERITIES
from dynacheck.progress import StatusLine

DIFF_FORMATS = ("terminal", "json", "markdown", "html")


@click.command("gate")
@click.option("--baseline", "baseline", metavar="FILE", help="Baseline file (default: dynacheck-baseline.json).")
@click.option("--update-baseline", is_flag=True, help="Rewrite the baseline from this scan and exit 0.")
@click.option("--target", "targets", multiple=True, metavar="SPEC", help="What to scan (repeatable).")
@click.option("--entry", "entries", multiple=True, metavar="E", help="Entry module:Class.method (repeatable).")
@click.option("--preset", default=None, help="Named entry set, e.g. glm5.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default=None, help="Lowest severity that fails the gate.")
@click.option("--format", "fmt", type=click.Choice(GATE_FORMATS), default=None, help="Output format.")
@click.option("--out", metavar="FILE", default=None, help="Write the output here instead of stdout.")
@click.option("--config", "config_file", metavar="FILE", default=None, help="pyproject.toml with [tool.dynacheck].")
@click.option("--offline", is_flag=True, help="Do not download targets; use the wheel cache only.")
def gate(baseline, update_baseline, targets, entries, preset, fail_on, fmt, out, config_file, offline) -> int:
    """Fail CI when the scan finds Dynamo hazards the baseline does not know.

    Exit 1 on new findings at or above --fail-on, 0 otherwise, 2 on bad input.
    """
    config = with_overrides(
        load_config(config_file),
        baseline=baseline, targets=targets, entries=entries, preset=preset, fail_on=fail_on, format=fmt,
    )
    with StatusLine("dynacheck gate") as status:
        verdict, changed = run_gate(config, update_baseline=update_baseline, offline=offline, progress=status)
    where = baseline_display(config.baseline_path())
    if verdict is None:
        click.echo(f"dynacheck gate: baseline {where} {'written' if changed else 'already up to date'}.")
        return 0
    _say_problems(verdict.scan)
    diff = relative_to_workdir(verdict.diff, verdict.scan.targets)
    if config.format == "terminal" and not out:
        click.echo(render_terminal(diff, title="dynacheck gate"), nl=False)
    else:
        emit(render_diff(diff, config.format), out)
        click.echo(f"dynacheck gate: {summary(diff)}", err=True)
    if verdict.failing:
        click.echo(
            f"dynacheck gate: FAILED: {len(verdict.failing)} new or worsened finding(s) at or above '{config.fail_on}' "
            f"(baseline {where}). Fix them, suppress with a reason, or accept with --update-baseline.",
            err=True,
        )
    else:
        not_counted = _not_counted(verdict.diff.added, config.include_conditional or not deployment_given(verdict.scan.deployment))
        click.echo(f"dynacheck gate: passed: no new finding at or above '{config.fail_on}' (baseline {where})"
                   f"{not_counted}.", err=True)
    return verdict.exit_code


def _not_counted(added, include_conditional: bool) -> str:
    """'; 2 new conditional finding(s) not counted (include_conditional = true counts them)' or ''."""
    conditional = sum(1 for f in added if not f.unconditional)
    if not conditional or include_conditional:
        return ""
    return f"; {conditional} new conditional finding(s) not counted (include_conditional = true counts them)"


@click.command("diff")
@click.option("--from", "before", required=True, metavar="'SPEC SPEC...'", help="Dependency set before.")
@click.option("--to", "after", required=True, metavar="'SPEC SPEC...'", help="Dependency set after.")
@click.option("--entry", "entries", multiple=True, metavar="E", help="Entry module:Class.method (repeatable).")
@click.option("--preset", default=None, help="Named entry set, e.g. glm5.")
@click.option("--format", "fmt", type=click.Choice(DIFF_FORMATS), default="terminal", help="Output format.")
@click.option("--out", metavar="FILE", default=None, help="Write the output here instead of stdout.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default=None, help="Exit 1 when added findings reach this.")
@click.option("--offline", is_flag=True, help="Do not download targets; use the wheel cache only.")
def diff(before, after, entries, preset, fmt, out, fail_on, offline) -> int:
    """Compare the Dynamo hazards of two dependency sets (e.g. a version bump) for a PR comment."""
    before_specs, after_specs = _split(before, "--from"), _split(after, "--to")
    with StatusLine("dynacheck diff") as status:
        status.phase = "before"
        first = run_scan(before_specs, entries, preset, offline=offline, progress=status)
        status.phase = "after"
        second = run_scan(after_specs, entries, preset, offline=offline, progress=status)
    _say_problems(first)
    _say_problems(second)
    comparison = compare_scans(first, second)
    result = dataclasses.replace(comparison.diff, notes=side_notes(first, second))
    if fmt == "terminal" and not out:
        click.echo(render_terminal(result, title="dynacheck diff", show_unchanged=False), nl=False)
    else:
        emit(render_diff(result, fmt), out)
        click.echo(f"dynacheck diff: {summary(result)}", err=True)
    if fail_on is None:
        return 0
    return judge(comparison, fail_on, second).exit_code


NOTED_PROBLEMS = ("piecewise_off",)  # problems that change what a side's findings mean


def side_notes(before, after) -> tuple[str, ...]:
    """`before: ...` / `after: ...` for each problem of a side that changes what its findings mean (the
    release serves the model without piecewise CUDA graphs: nothing of it is compiled by default)."""
    return tuple(f"{side}: {problem.message}" for side, scan in (("before", before), ("after", after))
                 for problem in scan.problems if problem.kind in NOTED_PROBLEMS)


def _say_problems(result) -> None:
    """Skipped input (syntax errors, unreadable files) is said once, so a green gate is not taken as complete."""
    if result.problems:
        first = result.problems[0]
        more = f" (and {len(result.problems) - 1} more)" if len(result.problems) > 1 else ""
        where = f" in {first.file}" if first.file else ""  # a deployment's note names no file
        click.echo(f"dynacheck: note: {first.kind}{where}: {first.message}{more}", err=True)


def _split(specs: str, option: str) -> list[str]:
    try:
        parts = shlex.split(specs)
    except ValueError as exc:
        raise UserError(f"Cannot read {option} '{specs}': {exc}.") from None
    if not parts:
        raise UserError(f"{option} names no target.", "Give one or more specs, e.g. --from 'sglang==0.5.9 flashinfer-python==0.6.3'.")
    return parts

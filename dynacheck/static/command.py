"""`dynacheck scan`: the static scan from the command line.

With no target and no entry it scans the embedded default: SGLang 0.5.9 + FlashInfer 0.6.3 from
the GLM-5 forward, the stack whose crash this tool was built around.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dynacheck.model import Review, ScanResult, severity_rank
from dynacheck.static.presets import DEFAULT_PRESET, DEFAULT_TARGETS, PRESETS

FORMATS = ("terminal", "json", "sarif", "html", "markdown", "github")


@click.command()
@click.option("--target", "-t", "targets", multiple=True, metavar="SPEC",
              help="pip requirement (sglang==0.5.9), wheel file, folder holding packages, or installed name.")
@click.option("--entry", "-e", "entries", multiple=True, metavar="MODULE:QUALNAME",
              help="Function Dynamo compiles, e.g. pkg.models.llama:LlamaModel.forward.")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
              help="Named entry of the framework version being scanned (glm5: SGLang's GLM-5 forward).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report here instead of standard output.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error", "never"]), default=None,
              help="Exit 1 when a finding at or above this severity is found [default: error; never for the "
                   "embedded default scan, which is a demonstration].")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Wheels, unpacked trees and parse summaries (default ~/.cache/dynacheck).")
@click.option("--offline", is_flag=True, help="Never download; use only cached wheels.")
@click.option("--verbose", "-v", is_flag=True, help="Show every chain, not just the shortest per site.")
@click.option("--fullgraph", is_flag=True,
              help="The entry is compiled with fullgraph=True: state that compile's outcome (fatal or no break) "
                   "instead of both.")
def scan(targets: tuple[str, ...], entries: tuple[str, ...], preset: str | None, fmt: str, out: Path | None,
         fail_on: str | None, cache_dir: Path | None, offline: bool, verbose: bool, fullgraph: bool) -> int:
    """Find what Dynamo cannot trace on the path from a model's forward, and how to fix it.

    Never imports or runs the scanned code.
    """
    from dynacheck.static.scan import scan as run_scan

    if not targets and not entries and not preset:
        targets, preset = DEFAULT_TARGETS, DEFAULT_PRESET
        fail_on = fail_on or "never"
        click.echo(f"dynacheck: no target given; scanning the default: {' + '.join(targets)}, --preset {preset}",
                   err=True)
    fail_on = fail_on or "error"
    progress = _progress() if sys.stderr.isatty() and fmt == "terminal" else None
    try:
        result = run_scan(list(targets), list(entries), preset, cache_dir=cache_dir, offline=offline,
                          progress=progress, fullgraph=fullgraph)
    finally:
        if progress is not None:
            progress.close()
    _emit(result, fmt, out, verbose)
    return exit_code(result, fail_on)


def exit_code(result: ScanResult, fail_on: str) -> int:
    """1 when any finding is at or above the threshold, else 0."""
    if fail_on == "never":
        return 0
    threshold = severity_rank(fail_on)
    return 1 if any(severity_rank(f.severity) >= threshold and f.status != "suppressed"
                    for f in result.findings) else 0


def _emit(result: ScanResult, fmt: str, out: Path | None, verbose: bool) -> None:
    from dynacheck import report

    if fmt == "terminal":
        from rich.console import Console

        from dynacheck.report.console import render_console

        if out is None:
            render_console(Review(scan=result), verbose=verbose)
            return
        with open(out, "w", encoding="utf-8") as handle:
            render_console(Review(scan=result), Console(file=handle, width=120), verbose=verbose)
        return
    text = report.render(result if fmt == "json" else Review(scan=result), fmt)
    if out is None:
        click.echo(text)
    else:
        report.write(text, out)
        click.echo(f"dynacheck: wrote {out}", err=True)


class _progress:
    """A one-line status on stderr while resolving and walking (only on a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.status import Status

        self._status = Status("starting", console=Console(stderr=True))
        self._status.start()

    def __call__(self, message: str) -> None:
        self._status.update(f"dynacheck: {message}")

    def close(self) -> None:
        self._status.stop()

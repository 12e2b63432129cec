"""`dynacheck census`: every model class SGLang registers x a deployment matrix, in one table."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from dynacheck.progress import StatusLine

FORMATS = ("terminal", "json", "markdown", "html")
DEFAULT_TARGETS = ("sglang==0.5.9", "flashinfer-python==0.6.3")


@click.command()
@click.option("--target", "-t", "targets", multiple=True, metavar="SPEC",
              help="Package to scan (pip spec, wheel, folder); one must be SGLang. Default: the pinned pair.")
@click.option("--deployments", "deployments_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A TOML file of deployments (default: bf16/fp8/nvfp4/mxfp4 x sm90/sm100/sm120, piecewise on).")
@click.option("--model", "models", multiple=True, metavar="CLASS", help="Only these registered classes.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write here, not stdout.")
@click.option("--jobs", "-j", type=int, default=None, help="Worker processes (default: the CPU count).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--offline", is_flag=True, help="Never download; use only cached wheels.")
def census(targets: tuple[str, ...], deployments_file: Path | None, models: tuple[str, ...], fmt: str,
           out: Path | None, jobs: int | None, cache_dir: Path | None, offline: bool) -> None:
    """Where Dynamo breaks, for every registered SGLang model on each deployment."""
    from dynacheck.census import render
    from dynacheck.census.matrix import load_deployments
    from dynacheck.census.run import run_census
    from dynacheck.sources.resolve import resolve_targets

    specs = targets or DEFAULT_TARGETS
    progress = StatusLine() if sys.stderr.isatty() else (lambda message: click.echo(message, err=True))
    resolved = resolve_targets(specs, cache_dir=cache_dir, offline=offline)
    deployments = load_deployments(deployments_file)
    result = run_census(resolved, deployments, cache_dir=cache_dir, jobs=jobs, progress=progress,
                        models=models).to_dict()
    if isinstance(progress, StatusLine):
        progress.close()
    command = "dynacheck census " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else ""
    text = {"json": render.to_json, "markdown": lambda d: render.markdown(d, command),
            "html": lambda d: render.to_html(d, command), "terminal": render.terminal}[fmt](result)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        click.echo(f"dynacheck: census written to {out}", err=True)
    else:
        click.echo(text, nl=False)

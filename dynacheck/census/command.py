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
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write census-sglang-<version>.json, .md and .html here (e.g. reports/).")
@click.option("--flashinfer-api", is_flag=True,
              help="Census FlashInfer's exported functions instead of SGLang's models (one deployment: sm100).")
@click.option("--compare", nargs=2, type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              metavar="OLD.json NEW.json", help="Diff two census JSON files (no scan) and print markdown.")
@click.option("--jobs", "-j", type=int, default=None, help="Worker processes (default: the CPU count).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--offline", is_flag=True, help="Never download; use only cached wheels.")
def census(targets: tuple[str, ...], deployments_file: Path | None, models: tuple[str, ...], fmt: str,
           out: Path | None, out_dir: Path | None, flashinfer_api: bool, compare: tuple[Path, Path] | None, jobs: int | None, cache_dir: Path | None, offline: bool) -> None:
    """Where Dynamo breaks, for every registered SGLang model on each deployment."""
    from dynacheck.census import render
    from dynacheck.census.matrix import load_deployments
    from dynacheck.census.run import run_census
    from dynacheck.errors import UserError
    from dynacheck.sources.resolve import resolve_targets

    command = "dynacheck census " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else ""
    if compare:
        _compare(compare, out, command)
        return
    if flashinfer_api and fmt == "html":
        raise UserError("The FlashInfer API census is written as JSON or markdown, not HTML.",
                        "Use --format json or --format markdown (or --out-dir for both).")
    specs = targets or DEFAULT_TARGETS
    deployments = load_deployments(deployments_file)  # a bad file is said before any download
    progress = StatusLine() if sys.stderr.isatty() else (lambda message: click.echo(message, err=True))
    try:
        resolved = resolve_targets(specs, cache_dir=cache_dir, offline=offline)
        if flashinfer_api:
            _api(resolved, cache_dir, progress, fmt, out, out_dir, command)
            return
        result = run_census(resolved, deployments, cache_dir=cache_dir, jobs=jobs, progress=progress,
                            models=models).to_dict()
    finally:
        if isinstance(progress, StatusLine):
            progress.close()  # also on an error: the error line is not drawn over by the status
    text = {"json": render.to_json, "markdown": lambda d: render.markdown(d, command),
            "html": lambda d: render.to_html(d, command), "terminal": render.terminal}[fmt](result)
    if out_dir is not None:
        version = next((t.version for t in resolved if t.name == "sglang"), "unknown")
        out_dir.mkdir(parents=True, exist_ok=True)
        for suffix, view in (("json", render.to_json), ("md", lambda d: render.markdown(d, command)),
                             ("html", lambda d: render.to_html(d, command))):
            path = out_dir / f"census-sglang-{version}.{suffix}"
            path.write_text(view(result), encoding="utf-8")
            click.echo(f"dynacheck: census written to {path}", err=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        click.echo(f"dynacheck: census written to {out}", err=True)
    else:
        click.echo(text, nl=False)


def _api(resolved, cache_dir, progress, fmt, out, out_dir, command) -> None:
    import json

    from dynacheck.census.flashinfer_api import api_census, api_markdown

    data = api_census(resolved, cache_dir=cache_dir, progress=progress)
    views = {"json": lambda d: json.dumps(d, indent=1) + "\n", "markdown": lambda d: api_markdown(d, command)}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for suffix, view in (("json", views["json"]), ("md", views["markdown"])):
            path = out_dir / f"census-flashinfer-{data['version']}.{suffix}"
            path.write_text(view(data), encoding="utf-8")
            click.echo(f"dynacheck: FlashInfer API census written to {path}", err=True)
    text = views.get(fmt, views["markdown"])(data)  # terminal: the markdown table
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    elif out_dir is None:
        click.echo(text, nl=False)


def _compare(paths: tuple[Path, Path], out: Path | None, command: str) -> None:
    import json

    from dynacheck.census.compare import compare, compare_markdown
    from dynacheck.errors import UserError

    try:
        old, new = (json.loads(p.read_text(encoding="utf-8")) for p in paths)
        text = compare_markdown(compare(old, new), command)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"Could not compare the census files: {exc}.",
                        "Give two JSON files written by `dynacheck census --format json`.") from None
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)

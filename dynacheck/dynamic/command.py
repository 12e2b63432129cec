"""`dynacheck trace [--out DIR] [--collect-all] -- CMD ARGS...`"""

from __future__ import annotations

import time
from pathlib import Path

import click

from dynacheck.dynamic.launch import run_traced
from dynacheck.dynamic.merge import load_trace
from dynacheck.dynamic.summary import print_summary


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("reports/trace"), show_default=True, help="Folder for the per-process event files.")
@click.option("--collect-all", is_flag=True,
              help="Compile fullgraph=True code with fullgraph=False so one run records every break "
                   "(each still marked fatal under the user's fullgraph).")
@click.option("--quiet", is_flag=True, help="Do not print the summary.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def trace(out_dir: Path, collect_all: bool, quiet: bool, command: tuple[str, ...]) -> int:
    """Run CMD with the Dynamo recorder in every Python process it starts; exit with CMD's code."""
    started = time.monotonic()
    if not quiet:
        click.echo(f"dynacheck trace: recording every Python process of `{' '.join(command)}` into {out_dir}/",
                   err=True)
    code = run_traced(list(command), out_dir, collect_all)
    if not quiet:
        trace = load_trace(out_dir)
        click.echo(f"dynacheck trace: done in {time.monotonic() - started:.1f} s: {len(trace.processes)} "
                   f"process(es), {len(trace.events)} event(s), exit {code}", err=True)
        print_summary(trace, out_dir=str(out_dir))
    return code

"""A terminal summary of a trace: what broke, where in the user's code, and how often."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from dynacheck.model import Event, TraceResult

KIND_ORDER = ("fullgraph_error", "compile_error", "graph_break", "frame_skip", "recompile_limit", "recompile",
              "cuda_graph", "side_effect")


def short_path(path: str) -> str:
    """Relative to the working folder when under it; else the last two parts."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    if not rel.startswith(".."):
        return rel
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def where(event: Event) -> str:
    site = event.site
    if site is None:
        return event.compiled_frame or "?"
    return f"{site.function} {short_path(site.file)}:{site.line}"


def print_summary(trace: TraceResult, console: Console | None = None, out_dir: str = "") -> None:
    console = console or Console(stderr=True)
    died = [p for p in trace.processes if not p.ended]
    console.print(
        f"[bold]dynacheck trace[/bold]: {len(trace.processes)} process(es) with torch {trace.torch_version or '?'}, "
        f"{len(trace.events)} distinct event(s), command exit {trace.exit_code}"
        + (f", {len(died)} process(es) ended without an exit record" if died else "")
    )
    if not trace.events:
        console.print("No graph breaks, recompiles or side effects were recorded.")
        return
    table = Table(show_lines=False, box=None, pad_edge=False)
    for column in ("kind", "GB id", "what", "site", "n", "fatal*"):
        table.add_column(column, overflow="fold")
    ordered = sorted(trace.events, key=lambda e: (KIND_ORDER.index(e.kind) if e.kind in KIND_ORDER else 99, e.time))
    for event in ordered:
        label = event.gb_type if event.kind != "side_effect" else f"{event.gb_type} [{event.phase}]"
        table.add_row(event.kind, event.gb_id or "-", label, where(event), str(event.count),
                      "yes" if event.fatal_under_fullgraph else "")
    console.print(table)
    console.print("fatal*: would stop the run under the user's own fullgraph=True")
    if out_dir:
        console.print(f"Events: {out_dir}  (full report: dynacheck report --trace {out_dir})")

"""A terminal summary of a trace: what broke, where in the user's code, and how often."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from dynacheck.model import Event, TraceResult
from dynacheck.report.events import event_is_outside

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
    """`Class.method` over `file:line`: two short lines a narrow table wraps between, not inside a name."""
    site = event.site
    if site is None:
        return event.compiled_frame or "?"
    return f"{short_name(site.function)}\n{short_path(site.file)}:{site.line}"


def short_name(function: str) -> str:
    """The last two parts of a qualified name, `<locals>` left out (the file names the module)."""
    parts = [p for p in function.split(".") if p != "<locals>"]
    return ".".join(parts[-2:])


def is_outside(event: Event) -> bool:
    """A side effect outside any compiled region: eager JIT builds, imports, compile workers; not a break."""
    return event_is_outside(event)


NARROW = 110  # below this a table would split names mid-word: one block per event instead


def _label(event: Event) -> str:
    return event.gb_type if event.kind != "side_effect" else f"{event.gb_type} [{event.phase}]"


def _print_blocks(console: Console, events: list[Event]) -> None:
    """One event per block; lines wrap at spaces, so a name is split only when it is wider than the terminal."""
    from rich.padding import Padding
    from rich.text import Text

    for event in events:
        head = Text(f"{event.kind} {event.gb_id or '-'}  x{event.count}", style="bold")
        if event.fatal_under_fullgraph:
            head.append("  fatal*", style="red")
        console.print(head)
        console.print(Padding(Text(_label(event)), (0, 0, 0, 2)))
        console.print(Padding(Text("at " + where(event).replace("\n", " ")), (0, 0, 0, 2)))


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
    inside = [e for e in trace.events if not is_outside(e)]
    outside = len(trace.events) - len(inside)
    ordered = sorted(inside, key=lambda e: (KIND_ORDER.index(e.kind) if e.kind in KIND_ORDER else 99, e.time))
    if console.width < NARROW:
        _print_blocks(console, ordered)
    else:
        table = Table(show_lines=False, box=None, pad_edge=False)
        for column in ("kind", "GB id", "what", "site", "n", "fatal*"):
            table.add_column(column, overflow="fold", no_wrap=column not in ("what", "site"))
        for event in ordered:
            table.add_row(event.kind, event.gb_id or "-", _label(event), where(event), str(event.count),
                          "yes" if event.fatal_under_fullgraph else "")
        console.print(table)
    console.print("fatal*: would stop the run under the user's own fullgraph=True")
    if outside:
        console.print(f"{outside} side effect(s) outside compiled regions (not breaks) are not listed; "
                      "`dynacheck report --trace DIR -v` lists them.")
    if out_dir:
        console.print(f"Events: {out_dir}  (full report: dynacheck report --trace {out_dir})")

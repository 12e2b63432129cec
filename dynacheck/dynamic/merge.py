"""Read a trace folder back: every process's events, merged and deduplicated across ranks and layers.

Tolerates what killed processes leave: a truncated last line, no end record (ended = "").
Events with the same kind, break type, site and phase become one event whose `count` adds up the
occurrences; the ranks and pids it was seen on are kept in `ranks` / `pids`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from dynacheck.errors import UserError
from dynacheck.model import Event, ProcessInfo, TraceResult

RUN_FILE = "trace.json"  # written by `dynacheck trace`: command, exit code


def _records(path: Path) -> list[dict[str, Any]]:
    records = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            if isinstance(record, dict):
                records.append(record)
    return records


def _dedupe_key(event: Event) -> tuple:
    site = event.site
    where = (site.file, site.line, site.function) if site else (event.compiled_frame, 0, "")
    return (event.kind, event.gb_type, *where, event.phase)


def load_process(path: Path) -> tuple[ProcessInfo | None, list[Event], str]:
    """One process file -> its info, its events (repeat counts applied), its torch version."""
    header: dict[str, Any] = {}
    events: list[Event] = []
    repeats: dict[tuple, int] = {}
    ended = ""
    torch_version = ""
    for record in _records(path):
        kind = record.get("record")
        if kind == "process":
            header = record
            torch_version = record.get("torch_version") or torch_version
        elif kind == "process_update":
            torch_version = record.get("torch_version") or torch_version
        elif kind == "end":
            ended = str(record.get("ended", ""))
        elif kind == "repeat":
            event = Event.from_dict(record)
            repeats[_dedupe_key(event)] = event.count
        elif kind is None and "kind" in record:
            try:
                events.append(Event.from_dict(record))
            except TypeError:
                continue
    if repeats:
        events = [replace(e, count=repeats.get(_dedupe_key(e), e.count)) for e in events]
    if not header and not events:
        return None, [], torch_version
    pid = int(header.get("pid") or (events[0].pid if events else 0))
    rank = int(header.get("rank", -1))
    if rank < 0:  # the rank may be set after start-up (e.g. in a spawned worker's target)
        rank = next((e.rank for e in events if e.rank >= 0), -1)
    info = ProcessInfo(
        pid=pid,
        rank=rank,
        argv=tuple(header.get("argv") or ()),
        events=len(events),
        ended=ended,
    )
    return info, events, torch_version


def merge_events(events: list[Event]) -> list[Event]:
    """Same kind + break type + site (+ phase) -> one event, counts summed, ranks/pids kept."""
    groups: dict[tuple, list[Event]] = {}
    for event in sorted(events, key=lambda e: e.time):
        groups.setdefault(_dedupe_key(event), []).append(event)
    merged = []
    for group in groups.values():
        first = group[0]
        pids = sorted({e.pid for e in group})
        ranks = sorted({e.rank for e in group if e.rank >= 0})
        merged.append(
            replace(
                first,
                count=sum(e.count for e in group),
                fatal_under_fullgraph=any(e.fatal_under_fullgraph for e in group),
                ranks=tuple(ranks),
                pids=tuple(pids),
            )
        )
    return merged


def load_trace(trace_dir: str | Path) -> TraceResult:
    """Merge every `events-*.jsonl` in a trace folder into one TraceResult."""
    folder = Path(trace_dir)
    if not folder.is_dir():
        raise UserError(f"No trace folder at {folder}.", "Run `dynacheck trace --out DIR -- CMD` first.")
    run: dict[str, Any] = {}
    if (folder / RUN_FILE).is_file():
        try:
            run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        except ValueError:
            run = {}
    processes: list[ProcessInfo] = []
    events: list[Event] = []
    torch_version = ""
    for path in sorted(folder.glob("events-*.jsonl")):
        info, proc_events, version = load_process(path)
        if info is not None:
            processes.append(info)
        events.extend(proc_events)
        torch_version = torch_version or version
    return TraceResult(
        command=tuple(run.get("command") or ()),
        processes=tuple(sorted(processes, key=lambda p: (p.rank, p.pid))),
        events=tuple(merge_events(events)),
        exit_code=int(run.get("exit_code", 0) or 0),
        torch_version=torch_version,
    )

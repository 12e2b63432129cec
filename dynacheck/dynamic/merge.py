"""Read a trace folder back: every process's events, merged and deduplicated across ranks and layers.

Tolerates what killed processes leave: a truncated last line, no end record (ended = "").
Events with the same kind, break type, site and phase become one event whose `count` adds up the
occurrences; the ranks and pids it was seen on are kept in `ranks` / `pids`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from dynacheck.errors import UserError
from dynacheck.readers import parse_json, read_input_bytes, read_input_text
from dynacheck.model import Event, ProcessInfo, TraceResult

RUN_FILE = "trace.json"  # written by `dynacheck trace`: command, exit code


MAX_EVENTS_BYTES = 1024 * 1024 * 1024  # per process file
_TEXT = ("gb_id", "gb_type", "reason", "explanation", "compiled_frame", "phase", "detail")
_INTS = ("rank", "count")


def _records(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of one events file; lines that are not one (cut short by a kill, too deep) are dropped."""
    records = []
    text = read_input_bytes(path, "trace events", MAX_EVENTS_BYTES).decode("utf-8", errors="replace")
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line cut short by a kill, or not an event at all
        if isinstance(record, dict):
            records.append(record)
    return records


def event_from(record: dict[str, Any]) -> Event | None:
    """An Event from one record when every field has the type the recorder writes; else None (skipped)."""
    if not isinstance(record.get("kind"), str) or not _is_int(record.get("pid", 0)):
        return None
    if any(not isinstance(record.get(k, ""), str) for k in _TEXT):
        return None
    if any(not _is_int(record.get(k, 0)) for k in _INTS) or not isinstance(record.get("time", 0.0), (int, float)):
        return None
    if not isinstance(record.get("fatal_under_fullgraph", False), bool):
        return None
    for key, kind in (("hints", str), ("argv", str), ("ranks", int), ("pids", int)):
        values = record.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
            return None
    stack, site = record.get("user_stack", []), record.get("site")
    if not isinstance(stack, list) or not all(_is_frame(f) for f in stack) or not (site is None or _is_frame(site)):
        return None
    try:
        return Event.from_dict(record)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def _is_frame(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("file"), str) and _is_int(value.get("line"))
            and isinstance(value.get("function"), str) and isinstance(value.get("code", ""), str))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    malformed = 0
    for record in _records(path):
        kind = record.get("record")
        if kind == "process":
            header = record
            torch_version = record.get("torch_version") or torch_version
        elif kind == "process_update":
            torch_version = record.get("torch_version") or torch_version
        elif kind == "end":
            ended = str(record.get("ended", ""))[:200]
        elif kind == "repeat":
            event = event_from(record)
            if event is not None:
                repeats[_dedupe_key(event)] = event.count
            malformed += event is None
        elif kind is None and "kind" in record:
            event = event_from(record)
            if event is not None:
                events.append(event)
            malformed += event is None
    if malformed:
        sys.stderr.write(f"dynacheck: {path.name}: left out {malformed} malformed event record(s); "
                         "the others are used\n")
    if repeats:
        events = [replace(e, count=repeats.get(_dedupe_key(e), e.count)) for e in events]
    if not header and not events:
        return None, [], torch_version
    if not isinstance(torch_version, str):
        torch_version = ""
    pid = header.get("pid") if _is_int(header.get("pid")) and header.get("pid") else (events[0].pid if events else 0)
    rank = header.get("rank", -1) if _is_int(header.get("rank", -1)) else -1
    if rank < 0:  # the rank may be set after start-up (e.g. in a spawned worker's target)
        rank = next((e.rank for e in events if e.rank >= 0), -1)
    argv = header.get("argv") or ()
    info = ProcessInfo(
        pid=pid,
        rank=rank,
        argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
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
    run = _run_record(folder / RUN_FILE)
    processes: list[ProcessInfo] = []
    events: list[Event] = []
    torch_version = ""
    for path in sorted(folder.glob("events-*.jsonl")):
        try:
            info, proc_events, version = load_process(path)
        except UserError as exc:  # a FIFO, a device, a link to /dev/zero: say so, read the others
            sys.stderr.write(f"dynacheck: skipped {path.name}: {exc.message}\n")
            continue
        if info is not None:
            processes.append(info)
        events.extend(proc_events)
        torch_version = torch_version or version
    command = run.get("command") or ()
    code = run.get("exit_code", 0)
    return TraceResult(
        command=tuple(str(c) for c in command) if isinstance(command, list) else (),
        processes=tuple(sorted(processes, key=lambda p: (p.rank, p.pid))),
        events=tuple(merge_events(events)),
        exit_code=code if _is_int(code) else (-1 if "exit_code" in run else 0),  # -1: never recorded
        torch_version=torch_version,
    )


def _run_record(path: Path) -> dict[str, Any]:
    """`trace.json`, or {} when it is absent, damaged or not a plain file."""
    if not path.exists():
        return {}
    try:
        run = parse_json(read_input_text(path, "trace run", 16 * 1024 * 1024), str(path), "")
    except UserError as exc:
        sys.stderr.write(f"dynacheck: ignored {path.name}: {exc.message}\n")
        return {}
    return run if isinstance(run, dict) else {}

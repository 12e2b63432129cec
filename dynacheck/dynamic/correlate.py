"""Line up a trace with a scan: confirmed, predicted only, seen only.

A finding is confirmed by a break-kind event whose user stack holds the finding's site (same
function, and same file:line when both are known) or, failing that, the finding's whole chain in
order. Paths are compared by suffix, so the scan's root-relative paths meet the trace's absolute
ones. Other events at a confirmed site (the side effect behind a break) join that match. Each
event left over is `seen_only`, with a note naming the hop the scan could not resolve: the deepest
frame of the stack that lies in a scanned target.
"""

from __future__ import annotations

import os
from pathlib import PurePath

from dynacheck.model import (
    Event,
    Finding,
    Frame,
    Match,
    Review,
    ScanResult,
    TraceResult,
)

BREAK_KINDS = ("graph_break", "frame_skip", "fullgraph_error", "compile_error")


def _norm(path: str) -> str:
    return PurePath(path.replace("\\", "/")).as_posix().lstrip("./") if path else ""


def same_file(trace_path: str, scan_path: str) -> bool:
    """True when one path ends with the other at a folder boundary (relative vs absolute)."""
    a, b = _norm(trace_path), _norm(scan_path)
    if not a or not b:
        return False
    if a == b:
        return True
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return longer.endswith("/" + shorter)


def same_function(frame_name: str, name: str) -> bool:
    """Qualified names match exactly, or one is the other's dotted tail (`Model.forward`)."""
    if not frame_name or not name:
        return False
    return frame_name == name or frame_name.endswith("." + name) or name.endswith("." + frame_name)


def frame_is(frame: Frame, function: str, file: str, line: int) -> bool:
    if not same_function(frame.function, function):
        return False
    if file and frame.file and not same_file(frame.file, file):
        return False
    return not (line and frame.line and frame.line != line)


def _chain_in_stack(finding: Finding, stack: tuple[Frame, ...]) -> bool:
    hops = [h for h in finding.chain if h.function]
    if not hops:
        return False
    position = 0
    for hop in hops:
        while position < len(stack) and not same_function(stack[position].function, hop.function):
            position += 1
        if position == len(stack):
            return False
        position += 1
    return True


def _frames(event: Event) -> tuple[Frame, ...]:
    return event.user_stack or ((event.site,) if event.site is not None else ())


def event_confirms(event: Event, finding: Finding) -> bool:
    site = finding.site
    if any(frame_is(f, site.function, site.file, site.line) for f in _frames(event)):
        return True
    gb_ok = not (event.gb_id and finding.outcome.gb_id) or event.gb_id == finding.outcome.gb_id
    return gb_ok and _chain_in_stack(finding, _frames(event))


def _target_roots(scan: ScanResult) -> list[str]:
    return [os.path.realpath(t.root) for t in scan.targets if t.root]


def _in_target(frame: Frame, roots: list[str], scan_files: set[str]) -> bool:
    real = os.path.realpath(frame.file) if frame.file else ""
    if any(real.startswith(root + os.sep) for root in roots):
        return True
    return any(same_file(frame.file, f) for f in scan_files)


def unresolved_hop(event: Event, scan: ScanResult) -> str:
    """Name the deepest stack frame inside a scanned target, and whether the scan reached it."""
    roots = _target_roots(scan)
    files = {h.file for f in scan.findings for h in f.chain} | {f.site.file for f in scan.findings}
    on_chain = {h.function for f in scan.findings for h in f.chain}
    for frame in reversed(_frames(event)):
        if not _in_target(frame, roots, files):
            continue
        where = f"{frame.function} ({frame.file}:{frame.line})"
        if any(same_function(frame.function, name) for name in on_chain):
            return f"the scan reached {where} but did not resolve the call made there"
        return f"the scan did not reach {where}: the hop into it was not resolved"
    return ""


def correlate(scan: ScanResult | None, trace: TraceResult) -> Review:
    """Classify each finding and each event; the Review carries both inputs and the matches."""
    findings = list(scan.findings) if scan is not None else []
    claimed: dict[int, list[int]] = {i: [] for i in range(len(findings))}
    used: set[int] = set()
    for index, event in enumerate(trace.events):
        if event.kind not in BREAK_KINDS:
            continue
        for f_index, finding in enumerate(findings):
            if event_confirms(event, finding):
                claimed[f_index].append(index)
                used.add(index)
    for index, event in enumerate(trace.events):
        if index in used or event.kind in BREAK_KINDS:
            continue
        for f_index, finding in enumerate(findings):
            site = finding.site
            if claimed[f_index] and event.site is not None and frame_is(event.site, site.function, site.file, site.line):
                claimed[f_index].append(index)
                used.add(index)
                break
    matches = [
        Match(status="confirmed" if claimed[i] else "predicted_only", fingerprint=f.fingerprint,
              events=tuple(sorted(claimed[i])))
        for i, f in enumerate(findings)
    ]
    for index, event in enumerate(trace.events):
        if index in used:
            continue
        note = unresolved_hop(event, scan) if scan is not None else ""
        matches.append(Match(status="seen_only", events=(index,), note=note))
    return Review(scan=scan, trace=trace, matches=tuple(matches))

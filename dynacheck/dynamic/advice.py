"""A fix for each observed break, placed the way the static scan would place it, from the event's stack.

A break seen at run time that the scan did not predict still deserves the scan's advice: the stack
gives the chain (from the compiled frame down to the innermost user frame) and the call made there
(the next frame, or the builtin Dynamo names); the catalogue gives the rule for that call and
`fixes.place` puts its fixes on the chain. Nothing is imported or run from the traced program.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import PurePath

from dynacheck.catalog import load_catalog
from dynacheck.dynamic.correlate import BREAK_KINDS
from dynacheck.dynamic.stacks import module_name
from dynacheck.fixes.place import HopFacts, place
from dynacheck.model import VIA_ENTRY, Event, Fix, Hop, TraceResult
from dynacheck.report.events import event_chain as user_chain

_BUILTIN = re.compile(r"^builtin (?P<name>[A-Za-z_][A-Za-z0-9_]*)\b")
_SKIPPED = re.compile(r"module: (?P<module>[\w.]+), qualname: (?P<qual>[\w.]+)")


def advise(trace: TraceResult) -> TraceResult:
    """The trace with `fixes` on every break event the catalogue has a rule for (others unchanged)."""
    events = tuple(_with_fixes(e) if e.kind in BREAK_KINDS and not e.fixes else e for e in trace.events)
    return dataclasses.replace(trace, events=events)


def observed_callee(event: Event) -> str:
    """What the site called: the builtin Dynamo names, or the first frame below the site, or the skipped function."""
    found = _BUILTIN.match(event.detail or "")
    if found:
        return f"builtins.{found.group('name')}"
    stack = list(event.user_stack)
    if event.site is not None:
        below = [i for i, f in enumerate(stack) if f.file == event.site.file and f.line == event.site.line]
        if below and below[-1] + 1 < len(stack):
            frame = stack[below[-1] + 1]
            module = (module_name(frame.file) or _module_from_path(frame.file)) if frame.file else ""
            return f"{module}.{frame.function}" if module and "." not in frame.function else frame.function
    skipped = _SKIPPED.search(event.detail or "")
    if skipped:
        return f"{skipped.group('module')}.{skipped.group('qual')}"
    return ""


def _module_from_path(file: str) -> str:
    """`/usr/lib/python3.11/subprocess.py` -> `subprocess` when the file is not on this machine's sys.path."""
    path = PurePath(file)
    return path.parent.name if path.stem == "__init__" else path.stem


def _with_fixes(event: Event) -> Event:
    callee = observed_callee(event)
    rule = load_catalog().match_call(callee) if callee else None
    frames = user_chain(event)
    if rule is None or not frames:
        return event
    chain = [Hop(f.function, f.file, f.line, VIA_ENTRY if i == 0 else "call seen at run time", code=f.code)
             for i, f in enumerate(frames)]
    facts = [HopFacts(returns_tensors=False, has_params=True, cached=False) for _ in chain]
    fixes: tuple[Fix, ...] = place(rule.fixes, chain, facts)
    return dataclasses.replace(event, fixes=fixes)

"""What an observed event is, in the model's terms alone: breaks vs side effects, severity, the user chain.

Shared by the renderers (through `view`) and by `dynamic.advice`, which places fixes on the same chain
the reports show; nothing here imports the analyzer or the dynamic room.
"""

from __future__ import annotations

from dynacheck.model import Event, Frame

BREAK_EVENTS = ("graph_break", "frame_skip", "fullgraph_error", "compile_error")
EVENT_WORDS = {"fullgraph_error": "fullgraph error", "compile_error": "compile error", "side_effect": "side effect",
               "recompile_limit": "recompile limit", "cuda_graph": "CUDA graph"}


def event_is_outside(event: Event) -> bool:
    """A side effect that ran outside any compiled region (eager JIT builds, imports, compile workers)."""
    return event.kind == "side_effect" and event.phase not in ("tracing", "compiled_runtime")


def event_severity(event: Event) -> str:
    """error: a break or a failed compile; warning: a recompile or a side effect in compiled code; info: outside."""
    if event.kind in BREAK_EVENTS or event.kind == "recompile_limit":
        return "error"
    if event_is_outside(event):
        return "info"
    return "warning"


def event_chain(event: Event) -> list[Frame]:
    """The stack from the compiled frame to the site: library and torch frames cut, Dynamo's resume copies merged.

    After a graph break Dynamo runs the rest of a function as a resume function, so the stack holds the
    function twice in a row (the original frame, then the resume frame): only the innermost is kept.
    User frames carry `module.qualname`; library, stdlib and torch frames keep a bare code name.
    """
    stack = list(event.user_stack)
    if event.site is not None:
        for i in range(len(stack) - 1, -1, -1):
            if stack[i].file == event.site.file and stack[i].line == event.site.line:
                stack = stack[:i + 1]
                break
    if event.compiled_frame:
        starts = [i for i, f in enumerate(stack) if f.function == event.compiled_frame]
        if starts:
            stack = stack[starts[0]:]
    chain: list[Frame] = []
    for frame in stack:
        if "." not in frame.function:
            continue
        if chain and chain[-1].function == frame.function and chain[-1].file == frame.file:
            chain[-1] = frame
            continue
        chain.append(frame)
    return chain or ([event.site] if event.site else [])


def event_text(event: Event) -> str:
    """What happened, in Dynamo's words (gb_type, explanation), never its internal reprs (those are `detail`)."""
    return event.gb_type or event.reason or event.explanation or event.kind.replace("_", " ")

"""Graph breaks, frame skips, fullgraph errors and recompiles, from Dynamo's structured trace.

Dynamo reports each of these through `torch._logging.trace_structured` (the stream `TORCH_TRACE`
/ tlparse read) while the exception is being handled. We wrap that function (called as
`torch._logging.trace_structured(...)` by Dynamo, so the wrapper sees every call) and take:
  - artifact `dynamo_graph_break_reason`: a graph break (or a frame skip when `skip_frame`);
  - artifact `dynamo_error`: the frame could not be compiled (fullgraph error, or frame skip);
  - artifact `recompile_reasons`: the guard failure that caused a recompile;
and read the live `Unsupported` (`gb_type`, `real_stack`, message) from `sys.exc_info()`.
The recompile limit is a warning on logger `torch._dynamo.convert_frame` ("hit config.%s").
Checked against torch 2.11 and 2.13 sources; see docs/trace.md for the differences.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from dynacheck.dynamic import registry, stacks
from dynacheck.dynamic.fullgraph import wanted_fullgraph
from dynacheck.model import Event

_SEEN = "_dynacheck_seen"
_FUNC_INFO = re.compile(r"^'(.+)' \((.+):(\d+)\)$")
RECOMPILE_LIMIT_GB_TYPE = "Dynamo recompile limit exceeded"


def compile_frame_info(frame: FrameType | None) -> tuple[CodeType | None, bool | None]:
    """(code being compiled, one_graph) from Dynamo's `convert_frame._compile` frame, when found.

    `_compile(code, ..., one_graph, ...)` has these locals in 2.11 and 2.13; absent -> (None, None).
    """
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            local = frame.f_locals
            target = local.get("code")
            one_graph = local.get("one_graph")
            return (target if isinstance(target, CodeType) else None), (
                bool(one_graph) if one_graph is not None else None
            )
        frame = frame.f_back
    return None, None


class DynamoHooks:
    """Turns Dynamo's reports into Events and hands them to `emit`."""

    def __init__(self, emit: Callable[[Event], None], pid: int, rank: Callable[[], int]) -> None:
        self.emit = emit
        self.pid = pid
        self.rank = rank
        self._inner_paths: set[tuple] = set()  # tails of recorded break stacks, see _is_retrace

    # ---- installation -------------------------------------------------------------------
    def install(self, torch: Any) -> list[str]:
        """Wrap the structured-trace entry point and listen for the recompile-limit warning."""
        installed = []
        log_module = getattr(torch, "_logging", None)
        original = getattr(log_module, "trace_structured", None)
        if original is not None and not getattr(original, "_dynacheck", False):
            hooks = self

            def trace_structured(name: str, metadata_fn: Callable[[], Any] = dict, **kwargs: Any) -> None:
                if name == "artifact":
                    hooks._safely(hooks.on_artifact, metadata_fn, kwargs.get("payload_fn"))
                return original(name, metadata_fn, **kwargs)

            trace_structured._dynacheck = True  # type: ignore[attr-defined]
            trace_structured.__wrapped__ = original  # type: ignore[attr-defined]
            log_module.trace_structured = trace_structured
            installed.append("torch._logging.trace_structured")
        logger = logging.getLogger("torch._dynamo.convert_frame")
        if not any(isinstance(h, _LimitHandler) for h in logger.handlers):
            logger.addHandler(_LimitHandler(self))
            installed.append("logger torch._dynamo.convert_frame")
        return installed

    def _safely(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001, S110 - recording must never change the traced program
            pass

    # ---- structured artifacts -----------------------------------------------------------
    def on_artifact(self, metadata_fn: Callable[[], Any], payload_fn: Callable[[], Any] | None) -> None:
        meta = metadata_fn()
        name = meta.get("name") if isinstance(meta, dict) else None
        if name == "dynamo_graph_break_reason":
            self.on_break(sys.exc_info()[1], from_error=False)
        elif name == "dynamo_error":
            self.on_break(sys.exc_info()[1], from_error=True)
        elif name == "recompile_reasons" and payload_fn is not None:
            self.on_recompile(payload_fn())

    def on_break(self, exc: BaseException | None, *, from_error: bool) -> None:
        if exc is None or getattr(exc, _SEEN, False):
            return
        code, one_graph = compile_frame_info(sys._getframe())
        fatal = bool(one_graph) or wanted_fullgraph()
        gb_type = getattr(exc, "gb_type", None) or type(exc).__name__
        skip_frame = bool(getattr(exc, "skip_frame", False))
        if gb_type == RECOMPILE_LIMIT_GB_TYPE:
            kind = "recompile_limit"
        elif from_error and one_graph:
            kind = "fullgraph_error"
        elif skip_frame:
            kind = "frame_skip"
        elif from_error:
            kind = "fullgraph_error" if fatal else "compile_error"
        else:
            kind = "graph_break"
        try:
            setattr(exc, _SEEN, True)
        except Exception:  # noqa: BLE001, S110
            pass
        if kind == "graph_break" and self._is_retrace(gb_type, getattr(exc, "real_stack", None)):
            return
        self.emit(self._event(kind, exc, gb_type, code, fatal))

    def _is_retrace(self, gb_type: str, real_stack: Any) -> bool:
        """After a break at a call, Dynamo compiles the callee as a frame of its own and meets the same
        break again: same type, same frames from the callee down. That is one break, not two."""
        if not real_stack:
            return False
        path = tuple((fs.filename, fs.lineno) for fs in real_stack)
        if (gb_type, path) in self._inner_paths:
            return True
        for start in range(1, len(path)):
            self._inner_paths.add((gb_type, path[start:]))
        return False

    def _event(self, kind: str, exc: BaseException, gb_type: str, code: CodeType | None, fatal: bool) -> Event:
        message = str(exc)
        headline, explanation, hints = registry.split_message(message)
        real_stack = getattr(exc, "real_stack", None) or _tracing_stack()
        outer = stacks.live_stack_above_dynamo(sys._getframe())
        user_stack = stacks.collapse_resume(outer + stacks.from_summary(real_stack or ()))
        compiled = ""
        if code is not None:
            compiled = stacks.to_frame(code.co_filename, code.co_firstlineno, code.co_name).function
        elif real_stack:
            compiled = stacks.original_name(real_stack[0].name)
        return Event(
            kind=kind,
            pid=self.pid,
            rank=self.rank(),
            gb_id=registry.gb_id_for(gb_type, message),
            gb_type=gb_type,
            reason=headline or gb_type,
            explanation=explanation,
            hints=hints,
            user_stack=tuple(user_stack),
            site=stacks.pick_site(user_stack),
            compiled_frame=compiled,
            fatal_under_fullgraph=fatal,
            detail=registry.developer_context(message),
            time=time.time(),
        )

    def on_recompile(self, payload: Any) -> None:
        reasons = payload if isinstance(payload, list) else [payload]
        text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in reasons if r)
        code, _ = compile_frame_info(sys._getframe())
        outer = stacks.live_stack_above_dynamo(sys._getframe())
        compiled = stacks.to_frame(code.co_filename, code.co_firstlineno, code.co_name) if code else None
        user_stack = outer + ([compiled] if compiled else [])
        self.emit(
            Event(
                kind="recompile",
                pid=self.pid,
                rank=self.rank(),
                reason=text.splitlines()[0] if text else "",
                detail=text[:2000],
                user_stack=tuple(user_stack),
                site=stacks.pick_site(user_stack),
                compiled_frame=compiled.function if compiled else "",
                fatal_under_fullgraph=False,
                time=time.time(),
            )
        )

    def on_limit_warning(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        limit_type, value, func_info, last_reason = (list(args) + ["", "", "", ""])[:4]
        outer = stacks.live_stack_above_dynamo(sys._getframe())
        found = _FUNC_INFO.match(str(func_info))  # "'name' (file:line)", from format_func_info
        if found:
            outer.append(stacks.to_frame(found.group(2), int(found.group(3)), found.group(1)))
        self.emit(
            Event(
                kind="recompile_limit",
                pid=self.pid,
                rank=self.rank(),
                gb_id=registry.gb_id_for(RECOMPILE_LIMIT_GB_TYPE),
                gb_type=RECOMPILE_LIMIT_GB_TYPE,
                reason=f"hit config.{limit_type} ({value})",
                detail=str(last_reason)[:2000],
                user_stack=tuple(outer),
                site=stacks.pick_site(outer),
                compiled_frame=outer[-1].function if found else str(func_info),
                fatal_under_fullgraph=wanted_fullgraph(),
                time=time.time(),
            )
        )


def _tracing_stack() -> list[Any]:
    guards = sys.modules.get("torch._guards")
    try:
        return list(guards.TracingContext.extract_stack()) if guards is not None else []
    except Exception:  # noqa: BLE001
        return []


class _LimitHandler(logging.Handler):
    """Sees `torch._dynamo hit config.recompile_limit` (a WARNING; same text in 2.11 and 2.13)."""

    def __init__(self, hooks: DynamoHooks) -> None:
        super().__init__(logging.WARNING)
        self.hooks = hooks

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str) and record.msg.startswith("torch._dynamo hit config."):
            self.hooks._safely(self.hooks.on_limit_warning, record)

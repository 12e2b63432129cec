"""Side effects seen by `sys.addaudithook`, tagged with when they happened relative to Dynamo.

phase: `tracing` (Dynamo's convert_frame is on the stack: the code runs while being traced, e.g.
under allow_in_graph / assume_constant_result), `compiled_runtime` (inside a compiled region at run
time: eval_frame is on the stack and `torch.compiler.is_compiling()` is False, e.g. the eager
code after a graph break), `outside`. Process spawns, `os.system` and ctypes loads are recorded in
every phase; file opens only inside compiled regions (elsewhere they are the program's business),
and never for Python's, torch's or the usual cache directories.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from dynacheck.dynamic import stacks
from dynacheck.model import Event

SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn", "ctypes.dlopen"}
WATCHED = SPAWN_EVENTS | {"open"}
_QUIET_CALLERS = ("importlib", "linecache", "tokenize", "zipimport", "pkgutil")


def _excluded_prefixes(out_dir: str) -> tuple[str, ...]:
    home = os.path.expanduser("~")
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, out_dir, "/proc", "/sys", "/dev",
                os.path.join(home, ".cache"), os.path.join(home, ".triton"), os.path.join(home, ".nv")}
    prefixes.update(d.rstrip(os.sep) for d in stacks._torch_dirs())
    tmp = tempfile.gettempdir()
    prefixes.update(os.path.join(tmp, name) for name in ("torchinductor_", "triton", "dynacheck"))
    return tuple(sorted(p for p in prefixes if p))


def phase_of(frame: FrameType | None) -> str:
    """tracing | compiled_runtime | outside, from the frames on the stack."""
    in_eval_frame = False
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.endswith("convert_frame.py") and "_dynamo" in filename:
            return "tracing"
        if filename.endswith("eval_frame.py") and "_dynamo" in filename:
            in_eval_frame = True
        frame = frame.f_back
    if in_eval_frame:
        compiler = getattr(sys.modules.get("torch"), "compiler", None)
        compiling = getattr(compiler, "is_compiling", None)
        if compiling is None or not compiling():
            return "compiled_runtime"
    return "outside"


def describe(event: str, args: tuple[Any, ...]) -> str:
    """A short human text for an audit event's arguments."""
    if event == "subprocess.Popen" and len(args) >= 2:
        cmd = args[1]
        return " ".join(map(str, cmd)) if isinstance(cmd, (list, tuple)) else str(cmd)
    if args:
        return str(args[0])[:300]
    return ""


class AuditHooks:
    """The audit hook; cheap for every event it does not watch."""

    def __init__(self, emit: Callable[[Event], None], pid: int, rank: Callable[[], int], out_dir: str) -> None:
        self.emit = emit
        self.pid = pid
        self.rank = rank
        self.excluded = _excluded_prefixes(out_dir)
        self._busy = threading.local()

    def install(self) -> None:
        sys.addaudithook(self.hook)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in WATCHED or getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            self._record(event, args)
        except Exception:  # noqa: BLE001, S110 - an audit hook that raises would abort the audited call
            pass
        finally:
            self._busy.on = False

    def _record(self, event: str, args: tuple[Any, ...]) -> None:
        caller = sys._getframe(2)
        if event == "open" and not self._interesting_open(args, caller):
            return
        if not self._by_user_code(caller):
            return  # torch's own work (reading sources, compile workers): not the user's side effect
        phase = phase_of(caller)
        if event == "open" and phase == "outside":
            return
        stack = self._live_stack(caller)
        self.emit(
            Event(
                kind="side_effect",
                pid=self.pid,
                rank=self.rank(),
                gb_type=event,
                reason=f"{event}: {describe(event, args)}",
                user_stack=tuple(stack),
                site=stacks.pick_site(stack),
                phase=phase,
                detail=describe(event, args),
                time=time.time(),
            )
        )

    def _interesting_open(self, args: tuple[Any, ...], caller: FrameType | None) -> bool:
        if not args or isinstance(args[0], int):
            return False
        path = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else ""
        if not path:
            return False
        if caller is not None and any(q in caller.f_code.co_filename for q in _QUIET_CALLERS):
            return False
        path = os.path.abspath(path)
        return not path.startswith(self.excluded)

    @staticmethod
    def _by_user_code(frame: FrameType | None) -> bool:
        """The innermost frame that is not stdlib belongs to the user (not torch, not dynacheck)."""
        while frame is not None:
            kind = stacks.frame_kind(frame.f_code.co_filename)
            if kind != "stdlib":
                return kind == "user"
            frame = frame.f_back
        return False

    @staticmethod
    def _live_stack(frame: FrameType | None) -> list:
        raw = []
        while frame is not None:
            raw.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        raw.reverse()
        keep = [r for r in raw if stacks.frame_kind(r[0]) not in ("torch", "dynacheck")]
        return [stacks.to_frame(f, ln, n) for f, ln, n in keep]

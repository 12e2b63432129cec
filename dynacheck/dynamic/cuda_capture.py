"""CUDA-graph capture failures and synchronizing calls made while a stream is capturing.

Patches `torch.cuda.graph.__exit__` (capture failures, with the stack of the failing call) and
`torch.cuda.synchronize` / `torch.cuda.Stream.synchronize` / `torch.cuda.Event.synchronize`
(a sync during capture). Installed only when torch was built with CUDA; nothing here touches the
device until a capture is under way, so fork-based workers stay safe.
"""

from __future__ import annotations

import functools
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from dynacheck.dynamic import stacks
from dynacheck.model import Event

_SYNC_WORDS = ("operation not permitted when stream is capturing", "stream is capturing", "StreamCapture")


class CudaGraphHooks:
    def __init__(self, emit: Callable[[Event], None], pid: int, rank: Callable[[], int]) -> None:
        self.emit = emit
        self.pid = pid
        self.rank = rank

    def install(self, torch: Any) -> bool:
        cuda = getattr(torch, "cuda", None)
        built = getattr(getattr(torch, "backends", None), "cuda", None)
        if cuda is None or built is None or not built.is_built():
            return False
        graph_cls = getattr(cuda, "graph", None)
        if graph_cls is not None and not getattr(graph_cls.__exit__, "_dynacheck", False):
            graph_cls.__exit__ = self._wrap_exit(graph_cls.__exit__)
        self._wrap_sync(cuda, "synchronize", "torch.cuda.synchronize")
        for cls_name in ("Stream", "Event"):
            cls = getattr(cuda, cls_name, None)
            if cls is not None:
                self._wrap_sync(cls, "synchronize", f"torch.cuda.{cls_name}.synchronize")
        return True

    def _wrap_exit(self, original: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        @functools.wraps(original)
        def __exit__(graph_self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:
            if exc is not None:
                try:
                    hooks._capture_failed(exc, tb)
                except Exception:  # noqa: BLE001, S110
                    pass
            return original(graph_self, exc_type, exc, tb)

        __exit__._dynacheck = True  # type: ignore[attr-defined]
        return __exit__

    def _wrap_sync(self, owner: Any, attr: str, label: str) -> None:
        original = getattr(owner, attr, None)
        if original is None or getattr(original, "_dynacheck", False):
            return
        hooks = self

        @functools.wraps(original)
        def synchronize(*args: Any, **kwargs: Any) -> Any:
            try:
                if sys.modules["torch"].cuda.is_current_stream_capturing():
                    hooks._sync_during_capture(label)
            except Exception:  # noqa: BLE001, S110
                pass
            return original(*args, **kwargs)

        synchronize._dynacheck = True  # type: ignore[attr-defined]
        setattr(owner, attr, synchronize)

    def _capture_failed(self, exc: BaseException, tb: Any) -> None:
        frames = stacks.from_summary(traceback.extract_tb(tb)) if tb is not None else []
        message = str(exc)
        is_sync = any(word in message for word in _SYNC_WORDS)
        self._emit(
            "sync during capture" if is_sync else "capture failed",
            f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}",
            frames,
            message[:2000],
        )

    def _sync_during_capture(self, label: str) -> None:
        frames = []
        frame = sys._getframe(2)
        raw = []
        while frame is not None:
            raw.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        for filename, line, name in reversed(raw):
            if stacks.frame_kind(filename) != "dynacheck":
                frames.append(stacks.to_frame(filename, line, name))
        self._emit("sync during capture", f"{label} called while a CUDA graph is being captured", frames, label)

    def _emit(self, gb_type: str, reason: str, frames: list, detail: str) -> None:
        self.emit(
            Event(
                kind="cuda_graph",
                pid=self.pid,
                rank=self.rank(),
                gb_type=gb_type,
                reason=reason,
                user_stack=tuple(frames),
                site=stacks.pick_site(frames),
                detail=detail,
                time=time.time(),
            )
        )

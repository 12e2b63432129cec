"""The recorder loaded into every traced process.

`activate()` costs one meta-path finder that answers only for the name `torch`: a process that
never imports torch pays nothing else and writes nothing. When torch finishes importing, the
recorder opens `<out>/events-<pid>.jsonl` and attaches its hooks: Dynamo's structured trace
(`dynamo_hooks`), the audit hook (`audit`), CUDA-graph capture (`cuda_capture`) and the
`torch.compile` wrapper that remembers `fullgraph=True` / forces it off under `--collect-all`
(`fullgraph`). Options travel in environment variables so child processes inherit them.
"""

from __future__ import annotations

import atexit
import importlib.abc
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the model (dataclasses) loads only once torch is imported
    from dynacheck.model import Event

ENV_OUT = "DYNACHECK_TRACE_DIR"
ENV_COLLECT_ALL = "DYNACHECK_COLLECT_ALL"
ENV_DISABLE = "DYNACHECK_TRACE_DISABLE"


class Recorder:
    """One per process: owns the event file and the hooks."""

    def __init__(self, out_dir: str, collect_all: bool = False) -> None:
        from dynacheck.dynamic.writer import EventWriter, current_rank

        self.out_dir = out_dir
        self.collect_all = collect_all
        self.writer = EventWriter(out_dir)
        self.rank = current_rank
        self.installed: list[str] = []
        self._repeats: dict[tuple, list] = {}  # side effect key -> [first event, count]
        self._lock = threading.Lock()
        self._exit_code: Any = None
        self._closed = False
        self._patch_exits()
        atexit.register(self.close)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._repeats = {}
        self._exit_code = None
        self._closed = False

    # ---- events -------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Write an event now; a side effect that repeats at the same site is counted, not rewritten."""
        if event.pid != self.writer.pid:  # hooks were attached before a fork
            from dataclasses import replace

            event = replace(event, pid=self.writer.pid)
        if event.kind == "side_effect":
            site = event.site
            key = (event.gb_type, event.phase, site.file if site else "", site.line if site else 0)
            with self._lock:
                seen = self._repeats.get(key)
                if seen is not None:
                    seen[1] += 1
                    return
                self._repeats[key] = [event, 1]
        self.writer.event(event)

    def close(self, code: Any = None) -> None:
        """At interpreter exit (or os._exit): counts of repeated side effects, then the end record."""
        from dataclasses import replace

        if self._closed:
            return
        self._closed = True
        if code is not None:
            self._exit_code = code

        for event, count in list(self._repeats.values()):
            if count > 1:
                self.writer._write({"record": "repeat", **replace(event, count=count).to_dict()})
        code = self._exit_code
        if code is None:
            code = 1 if getattr(sys, "last_value", None) is not None else 0
        elif not isinstance(code, int):
            code = 1
        self.writer.end(f"exit {code}")

    def _patch_exits(self) -> None:
        """Remember sys.exit's status; write the end record before os._exit (fork workers leave that way)."""
        original_exit, original_os_exit = sys.exit, os._exit
        recorder = self

        def exit(status: Any = None) -> None:
            recorder._exit_code = 0 if status is None else status
            original_exit(status)

        def _exit(status: int) -> None:
            try:
                recorder.close(status)
            finally:
                original_os_exit(status)

        exit.__wrapped__ = original_exit  # type: ignore[attr-defined]
        _exit.__wrapped__ = original_os_exit  # type: ignore[attr-defined]
        sys.exit = exit
        os._exit = _exit

    # ---- hooks --------------------------------------------------------------------------
    def attach(self, torch: Any) -> None:
        """Attach every hook this torch supports; a missing hook is skipped, never fatal."""
        from dynacheck.dynamic.audit import AuditHooks
        from dynacheck.dynamic.cuda_capture import CudaGraphHooks
        from dynacheck.dynamic.dynamo_hooks import DynamoHooks
        from dynacheck.dynamic.fullgraph import patch_compile

        pid = self.writer.pid
        self.installed += DynamoHooks(self.emit, pid, self.rank).install(torch)
        if patch_compile(torch, self.collect_all):
            self.installed.append("torch.compile" + (" (collect-all)" if self.collect_all else ""))
        AuditHooks(self.emit, pid, self.rank, self.out_dir).install()
        self.installed.append("sys.addaudithook")
        try:
            if CudaGraphHooks(self.emit, pid, self.rank).install(torch):
                self.installed.append("torch.cuda.graph")
        except Exception:  # noqa: BLE001, S110
            pass
        self.writer.header_update(
            torch_version=str(getattr(torch, "__version__", "")),
            hooks=self.installed,
            collect_all=self.collect_all,
        )


class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself; when `torch` is found by the next finder, runs a callback after it executes."""

    def __init__(self, on_torch: Any) -> None:
        self.on_torch = on_torch

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        watcher = self

        def exec_module(module: Any) -> None:
            original(module)
            watcher.detach()
            watcher.on_torch(module)

        loader.exec_module = exec_module
        return spec

    def detach(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


_recorder: Recorder | None = None  # the process's recorder (one per process by design)


def _start(torch: Any, out_dir: str, collect_all: bool) -> None:
    global _recorder
    if _recorder is not None:
        return
    try:
        _recorder = Recorder(out_dir, collect_all)
        _recorder.attach(torch)
    except Exception as exc:  # noqa: BLE001 - never break the traced program
        print(f"dynacheck: recorder not attached: {exc}", file=sys.stderr)


def activate(out_dir: str | None = None, collect_all: bool | None = None) -> bool:
    """Arm the recorder for this process (env vars give the defaults); True when armed."""
    out_dir = out_dir or os.environ.get(ENV_OUT, "")
    if not out_dir or os.environ.get(ENV_DISABLE):
        return False
    if collect_all is None:
        collect_all = os.environ.get(ENV_COLLECT_ALL, "") not in ("", "0")
    out_dir = os.path.abspath(out_dir)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "compile"):
        _start(torch, out_dir, collect_all)
        return True
    if not any(isinstance(f, _TorchWatcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchWatcher(lambda module: _start(module, out_dir, collect_all)))
    return True

"""One JSON-lines file per process: a header, one line per event (flushed), an end line at exit.

A process that is killed keeps every line written before; the merge reads a missing end line as
"the process died". Forked children reopen their own file.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from dynacheck.model import Event

RANK_VARS = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def env_rank() -> int:
    """The process rank from the usual launcher variables (-1 when none is set)."""
    for name in RANK_VARS:
        value = os.environ.get(name, "")
        if value.strip().lstrip("-").isdigit():
            return int(value)
    return -1


def current_rank() -> int:
    rank = env_rank()
    if rank >= 0:
        return rank
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001, S110 - a rank lookup must never break the traced program
        pass
    return -1


class EventWriter:
    """Appends records to `<out>/events-<pid>.jsonl`; safe to call from any thread."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self._lock = threading.Lock()
        self._fh = None
        self.pid = 0
        self.events = 0
        self._open()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    @property
    def path(self) -> str:
        return os.path.join(self.out_dir, f"events-{self.pid}.jsonl")

    def _open(self) -> None:
        self.pid = os.getpid()
        self.events = 0
        os.makedirs(self.out_dir, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with the process
        self._write(
            {
                "record": "process",
                "pid": self.pid,
                "ppid": os.getppid(),
                "rank": env_rank(),
                "argv": list(sys.argv) or [sys.executable],
                "executable": sys.executable,
                "torch_version": _torch_version(),
                "time": time.time(),
            }
        )

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._open()

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str)
        with self._lock:
            if self._fh is None:
                return
            self._fh.write(line + "\n")
            self._fh.flush()

    def event(self, event: Event) -> None:
        self.events += 1
        self._write(event.to_dict())

    def header_update(self, **fields: Any) -> None:
        """Late facts about the process (e.g. torch version once torch is imported)."""
        self._write({"record": "process_update", "pid": self.pid, **fields})

    def end(self, how: str) -> None:
        self._write({"record": "end", "pid": self.pid, "ended": how, "events": self.events, "time": time.time()})
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "")) if torch is not None else ""

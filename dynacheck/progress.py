"""A one-line status on stderr while a long step runs: the phase and its counts, nothing else.

A cold scan downloads wheels and parses a few hundred files; a spinner that only names the phase
looks stuck. Every step reports what it counts (files unpacked of total, files parsed and read
from cache), and the line is drawn only on a terminal, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
import time


class StatusLine:
    """Callable with a message; `counts(label, done, total)` for the sources' download/unpack callback."""

    def __init__(self, prefix: str = "dynacheck", *, enabled: bool | None = None) -> None:
        self._prefix = prefix
        self._enabled = sys.stderr.isatty() if enabled is None else enabled
        self._status = None
        self._started = time.monotonic()
        self.phase = ""  # e.g. "before" / "after" for the two scans of a diff
        if self._enabled:
            from rich.console import Console
            from rich.status import Status

            self._status = Status(f"{prefix}: starting", console=Console(stderr=True))
            self._status.start()

    def __call__(self, message: str) -> None:
        if self._status is not None:
            phase = f"{self.phase}: " if self.phase else ""
            self._status.update(f"{self._prefix}: {phase}{message}  [dim]{time.monotonic() - self._started:.0f} s[/]")

    def counts(self, label: str, done: int, total: int) -> None:
        """`unpacking sglang 1200/4700 files`; a total of 0 means no known end (a pip download)."""
        self(f"{label} {done}/{total} files" if total else label)

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __enter__(self) -> StatusLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

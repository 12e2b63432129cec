"""Peak physical memory of a process and its descendants together, sampled while they run.

A census forks its workers from the main process, so each worker's RSS counts the pages it still
shares with the others: main + workers x the largest worker's RSS (what `getrusage` allows) is an
upper bound that grows with the worker count. PSS splits each shared page between the processes
that map it, so the sum of the tree's PSS is the physical memory the tree holds at that moment.
The sampler reads `/proc/<pid>/smaps_rollup` for every process of the tree every `interval`
seconds and keeps the largest sum (a spike shorter than the interval can be missed: a lower bound
of the true peak, next to the upper bound). It keeps the largest sum of the processes' RSS too, read
at the same moments: what "peak RSS" of several processes measures when it is taken, each shared
page counted once per process that maps it, and never above the upper bound (the workers do not
all peak at once). Linux only; elsewhere `available()` is False.
"""

from __future__ import annotations

import threading
from pathlib import Path

PROC = Path("/proc")


def available() -> bool:
    return (PROC / "self" / "smaps_rollup").exists()


def tree(pid: int, proc: Path = PROC) -> list[int]:
    """`pid` and every process below it (from each process's parent in `/proc/<pid>/stat`)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        parent = _parent(entry / "stat")
        if parent is not None:
            children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, ()))
    return out


def memory_kb(pid: int, proc: Path = PROC) -> tuple[int, int]:
    """The process's (PSS, RSS) in kB, zeros when it is gone or unreadable."""
    try:
        text = (proc / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return 0, 0
    found = {"Pss:": 0, "Rss:": 0}
    for line in text.splitlines():
        head = line[:4]
        if head in found:
            found[head] = int(line.split()[1])
    return found["Pss:"], found["Rss:"]


def _parent(stat: Path) -> int | None:
    try:
        text = stat.read_text()
    except OSError:
        return None
    # `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split after the last ')'
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[1]) if len(fields) > 1 else None


class TreeSampler:
    """`with TreeSampler(pid) as s: ...` then `s.peak_mb`: the largest PSS sum of the tree seen
    (`s.rss_peak_mb`: the largest RSS sum)."""

    def __init__(self, pid: int, interval: float = 0.1, proc: Path = PROC) -> None:
        self.pid, self.interval, self.proc = pid, interval, proc
        self.peak_kb = 0
        self.rss_peak_kb = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @property
    def peak_mb(self) -> float:
        return self.peak_kb / 1024

    @property
    def rss_peak_mb(self) -> float:
        return self.rss_peak_kb / 1024

    def sample(self) -> int:
        """One reading of the tree: its PSS sum (the RSS sum is kept beside it)."""
        read = [memory_kb(p, self.proc) for p in tree(self.pid, self.proc)]
        total = sum(pss for pss, _ in read)
        self.peak_kb = max(self.peak_kb, total)
        self.rss_peak_kb = max(self.rss_peak_kb, sum(rss for _, rss in read))
        self.samples += 1
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


"""Benchmark: what spreading a cold census over two workers costs in CPU, against what two busy processes cost
each other on this machine.

Each round runs, cold and in this order: the census as one chain in one process (nothing done twice); the
census with two workers; and two one-chain censuses at once (two independent processes: whatever they cost
each other is the machine's, not the census's). The census's overhead is its two-worker CPU time over the
one-chain CPU time; the machine's contention is the concurrent pair's CPU time per census over the lone
one-chain's. If the first is no larger than the second, the two workers do no work twice that matters, and a
faster two-core census needs less work, not a better split.

    python bench/census_overhead.py [--repeat 3] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
from pathlib import Path

from census_bench import _run  # bench/ is this script's folder
from scan_bench import publish

COMMAND = "python bench/census_overhead.py --repeat {repeat} --write bench/RESULTS.md"
SECTION = "## Census on two workers: its CPU overhead against the machine's contention"


def _together(what: str) -> list[dict]:
    """Two cold runs of `what` at once, each in its own process with its own empty cache."""
    out: list[dict] = [{}, {}]
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, _run(what, 1))) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    rounds = []
    for _ in range(max(1, args.repeat)):
        one, two = _run("census-one-chain", 1), _run("census", 2)
        pair = _together("census-one-chain")
        rounds.append({"one": one, "two": two, "pair": pair,
                       "overhead": two["cpu_seconds"] / one["cpu_seconds"],
                       "contention": statistics.mean(p["cpu_seconds"] for p in pair) / one["cpu_seconds"]})
    overhead = statistics.median(r["overhead"] for r in rounds)
    contention = statistics.median(r["contention"] for r in rounds)
    runs = lambda key: ", ".join(f"{r[key]:.2f}x" for r in rounds)  # noqa: E731
    med = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
    lines = [SECTION, "", f"Command: `{COMMAND.format(repeat=args.repeat)}` (sglang 0.5.9 + flashinfer-python 0.6.3, "
             f"default matrix, cold, offline; Python {platform.python_version()}, {platform.machine()}; each round: one "
             "chain alone, two workers, two one-chain censuses at once)", "",
             "| measure | value (median of the rounds) |", "| --- | --- |",
             f"| one chain in one process: wall / CPU | {med(lambda r: r['one']['seconds']):.1f} s / "
             f"{med(lambda r: r['one']['cpu_seconds']):.1f} s |",
             f"| two workers: wall / CPU (all processes) | {med(lambda r: r['two']['seconds']):.1f} s / "
             f"{med(lambda r: r['two']['cpu_seconds']):.1f} s |",
             f"| the census's overhead: two-worker CPU / one-chain CPU | **{overhead:.2f}x** (runs: {runs('overhead')}) |",
             f"| the machine's contention: CPU of a one-chain census beside another / alone | **{contention:.2f}x** "
             f"(runs: {runs('contention')}) |", ""]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

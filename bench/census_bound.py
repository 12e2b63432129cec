"""Benchmark: how close to one cold flagship scan a census on two cores could come if no work were done twice.

A census's two workers each parse and evaluate what both need (the shared layers), write the bodies they
share, and wait for the model list. This runs the whole census instead as one chain of deployments in one
process (one evaluator, forked from deployment to deployment: nothing computed twice), cold, and halves its
wall time: the time two cores would take if the same work split perfectly between them with nothing
repeated, nothing serial and nothing written twice. Its ratio to a cold flagship scan (the mean of the scans
before and after it, as bench/census_bench.py) is a lower bound for any way of spreading this census's work
over two cores: below the goal's 3x only if the work itself is cheap enough.

    python bench/census_bound.py [--repeat 3] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
from pathlib import Path

from census_bench import _run  # bench/ is this script's folder
from scan_bench import publish

COMMAND = "python bench/census_bound.py --repeat {repeat} --write bench/RESULTS.md"
SECTION = "## Census on two cores, nothing done twice: a lower bound"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rounds = [(_run("flagship", 1), _run("census-one-chain", 1)) for _ in range(max(1, args.repeat))]
    closing = _run("flagship", 1)
    flagships = [f for f, _ in rounds] + [closing]
    ratios = sorted((c["seconds"] / 2) / ((flagships[i]["seconds"] + flagships[i + 1]["seconds"]) / 2)
                    for i, (_, c) in enumerate(rounds))
    census = statistics.median(c["seconds"] for _, c in rounds)
    flagship = statistics.median(f["seconds"] for f in flagships)
    publish([SECTION, "", f"Command: `{COMMAND.format(repeat=args.repeat)}` (offline, cached wheels; Python "
             f"{platform.python_version()}, {platform.machine()}; the census cold, as one chain in one process)", "",
             "| measure | value |", "| --- | --- |",
             f"| cold flagship scan (glm5 preset), median | {flagship:.1f} s |",
             f"| cold census as one chain in one process ({rounds[0][1]['cells']} cells), median | {census:.1f} s |",
             f"| half of it / the flagship scans around it, median: no 2-core census of this work is faster | "
             f"**{statistics.median(ratios):.2f}x** (runs: {', '.join(f'{r:.2f}x' for r in ratios)}) |", ""], args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

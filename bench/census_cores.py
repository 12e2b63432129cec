"""Benchmark: the census on more cores, against one cold flagship scan on the same machine, in the same run.

census_bench.py measures a 2-core machine, where the census has two workers. A census spreads over
every core it is given (census/run.py `_tasks`: one part of each chain per worker), a flagship scan
does not (one walk, and a prefetch process that parses ahead): this runs both, cold, in alternating
rounds, for each number of workers asked for, and reports each census against the mean of the flagship
scan that opens its round and the one that opens the next (a last one closes the run).

    python bench/census_cores.py [--jobs 2,16] [--repeat 3] [--targets SPEC,SPEC] [--write FILE]

`--targets` defaults to sglang==0.5.9 and flashinfer-python==0.6.3 from the cache; on a machine
without it, give the two wheel files (a wheel path is a target). bench/gpu_census_cores.sh runs it on
the 16-core GPU host.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

from census_bench import _bracketed, _peak, _run  # bench/ is this script's folder
from scan_bench import publish

SECTION = "## Census on more cores against one cold flagship scan"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default=f"2,{os.cpu_count() or 1}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--targets", default="sglang==0.5.9,flashinfer-python==0.6.3")
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--command", default="", help="the command line to print (as run, e.g. on another host)")
    args = parser.parse_args()
    env = {"DYNACHECK_BENCH_TARGETS": args.targets}
    counts = sorted({int(j) for j in args.jobs.split(",")})
    rounds = []
    for _ in range(max(1, args.repeat)):
        flagship = _run("flagship", 1, **env)
        rounds.append((flagship, {j: _run("census", j, **env) for j in counts}))
        print("round:", round(flagship["seconds"], 2), {j: round(c["seconds"], 2) for j, c in rounds[-1][1].items()},
              file=sys.stderr, flush=True)
    closing = _run("flagship", 1, **env)  # each round's censuses against the mean of the scans around them
    rounds = [(_bracketed(f, later), c) for (f, c), later in zip(rounds, [f for f, _ in rounds[1:]] + [closing])]
    flagship_s = [f["seconds"] for f, _ in rounds]
    command = args.command or f"python bench/census_cores.py --jobs {args.jobs} --repeat {args.repeat}"
    lines = [SECTION, "", f"Command: `{command}` (cold: each run its own empty summary cache; Python "
             f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores; "
             f"targets {args.targets.replace(',', ', ')})", "",
             "| workers | cold flagship scan, median | cold census, median (runs) | census / flagship (the scans around its round), median | peak RSS, main + workers (upper bound) | peak RSS: sum of RSS, sampled | peak memory: sum of PSS, sampled |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for j in counts:
        census = [c[j] for _, c in rounds]
        ratios = [c[j]["seconds"] / f["seconds"] for f, c in rounds]
        lines.append(f"| {census[0]['jobs']} | {statistics.median(flagship_s):.1f} s | "
                     f"{statistics.median(c['seconds'] for c in census):.1f} s "
                     f"({', '.join(format(c['seconds'], '.1f') for c in census)}) | **{statistics.median(ratios):.1f}x** | "
                     f"{max(c['rss_total_mb'] for c in census):.0f} MB | {_peak(census, 'rss_sum_peak_mb')} | "
                     f"{_peak(census)} |")
    cells = {c["cells"] for _, r in rounds for c in r.values()}
    lines += ["", f"{cells.pop()} cells in every census run." if len(cells) == 1
              else f"Cell counts differ between runs: {sorted(cells)}.", ""]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

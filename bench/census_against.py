"""Benchmark: the census of this checkout against the census of another commit, run alternately.

The shared machine's speed drifts by tens of percent between minutes, so a change to the census's
speed is measured beside the code before it: each round runs a cold census (empty summary cache)
then a warm one (same cache), for the other commit and then for this checkout, in fresh processes.

    git worktree add /tmp/before COMMIT
    python bench/census_against.py /tmp/before [--repeat 2] [--jobs 2] [--write bench/RESULTS.md]

`--jobs 1` walks each census in one process: what the evaluator does, without two workers' noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

SECTION = "## Census against the code before it, alternately on one machine"

# A child's first lines: the checkout named by its first argument is the one imported; the targets.
CHILD_PRELUDE = r"""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import dynacheck
assert dynacheck.__file__.startswith(sys.argv[1]), dynacheck.__file__
from dynacheck.sources.resolve import resolve_target
targets = [resolve_target(s, offline=True) for s in ("sglang==0.5.9", "flashinfer-python==0.6.3")]
"""

_CHILD = CHILD_PRELUDE + r"""
from dynacheck.census.matrix import default_deployments
from dynacheck.census.run import run_census
with tempfile.TemporaryDirectory() as cache:
    times = []
    for _ in range(2):  # cold, then warm
        started = time.perf_counter()
        census = run_census(targets, default_deployments(), cache_dir=Path(cache), jobs=int(sys.argv[2]))
        times.append(time.perf_counter() - started)
print(json.dumps({"cold": times[0], "warm": times[1], "cells": len(census.cells)}))
"""


def child(code: str, *args: str) -> dict:
    """Run a child script (CHILD_PRELUDE first) in a new interpreter; its last line of output, as JSON."""
    done = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _census(root: Path, jobs: int = 2) -> dict:
    return child(_CHILD, str(root), str(jobs))


def _commit(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or str(root)


def run_rounds(measure, default_repeat: int) -> tuple[argparse.Namespace, Path, list[dict], list[dict]]:
    """Parse `BEFORE [--repeat N] [--write FILE]`, then run `measure(checkout)` for the other commit and
    for this checkout, alternately, N times: (arguments, this checkout, its runs before, runs now)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path, help="a checkout (git worktree) of the commit to compare with")
    parser.add_argument("--repeat", type=int, default=default_repeat)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2, help="census worker processes (census_against only)")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    rounds = [(measure(args.before.resolve(), args), measure(here, args)) for _ in range(max(1, args.repeat))]
    return args, here, [b for b, _ in rounds], [n for _, n in rounds]


def table_rows(args: argparse.Namespace, here: Path, before: list[dict], now: list[dict], size: str,
               digits: int) -> list[str]:
    """The table's two rows: the cold and warm ranges of each side, and its size column."""
    def span(runs: list[dict], k: str) -> str:
        values = [r[k] for r in runs]
        return f"{min(values):.{digits}f}-{max(values):.{digits}f} s (median {statistics.median(values):.{digits}f})"

    return [f"| before ({_commit(args.before)}) | {span(before, 'cold')} | {span(before, 'warm')} | {before[0][size]} |",
            f"| this checkout ({_commit(here)}) | {span(now, 'cold')} | {span(now, 'warm')} | {now[0][size]} |", ""]


def main() -> int:
    args, here, before, now = run_rounds(lambda root, args: _census(root, args.jobs), default_repeat=2)
    jobs = f" --jobs {args.jobs}" if args.jobs != 2 else ""
    lines = [SECTION + (f" ({args.jobs} process{'es' if args.jobs > 1 else ''})" if jobs else ""), "",
             f"Command: `git worktree add /tmp/before {_commit(args.before)} && python bench/census_against.py "
             f"/tmp/before --repeat {args.repeat}{jobs} --write bench/RESULTS.md` (sglang 0.5.9 + flashinfer 0.6.3, "
             f"default matrix, {args.jobs} jobs, offline; each round: the commit before, then this checkout)", "",
             "| census | cold (empty summary cache) | warm (summary cache filled) | cells |", "| --- | --- | --- | --- |",
             *table_rows(args, here, before, now, "cells", 1)]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

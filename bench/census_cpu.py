"""Where a census worker's CPU goes, by part: parsing, cache writes and reads, the start-up check, the walk.

Each part is timed (process CPU time) around the functions that do it, in every worker, and printed per
task (a chain's part) at its end. Cold (an empty summary cache, the default) or warm (`--cache DIR`, a
cache a census filled). Parts nest: `startup` holds its own parsing and `startup_branches`, `cells` hold
the walk, findings and value hazards (and the parsing they caused).

    python bench/census_cpu.py [--jobs 2] [--cache DIR]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

import dynacheck.census.run as run
import dynacheck.static.body_exchange as exchange
import dynacheck.static.cache as cache
import dynacheck.static.findings as findings
import dynacheck.static.startup as startup
import dynacheck.static.startup_branches as branches
import dynacheck.static.summary as summary
import dynacheck.static.tensors as tensors
from dynacheck.census.matrix import default_deployments
from dynacheck.sources.resolve import resolve_target

SPECS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
PARTS = [  # (owner, function, part)
    (cache, "summarize", "parse: modules"), (summary, "summarize_body", "parse: bodies"),
    (cache.SummaryCache, "_store", "write: entries"), (exchange.BodyExchange, "give", "write: shared bodies"),
    (cache.SummaryCache, "_load_any", "read: entries"), (exchange.BodyExchange, "take", "read: shared bodies"),
    (startup, "model_unbuildable", "startup"), (branches, "failing_every_way", "startup: every way"),
    (run, "_walk_cell", "cells"), (findings.FindingBuilder, "build", "cells: findings"),
    (tensors.TensorHazards, "hits", "cells: value hazards"),
]
SPENT: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def _timed(owner, name: str, part: str) -> None:
    real = getattr(owner, name)

    def timed(*args, **kwargs):
        started = time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            SPENT[part] += time.process_time() - started
            CALLS[part] += 1
    setattr(owner, name, timed)


_REAL_WALK_CHAIN = run._walk_chain


def walk_chain_reporting(*args, **kwargs):
    """run._walk_chain, then this task's CPU by part (module-level: the pool pickles it by name)."""
    SPENT.clear()
    CALLS.clear()
    started = time.process_time()
    out = _REAL_WALK_CHAIN(*args, **kwargs)
    total = time.process_time() - started
    lines = [f"worker {os.getpid()}: task of {len(args[1][0])} forwards, {total:.2f} s CPU"]
    lines += [f"  {part:24s} {SPENT[part]:6.2f} s  {CALLS[part]:6d} calls" for _, _, part in PARTS]
    print("\n".join(lines), file=sys.stderr, flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    for owner, name, part in PARTS:
        _timed(owner, name, part)
    run._walk_chain = walk_chain_reporting  # workers are forked: they run the wrapped code
    targets = [resolve_target(spec, offline=True) for spec in SPECS]
    with tempfile.TemporaryDirectory(prefix="dynacheck-census-cpu-") as empty:
        started = time.perf_counter()
        census = run.run_census(targets, default_deployments(), cache_dir=args.cache or Path(empty), jobs=args.jobs)
        print(f"census: {len(census.cells)} cells, {time.perf_counter() - started:.1f} s wall, "
              f"{'warm' if args.cache else 'cold'}, {census.stats['jobs']} workers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

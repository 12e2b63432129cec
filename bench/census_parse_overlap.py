"""How much parsing a cold census's workers do twice.

Each worker logs every module and deferred body it summarizes itself (taken from the summary cache or
from the other worker's shared bodies is not parsing), with the CPU time it took. At the end: each
worker's parsing, the parsing done by more than one worker, and the union (each item counted once,
at its largest time). If the workers parsed much of the same, sharing parses would be a way to a
faster cold census; measured at stop 35 they do not.

    python bench/census_parse_overlap.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import dynacheck.census.run as run
import dynacheck.static.cache as cache
import dynacheck.static.summary as summary
from dynacheck.census.matrix import default_deployments
from dynacheck.sources.resolve import resolve_target

SPECS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
PLURAL = {"module": "modules", "body": "bodies"}
LOGS = Path(tempfile.mkdtemp(prefix="dynacheck-parse-overlap-"))


def _logged(owner, name: str, kind: str, item) -> None:
    real = getattr(owner, name)

    def logged(*args, **kwargs):
        started = time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            with open(LOGS / f"{os.getpid()}.log", "a", encoding="utf-8") as log:
                log.write(json.dumps([kind, item(args), time.process_time() - started]) + "\n")
    setattr(owner, name, logged)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    _logged(cache, "summarize", "module", lambda a: a[1])  # (source, module, ...)
    _logged(summary, "summarize_body", "body", lambda a: f"{a[0]}:{a[3][:80]}")  # (module, path, pkg, text, ...)
    targets = [resolve_target(spec, offline=True) for spec in SPECS]
    with tempfile.TemporaryDirectory(prefix="dynacheck-parse-overlap-cache-") as empty:
        started = time.perf_counter()
        census = run.run_census(targets, default_deployments(), cache_dir=Path(empty), jobs=args.jobs)
        wall = time.perf_counter() - started
    workers = {}
    for log in LOGS.iterdir():
        rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        workers[log.stem] = {(kind, item): seconds for kind, item, seconds in rows}
        log.unlink()
    LOGS.rmdir()
    print(f"cold census: {len(census.cells)} cells, {wall:.1f} s wall, {len(workers)} processes that parsed")
    for pid, items in workers.items():
        by_kind = collections.Counter()
        for (kind, _), seconds in items.items():
            by_kind[kind] += seconds
        print(f"  process {pid}: {len(items)} items, " + ", ".join(f"{PLURAL[k]} {v:.2f} s" for k, v in sorted(by_kind.items())))
    every = set().union(*workers.values()) if workers else set()
    twice = [item for item in every if sum(item in w for w in workers.values()) > 1]
    wasted = sum(sorted(w[item] for w in workers.values() if item in w)[0] for item in twice)
    total = sum(sum(w.values()) for w in workers.values())
    union = sum(max(w.get(item, 0.0) for w in workers.values()) for item in every)
    print(f"parsing, all processes: {total:.2f} s CPU; each item once: {union:.2f} s; "
          f"{len(twice)} items parsed by more than one, {wasted:.2f} s of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

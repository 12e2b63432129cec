"""The flagship evaluator's memo after a warm scan: its tables, how many keys hold an id, how fast it loads.

The figures behind the engine store's design (static/engine_store.py, docs/cache.md): after one warm
scan in this process (and a second one, every answer memoized), how many entries the evaluator's tables hold, how many are keyed by an object's
id (valid in one process only: what the store turns into references), and how long the evaluator and
its boundaries take to pickle and to load back with the summaries referred to rather than copied
(functions left out, so a lower bound of the store's own load, which also holds the summaries).

    python bench/walk_memo_share.py [--cache DIR]   # DIR: a summary cache a flagship scan filled
"""

from __future__ import annotations

import argparse
import gc
import io
import pickle
import sys
import tempfile
import time
import types
from pathlib import Path

from dynacheck.sources.resolve import resolve_target
from dynacheck.static import reach
from dynacheck.static import summary as summaries
from dynacheck.static.scan import ScanSession, scan_targets

SPECS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
ID_FLOOR = 1 << 32  # ids are addresses; line numbers and counts in keys are far below


def keyed_by_id(key, depth: int = 0) -> bool:
    if isinstance(key, int) and not isinstance(key, bool):
        return key > ID_FLOOR
    return isinstance(key, tuple) and depth < 4 and any(keyed_by_id(k, depth + 1) for k in key)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    targets = [resolve_target(spec, offline=True) for spec in SPECS]
    with tempfile.TemporaryDirectory() as empty:
        cache = args.cache or Path(empty)
        if args.cache is None:
            scan_targets(targets, [], "glm5", cache_dir=cache, reuse=False)  # fill the summary cache
        session = ScanSession.open(targets, cache, None, prefetch=False)
        walking = _timed_walk()
        started = time.perf_counter()
        scan_targets(targets, [], "glm5", cache_dir=cache, reuse=False, session=session)
        warm = time.perf_counter() - started
        (_, evaluator, boundaries), = session._engines.values()
        tables = [(prefix + name, table) for owner, prefix in ((evaluator, ""), (evaluator.partial, "partial."),
                                                        (boundaries, "boundaries."))
                  for name, table in vars(owner).items() if isinstance(table, dict) and table]
        print(f"warm scan in this process: {warm:.2f} s, of which the walk (reach.Reacher.walk) {walking[0]:.2f} s")
        started = time.perf_counter()
        scan_targets(targets, [], "glm5", cache_dir=cache, reuse=False, session=session)
        print(f"the same scan again in this process, every answer memoized: {time.perf_counter() - started:.3f} s")
        print(f"{'table':24s} {'entries':>8s} {'keyed by id':>12s}")
        for name, table in tables:
            print(f"{name:24s} {len(table):8d} {sum(map(keyed_by_id, table)):12d}")
        total = sum(len(t) for _, t in tables)
        by_id = sum(sum(map(keyed_by_id, t)) for _, t in tables)
        print(f"{'all':24s} {total:8d} {by_id:12d} ({100 * by_id / total:.0f} %)")
        data, kept = _dump((evaluator, boundaries), session)
        loads = []
        gc.disable()
        for _ in range(3):
            started = time.perf_counter()
            _Loader(io.BytesIO(data), kept).load()
            loads.append(time.perf_counter() - started)
        print(f"pickled: {len(data) / 1e6:.1f} MB, {len(kept)} summary objects referred to; "
              f"load {min(loads):.3f}-{max(loads):.3f} s")
        session.close()
    return 0


def _timed_walk() -> list[float]:
    """Seconds spent in the walk from now on, in the list's one item."""
    spent, real = [0.0], reach.Reacher.walk

    def walk(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return real(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started
    reach.Reacher.walk = walk
    return spent


def _dump(obj, session) -> tuple[bytes, dict]:
    kept: dict = {}

    class Dumper(pickle.Pickler):
        def persistent_id(self, value):
            if isinstance(value, (summaries.ModuleSummary, summaries.FunctionSummary, summaries.ClassSummary)) \
                    or value is session.index or value is session.locator or value is session.cache:
                kept[id(value)] = value
                return id(value)
            return None

        def reducer_override(self, value):
            if isinstance(value, (types.FunctionType, types.MethodType)):
                return (str, ("function",))  # closures (a scan's `breaks_at`) cannot be pickled
            return NotImplemented

    buffer = io.BytesIO()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    Dumper(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue(), kept


class _Loader(pickle.Unpickler):
    def __init__(self, file, kept: dict) -> None:
        super().__init__(file)
        self.kept = kept

    def persistent_load(self, pid):
        return self.kept[pid]


if __name__ == "__main__":
    sys.exit(main())

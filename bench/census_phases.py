"""Where a census's time goes: each deployment of the default chain, walked as one chain in one process.

For each deployment: its scans (forward x class walks, each timed with the check that may answer it
from the deployment before: static/scan_reuse.py) and how many that check answered; what its evaluator
dropped when forked from the one before (memo entries that read a fact the two differ in) and how many
of those were computed again with an equal answer; and how many of its scans read the GPU or the
quantization fact at all. Run on a warm summary cache, so parsing is not counted.

    python bench/census_phases.py [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

import dynacheck.census.run as run
import dynacheck.static.values as values
from dynacheck.census.matrix import default_deployments
from dynacheck.deploy.facts import GPU_FACT, QUANT_FACT
from dynacheck.sources.resolve import resolve_target

SECTION = "## Census phases: each deployment of the chain, one process"
TABLES = ("_names", "_globals", "_returns", "_attrs", "_mro", "_constructors")


def _tables(ev) -> dict:
    out = {t: getattr(ev, t) for t in TABLES}
    out["partial"] = ev.partial._memo
    out["sites"] = {k: v for k, v in ev.sites.items() if isinstance(v, tuple)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    targets = [resolve_target(s, offline=True) for s in ("sglang==0.5.9", "flashinfer-python==0.6.3")]
    forks: dict[str, tuple] = {}  # deployment name -> (child evaluator, the parent's dropped entries)
    rows: dict[str, list] = {}  # deployment name -> [scans, seconds, scans reading GPU, scans reading quant]
    current = {"name": ""}

    real_fork = values.Evaluator.fork

    def fork(self, deployment, dirty):
        child = real_fork(self, deployment, dirty)
        kept = _tables(child)
        forks[current["name"]] = (child, {t: {k: v for k, v in table.items() if k not in kept[t]}
                                          for t, table in _tables(self).items()})
        return child

    real_cell = run._walk_cell

    def timed(deployment, entry, architecture):
        reused = run._WORKER.get("reused", 0)
        started = time.perf_counter()
        record, reads, tests = real_cell(deployment, entry, architecture)
        row = rows.setdefault(current["name"], [0, 0.0, 0, 0, 0])
        row[0] += 1
        row[1] += time.perf_counter() - started
        row[2] += bool(reads & GPU_FACT)
        row[3] += bool(reads & QUANT_FACT)
        row[4] += run._WORKER.get("reused", 0) - reused
        return record, reads, tests

    real_entries = run._walk_entries

    def entries(deployment, walk, *rest):
        current["name"] = deployment.name
        return real_entries(deployment, walk, *rest)

    def one_chain(deployments, names, wanted, workers=1):
        chain = list(deployments)
        return [(chain, [[e for e in names if d in wanted[e]] for d in chain])]

    values.Evaluator.fork, run._walk_cell, run._walk_entries, run._tasks = fork, timed, entries, one_chain
    with tempfile.TemporaryDirectory(prefix="dynacheck-census-phases-") as cache:
        run.run_census(targets, default_deployments(), cache_dir=Path(cache), jobs=1)  # fills the cache
        rows.clear()
        forks.clear()
        started = time.perf_counter()
        census = run.run_census(targets, default_deployments(), cache_dir=Path(cache), jobs=1)
        total = time.perf_counter() - started
    lines = [SECTION, "", "Command: `python bench/census_phases.py --write bench/RESULTS.md` (sglang 0.5.9 + flashinfer "
             "0.6.3, default matrix walked as one chain in one process, warm summary cache, offline)", "",
             f"Census: {len(census.cells)} cells, {total:.1f} s. A fork drops the memo entries that read a fact the two "
             "deployments differ in; \"equal again\" counts those the walk computed again with the same answer.", "",
             "| deployment | scans | of them answered by the deployment before | seconds | entries dropped at its fork "
             "| computed again | equal again | scans reading the GPU | scans reading the quantization |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for deployment in default_deployments():
        scans, seconds, gpu, quant, reused = rows.get(deployment.name, [0, 0.0, 0, 0, 0])
        dropped = again = equal = 0
        if deployment.name in forks:
            child, gone = forks[deployment.name]
            now = _tables(child)
            for table, entries_gone in gone.items():
                for key, entry in entries_gone.items():
                    dropped += 1
                    if key in now[table]:
                        again += 1
                        try:
                            equal += bool(now[table][key][:-1] == entry[:-1])
                        except Exception:  # noqa: BLE001 - an entry whose values do not compare
                            pass
        fork_cells = (f"{dropped} | {again} | {equal}" if deployment.name in forks else "(first) | | ")
        lines.append(f"| {deployment.name} | {scans} | {reused} | {seconds:.2f} | {fork_cells} | {gpu} | {quant} |")
    lines.append("")
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

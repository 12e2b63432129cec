"""Benchmark: the whole SGLang census against one cold flagship scan, same machine, same run.

Each runs in its own process with its own empty summary cache (cold), timed by wall clock. Peak memory
twice: the process's max RSS plus the number of workers times the largest worker's (an upper bound:
forked workers share pages), and the largest sum of the process tree's PSS, sampled (tree_memory.py).

    python bench/census_bench.py [--jobs 2] [--repeat 3] [--write bench/RESULTS.md]

With --repeat N, the census runs N times, each between two flagship scans, and the ratio reported is the
median of the N ratios of a census to the mean of the flagship scan just before it and the next round's
(after that round's one-core flagship run; a last scan closes the run). This machine's speed drifts by
20 % between minutes, and a census takes a quarter of one: a flagship scan on one side only measured it at
another speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tree_memory  # bench/ is this script's folder

COMMAND = "python bench/census_bench.py --repeat {repeat} --write bench/RESULTS.md"
SECTION = "## Census: every SGLang model x 12 deployments against one cold flagship scan"

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from dynacheck.sources.resolve import resolve_target
import os
specs = os.environ.get("DYNACHECK_BENCH_TARGETS", "sglang==0.5.9,flashinfer-python==0.6.3").split(",")
targets = [resolve_target(s, offline=True) for s in specs]
cache, what, jobs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
started = time.perf_counter()
if what == "flagship":
    from dynacheck.static.scan import scan_targets
    result = scan_targets(targets, [], "glm5", cache_dir=cache)
    size = {"findings": len(result.findings), "files_parsed": result.stats.files_parsed}
else:
    from dynacheck.census import run
    from dynacheck.census.matrix import default_deployments
    if what == "census-one-chain":  # every deployment and forward in one chain, one evaluator: nothing done twice
        run._tasks = lambda deployments, entries, wanted, workers=1: [
            (list(deployments), [[e for e in entries if d in wanted[e]] for d in deployments])]
    census = run.run_census(targets, default_deployments(), cache_dir=cache, jobs=jobs)
    size = {"cells": len(census.cells), **census.stats}
seconds = time.perf_counter() - started
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
          for f in ("ru_utime", "ru_stime"))
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "rss_mb": own / 1024, "rss_total_mb": (own + jobs * kids) / 1024} | size))
"""


def _run(what: str, jobs: int, **env: str) -> dict:
    """One cold run in a child process; with `/proc`, also the peak of its process tree's PSS sum
    (tree_memory.py: the physical memory main process and workers held together, sampled)."""
    with tempfile.TemporaryDirectory(prefix="dynacheck-census-bench-") as cache:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, cache, what, str(jobs)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, (str(Path.cwd()), os.environ.get("PYTHONPATH"))))} | env)
        sampler = tree_memory.TreeSampler(child.pid) if tree_memory.available() else None
        if sampler is not None:
            with sampler:
                stdout, stderr = child.communicate()
        else:
            stdout, stderr = child.communicate()
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, "census_bench child", stdout, stderr)
    out = json.loads(stdout.strip().splitlines()[-1])
    if sampler is not None and sampler.samples:
        out["pss_peak_mb"] = sampler.peak_mb
        out["rss_sum_peak_mb"] = sampler.rss_peak_mb
    return out


def _bracketed(before: dict, after: dict) -> dict:
    """A flagship run whose time is the mean of the runs before and after a census."""
    return before | {"seconds": (before["seconds"] + after["seconds"]) / 2}


def _peak(runs, field: str = "pss_peak_mb") -> str:
    """The largest sampled peak of `runs`: the PSS sum, or `field` (the RSS sum); or why there is none."""
    peaks = [r[field] for r in runs if field in r]
    return f"{max(peaks):.0f} MB" if peaks else "not sampled (no /proc)"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    # the flagship also without its prefetch worker (one core): how much of the ratio is the
    # flagship's own second core rather than the census
    runs = [(_run("flagship", 1, DYNACHECK_PREFETCH="0"), _run("flagship", 1), _run("census", args.jobs))
            for _ in range(max(1, args.repeat))]
    after = [f for _, f, _ in runs[1:]] + [_run("flagship", 1)]  # the next flagship scan with its prefetch worker after each census
    pairs = [(_bracketed(f, later), c) for (_, f, c), later in zip(runs, after)]
    ratios = sorted(c["seconds"] / f["seconds"] for f, c in pairs)
    ratio = statistics.median(ratios)
    one_core = statistics.median(c["seconds"] / f["seconds"] for f, _, c in runs)
    alone = statistics.median(f["seconds"] for f, _, _ in runs)
    flagship, census = min(pairs, key=lambda p: abs(p[1]["seconds"] / p[0]["seconds"] - ratio))
    spread = f" (runs: {', '.join(f'{r:.1f}x' for r in ratios)})" if len(ratios) > 1 else ""
    lines = [SECTION, "", f"Command: `{COMMAND.format(repeat=args.repeat)}` (offline, cached wheels; Python {platform.python_version()}, "
             f"{platform.machine()}, {os.cpu_count()} cores shared with other work, census jobs={args.jobs})", "",
             "| measure | value |", "| --- | --- |",
             f"| cold flagship scan (glm5 preset; the mean of the two around the census below) | {flagship['seconds']:.1f} s, {flagship['files_parsed']} files, "
             f"peak RSS {flagship['rss_mb']:.0f} MB |",
             f"| cold census ({census['models']} model classes, {census['forwards']} distinct forwards, "
             f"{census['cells']} cells, {census['scans']} scans) | {census['seconds']:.1f} s |",
             f"| census / flagship (the mean of the scans before and after it), median | **{ratio:.1f}x** (goal <= 3x){spread} |",
             f"| the flagship without its prefetch worker (`DYNACHECK_PREFETCH=0`): time, census / it | "
             f"{alone:.1f} s, {one_core:.1f}x |",
             f"| census peak RSS: main process / main + workers (upper bound) | {census['rss_mb']:.0f} MB / "
             f"{census['rss_total_mb']:.0f} MB |",
             f"| census peak memory: the largest sum of its processes' PSS, sampled every 0.1 s (all runs) | "
             f"**{_peak(c for _, c in pairs)}** (goal <= 2 GB) |",
             f"| census peak RSS: the largest sum of its processes' RSS, sampled with the PSS | "
             f"{_peak((c for _, c in pairs), 'rss_sum_peak_mb')} |", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        body = args.write.read_text(encoding="utf-8")
        if SECTION in body:
            head, _, rest = body.partition(SECTION)
            tail = rest[rest.find("\n## "):] if "\n## " in rest else "\n"
            body = head + text + tail
        else:
            body = body.rstrip("\n") + "\n\n" + text
        args.write.write_text(body, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the flagship scan, cold and warm, against the floor of this design.

The floor is a bare `libcst.parse_module` over exactly the files the scan parsed, timed in the
same run (sources read beforehand), so the ratio is machine-independent. Warm scans run in new
processes over the filled summary cache: with the engine an earlier scan stored
(static/engine_store.py), without one, and storing one; then a re-scan answered by the result cache.

    python bench/scan_bench.py [--repeat 3] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import libcst

from dynacheck.sources.locate import ModuleLocator
from dynacheck.sources.resolve import resolve_target

SPECS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
COMMAND = "python bench/scan_bench.py --repeat 3 --write bench/RESULTS.md"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()

    targets = [resolve_target(spec) for spec in SPECS]
    files_in_trees = sum(1 for _ in ModuleLocator(targets).iter_files())
    colds, warms, floors, rescans, storing, stored = [], [], [], [], [], []
    parsed: list[str] = []
    findings = 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            cold = _cold_process_scan(cache)  # a new process, as a user's first scan (it stores no engine)
            colds.append(cold["seconds"])
            parsed, findings = cold["parsed"], cold["findings"]
            # a warm scan is the user's next run: a fresh process (imports not counted) over the filled cache;
            # first with no stored engine (the walk evaluated anew), then one that stores its engine, then
            # one that loads it (static/engine_store.py)
            warms.append(_fresh_process_scan(cache, reuse=False, store=False))
            storing.append(_fresh_process_scan(cache, reuse=False, expect_engine="saved"))
            stored.append(_fresh_process_scan(cache, reuse=False, expect_engine="loaded"))
            _fresh_process_scan(cache, reuse=True)  # stores the answer
            rescans.append(_fresh_process_scan(cache, reuse=True, expect_reused=True))
        sources = [Path(p).read_text(encoding="utf-8", errors="replace") for p in parsed]
        started = time.perf_counter()
        for source in sources:
            libcst.parse_module(source)
        floors.append(time.perf_counter() - started)

    print("runs: cold", [round(x, 2) for x in colds], "warm", [round(x, 2) for x in warms], "storing",
          [round(x, 2) for x in storing], "stored", [round(x, 2) for x in stored], "rescan",
          [round(x, 2) for x in rescans], file=sys.stderr)
    cold, warm, floor = statistics.median(colds), statistics.median(warms), statistics.median(floors)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "## Static scan: GLM-5 preset on sglang 0.5.9 + flashinfer-python 0.6.3",
        "",
        f"Command: `{COMMAND}` (median of {args.repeat}; {platform.python_version()}, "
        f"libcst {libcst_version()}, {platform.machine()}, {_cores()} cores)",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| files in the two trees | {files_in_trees} |",
        f"| files parsed by the scan | {len(parsed)} ({100 * len(parsed) / files_in_trees:.1f}%) |",
        f"| findings | {findings} |",
        f"| floor: bare libcst.parse_module over the parsed files | {floor:.2f} s |",
        f"| cold scan (empty summary cache) | {cold:.2f} s |",
        f"| cold / floor | **{cold / floor:.2f}x** (goal <= 1.0x) |",
        f"| warm scan: a new process, summary cache filled and the engine an earlier scan stored, the walk replayed (imports not counted) | **{statistics.median(stored):.2f} s** (goal <= 0.3 s; runs {', '.join(f'{x:.2f}' for x in stored)}) |",
        f"| warm scan with no stored engine: the walk evaluated anew (`DYNACHECK_ENGINE_STORE=0`) | {warm:.2f} s |",
        f"| the same, storing its engine for the next scan, as the first warm scan after any input changed does (a cold scan stores none) | {statistics.median(storing):.2f} s |",
        f"| re-scan of unchanged inputs (answer from the result cache) | {statistics.median(rescans):.2f} s |",
        f"| peak RSS of the benchmark process | {peak_mb:.0f} MB |",
        "",
    ]
    publish(lines, args.write)
    return 0


_FRESH = """
import sys, time
from pathlib import Path
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import engine_store
from dynacheck.static.scan import scan_targets
engine, load, save = [], engine_store.load, engine_store.save
def loading(*args):
    stored = load(*args)
    if stored is not None:
        engine.append("loaded")
    return stored
def saving(*args):
    if save(*args):
        engine.append("saved")
        return True
    return False
engine_store.load, engine_store.save = loading, saving
targets = [resolve_target(spec) for spec in {specs!r}]
started = time.perf_counter()
result = scan_targets(targets, [], "glm5", cache_dir=Path({cache!r}), reuse={reuse!r})
print(time.perf_counter() - started, result.stats.reused, ",".join(engine) or "-")
"""


_COLD = """
import json, time
from pathlib import Path
from dynacheck.sources.resolve import resolve_target
from dynacheck.static.scan import scan_targets
targets = [resolve_target(spec) for spec in {specs!r}]
observer = {{}}
started = time.perf_counter()
result = scan_targets(targets, [], "glm5", cache_dir=Path({cache!r}), observer=observer)
print(json.dumps({{"seconds": time.perf_counter() - started, "findings": len(result.findings),
                  "parsed": observer["parsed_files"]}}))
"""


def _cold_process_scan(cache: str) -> dict:
    """One cold scan in a new interpreter (imports not counted): seconds, findings, the files it parsed."""
    import json
    import subprocess

    code = _COLD.format(specs=list(SPECS), cache=str(cache))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fresh_process_scan(cache: str, reuse: bool, expect_reused: bool = False, store: bool = True,
                        expect_engine: str = "") -> float:
    """Seconds of one scan in a new interpreter (its imports and the target lookup not counted);
    `store=False` turns the engine store off, `expect_engine` is what it must do with it."""
    import os
    import subprocess

    code = _FRESH.format(specs=list(SPECS), cache=str(cache), reuse=reuse)
    env = os.environ | ({} if store else {"DYNACHECK_ENGINE_STORE": "0"})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    seconds, reused, engine = done.stdout.split()
    assert (reused == "True") == expect_reused, done.stdout
    assert not expect_engine or engine == expect_engine, done.stdout
    return float(seconds)


def libcst_version() -> str:
    from importlib.metadata import version

    return version("libcst")


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def publish(lines: list[str], write: Path | None) -> None:
    """Print a section (its first line is its heading) and, with `write`, put it in that file."""
    text = "\n".join(lines)
    print(text)
    if write:
        _replace_section(write, lines[0], text)


def _replace_section(path: Path, heading: str, text: str) -> None:
    """Keep other benchmarks' sections; replace this one."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\n"
    parts = old.split("\n## ")
    kept = [parts[0].rstrip() + "\n"] + ["## " + p.rstrip() + "\n" for p in parts[1:]
                                         if not ("## " + p).startswith(heading)]
    path.write_text("\n".join(kept + [text]), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())

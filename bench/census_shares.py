"""Benchmark: where the time of a cold census and of a cold flagship scan goes, each in one process.

The census goal is a ratio (census <= 3x one cold flagship scan), so what matters is which work each
side does more of. Both run cold (an empty summary cache), alone on one core (the census as one chain of
deployments, bench/census_bound.py's layout; the flagship without its prefetch worker), with their time
split into: libcst's native parse (`libcst._parser.entrypoints._parse`), Python's own parse
(`ast.parse`, for line numbers and the model list), the start-up check's own evaluation
(static/startup.py, whether each model class can be built on a quantized deployment; the parsing it
causes is counted in the parse rows, as the walk would cause most of it otherwise) and the rest
(summarizing the parsed trees, walking, evaluating, building findings). A share that is larger for
the flagship than for the census (parsing) cannot lower the ratio when it gets faster: it lowers the
flagship more.

    python bench/census_shares.py [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

COMMAND = "python bench/census_shares.py --write bench/RESULTS.md"
SECTION = "## Where a cold census and a cold flagship scan spend their time"

_CHILD = r"""
import ast, json, sys, time
from pathlib import Path
import libcst._parser.entrypoints as entrypoints
from dynacheck.sources.resolve import resolve_target

clock = {"libcst": 0.0, "ast": 0.0, "startup": 0.0, "startup_libcst": 0.0, "startup_ast": 0.0}
inside = {"startup": False}

def timed(module, name, key):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent = time.perf_counter() - started
            clock[key] += spent
            if inside["startup"]:
                clock["startup_" + key] += spent
    setattr(module, name, wrapper)

timed(entrypoints, "_parse", "libcst")
timed(ast, "parse", "ast")
targets = [resolve_target(s, offline=True) for s in ("sglang==0.5.9", "flashinfer-python==0.6.3")]
cache, what = Path(sys.argv[1]), sys.argv[2]
started = time.perf_counter()
def checked(module, name):
    real_check = getattr(module, name)
    def check(*args):
        began, inside["startup"] = time.perf_counter(), True
        try:
            return real_check(*args)
        finally:
            inside["startup"] = False
            clock["startup"] += time.perf_counter() - began
    setattr(module, name, check)

if what == "flagship":
    import dynacheck.static.scan as scan
    checked(scan, "_does_not_start")
    scan.scan_targets(targets, [], "glm5", cache_dir=cache)
else:
    import dynacheck.census.run as run
    from dynacheck.census.matrix import default_deployments
    checked(run, "_unbuildable")
    run._tasks = lambda deployments, entries, wanted, workers=1: [
        (list(deployments), [[e for e in entries if d in wanted[e]] for d in deployments])]
    run.run_census(targets, default_deployments(), cache_dir=cache, jobs=1)
print(json.dumps(clock | {"seconds": time.perf_counter() - started}))
"""


def _run(what: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="dynacheck-shares-") as cache:
        env = os.environ | {"DYNACHECK_PREFETCH": "0",
                            "PYTHONPATH": os.pathsep.join(filter(None, (str(Path.cwd()), os.environ.get("PYTHONPATH"))))}
        done = subprocess.run([sys.executable, "-c", _CHILD, cache, what], capture_output=True, text=True, env=env,
                              check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _shares(run: dict) -> dict:
    """Seconds of the four parts: all parsing in the first two (also what the start-up check caused),
    the start-up check's own evaluation in the third."""
    startup = run["startup"] - run["startup_libcst"] - run["startup_ast"]
    parts = {"libcst native parse": run["libcst"], "ast.parse": run["ast"], "start-up check, parsing left out": startup}
    parts["the rest"] = run["seconds"] - sum(parts.values())
    return parts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    flagship, census = _run("flagship"), _run("census")
    left, right = _shares(flagship), _shares(census)
    lines = [SECTION, "", f"Command: `{COMMAND}` (sglang 0.5.9 + flashinfer-python 0.6.3, offline, cold: an empty "
             f"summary cache each; one process each, the flagship without its prefetch worker, the census as one "
             f"chain of deployments; Python {platform.python_version()}, {platform.machine()})", "",
             "| part | cold flagship scan | share | cold census, one chain | share | census / flagship |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name in left:
        lines.append(f"| {name} | {left[name]:.1f} s | {left[name] / flagship['seconds']:.0%} | {right[name]:.1f} s | "
                     f"{right[name] / census['seconds']:.0%} | "
                     f"{f'{right[name] / left[name]:.1f}x' if left[name] > 0.05 else '-'} |")
    lines += [f"| total | {flagship['seconds']:.1f} s | | {census['seconds']:.1f} s | | "
              f"{census['seconds'] / flagship['seconds']:.1f}x |", "",
              "Parsing is a larger share of the flagship scan than of the census, so a faster parser raises "
              "census / flagship; the start-up check (whether each model class builds on each quantized "
              "deployment, with the parsing it causes) is census work the flagship does once.", ""]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

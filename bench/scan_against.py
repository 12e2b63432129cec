"""Benchmark: the flagship scan of this checkout against another commit's, run alternately.

`scan_bench.py` reports absolute times, which drift with the shared machine by tens of percent;
a change to the walk's speed is measured here beside the code before it. Each round, for the other
commit and then for this checkout: a cold scan in a new process (empty summary cache), then a warm
one in another new process over that cache, the walk redone (the result cache not used).

    git worktree add /tmp/before COMMIT
    python bench/scan_against.py /tmp/before [--repeat 3] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from census_against import CHILD_PRELUDE, _commit, child, run_rounds, table_rows  # bench/ is this script's folder
from scan_bench import publish

SECTION = "## Flagship scan against the code before it, alternately on one machine"

_CHILD = CHILD_PRELUDE + r"""
from dynacheck.static.scan import scan_targets
started = time.perf_counter()
result = scan_targets(targets, [], "glm5", cache_dir=Path(sys.argv[2]), reuse=False)
print(json.dumps({"seconds": time.perf_counter() - started, "findings": len(result.findings)}))
"""


def _scan(root: Path, cache: str) -> dict:
    return child(_CHILD, str(root), cache)


def _round(root: Path, args=None) -> dict:
    """A cold scan, then a warm one in a new process over the cache it filled (imports not counted)."""
    with tempfile.TemporaryDirectory(prefix="dynacheck-scan-against-") as cache:
        cold = _scan(root, cache)
        warm = _scan(root, cache)
    return {"cold": cold["seconds"], "warm": warm["seconds"], "findings": warm["findings"]}


def main() -> int:
    args, here, before, now = run_rounds(_round, default_repeat=3)
    lines = [SECTION, "", f"Command: `git worktree add /tmp/before {_commit(args.before)} && python bench/scan_against.py "
             f"/tmp/before --repeat {args.repeat} --write bench/RESULTS.md` (GLM-5 preset, sglang 0.5.9 + flashinfer "
             "0.6.3, offline; each round: the commit before, then this checkout, each scan a new process)", "",
             "| flagship scan | cold (empty summary cache) | warm (cache filled, walk redone) | findings |",
             "| --- | --- | --- | --- |",
             *table_rows(args, here, before, now, "findings", 2)]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

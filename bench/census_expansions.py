"""How many function expansions each deployment of a census computes, and how many distinct results they give.

A walk expands a function once per scope (function, receiver, bound parameters) and deployment; two
expansions of one function with the same actions are work a coarser scope would have shared. This counts,
per deployment of the default matrix walked as one chain in one process (warm summary cache), the
expansions computed (not memo hits) and their distinct (function, actions) pairs.

    python bench/census_expansions.py [--write bench/RESULTS.md]
    PYTHONPATH=/tmp/before python bench/census_expansions.py --write bench/RESULTS.md   # another checkout

The section is named by the commit of the dynacheck it imported, so two checkouts give two sections.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
from pathlib import Path

import dynacheck.census.run as run
import dynacheck.static.reach as reach
from dynacheck.census.matrix import default_deployments
from dynacheck.sources.resolve import default_cache_dir, resolve_target
from scan_bench import publish  # bench/ is this script's folder


def _action(action: tuple) -> tuple:
    """An expansion's action, comparable across scopes: a hit by its line and callee, a push by its callee
    and bindings."""
    if action[0] == "hit":
        return ("hit", action[1].line, action[2], action[3])
    if action[0] == "push":
        return ("push", action[1].line, action[4])
    return action


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    current = {"deployment": ""}
    computed: collections.Counter = collections.Counter()
    distinct: dict[str, set] = collections.defaultdict(set)
    walk_entries, expansion = run._walk_entries, reach.Reacher._expansion

    def entries(deployment, *args, **kwargs):
        current["deployment"] = deployment.name
        return walk_entries(deployment, *args, **kwargs)

    def counted(self, key, scope):
        hit = self.ev.sites.get(("expand", id(scope), key.mode))
        actions = expansion(self, key, scope)
        if not (hit is not None and hit[0] is scope):
            computed[current["deployment"]] += 1
            distinct[current["deployment"]].add((key.module, key.qualname, key.mode, tuple(map(_action, actions))))
        return actions

    run._walk_entries, reach.Reacher._expansion = entries, counted
    targets = [resolve_target(s, offline=True) for s in ("sglang==0.5.9", "flashinfer-python==0.6.3")]
    run.run_census(targets, default_deployments(), cache_dir=default_cache_dir(), jobs=1)
    root = Path(run.__file__).resolve().parents[2]
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or str(root)
    lines = [f"## Census expansions per deployment at {commit}", "",
             f"Command: `{f'git worktree add {root} {commit} && PYTHONPATH={root} ' if root != Path(__file__).resolve().parent.parent else ''}"
             "python bench/census_expansions.py --write bench/RESULTS.md` (sglang 0.5.9 + flashinfer 0.6.3, default "
             "matrix as one chain in one process, warm summary cache, offline)", "",
             "| deployment | expansions computed | distinct (function, actions) |", "| --- | ---: | ---: |",
             *(f"| {name} | {count} | {len(distinct[name])} |" for name, count in computed.items()), ""]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

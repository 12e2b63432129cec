"""How many census cells are what a census of that one model alone says.

A census walks every model's forward with one evaluator per chain of deployments, and what the
evaluator memoized from the forwards walked before can change a later cell (docs/census.md, order
dependence). This walks each model alone (its own census, every deployment, one process) and
compares its cells with the committed census, field by field.

    python bench/census_alone.py reports/census-sglang-0.5.9.json [--write bench/RESULTS.md]

Offline, from the cached wheels of the census's own targets; about 3 minutes for sglang 0.5.9.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from dynacheck.census.matrix import deployments_from_census
from dynacheck.census.run import run_census
from dynacheck.sources.resolve import resolve_target
from scan_bench import _replace_section  # bench/ is this script's folder

SECTION = "## Census cells against each model walked alone"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    census = json.loads(args.census.read_text(encoding="utf-8"))
    targets = [resolve_target(spec, offline=True) for spec in census["targets"]]
    deployments = deployments_from_census(census)
    committed = {(c["model"], c["deployment"]): c for c in census["cells"]}
    models = sorted({model for model, _ in committed})
    differing: list[tuple[str, str, list[str]]] = []
    for model in models:
        alone = run_census(targets, deployments, jobs=1, models=[model])
        for cell in alone.cells:
            known = committed[(cell["model"], cell["deployment"])]
            fields = [k for k in cell if cell[k] != known.get(k)]
            if fields:
                differing.append((cell["model"], cell["deployment"], fields))
    by_field = collections.Counter(tuple(f) for _, _, f in differing)
    lines = [SECTION, "",
             f"Command: `python bench/census_alone.py {args.census}` (each model's census walked alone, jobs=1, "
             "offline, compared field by field with the committed census)", "",
             "| measure | value |", "| --- | --- |",
             f"| cells | {len(committed)} ({len(models)} model classes) |",
             f"| equal to the model walked alone | **{len(committed) - len(differing)}** |",
             f"| different | {len(differing)}{_fields(by_field)} |", ""]
    if differing:
        lines += ["Cells that differ: " + ", ".join(f"{m} x {d}" for m, d, _ in differing), ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        _replace_section(args.write, SECTION, text)
    return 0


def _fields(by_field: collections.Counter) -> str:
    """` (15 in conditional_sites)`: how many differing cells differ in which fields."""
    if not by_field:
        return ""
    return " (" + "; ".join(f"{n} in {', '.join(fields)}" for fields, n in by_field.most_common()) + ")"


if __name__ == "__main__":
    sys.exit(main())

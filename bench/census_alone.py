"""How many census cells are what a census of that one model alone says.

A census walks every model's forward with one evaluator per chain of deployments, and what the
evaluator memoized from the forwards walked before can change a later cell (docs/census.md, order
dependence). This walks each model alone (its own census, every deployment, one process) and
compares its cells with the committed census, field by field.

    python bench/census_alone.py reports/census-sglang-0.5.9.json [--write bench/RESULTS.md]
    python bench/census_alone.py reports/census-sglang-0.5.10.json --fresh [--write bench/RESULTS.md]

With --fresh, each cell is one scan with an evaluator of its own (no fork, nothing walked before it
in that evaluator): the stronger check, about 6 minutes per census on 2 cores.

Offline, from the cached wheels of the census's own targets; about 3 minutes for sglang 0.5.9.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from dynacheck.census.matrix import deployments_from_census
from dynacheck.census.run import run_census
from dynacheck.sources.resolve import resolve_target
from scan_bench import _replace_section  # bench/ is this script's folder

SECTION = "## Census cells against each model walked alone"
STOPPED = "does not start on this deployment"  # an n/a reason of static/startup.py, checked with --fresh
FRESH_SECTION = "## Census cells against each cell scanned alone"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--fresh", action="store_true", help="scan each cell with an evaluator of its own")
    args = parser.parse_args()
    census = json.loads(args.census.read_text(encoding="utf-8"))
    targets = [resolve_target(spec, offline=True) for spec in census["targets"]]
    deployments = deployments_from_census(census)
    committed = {(c["model"], c["deployment"]): c for c in census["cells"]}
    models = sorted({model for model, _ in committed})
    differing: list[tuple[str, str, list[str]]] = []
    stopped, stopped_differing = 0, []
    if args.fresh:
        differing, stopped_differing, stopped = _fresh(census, targets, deployments)
    for model in models if not args.fresh else ():
        alone = run_census(targets, deployments, jobs=1, models=[model])
        for cell in alone.cells:
            known = committed[(cell["model"], cell["deployment"])]
            fields = [k for k in cell if cell[k] != known.get(k)]
            if fields:
                differing.append((cell["model"], cell["deployment"], fields))
    by_field = collections.Counter(tuple(f) for _, _, f in differing)
    how = ("each cell one scan with an evaluator of its own, 2 processes" if args.fresh
           else "each model's census walked alone, jobs=1")
    lines = [f"{FRESH_SECTION}: {args.census.name}" if args.fresh else SECTION, "",
             f"Command: `python bench/census_alone.py {args.census}{' --fresh' if args.fresh else ''}` ({how}, "
             "offline, compared field by field with the committed census)", "",
             "| measure | value |", "| --- | --- |",
             f"| cells | {len(committed)} ({len(models)} model classes) |",
             f"| equal to the {'cell scanned' if args.fresh else 'model walked'} alone | **{len(committed) - len(differing)}** |",
             f"| different | {len(differing)}{_fields(by_field)} |"]
    if args.fresh:
        lines.append(f"| n/a because the model does not start (static/startup.py), worked out again alone | "
                     f"{stopped}, **{stopped - len(stopped_differing)} equal** |")
        differing += stopped_differing
    lines.append("")
    if differing:
        lines += ["Cells that differ: " + ", ".join(f"{m} x {d}" for m, d, _ in differing), ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        _replace_section(args.write, lines[0], text)
    return 0


_FRESH: dict = {}


def _fresh_init(specs: list[str]) -> None:
    from dynacheck.static.scan import ScanSession

    _FRESH["targets"] = [resolve_target(spec, offline=True) for spec in specs]
    _FRESH["session"] = ScanSession.open(_FRESH["targets"], None)


def _fresh_cell(cell: dict, deployment) -> tuple[str, str, list[str]] | None:
    """The cell scanned with a new evaluator (ScanSession.engine with nothing to fork from)."""
    from dynacheck.census.run import cell_record
    from dynacheck.static.scan import scan_targets

    from dataclasses import replace

    # the cell's model class is its config's architecture, as in the census (facts.ARCH_FACT)
    session, spec = _FRESH["session"], replace(deployment.spec(), architecture=cell["model"])
    session.engine(spec, None)
    session._builder = None  # findings built afresh too, not reused by walk signature from an earlier cell
    try:
        record = cell_record(scan_targets(_FRESH["targets"], [cell["entry"]], None, deployment=spec,
                                          session=session))
        if deployment.quantization:  # a walked cell is one whose model starts (static/startup.py)
            record["does not start"] = _does_not_start(session, spec, cell)
    finally:
        session.release(spec)
    fields = [k for k in record if record[k] != cell.get(k, "")]
    return (cell["model"], cell["deployment"], fields) if fields else None


def _does_not_start(session, spec, record: dict) -> str:
    from dynacheck.static.startup import model_unbuildable

    found = model_unbuildable(session.engine(spec)[1], record["module"], record["model"])
    return found.reason(record["model"], session.locator.display_path(found.file)) if found else ""


def _fresh_start(entry: dict, deployment) -> tuple[str, str, list[str]] | None:
    """A census's "does not start" n/a, worked out again with an evaluator of its own."""
    from dataclasses import replace

    session, spec = _FRESH["session"], replace(deployment.spec(), architecture=entry["model"])
    session.engine(spec, None)
    try:
        reason = _does_not_start(session, spec, entry)
    finally:
        session.release(spec)
    return None if reason == entry["reason"] else (entry["model"], entry["deployment"], ["does not start"])


def _fresh(census: dict, targets, deployments) -> tuple[list, list, int]:
    """Cells that differ, "does not start" entries that differ, and how many of those there are."""
    by_name = {d.name: d for d in deployments}
    cells = census["cells"]
    jobs = min(2, os.cpu_count() or 1)
    stopped = [n for n in census["not_applicable"] if STOPPED in n["reason"]]
    with ProcessPoolExecutor(jobs, initializer=_fresh_init, initargs=(census["targets"],)) as pool:
        found = pool.map(_fresh_cell, cells, [by_name[c["deployment"]] for c in cells], chunksize=16)
        again = pool.map(_fresh_start, stopped, [by_name[n["deployment"]] for n in stopped], chunksize=16)
        return [d for d in found if d is not None], [d for d in again if d is not None], len(stopped)


def _fields(by_field: collections.Counter) -> str:
    """` (15 in conditional_sites)`: how many differing cells differ in which fields."""
    if not by_field:
        return ""
    return " (" + "; ".join(f"{n} in {', '.join(fields)}" for fields, n in by_field.most_common()) + ")"


if __name__ == "__main__":
    sys.exit(main())

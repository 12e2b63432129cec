"""Clean census cells that would break whichever way an open test goes (static/every_way.py).

The FlashInfer API census counts a function whose breaks all wait on undecided tests as not safe when every
way those tests go breaks; the model census does not apply that yet. This rescans each cell with no fatal
site (its deployment and model class, one session) and counts the cells where it would.

    python bench/every_way_cells.py reports/census-sglang-0.5.9.json
    python bench/every_way_cells.py reports/census-sglang-0.5.10.json --deployments reports/census-deployments-sglang-0.5.10.toml
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from dynacheck.census.matrix import load_deployments
from dynacheck.sources.resolve import resolve_target
from dynacheck.static.every_way import fatal_every_way
from dynacheck.static.scan import ScanSession, scan_targets


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path)
    parser.add_argument("--deployments", type=Path, default=None, help="the file the census was made with")
    args = parser.parse_args()
    data = json.loads(args.census.read_text())
    targets = [resolve_target(spec, offline=True) for spec in data["targets"]]
    deployments = {d.name: d for d in load_deployments(args.deployments)}
    session = ScanSession.open(targets, None)
    clean = [c for c in data["cells"] if c["fatal_sites"] == 0]
    found = []
    for cell in clean:
        spec = replace(deployments[cell["deployment"]].spec(), architecture=cell["model"])
        result = scan_targets(targets, [cell["entry"]], None, deployment=spec, session=session)
        together, tests = fatal_every_way(result.findings)
        if together:
            found.append((cell["model"], cell["deployment"], [t.text for t in tests]))
    print(f"{args.census}: {len(clean)} cells without a fatal site of {len(data['cells'])}; "
          f"{len(found)} would break whichever way their open tests go")
    for model, deployment, tests in found:
        print(f"  {model} x {deployment}: {', '.join(tests)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

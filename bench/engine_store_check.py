"""Census cells scanned alone with and without a stored engine (static/engine_store.py): equal?

For a sample of a census's cells (fixed seed), each cell is scanned as a user would (one entry, the
cell's deployment and model class, a new process per scan): once with the store off (its summaries
cached), once evaluating anew and storing its engine, once loading it. The JSON of the loaded scan
must equal the one evaluated anew, field for field (timings aside).

    python bench/engine_store_check.py reports/census-sglang-0.5.9.json [--cells 24] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

SECTION = "## Engine store: census cells scanned with and without a stored engine"
SEED = 35

CHILD = r"""
import json, sys
from dataclasses import replace
from pathlib import Path
from dynacheck.census.matrix import deployments_from_census
from dynacheck.report.json_out import to_data
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import engine_store
from dynacheck.static.scan import scan_targets
census_path, model, deployment, entry, cache = sys.argv[1:]
census = json.loads(Path(census_path).read_text())
spec = next(d for d in deployments_from_census(census) if d.name == deployment).spec()
seen, load, save = [], engine_store.load, engine_store.save
def loading(*args):
    engine = load(*args)
    seen.append("loaded" if engine is not None else "none")
    return engine
def saving(*args):
    ok = save(*args)
    seen.append("saved" if ok else "not saved")
    return ok
engine_store.load, engine_store.save = loading, saving
targets = [resolve_target(t, offline=True) for t in census["targets"]]
result = scan_targets(targets, [entry], None, cache_dir=Path(cache), deployment=replace(spec, architecture=model),
                      reuse=False)
data = to_data(result)
data["stats"].pop("seconds")
print(json.dumps({"engine": seen, "result": data}))
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path)
    parser.add_argument("--cells", type=int, default=24)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    census = json.loads(args.census.read_text(encoding="utf-8"))
    cells = random.Random(SEED).sample(census["cells"], min(args.cells, len(census["cells"])))
    with tempfile.TemporaryDirectory(prefix="dynacheck-engine-check-") as work:
        shared = Path(work) / "summaries"
        _scan(args.census, cells[0], Path(work) / "warmup", off=True)  # fills the folder with what most cells read
        os.rename(Path(work) / "warmup" / "summaries", shared)
        with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
            outcomes = list(pool.map(lambda i: _three_ways(args.census, cells[i], Path(work) / f"cell{i}", shared),
                                     range(len(cells))))
    equal = sum(1 for o in outcomes if o["equal"])
    loaded = sum(1 for o in outcomes if o["loaded"])
    lines = [SECTION, "", f"Command: `python bench/engine_store_check.py {args.census} --cells {args.cells}` "
             f"(seed {SEED}; each cell three scans in new processes: store off, storing, loading)", "",
             "| measure | value |", "| --- | --- |",
             f"| cells sampled | {len(cells)} ({len({c['deployment'] for c in cells})} deployments, "
             f"{len({c['model'] for c in cells})} model classes) |",
             f"| loaded scan took the stored engine | {loaded} of {len(cells)} |",
             f"| loaded scan's JSON equal to the one evaluated anew | **{equal} of {len(cells)}** |", ""]
    lines += [f"- differs: {o['model']} x {o['deployment']} ({', '.join(o['fields'])})"
              for o in outcomes if not o["equal"]]
    lines += [f"- not loaded: {o['model']} x {o['deployment']} (the storing scan: {o['engine'][0]}; the next: "
              f"{o['engine'][1]})" for o in outcomes if not o["loaded"]]
    publish(lines, args.write)
    return 0 if equal == loaded == len(cells) else 1


def _three_ways(census: Path, cell: dict, cache: Path, shared: Path) -> dict:
    cache.mkdir(parents=True)
    (cache / "summaries").symlink_to(shared)  # warm summaries, an engine folder of the cell's own
    _scan(census, cell, cache, off=True)  # the summaries this cell reads, cached (a cold scan stores nothing)
    storing = _scan(census, cell, cache)  # evaluates anew, stores its engine
    loading = _scan(census, cell, cache)
    fields = sorted(k for k in set(storing["result"]) | set(loading["result"])
                    if storing["result"].get(k) != loading["result"].get(k))
    return {"model": cell["model"], "deployment": cell["deployment"], "equal": not fields, "fields": fields,
            "loaded": "saved" in storing["engine"] and loading["engine"][:1] == ["loaded"],
            "engine": (storing["engine"], loading["engine"])}


def _scan(census: Path, cell: dict, cache: Path, off: bool = False) -> dict:
    env = os.environ | ({"DYNACHECK_ENGINE_STORE": "0"} if off else {})
    done = subprocess.run([sys.executable, "-c", CHILD, str(census), cell["model"], cell["deployment"],
                           cell["entry"], str(cache)], capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())

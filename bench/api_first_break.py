"""Score the FlashInfer API census's "not safe" verdicts and their first breaks against the sources.

`bench/api_labels.py` checks the functions the census calls safe. This checks the other side on a sample:
functions it calls not safe, drawn at random (seeded) from those no other label covers. Each label says
what a call inside `torch.compile(fullgraph=True)` does on the census deployment (sm100, CUDA, default
env, every argument not given left at its default, no eager warm-up), and, where it breaks, the
`file:line` of the first call Dynamo cannot trace, in program order, with the lines that decide it.

    python bench/api_first_break.py --draw 20 --seed 40 reports/census-flashinfer-0.7.4.json  # the sample
    python bench/api_first_break.py reports/census-flashinfer-0.7.4.json [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

LABELS = Path(__file__).parent / "labels" / "api-first-break-flashinfer.json"
SAFE_LABELS = Path(__file__).parent / "labels" / "api-safe-flashinfer.json"
SECTION = "## FlashInfer API census: its first breaks against the sources (a sample)"


def draw(census: dict, count: int, seed: int) -> list[str]:
    """`count` functions the census calls not safe, none of them labelled in api-safe-flashinfer.json."""
    labelled = {(label["version"], label["function"])
                for label in json.loads(SAFE_LABELS.read_text(encoding="utf-8"))["labels"]}
    pool = sorted(r["function"] for r in census["functions"]
                  if r.get("safe") is False and (census["version"], r["function"]) not in labelled)
    return sorted(random.Random(seed).sample(pool, min(count, len(pool))))


def score(census: dict, labels: list[dict]) -> dict[str, list[str]]:
    """Each labelled function of the census's version, by whether the verdict and the first break hold."""
    says = {r["function"]: r for r in census["functions"]}
    rows: dict[str, list[str]] = {"verdict right, first break right": [], "verdict right, first break wrong": [],
                                  "verdict wrong": [], "unclear in the sources": []}
    for label in labels:
        if label["version"] != census["version"]:
            continue
        record = says.get(label["function"])
        if record is None:
            raise SystemExit(f"{label['function']}: labelled for {census['version']} but not in the census")
        name = label["function"].partition(":")[2]
        if label["verdict"] == "unclear":
            rows["unclear in the sources"].append(name)
        elif (label["verdict"] == "breaks") != (record.get("safe") is False):
            rows["verdict wrong"].append(name)
        elif label["verdict"] == "breaks" and _where(record.get("first_break")) not in label["first_break"]:
            rows["verdict right, first break wrong"].append(name)
        else:
            rows["verdict right, first break right"].append(name)
    return rows


def _where(site: dict | None) -> str:
    return f"{site['file']}:{site['line']}" if site else ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path, nargs="+")
    parser.add_argument("--draw", type=int, default=0, help="print a sample of this many functions instead")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    censuses = [json.loads(path.read_text(encoding="utf-8")) for path in args.census]
    if args.draw:
        for census in censuses:
            print("\n".join(draw(census, args.draw, args.seed)))
        return 0
    data = json.loads(LABELS.read_text(encoding="utf-8"))
    shown = " ".join(str(p) for p in args.census)
    lines = [SECTION, "",
             f"Command: `python bench/api_first_break.py {shown}` (labels: `bench/labels/api-first-break-flashinfer.json`: "
             f"{data['what']})", "", "| version | verdict / first break | functions |", "| --- | --- | --- |"]
    for census in censuses:
        rows = score(census, data["labels"])
        lines += [f"| {census['version']} | {row} | {len(names)}{': ' + ', '.join(sorted(names)) if names else ''} |"
                  for row, names in rows.items() if names]
    lines.append("")
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

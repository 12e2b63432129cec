"""Score the FlashInfer API census's "safe" verdicts against the functions read in the sources.

The labels (bench/labels/api-safe-flashinfer.json) cover every function the API census called safe at
stop 38 (8768458), and five 0.7.4 functions it newly called safe during stop 40, per FlashInfer version: what calling it inside `torch.compile(fullgraph=True)` on the
census deployment (sm100, CUDA, default env) does, read in the sources ("safe", "breaks", "raises": it
raises on this deployment before any kernel, "unclear"), with the file:lines that decide it. A census
claim is its `safe` field; one that names an argument its verdict depends on (`depends_on`) has its own rows.

    python bench/api_labels.py reports/census-flashinfer-0.6.3.json reports/census-flashinfer-0.7.4.json \
        [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

LABELS = Path(__file__).parent / "labels" / "api-safe-flashinfer.json"
SECTION = "## FlashInfer API census: its safe verdicts against the sources"
ROWS = ("says safe, sources safe", "says safe, sources: raises on sm100", "says safe, sources break",
        "says not safe, sources break", "says not safe, sources safe", "unclear in the sources",
        "says it depends on an argument the caller passes, sources break with the one its callers pass",
        "says it depends on an argument the caller passes, sources safe")


def score(census: dict, labels: list[dict]) -> dict[str, list[str]]:
    """Each labelled function of the census's version in one row of ROWS."""
    says = {r["function"]: r.get("safe") for r in census["functions"]}
    depends = {r["function"] for r in census["functions"] if r.get("depends_on")}
    rows: dict[str, list[str]] = {row: [] for row in ROWS}
    for label in labels:
        if label["version"] != census["version"]:
            continue
        name, verdict = label["function"], label["verdict"]
        if name not in says:
            raise SystemExit(f"{name}: labelled for {census['version']} but not in the census")
        if verdict == "unclear":
            row = ROWS[5]
        elif name in depends:  # static/argument_calls.py: no claim of safe or not, a named argument
            row = ROWS[7] if verdict == "safe" else ROWS[6]
        elif says[name]:
            row = {"safe": ROWS[0], "raises": ROWS[1]}.get(verdict, ROWS[2])
        else:
            row = ROWS[4] if verdict == "safe" else ROWS[3]
        rows[row].append(name.partition(":")[2])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path, nargs="+")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    labels = json.loads(LABELS.read_text(encoding="utf-8"))["labels"]
    shown = " ".join(str(p) for p in args.census)
    lines = [SECTION, "",
             f"Command: `python bench/api_labels.py {shown}` (labels: `bench/labels/api-safe-flashinfer.json`: "
             "every function the API census called safe at stop 38 and five it newly called safe during stop 40, "
             "read in the sources, each verdict with the file:lines that decide it)", "",
             "| version | census says / sources say | functions |", "| --- | --- | --- |"]
    for path in args.census:
        census = json.loads(path.read_text(encoding="utf-8"))
        rows = score(census, labels)
        lines += [f"| {census['version']} | {row} | {len(names)}{': ' + ', '.join(sorted(names)) if names else ''} |"
                  for row, names in rows.items() if names]
        claims = len(rows[ROWS[0]]) + len(rows[ROWS[1]]) + len(rows[ROWS[2]])
        lines.append(f"| {census['version']} | precision of `safe` on the labelled functions (no break; a "
                     f"function that raises counts as right) | {len(rows[ROWS[0]]) + len(rows[ROWS[1]])}/{claims} |")
    lines.append("")
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

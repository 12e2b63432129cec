"""Score a census against its labelled sample (bench/labels/census-sample-<version>.json): the verdicts read
in the sources for each sampled cell, kept with the census record they were read against (`census_now`).
A cell whose record in the census differs from that one is listed as "to read again": its verdict is stale.

    python bench/census_sample_score.py bench/labels/census-sample-0.5.10.json reports/census-sglang-0.5.10.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def record(census: dict, model: str, deployment: str) -> dict:
    """The census's reading of one cell, in the labels' shape."""
    for cell in census["cells"]:
        if (cell["model"], cell["deployment"]) == (model, deployment):
            first = cell["first_break"]
            return {"fatal_sites": cell["fatal_sites"],
                    "first_break": f"{first['gb_id'] or 'fatal'} {first['file']}:{first['line']}" if first else None}
    for item in census["not_applicable"]:
        if (item["model"], item["deployment"]) == (model, deployment):
            return {"not_applicable": item["reason"]}
    return {"missing": True}


def main() -> int:
    labels = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    census = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    stale = [c for c in labels["cells"] if record(census, c["model"], c["deployment"]) != c["census_now"]]
    counts = Counter(c["verdict_now"] for c in labels["cells"])
    print(f"{len(labels['cells'])} cells: " + ", ".join(f"{n} {v}" for v, n in counts.most_common()))
    print(f"when drawn (stop 42, before its changes): " + ", ".join(f"{n} {v}" for v, n in
                                                     Counter(c["verdict_then"] for c in labels["cells"]).most_common()))
    for cell in stale:
        print(f"to read again (its record changed): {cell['index']} {cell['model']} {cell['deployment']}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

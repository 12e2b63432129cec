"""Score the census's "does not start" verdicts (static/startup.py) against models read by hand.

The labels (bench/labels/startup-mxfp4-sglang-0.5.9.json) give, per model, what the sources say when the
loader builds it with SGLang's Mxfp4Config on CUDA ("does not start", "starts", or "undecided": a
checkpoint-dependent layer), with the file:lines that decide it. A claim is the census listing the model's
mxfp4 cells as `not_applicable` because it does not start.

    python bench/startup_labels.py reports/census-sglang-0.5.9.json [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scan_bench import publish  # bench/ is this script's folder

LABELS = Path(__file__).parent / "labels" / "startup-mxfp4-sglang-0.5.9.json"
STOPPED = "does not start on this deployment"
SECTION = "## Does the model start? The census's mxfp4 verdicts against models read by hand"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("census", type=Path)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    census = json.loads(args.census.read_text(encoding="utf-8"))
    labels = json.loads(LABELS.read_text(encoding="utf-8"))["labels"]
    claimed = {n["model"] for n in census["not_applicable"]
               if n["deployment"].startswith("mxfp4") and STOPPED in n["reason"]}
    walked = {c["model"] for c in census["cells"] if c["deployment"].startswith("mxfp4")}
    rows = {"claim, label does not start": [], "claim, label starts or undecided": [],
            "no claim, label starts": [], "no claim, label undecided": [], "no claim, label does not start": []}
    for label in labels:
        model, verdict = label["model"], label["verdict"]
        if model in claimed:
            rows["claim, label does not start" if verdict == "does not start"
                 else "claim, label starts or undecided"].append(model)
        elif model in walked:
            key = {"starts": "no claim, label starts", "undecided": "no claim, label undecided"}.get(
                verdict, "no claim, label does not start")
            rows[key].append(model)
        else:
            print(f"{model}: neither claimed nor walked on mxfp4 in {args.census}", file=sys.stderr)
            return 1
    claims = len(rows["claim, label does not start"]) + len(rows["claim, label starts or undecided"])
    lines = [SECTION, "",
             f"Command: `python bench/startup_labels.py {args.census}` (labels: `{LABELS.relative_to(Path.cwd())}`, "
             "each verdict with the file:lines that decide it)", "",
             "| census says / sources say | models |", "| --- | --- |"]
    lines += [f"| {key} | {len(models)}{': ' + ', '.join(sorted(models)) if models else ''} |"
              for key, models in rows.items()]
    lines += ["", f"Precision of the claims on this sample: {len(rows['claim, label does not start'])}/{claims}. "
              f"Of all mxfp4 models, the census claims {len(claimed)} and walks {len(walked)}.", ""]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Precision and recall of a deployment-aware scan against the labelled flagship sites.

    python bench/deploy_precision.py SCAN.json [--labels bench/labels/glm5-sm120-sites.json]

The labels (real / conditional / impossible, each with the file:line that decides it) were made by
reading sglang 0.5.9 + flashinfer 0.6.3 for the GLM-5-NVFP4 SM120 deployment of `--preset glm5`.
Precision: of the scan's unconditional sites that are labelled, the share labelled real.
Recall: of the sites labelled real, the share the scan reports unconditionally. The labels'
`missed` list (real sites no scan reported when they were made, found by reading the sources) counts
too, except entries of kind "route": a call into an in-tree function whose hazards are labelled as
sites of their own (listed as `routes_not_counted`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).parent


def score(scan: dict, labels: dict) -> dict:
    verdict = {(s["file"], s["line"]): s["verdict"] for s in labels["sites"]}
    # sites read in the sources that no scan reported when the labels were made: real ones count in recall
    routes = []  # calls into in-tree functions whose hazards are labelled as their own sites: not sites
    for missed in labels.get("missed", []):
        if missed.get("kind") == "route":
            routes.append(missed["site"])
            continue
        file, _, line = missed["site"].rpartition(":")
        verdict.setdefault((file, int(line)), missed["verdict"])
    first: dict[tuple, dict] = {}
    for finding in scan["findings"]:
        first.setdefault((finding["site"]["file"], finding["site"]["line"]), finding)
    unconditional = {k for k, f in first.items() if not f.get("conditions")}
    labelled = [k for k in unconditional if k in verdict]
    real = {k for k, v in verdict.items() if v == "real"}
    return {
        "sites": len(first),
        "unconditional_sites": len(unconditional),
        "unconditional_labelled": len(labelled),
        "unconditional_unlabelled": sorted(f"{f}:{line}" for f, line in unconditional - set(verdict)),
        "true_positives": sum(1 for k in labelled if verdict[k] == "real"),
        "false_positives": sorted(f"{f}:{line} ({verdict[(f, line)]})" for f, line in labelled
                                  if verdict[(f, line)] != "real"),
        "precision": round(sum(1 for k in labelled if verdict[k] == "real") / len(labelled), 3) if labelled else None,
        "real_labelled": len(real),
        "recall": round(len(real & unconditional) / len(real), 3) if real else None,
        "missed_real": sorted(f"{f}:{line}" for f, line in real - unconditional),
        "routes_not_counted": sorted(routes),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scan", type=Path)
    parser.add_argument("--labels", type=Path, default=HERE / "labels" / "glm5-sm120-sites.json")
    args = parser.parse_args()
    result = score(json.loads(args.scan.read_text()), json.loads(args.labels.read_text()))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Score the static scan against the evaluation corpus's ground truth (bench/corpus/truth.json).

Each program in bench/corpus/ is scanned from its entry `f` (static only: nothing is imported).
A break site is found when a finding sits on the same line with the same GB id as a break the
real Dynamo reported under the default compile (bench/corpus_truth.py). Also counted: false
breaks (findings with a GB id on the negative programs, which compile into one graph) and
whether the scan's fullgraph verdict (any finding fatal under fullgraph) matches Dynamo's.

    PYTHONPATH=$PWD python bench/corpus_score.py [--table] [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"
COMMAND = "PYTHONPATH=$PWD python bench/corpus_truth.py && PYTHONPATH=$PWD python bench/corpus_score.py --write bench/RESULTS.md"
HEADING = "## Evaluation corpus: static predictions against real Dynamo"


def predicted(stem: str, cache: Path) -> tuple[set[tuple[int, str]], bool, list[str]]:
    """(line, GB id) sites the scan predicts in the program, whether it predicts a fatal fullgraph, rules."""
    from dynacheck.static.scan import scan_roots

    result = scan_roots([CORPUS], [f"{stem}:f"], cache_dir=cache)
    sites, fatal, rules = set(), False, []
    for finding in result.findings:
        if Path(finding.site.file).name != f"{stem}.py":
            continue
        rules.append(finding.rule)
        fatal = fatal or finding.outcome.fatal_under_fullgraph
        if finding.outcome.gb_id:
            sites.add((finding.site.line, finding.outcome.gb_id))
    return sites, fatal, rules


def score(truth: dict) -> dict:
    rows, found, total, false_breaks, fatal_agree = [], 0, 0, 0, 0
    with tempfile.TemporaryDirectory() as cache:
        for stem, entry in sorted(truth["programs"].items()):
            expected = {(b["line"], b["gb_id"]) for b in entry["breaks"]}
            sites, fatal, rules = predicted(stem, Path(cache))
            hit = expected & sites
            found += len(hit)
            total += len(expected)
            if stem.startswith("n") and sites:
                false_breaks += 1
            fatal_agree += fatal == (entry["fullgraph"] is not None)
            rows.append((stem, sorted(expected), sorted(sites), len(hit), fatal, entry["fullgraph"] is not None,
                         rules))
    return {"rows": rows, "found": found, "total": total, "false_breaks": false_breaks,
            "negatives": sum(1 for s in truth["programs"] if s.startswith("n")),
            "positives": sum(1 for s in truth["programs"] if s.startswith("p")),
            "fatal_agree": fatal_agree, "torch": truth["torch"]}


def render(result: dict, table: bool) -> str:
    programs = result["positives"] + result["negatives"]
    lines = [
        HEADING,
        "",
        f"Command: `{COMMAND}` (ground truth: torch {result['torch']} CPU, `backend=\"eager\"`, with and "
        "without `fullgraph=True`).",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| programs | {result['positives']} positive, {result['negatives']} negative |",
        f"| break sites (default compile) | {result['total']} |",
        f"| recall (same line and GB id) | **{result['found']}/{result['total']} = "
        f"{100 * result['found'] / max(result['total'], 1):.1f}%** (aim >= 90%) |",
        f"| negatives with a predicted break | **{result['false_breaks']}/{result['negatives']}** (aim 0) |",
        f"| fullgraph verdict agrees (fatal or not) | {result['fatal_agree']}/{programs} |",
        "",
    ]
    missed = [r for r in result["rows"] if len(r[1]) > r[3]]
    if missed:
        lines += ["Missed sites (program: Dynamo's (line, GB id) -> the scan's):", ""]
        lines += [f"- `{stem}`: {expected} -> {sites or 'none'}" for stem, expected, sites, *_ in missed]
        lines.append("")
    if table:
        lines += ["| program | Dynamo (line, GB) | scan (line, GB) | rules | fatal: scan / Dynamo |",
                  "| --- | --- | --- | --- | --- |"]
        for stem, expected, sites, _, fatal, truly, rules in result["rows"]:
            lines.append(f"| {stem} | {expected} | {sites} | {', '.join(sorted(set(rules)))} | {fatal} / {truly} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", action="store_true", help="one row per program")
    parser.add_argument("--write", type=Path, default=None, help="replace this section in a RESULTS.md")
    args = parser.parse_args()
    truth = json.loads((CORPUS / "truth.json").read_text())
    text = render(score(truth), args.table)
    print(text)
    if args.write:
        sys.path.insert(0, str(Path(__file__).parent))
        from scan_bench import _replace_section

        _replace_section(args.write, HEADING, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

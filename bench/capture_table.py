"""Markdown tables from `dynacheck capture` summaries: capture time per batch size, eager vs replay step.

  python bench/capture_table.py reports/capture/h200/capture-fix.json [capture-nofix.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(summary: dict) -> str:
    lines = []
    for rank in summary.get("ranks", []):
        gpu = rank.get("gpu", rank.get("device", "?"))
        lines.append(f"rank {rank.get('rank')} on {gpu} ({rank.get('size')} sizes, "
                     f"{rank.get('config', {}).get('layers')} layers, {rank.get('config', {}).get('experts')} experts, "
                     f"quantizer {rank.get('quantizer', {}).get('source')})\n")
        lines.append("| batch | compiled | captured | compile s | capture s | eager ms | replay ms | speed-up "
                     "| replay max rel |")
        lines.append("|---:|:---:|:---:|---:|---:|---:|---:|---:|---:|")
        for e in rank.get("batch_sizes", []):
            eager, replay = e.get("eager_ms"), e.get("replay_ms")
            speed = f"{eager / replay:.2f}x" if eager and replay else ""
            err = e.get("replay", {}).get("max_rel")
            lines.append(
                f"| {e['batch_size']} | {_yes(e.get('compiled'))} | {_yes(e.get('captured'))} | "
                f"{_num(e.get('compile_s'))} | {_num(e.get('capture_s'))} | {_num(eager)} | {_num(replay)} | "
                f"{speed} | {'' if err is None else f'{err:.1e}'} |")
        lines.append("")
    for b in summary.get("verdict", {}).get("breaks", []):
        site = b.get("site") or {}
        lines.append(f"- break {b['gb_id']} `{b['gb_type']}` at `{site.get('function')}` line {site.get('line')}"
                     f" (ranks {b['ranks']}{', fatal under fullgraph' if b.get('fatal_under_fullgraph') else ''})")
    return "\n".join(lines)


def _yes(v: object) -> str:
    return {True: "yes", False: "**no**", None: "n/a"}.get(v, str(v))  # type: ignore[arg-type]


def _num(v: object) -> str:
    return "" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(f"### {Path(path).name}\n")
        print(table(json.loads(Path(path).read_text())))
        print()

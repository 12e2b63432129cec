"""Which SGLang releases can compile the model piecewise with torch.compile, read from their sources.

For each release (wheels fetched into the dynacheck cache, never installed or imported) it reports
whether `model_runner.py` builds the piecewise runner dynacheck's census models
(`init_piecewise_cuda_graphs`), how piecewise is turned on (`--enable-piecewise-cuda-graph`, on by
default with `--disable-piecewise-cuda-graph`, or the `tc_piecewise` CUDA-graph backend), and whether
the `tc_piecewise` backend was removed ("tc_piecewise was removed").

    python bench/piecewise_history.py [--offline] [--write bench/RESULTS.md] 0.5.9 0.5.10 ... 0.5.23
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from scan_bench import publish

from dynacheck.errors import UserError
from dynacheck.sources.resolve import resolve_target


def facts(root: Path) -> dict[str, str]:
    srt = root / "sglang" / "srt"
    texts = [srt / "server_args.py", srt / "model_executor" / "cuda_graph_config.py",
             *sorted((srt / "arg_groups" / "fields").glob("*.py"))]
    args = "".join(p.read_text(encoding="utf-8", errors="replace") for p in texts if p.is_file())
    runner = (srt / "model_executor" / "model_runner.py").read_text(encoding="utf-8", errors="replace")
    if "tc_piecewise was removed" in args:
        switch = "none: `tc_piecewise was removed`"
    elif "Backend.BREAKABLE if is_cuda() else Backend.TC_PIECEWISE" in args:
        switch = "opt-in on CUDA: `--cuda-graph-backend-prefill tc_piecewise` (the default there is breakable, no torch.compile)"
    elif "PhaseConfig(backend=Backend.TC_PIECEWISE)" in args:
        switch = "on by default: the `tc_piecewise` prefill backend"
    elif re.search(r'Literal\[[^\]]*"tc_piecewise"', args):
        switch = "`--cuda-graph-backend-prefill tc_piecewise`"
    elif "disable_piecewise_cuda_graph: bool = False" in args:
        switch = "on by default (`--disable-piecewise-cuda-graph`)"
    elif "enable_piecewise_cuda_graph: bool = False" in args:
        switch = "`--enable-piecewise-cuda-graph`"
    else:
        switch = "not found"
    return {"runner": "yes" if "def init_piecewise_cuda_graphs" in runner else "no",
            "switch": switch, "namespaces": "yes" if (srt / "arg_groups" / "fields").is_dir() else "no"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    lines = ["## Piecewise torch.compile across SGLang releases", "",
             f"Command: `python bench/piecewise_history.py --write bench/RESULTS.md {' '.join(args.versions)}` "
             "(each wheel's sources read, nothing imported)", "",
             "| sglang | `init_piecewise_cuda_graphs` (the runner the census models) | how piecewise torch.compile is "
             "turned on | ServerArgs in arg_groups/fields |", "| --- | --- | --- | --- |"]
    for version in args.versions:
        try:
            target = resolve_target(f"sglang=={version}", offline=args.offline)
        except UserError as exc:
            lines.append(f"| {version} | (not fetched: {exc.message}) | | |")
            continue
        got = facts(Path(target.root))
        lines.append(f"| {version} | {got['runner']} | {got['switch']} | {got['namespaces']} |")
    lines.append("")
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())

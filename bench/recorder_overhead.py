"""Recorder overhead on a compile-heavy CPU program, with and without `dynacheck trace`, in one run.

Each repetition runs the same workload twice in fresh processes, once plain and once with the
recorder injected exactly as `dynacheck trace` does (alternating, so drift hits both); the
workload times its own compile-and-run section. Prints medians and the ratio.

    PYTHONPATH=$PWD python bench/recorder_overhead.py [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def workload() -> None:
    """Several small modules, each with graph breaks and recompiles (shapes change, dynamic=False)."""
    import logging

    import torch

    log = logging.getLogger("bench")

    class Block(torch.nn.Module):
        def __init__(self, width: int, mode: int) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(width, width)
            self.mode = mode

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.lin(x))
            if self.mode == 0:
                print("block", x.shape[0], file=sys.stderr)  # graph break
            elif self.mode == 1:
                log.debug("block")  # graph break
            else:
                x = x + x.sum().item()  # graph break
            return x * 2

    started = time.perf_counter()
    for index in range(6):
        block = torch.compile(Block(16, index % 3), backend="eager", dynamic=False)
        for batch in (1, 2, 3, 4):  # a recompile per new batch size
            block(torch.ones(batch, 16))
            block(torch.ones(batch, 16))
    print(f"WORKLOAD_SECONDS {time.perf_counter() - started:.4f}")


def run_once(traced: bool, out_dir: Path) -> tuple[float, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if traced:
        from dynacheck.dynamic.launch import prepare_out, trace_env

        prepare_out(out_dir)
        env = trace_env(out_dir, collect_all=False, base=env)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-W", "ignore", __file__, "--workload"], env=env,
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    inner = next(float(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("WORKLOAD_SECONDS"))
    return inner, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workload:
        workload()
        return
    sys.path.insert(0, str(REPO))
    plain_inner, plain_wall, traced_inner, traced_wall = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "trace"
        run_once(False, out_dir)  # warm the file cache; not counted
        for _ in range(args.reps):
            inner, wall = run_once(False, out_dir)
            plain_inner.append(inner)
            plain_wall.append(wall)
            inner, wall = run_once(True, out_dir)
            traced_inner.append(inner)
            traced_wall.append(wall)
        from dynacheck.dynamic.merge import load_trace

        recorded = load_trace(out_dir)
    pi, ti = statistics.median(plain_inner), statistics.median(traced_inner)
    pw, tw = statistics.median(plain_wall), statistics.median(traced_wall)
    print(f"reps: {args.reps}; events recorded per traced run: {len(recorded.events)} distinct, "
          f"{sum(e.count for e in recorded.events)} total")
    print(f"compile+run section: plain {pi:.3f}s, traced {ti:.3f}s, ratio {ti / pi:.3f}")
    print(f"whole process:       plain {pw:.3f}s, traced {tw:.3f}s, ratio {tw / pw:.3f}")


if __name__ == "__main__":
    main()

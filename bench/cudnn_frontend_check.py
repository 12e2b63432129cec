"""What Dynamo does with the cuDNN frontend calls rule DC063 names, on the installed torch and frontend.

Each call is compiled alone with `fullgraph=True` (backend "eager"): the GB id and type Dynamo raised, or
that it traced. On a host with a GPU and libcudnn, each is also called eagerly first, to show it is a
real call there (on a CPU host the frontend cannot make a handle; Dynamo stops before running it either way).

    python bench/cudnn_frontend_check.py [--out results.json]

Runs where `import cudnn` works (nvidia-cudnn-frontend); `bash bench/gpu_cudnn.sh` runs it on the GPU
host for each frontend wheel carried in `.whl/`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynacheck.catalog import load_catalog  # noqa: E402


def _outcome(call) -> dict:
    import torch

    torch._dynamo.reset()

    def forward(x):
        call()
        return x + 1

    try:
        torch.compile(forward, fullgraph=True, backend="eager")(torch.ones(2))
    except Exception as exc:  # noqa: BLE001 - whatever Dynamo raised is the measurement
        text = str(exc)
        gb = re.search(r"gb/gb(\d+)", text)
        return {"traced": False, "gb_id": f"GB{gb.group(1)}" if gb else "", "gb_type": getattr(exc, "gb_type", None)
                or text.strip().splitlines()[0], "error": type(exc).__name__}
    return {"traced": True}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import cudnn
    import torch

    rule = next(r for r in load_catalog().rules if r.id == "DC063")
    rows = {}
    for name in rule.calls:
        fn = getattr(cudnn, name.removeprefix("cudnn."))
        row = {"type": type(fn).__name__}
        if torch.cuda.is_available():
            try:
                fn()
                row["eager"] = "ran"
            except Exception as exc:  # noqa: BLE001
                row["eager"] = f"{type(exc).__name__}: {exc}"[:200]
        row |= _outcome(fn)
        rows[name] = row
    out = {"torch": torch.__version__, "cudnn_frontend": getattr(cudnn, "__version__", "?"),
           "cuda": torch.cuda.is_available(), "rule": rule.id, "rule_gb_id": rule.outcome.gb_id, "calls": rows}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

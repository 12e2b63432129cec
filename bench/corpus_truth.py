"""Ground truth for the evaluation corpus: run the real Dynamo on every program in bench/corpus/.

Each program defines `f(x)`; it is compiled with `backend="eager"` on `torch.randn(8)`, once as
the default compile and once with `fullgraph=True` (dynacheck.dynamic.oracle). Writes
bench/corpus/truth.json: per program, the breaks (GB id, line) of the default compile and the
fullgraph outcome. Programs named `p*` must break, `n*` must compile into one graph; the script
says so when one does not. Regenerate after editing a program or upgrading torch:

    PYTHONPATH=$PWD python bench/corpus_truth.py
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"


def truth_for(path: Path) -> dict:
    import torch

    from dynacheck.dynamic.oracle import judge, load_callable

    verdict = judge(load_callable(path), lambda: torch.randn(8), near=str(path))
    fg = verdict.fullgraph_error
    return {
        "breaks": [{"gb_id": b.gb_id, "gb_type": b.gb_type, "line": b.line} for b in verdict.breaks],
        "fullgraph": None if fg is None else {"gb_id": fg.gb_id, "gb_type": fg.gb_type, "line": fg.line},
        "error": verdict.error,
    }


def main() -> int:
    import logging

    import torch

    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    programs = sorted(p for p in CORPUS.glob("[pn][0-9]*.py"))
    truth = {"torch": torch.__version__, "programs": {}}
    problems = []
    for path in programs:
        entry = truth_for(path)
        truth["programs"][path.stem] = entry
        broke = bool(entry["breaks"]) or entry["fullgraph"] is not None
        if entry["error"]:
            problems.append(f"{path.stem}: the program itself fails ({entry['error']})")
        elif path.stem.startswith("p") and not broke:
            problems.append(f"{path.stem}: a positive program that compiles into one graph")
        elif path.stem.startswith("n") and broke:
            problems.append(f"{path.stem}: a negative program that breaks")
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else CORPUS / "truth.json"
    out.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    positives = sum(1 for p in programs if p.stem.startswith("p"))
    sites = sum(len(e["breaks"]) for e in truth["programs"].values())
    print(f"{len(programs)} programs ({positives} positive), {sites} break sites, torch {torch.__version__}")
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

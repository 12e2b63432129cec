"""Whether the scanned framework still has the runner whose compile the framework facts describe.

`presets/sglang.toml`'s `[runtime]` and `[traced_batch]` are what SGLang's piecewise runner sets and
traces with (`init_piecewise_cuda_graphs` in model_executor/model_runner.py). sglang 0.5.23 removed that
runner with the tc_piecewise backend; applying its facts there would prune branches by a batch and
globals no compile of that release has. Read from the source (`ast`), never imported.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Iterable


def missing_runner(roots: Iterable[Path], facts: dict[str, Any]) -> str:
    """Why the runner named by `compiling_runner = "path.py:function"` is absent ("" when it is there,
    when the facts name none, or when no root holds that file: nothing to tell)."""
    spec = str(facts.get("compiling_runner", ""))
    relative, _, function = spec.partition(":")
    if not relative or not function:
        return ""
    path = next((Path(r) / relative for r in roots if (Path(r) / relative).is_file()), None)
    if path is None:
        return ""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return ""
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function for n in ast.walk(tree)):
        return ""
    # neutral on purpose: 0.5.14-0.5.21 compile piecewise through another runner (tc_piecewise), 0.5.22+ not at all
    return f"this SGLang's {relative} defines no {function}, the piecewise runner dynacheck models"

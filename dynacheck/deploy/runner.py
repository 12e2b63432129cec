"""Whether the scanned framework still has the runner whose compile the framework facts describe.

`presets/sglang.toml`'s `[runtime]` and `[traced_batch]` are what SGLang's piecewise runner sets and
traces with (`init_piecewise_cuda_graphs` in model_executor/model_runner.py). sglang 0.5.23 removed that
runner with the tc_piecewise backend; applying its facts there would prune branches by a batch and
globals no compile of that release has. Read from the source (`ast`), never imported.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any, Iterable

from dynacheck.sources.text import read_source


def framework_file(roots: Iterable[Path], relative: str) -> Path | None:
    """The first of `roots` holding `relative` (a framework facts path such as sglang/srt/server_args.py)."""
    if not relative:
        return None
    return next((Path(r) / relative for r in roots if (Path(r) / relative).is_file()), None)


def missing_runner(roots: Iterable[Path], facts: dict[str, Any]) -> str:
    """Why the runner named by `compiling_runner = "path.py:function"` is absent ("" when it is there,
    when the facts name none, or when no root holds that file: nothing to tell)."""
    relative, _, function = str(facts.get("compiling_runner", "")).partition(":")
    path = framework_file(roots, relative) if function else None
    if path is None:
        return ""
    try:
        stat = path.stat()
    except OSError:
        return ""
    if _defines(str(path), stat.st_mtime_ns, stat.st_size, function) is not False:
        return ""
    # neutral on purpose: 0.5.14-0.5.21 compile piecewise through another runner (tc_piecewise), 0.5.22+ not at all
    return f"this SGLang's {relative} defines no {function}, the piecewise runner dynacheck models"


@functools.lru_cache(maxsize=16)
def _defines(path: str, mtime_ns: int, size: int, function: str) -> bool | None:
    """Whether the file defines `function` (None when it does not parse): once per file version, as
    every deployment a census builds asks (model_runner.py is 100 KB of source)."""
    try:
        tree = ast.parse(read_source(path))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function for n in ast.walk(tree))

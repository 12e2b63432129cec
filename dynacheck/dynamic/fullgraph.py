"""The user's `fullgraph=True`, remembered; and `--collect-all`, which compiles without it.

`torch.compile` is patched (a public API, present in 2.11 and 2.13): a callable compiled with
`fullgraph=True` runs with a thread-local flag set, so an event seen while it runs knows that the
user's own settings would have made it fatal. Under `--collect-all` the compile is made with
`fullgraph=False`, so Dynamo goes on past each break and one run yields all of them.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

_state = threading.local()


def wanted_fullgraph() -> bool:
    """True while code compiled by the user with fullgraph=True is running (or being traced)."""
    return getattr(_state, "depth", 0) > 0


def _flagged(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run_wanting_fullgraph(*args: Any, **kwargs: Any) -> Any:
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _state.depth -= 1

    run_wanting_fullgraph._dynacheck_fullgraph = True  # type: ignore[attr-defined]
    return run_wanting_fullgraph


def _mark(result: Any) -> Any:
    nn = sys.modules.get("torch.nn")
    if nn is not None and isinstance(result, nn.Module):
        forward = result.__dict__.get("forward")  # OptimizedModule keeps its compiled forward here
        if forward is not None and not getattr(forward, "_dynacheck_fullgraph", False):
            object.__setattr__(result, "forward", _flagged(forward))
        return result
    if callable(result):
        return _flagged(result)
    return result


def patch_compile(torch: Any, collect_all: bool) -> bool:
    """Wrap `torch.compile`; returns False when it is absent or already wrapped."""
    original = getattr(torch, "compile", None)
    if original is None or getattr(original, "_dynacheck", False):
        return False

    @functools.wraps(original)
    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(fullgraph=True) decorator form
            return lambda m: compile(m, *args, **kwargs)
        if not kwargs.get("fullgraph", False):
            return original(model, *args, **kwargs)
        if collect_all:
            kwargs = {**kwargs, "fullgraph": False}
        return _mark(original(model, *args, **kwargs))

    compile._dynacheck = True  # type: ignore[attr-defined]
    torch.compile = compile
    return True

"""Turn a Dynamo exception into an `Event`: GB id, type, the user stack and the frame a user can act on.

Works without the recorder: under fullgraph=True the first break raises `Unsupported`, whose
`real_stack` holds the traced user frames (the flagship's end in `subprocess.Popen.__init__`; the
site is the innermost frame outside the stdlib and torch, e.g. `flashinfer.jit.cpp_ext.get_cuda_version`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

from dynacheck.model import Event, Frame

_GB_URL = re.compile(r"gb(\d{4})\.html", re.IGNORECASE)


@functools.cache
def _registry() -> dict[str, list[dict[str, Any]]]:
    try:
        import torch._dynamo

        path = Path(torch._dynamo.__file__).with_name("graph_break_registry.json")
        return json.loads(path.read_text())
    except Exception:
        return {}


def gb_id_for(gb_type: str, message: str = "") -> str:
    """Dynamo's GB id: from the message's link when present, else the registry entry with this type."""
    found = _GB_URL.search(message)
    if found:
        return f"GB{found.group(1)}"
    for gb_id, entries in _registry().items():
        if any(e.get("Gb_type") == gb_type for e in entries):
            return gb_id
    return ""


@functools.cache
def _roots() -> tuple[tuple[str, ...], str]:
    stdlib = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
    try:
        import torch

        torch_root = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
    except Exception:
        torch_root = os.sep + "nonexistent-torch" + os.sep
    return stdlib, torch_root


def is_user_frame(file: str) -> bool:
    """Not stdlib and not torch: a frame in code that a user or a library they depend on owns."""
    if file.startswith("<"):
        return False
    stdlib, torch_root = _roots()
    real = os.path.realpath(file)
    if real.startswith(torch_root):
        return False
    parts = real.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return not real.startswith(stdlib)


def qualified_name(file: str, function: str) -> str:
    """`flashinfer.jit.cpp_ext.get_cuda_version` from a file path and a function name, via sys.path."""
    real = os.path.realpath(file)
    best = ""
    for entry in sys.path:
        root = os.path.realpath(entry or os.getcwd()) + os.sep
        if real.startswith(root) and len(root) > len(best):
            best = root
    if not best:
        return function
    mod = real[len(best):].removesuffix(".py").replace(os.sep, ".").removesuffix(".__init__")
    return f"{mod}.{function}"


def frames_of(exc: BaseException) -> tuple[Frame, ...]:
    stack = getattr(exc, "real_stack", None) or []
    return tuple(
        Frame(file=f.filename, line=f.lineno or 0, function=f.name, code=(f.line or "").strip()) for f in stack
    )


def break_event(exc: BaseException, *, rank: int = -1, compiled_frame: str = "") -> Event:
    """The fatal break (or other compile error) as the shared `Event` record."""
    gb_type = getattr(exc, "gb_type", "") or ""
    message = str(exc)
    frames = frames_of(exc)
    user = [f for f in frames if is_user_frame(f.file)]
    site = user[-1] if user else (frames[-1] if frames else None)
    if site is not None:
        site = Frame(file=site.file, line=site.line, function=qualified_name(site.file, site.function),
                     code=site.code)
    gb_id = gb_id_for(gb_type, message) if gb_type else ""
    explanation, hints = _explanation(message)
    return Event(
        kind="fullgraph_error" if gb_type else "compile_error",
        pid=os.getpid(),
        rank=rank,
        gb_id=gb_id,
        gb_type=gb_type,
        reason=message.splitlines()[0] if message else type(exc).__name__,
        explanation=explanation,
        hints=hints,
        user_stack=frames,
        site=site,
        compiled_frame=compiled_frame,
        phase="tracing",
        fatal_under_fullgraph=bool(gb_type),
        detail=f"{type(exc).__module__}.{type(exc).__qualname__}; innermost frame "
        + (_where(frames[-1]) if frames else "unknown"),
    )


def _where(frame: Frame) -> str:
    return f"{frame.function} ({Path(frame.file).name}:{frame.line}): {frame.code}"


def _explanation(message: str) -> tuple[str, tuple[str, ...]]:
    explanation, hints = "", []
    for line in message.splitlines():
        s = line.strip()
        if s.startswith("Explanation:"):
            explanation = s.removeprefix("Explanation:").strip()
        elif s.startswith("Hint:"):
            hints.append(s.removeprefix("Hint:").strip())
    return explanation, tuple(hints)

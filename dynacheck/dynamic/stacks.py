"""Which frames a user can act on: stdlib and torch frames are context, the rest are sites.

Also gives frames module-qualified names (`pkg.mod.Class.method`) so they can be matched with the
static scan's hop names; names come from the source file's `def`/`class` nesting (parsed once per
file), because Dynamo's recorded stacks carry only `co_name`.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import sysconfig
import traceback
from collections.abc import Iterable
from functools import lru_cache
from types import FrameType

from dynacheck.model import Frame

_RESUME = re.compile(r"^(?:torch_dynamo_resume_in_)+(.+?)(?:_at_\d+)+$")
_CONVERT_FRAME = os.path.join("_dynamo", "convert_frame.py")
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # dynacheck/


@lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if k in paths}
    return tuple(sorted(dirs))


@lru_cache(maxsize=1)
def _torch_dirs() -> tuple[str, ...]:
    import importlib.util

    dirs = []
    for name in ("torch", "functorch", "triton"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(os.path.realpath(p) + os.sep for p in spec.submodule_search_locations)
    return tuple(dirs)


@lru_cache(maxsize=4096)
def frame_kind(filename: str) -> str:
    """'stdlib' | 'torch' | 'dynacheck' | 'user' for a code file."""
    if not filename or filename.startswith("<"):
        return "stdlib"  # <frozen importlib._bootstrap>, <string> from exec: not actionable
    real = os.path.realpath(filename)
    if real.startswith(_torch_dirs()):
        return "torch"
    if real.startswith(_OWN_DIR + os.sep):
        return "dynacheck"
    if "site-packages" in real or "dist-packages" in real:
        return "user"
    if any(real.startswith(d + os.sep) for d in _stdlib_dirs()):
        return "stdlib"
    return "user"


def original_name(co_name: str) -> str:
    """`torch_dynamo_resume_in_forward_at_23` -> `forward` (Dynamo's resume functions)."""
    found = _RESUME.match(co_name)
    return found.group(1) if found else co_name


@lru_cache(maxsize=256)
def _def_spans(filename: str) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, qualname) of every def in a file; () when unreadable."""
    try:
        with open(filename, "rb") as fh:
            tree = ast.parse(fh.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return ()
    spans: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    spans.append((first, child.end_lineno or child.lineno, qual))
                    walk(child, qual + ".<locals>.")
                else:
                    walk(child, qual + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return tuple(spans)


def qualname_at(filename: str, line: int, co_name: str) -> str:
    """The innermost def around `line` whose name is `co_name` (or just `co_name`)."""
    best = ""
    best_width = 1 << 30
    for first, last, qual in _def_spans(filename):
        if first <= line <= last and qual.rsplit(".", 1)[-1] == co_name and last - first < best_width:
            best, best_width = qual, last - first
    return best or co_name


@lru_cache(maxsize=2048)
def module_name(filename: str) -> str:
    """Dotted module of a file, from the longest sys.path entry holding it ('' when none)."""
    real = os.path.realpath(filename)
    best = ""
    for entry in sys.path:
        root = os.path.realpath(entry or os.getcwd())
        if real.startswith(root + os.sep) and len(root) > len(best):
            best = root
    if not best:
        return ""
    rel = os.path.splitext(real[len(best) + 1:])[0].replace(os.sep, ".")
    rel = rel.removesuffix(".__init__")
    return "" if rel == "__main__" else rel


def to_frame(filename: str, line: int, co_name: str, code: str = "") -> Frame:
    """A model Frame; user frames get `module.qualname`, others keep `co_name`."""
    name = original_name(co_name)
    if frame_kind(filename) == "user":
        qual = qualname_at(filename, line, name)
        mod = module_name(filename)
        name = f"{mod}.{qual}" if mod else qual
    return Frame(file=filename, line=int(line or 0), function=name, code=(code or "").strip()[:200])


def from_summary(summary: Iterable[traceback.FrameSummary]) -> list[Frame]:
    return [to_frame(fs.filename, fs.lineno or 0, fs.name, fs.line or "") for fs in summary]


def live_stack_above_dynamo(frame: FrameType | None) -> list[Frame]:
    """Frames of the running program, outermost first, cut where torch's compile machinery starts."""
    frames: list[tuple[str, int, str]] = []
    while frame is not None:
        code = frame.f_code
        frames.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    frames.reverse()
    kept: list[tuple[str, int, str]] = []
    for filename, line, name in frames:
        if filename.endswith(_CONVERT_FRAME):
            break  # from here on: Dynamo tracing the frame, not the program
        if frame_kind(filename) in ("torch", "dynacheck"):
            continue
        kept.append((filename, line, name))
    return [to_frame(f, ln, n, _source_line(f, ln)) for f, ln, n in kept]


def _source_line(filename: str, line: int) -> str:
    import linecache

    return linecache.getline(filename, line).strip()


def pick_site(stack: list[Frame]) -> Frame | None:
    """The innermost frame a user can act on (not stdlib, not torch, not dynacheck)."""
    for frame in reversed(stack):
        if frame_kind(frame.file) == "user":
            return frame
    return None


def collapse_resume(stack: list[Frame]) -> list[Frame]:
    """Drop a frame that repeats its caller (the live frame and Dynamo's copy of the compiled frame)."""
    out: list[Frame] = []
    for frame in stack:
        if out and out[-1].file == frame.file and out[-1].function == frame.function and out[-1].line == frame.line:
            continue
        out.append(frame)
    return out

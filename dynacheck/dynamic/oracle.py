"""Ask the real Dynamo what a small program does: its breaks with GB id and line, with and without fullgraph.

The rule oracle (tests/test_rules_oracle.py) and the evaluation corpus (bench/corpus_truth.py)
both need the same measurement: compile a callable with `backend="eager"` on a small tensor,
once as the default compile and once with `fullgraph=True`, and read every break Dynamo
reports through the recorder's own hooks (so frame skips, which `torch._dynamo.explain`
does not list, are seen too). Only for code we wrote to be run: this imports and executes it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dynacheck.dynamic import registry
from dynacheck.errors import one_line

@dataclass(frozen=True)
class Break:
    gb_id: str  # "" when Dynamo raised without one (a data-dependent UserError)
    gb_type: str
    file: str
    line: int
    message: str = ""  # Dynamo's own words: the break type and its explanation, a few lines


@dataclass
class Verdict:
    """What Dynamo did with one program."""

    breaks: list[Break] = field(default_factory=list)  # default compile, in the order Dynamo met them
    fullgraph_error: Break | None = None  # the error `fullgraph=True` raised, None when it compiled
    error: str = ""  # the program itself failed (not a Dynamo outcome)

    @property
    def fatal(self) -> bool:
        return self.fullgraph_error is not None


def load_callable(path: Path, name: str = "f") -> Callable[..., Any]:
    """Import a program file under a private module name and return its entry."""
    spec = importlib.util.spec_from_file_location(f"_dc_oracle_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    target: Any = module
    for part in name.split("."):
        target = getattr(target, part)
        if isinstance(target, type):
            target = target()
    return target


def judge(fn: Callable[..., Any], make_input: Callable[[], Any], near: str = "") -> Verdict:
    """Compile `fn` both ways; `near` (a file path) picks the frame each break is reported at."""
    import torch

    verdict = Verdict()
    payloads: list[tuple[str, BaseException | None]] = []
    original = torch._logging.trace_structured

    def listen(name: str, metadata_fn: Callable[[], Any] = dict, **kwargs: Any) -> None:
        if name == "artifact" and kwargs.get("payload_fn") is not None:
            meta = metadata_fn()
            if isinstance(meta, dict) and meta.get("name") in ("dynamo_graph_break_reason", "dynamo_error"):
                payloads.append((str(kwargs["payload_fn"]()), sys.exc_info()[1]))
        return original(name, metadata_fn, **kwargs)

    torch._logging.trace_structured = listen
    try:
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager")(make_input())
        except Exception as exc:  # noqa: BLE001 - the program's own failure is data here
            verdict.error = one_line(exc)
        verdict.breaks = _unique(_from_payload(text, exc, near) for text, exc in payloads)
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(make_input())
        except Exception as exc:  # noqa: BLE001 - classified below
            verdict.fullgraph_error = _from_exception(exc, near)
    finally:
        torch._logging.trace_structured = original
        torch._dynamo.reset()
    return verdict


_AT = re.compile(r"Graph break in user code at (.+):(\d+)")


def _from_payload(text: str, exc: BaseException | None, near: str) -> Break:
    """A break from Dynamo's structured-trace payload: its type from the reason lines, its line near `near`."""
    gb_type = getattr(exc, "gb_type", None) or ""
    if not gb_type:
        reason = text.partition("Graph Break Reason:")[2].strip().splitlines()
        known = [line.strip() for line in reason[:3] if registry.gb_id_for(line.strip())]
        gb_type = known[0] if known else (reason[0].strip() if reason else "")
    file, line = "", 0
    found = _AT.search(text)
    if found:
        file, line = found.group(1), int(found.group(2))
    if near and Path(file).resolve() != Path(near).resolve():
        frames = getattr(exc, "real_stack", None) or ()
        inside = [f for f in frames if Path(f.filename).resolve() == Path(near).resolve()]
        if inside:
            file, line = near, inside[-1].lineno
        else:  # the stack printed after the reason: the last frame in `near`
            spots = re.findall(r'File "([^"]+)", line (\d+)', text)
            inside_text = [int(n) for f, n in spots if Path(f).resolve() == Path(near).resolve()]
            if inside_text:
                file, line = near, inside_text[-1]
    reason = text.partition("Graph Break Reason:")[2] or text
    return Break(registry.gb_id_for(gb_type, text), gb_type, file, line, _message(reason))


def _message(text: str, lines: int = 3) -> str:
    """The first lines of Dynamo's text, up to the stack it prints after them."""
    kept = []
    for raw in text.strip().splitlines():
        if raw.startswith(("User code traceback", "For more details", "  Hint:", "  Developer debug")) \
                or raw.strip().startswith("from user code"):
            break
        if raw.startswith("Encountered graph break when attempting to trace") or not raw.strip():
            continue
        kept.append(raw.rstrip())
        if len(kept) >= lines:
            break
    return "\n".join(kept)


def _from_exception(exc: BaseException, near: str) -> Break:
    """The error `fullgraph=True` raised: a GB id when Dynamo gave one (a data-dependent UserError has none)."""
    import traceback

    gb_type = getattr(exc, "gb_type", None) or type(exc).__name__
    line = 0
    frames = list(getattr(exc, "real_stack", None) or ()) or traceback.extract_tb(exc.__traceback__)
    for frame in frames:
        if near and Path(frame.filename).resolve() == Path(near).resolve():
            line = frame.lineno
    if not line and near:  # UserError: the user frame is only in the message
        spots = re.findall(r'File "([^"]+)", line (\d+)', str(exc))
        inside = [int(n) for f, n in spots if Path(f).resolve() == Path(near).resolve()]
        line = inside[-1] if inside else 0
    return Break(registry.gb_id_for(gb_type, str(exc)), gb_type, near, line, _message(str(exc)))


def _unique(breaks) -> list[Break]:
    out: list[Break] = []
    for item in breaks:
        if item not in out:
            out.append(item)
    return out

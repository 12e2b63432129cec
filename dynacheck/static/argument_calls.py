"""Calls whose target is a value the caller passes: what they do under torch.compile is the argument's.

An API census walks each exported function with its required arguments only (reach.Reacher.entry_defaults),
so a required argument is unknown, and a call of it was counted as unresolved and said nothing: FlashInfer's
`fi_trace(func_or_method, **kwargs)` calls `getattr(actual_func, "fi_trace", None)` (fi_trace.py:294-305),
and `fast_decode_plan(self, ...)`, a module-level function SGLang binds to a decode wrapper, calls
`self._cached_module.plan(...)` (decode.py:5837 in 0.7.4). Both read "safe" with no site found; both break
with the argument their callers pass (bench/labels/api-safe-flashinfer.json).

Two shapes are named, read from the function's summary alone (nothing evaluated):
- calling the argument, or a value read from it through locals (`getattr(p, "x")`, `p.x`, `p[i]`);
- calling a method of the receiver a module-level function takes as its first parameter `self`/`cls`.
A method of any other argument (`x.contiguous()` on a tensor) is not named: the argument is data.
"""

from __future__ import annotations

import re

from dynacheck.static.summary import CallSite, FunctionSummary

MAX_HOPS = 6  # locals followed back from the callee to a parameter
_READS = ("a", "s", "sl")  # attribute, subscript, slice: a value read from the object they start at


def argument_called(call: CallSite, fn: FunctionSummary, required: tuple[str, ...]) -> str | None:
    """The parameter (one of `required`, the arguments a caller must pass) whose value this call calls, or None."""
    func = call.func
    if not func or not required:
        return None
    if func[0] == "a":  # `obj.method(...)`: only a method of an unbound receiver (`self` of a module-level def)
        root = _origin(func[1], fn, MAX_HOPS)
        receiver = fn.params[0] if fn.params and not fn.cls and fn.params[0] in ("self", "cls") else ""
        return root if root is not None and root == receiver and root in required else None
    root = _origin(func, fn, MAX_HOPS)
    return root if root is not None and root in required else None


def _origin(expr, fn: FunctionSummary, hops: int) -> str | None:
    """The parameter a value is read from: itself, an attribute or item of it, `getattr(p, ...)`, or a
    local assigned only such values (each of its assignments from the same parameter)."""
    if not expr or hops < 0:
        return None
    kind = expr[0]
    if kind == "n":
        name = expr[1]
        if name in fn.params:
            return name
        values = fn.assigns.get(name)
        if not values:
            return None
        found = {_origin(value, fn, hops - 1) for value in values}
        return found.pop() if len(found) == 1 else None
    if kind in _READS:
        return _origin(expr[1], fn, hops)
    if kind == "c" and expr[1] == ("n", "getattr") and expr[2]:
        return _origin(expr[2][0], fn, hops)
    return None


_TEXT = re.compile(r"^line (\d+): `(.+?)\(\.\.\.\)` in (\S+) calls `(\w+)`")


def problem_text(line: int, callee: str, function: str, param: str) -> str:
    """The scan's problem line for one such call (kind "argument_call"); `read_problem` reads it back."""
    return (f"line {line}: `{callee}(...)` in {function} calls `{param}`, a value its caller passes (or one "
            "read from it): whether it breaks under torch.compile depends on that argument, which the walk "
            "does not know")


def read_problem(file: str, message: str) -> dict | None:
    """`{"argument", "call", "function", "file", "line"}` of a problem line `problem_text` made, else None."""
    found = _TEXT.match(message)
    if found is None:
        return None
    line, callee, function, param = found.groups()
    return {"argument": param, "call": f"{callee}(...)", "function": function, "file": file, "line": int(line)}

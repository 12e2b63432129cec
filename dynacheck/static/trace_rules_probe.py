"""Ask Dynamo's own trace rules what it does with a stdlib or builtin callable.

``torch._dynamo.trace_rules`` decides, per callable object, whether Dynamo inlines it, models
it as a torch op, or skips it (a graph break when called). Asking it needs the real object, so
this module imports torch (lazily, only when installed) and the named stdlib module. It never
imports anything else: scanned packages are only ever read as text.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys

SKIPPED = "skipped"  # Dynamo will not trace it: calling it is a graph break (GB0007)
INLINED = "inlined"  # Dynamo traces into it (Python code) or models it (builtins, polyfills)
TORCH_OP = "torch_op"  # goes into the graph as a torch function
UNKNOWN = "unknown"  # torch absent, not a stdlib callable, or the name does not resolve

# Top-level names we may import to get the object: the standard library and builtins only.
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "_thread", "_io"}


def is_probe_allowed(qualname: str) -> bool:
    """Only stdlib/builtin names are probed; importing anything else could run scanned code."""
    top = qualname.split(".", 1)[0]
    return bool(top) and top in _STDLIB and top not in {"__main__", "antigravity", "this"}


def _torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def resolve_object(qualname: str) -> object | None:
    """The object a dotted stdlib name denotes (longest importable module, then attributes)."""
    if not is_probe_allowed(qualname):
        return None
    parts = qualname.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if not is_probe_allowed(module_name):
            continue
        try:
            obj: object = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _verdict(trace_rules: object, obj: object) -> str:
    from torch._dynamo.variables import (
        BuiltinVariable,
        SkipFunctionVariable,
        TorchInGraphFunctionVariable,
    )

    # Dynamo's variable builder asks about builtins before the file-based rules.
    rule = trace_rules.lookup_callable(obj)  # type: ignore[attr-defined]
    if rule is None:
        rule = trace_rules.lookup(obj)  # type: ignore[attr-defined]
    if rule is None:
        return UNKNOWN
    if issubclass(rule, TorchInGraphFunctionVariable):
        return TORCH_OP
    if issubclass(rule, SkipFunctionVariable):
        return SKIPPED
    if issubclass(rule, BuiltinVariable) or rule.__name__.endswith("Variable"):
        return INLINED
    return UNKNOWN


@functools.lru_cache(maxsize=4096)
def classify(qualname: str) -> str:
    """What Dynamo does with the stdlib/builtin callable ``qualname``: one of the words above.

    ``builtins.print`` counts as inlined (Dynamo models the builtin itself); whether that model
    accepts the call is the catalogue's business (print is GB0059 all the same).
    """
    if not is_probe_allowed(qualname) or not _torch_installed():
        return UNKNOWN
    obj = resolve_object(qualname)
    if obj is None or not callable(obj):
        return UNKNOWN
    try:
        from torch._dynamo import trace_rules
    except Exception:  # a broken torch install must not break the scan
        return UNKNOWN
    try:
        return _verdict(trace_rules, obj)
    except Exception:
        return UNKNOWN

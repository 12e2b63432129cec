"""The values static evaluation deals in, the scopes names are looked up in, and their limits.

A value carries how it was believed (`via`) and how sure we are (`confidence`), so a chain can
say "self method", "attribute type", "class hierarchy fallback" hop by hop.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynacheck import model as m
from dynacheck.static.ir import Expr
from dynacheck.static.summary import FunctionSummary, ModuleSummary

MAX_DEPTH = 12
MAX_VALUES = 64
MAX_HIERARCHY = 256

# Calls of external factories whose result type matters to the rules.
EXTERNAL_FACTORIES = {
    "logging.getLogger": "logging.Logger",
    "logging.Logger": "logging.Logger",
    "threading.Lock": "threading.Lock",
    "threading.RLock": "threading.RLock",
    "threading.Condition": "threading.Condition",
    "threading.Semaphore": "threading.Semaphore",
    "threading.Event": "threading.Event",
    "queue.Queue": "queue.Queue",
    "torch.Generator": "torch.Generator",
    "multiprocessing.Lock": "threading.Lock",
    "filelock.FileLock": "filelock.FileLock",
    "builtins.open": "io.TextIOWrapper",
    "io.open": "io.TextIOWrapper",
    "pathlib.Path": "pathlib.Path",
    "datetime.datetime.now": "datetime.datetime",
    "tvm_ffi.load_module": "tvm_ffi.Module",
    "torch.utils.cpp_extension.load": "torch.utils.cpp_extension.Module",
    "torch.utils.cpp_extension.load_inline": "torch.utils.cpp_extension.Module",
    "ctypes.CDLL": "ctypes.CDLL",
}
EXTERNAL_INSTANCES = frozenset(EXTERNAL_FACTORIES.values()) | {"pathlib.PosixPath", "pathlib.PurePath"}
PATH_TYPES = frozenset({"pathlib.Path", "pathlib.PosixPath", "pathlib.PurePath"})
CONTAINER_FACTORIES = {
    "builtins.list", "builtins.tuple", "builtins.set", "builtins.dict",
    "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential",
    "torch.nn.modules.container.ModuleList",
}
NAMESPACE_FACTORIES = {"types.SimpleNamespace", "argparse.Namespace"}
ITERATOR_VIEWS = {"itertools.islice", "builtins.reversed", "builtins.iter"}  # iterate some of their argument's items
NN_MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module"}
# `F.apply(*args)` runs `F.forward(ctx, *args)`, and Dynamo traces that forward (a break in it is the model's)
AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
BUILTINS = frozenset(dir(__import__("builtins")))


@dataclass(frozen=True, init=False)
class Value:
    kind: str  # func | cls | inst | ext | extinst | mod | cont | ns | lam | const | unknown
    module: str = ""
    name: str = ""  # qualname (func/cls/inst), dotted (ext/extinst), module name (mod)
    via: str = m.VIA_IMPORT
    confidence: str = "high"
    items: tuple = ()  # cont: Values; ns: (attr, Value) pairs
    self_cls: "Value | None" = None  # func: the receiver's class when called as a bound method
    scope: "Scope | None" = None  # lam: where its body is evaluated
    expr: Expr | None = None  # lam body
    note: str = ""
    cond: tuple = ()  # model.Condition: what this value depends on that the deployment left open

    def __init__(self, kind: str, module: str = "", name: str = "", via: str = m.VIA_IMPORT,
                 confidence: str = "high", items: tuple = (), self_cls: "Value | None" = None,
                 scope: "Scope | None" = None, expr: Expr | None = None, note: str = "", cond: tuple = ()) -> None:
        """The fields set straight into the instance's dict, as `evolve` does: a frozen dataclass's own
        `__init__` goes through `object.__setattr__` once per field (1.5 us a value against 0.5 us; the
        evaluator makes millions in a census)."""
        self.__dict__.update(kind=kind, module=module, name=name, via=via, confidence=confidence, items=items,
                             self_cls=self_cls, scope=scope, expr=expr, note=note, cond=cond)

    def key(self) -> tuple:
        return (self.kind, self.module, self.name, self.self_cls.name if self.self_cls else "")

    def __hash__(self) -> int:
        """Hashed once per value (`evolve` drops it): memo keys hold values nested in values."""
        state = self.__dict__
        cached = state.get("_hash")
        if cached is None:
            cached = state["_hash"] = hash((self.kind, self.module, self.name, self.via, self.confidence,
                                            self.items, self.self_cls, self.scope, self.expr, self.note,
                                            self.cond))
        return cached

    def __getstate__(self) -> dict:
        # str hashes and allocation numbers (allocation_label) differ per process
        return {k: v for k, v in self.__dict__.items() if k not in _CACHED}


UNKNOWN = Value("unknown")
CONST = Value("const")
NONE_VALUE = Value("known", name="[None]", items=(None,))  # a parameter bound to None


@dataclass(eq=False)
class Scope:
    """Where names are looked up: a function (with its receiver class and bound params) in a module."""

    module: ModuleSummary
    function: FunctionSummary | None = None
    self_cls: Value | None = None
    bound: tuple[tuple[str, tuple[Value, ...]], ...] = ()
    parent: "Scope | None" = None


def evolve(obj, **changes):
    """`dataclasses.replace` for the evaluator's values and scopes, without its per-call checks: a copy of the
    instance's fields with `changes` applied, without re-running `__init__` (these classes define no
    `__post_init__`). The walk makes millions of such copies in a census."""
    new = object.__new__(obj.__class__)
    state = new.__dict__
    state.update(obj.__dict__)
    state.update(changes)
    # what was worked out from the fields (Value.__hash__, allocation_label, Scope's memo key) is the copy's own
    state.pop("_hash", None)
    state.pop("_label", None)
    state.pop("_key", None)
    return new


_CACHED = frozenset({"_hash", "_label", "_key"})  # fields kept in an object's __dict__ by what reads it


def passes_ctx(callee, params) -> bool:
    """Whether the call leaves out the first parameter as autograd does: `F.apply(x)` calls `forward(ctx, x)`.
    `callee`: the Value called, or the walk's edge into it (both say how it was reached, `via`)."""
    return callee.via == m.VIA_AUTOGRAD_APPLY and bool(params) and params[0] == "ctx"


def weaker(a: str, b: str) -> str:
    return a if m.confidence_rank(a) < m.confidence_rank(b) else b


def bound_key(bound: tuple) -> tuple:
    return tuple((name, tuple(v.key() for v in values)) for name, values in bound)


def vague(value: Value) -> bool:
    """Nothing known: an unknown, or a container of unknowns."""
    if value.kind == "unknown":
        return True
    return value.kind == "cont" and all(v.kind == "unknown" for v in value.items)


def dedupe(values: list[Value], limit: int = MAX_VALUES) -> list[Value]:
    seen: set = set()
    out: list[Value] = []
    for value in values:
        key = value.key() + (value.kind != "cont" or id(value),)
        if key in seen:
            continue
        seen.add(key)
        out.append(value)
    return out[:limit] if len(out) > limit else out


def receiver_key(self_cls: Value | None) -> str:
    """The receiver in a memo key: its class, and the allocation that made it when one is known (the
    TopK built with `use_grouped_topk=True` in one model is not the TopK of the next model walked)."""
    if self_cls is None:
        return ""
    if self_cls.expr is None:
        return self_cls.name
    return allocation_label(self_cls)


_ALLOCATIONS: dict = {}  # (id(expr), id(scope)) -> (number, expr, scope): both kept alive, so no id is reused


def allocation_label(value: Value) -> str:
    """An entity's name; an instance also names its allocation (`TopK(..., use_grouped_topk=False)` in
    one layer is not the TopK of another), numbered in the order the walk first meets it. Kept in the
    value (a census asks half a million times; `evolve` drops it from a copy)."""
    state = value.__dict__
    label = state.get("_label")
    if label is not None:
        return label
    owner = value.self_cls.name if value.self_cls is not None else ""
    where = ""
    if value.expr is not None:
        key = (id(value.expr), id(value.scope))
        entry = _ALLOCATIONS.get(key)
        if entry is None:
            entry = _ALLOCATIONS[key] = (len(_ALLOCATIONS), value.expr, value.scope)
        where = f" #{entry[0]}"
    label = state["_label"] = f"<{value.kind} {value.module}:{value.name}{' of ' + owner if owner else ''}{where}>"
    return label


def with_conditions(value: Value, conditions: tuple) -> Value:
    """The value, believed only when the conditions hold (medium confidence at best)."""
    merged = value.cond + tuple(c for c in conditions if c not in value.cond)
    return evolve(value, cond=merged, confidence=weaker(value.confidence, "medium"))

"""What the partial evaluator deals in: the values an expression may have (`Known`: a set, or
unknown with the open facts behind it), the deployment objects and Enum members among them, and
the pure helpers that compare, combine and label them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Iterable

from dynacheck.deploy.facts import UNKNOWN as FACT_UNKNOWN
from dynacheck.model import Condition
from dynacheck.static.ir import Expr, dotted, render
from dynacheck.static.value_types import Value, allocation_label


MAX_DEPTH = 10
NO_CUT = 1 << 30
MAX_SET = 16
ENUM_BASES = ("enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag")
ENV_READERS = {"os.getenv", "os.environ.get", "os.getenv.get"}
STR_METHODS = {"lower", "upper", "strip", "startswith", "endswith", "split", "replace", "lstrip", "rstrip"}
FAMILY_KINDS = ("flag", "env", "platform", "config", "runtime")


@dataclass(frozen=True)
class Ref:
    """A scanned or external entity (function, class, instance, module) as a value."""

    value: Value


@dataclass(frozen=True)
class Obj:
    """A deployment object whose attributes are known: the server args or the model config."""

    kind: str  # server_args | model_config
    fields: tuple

    def get(self, name: str) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        return FACT_UNKNOWN


@dataclass(frozen=True)
class Member:
    """An Enum member of a scanned Enum class."""

    module: str
    cls: str
    name: str
    value: Any


@dataclass(frozen=True)
class AtMost:
    """A runtime integer known only by its bound, 1..limit: the traced batch's token count."""

    limit: int


@dataclass(frozen=True, order=True)
class Release:
    """`packaging.version.parse("12.9")`: a plain release number, compared the way packaging does
    (trailing zeros do not count: 12.9 == 12.9.0). Pre-, post- and local releases are not modelled."""

    parts: tuple


def release(text: Any) -> "Release | None":
    if not isinstance(text, str) or not _RELEASE(text.strip()):
        return None
    parts = [int(p) for p in text.strip().split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return Release(tuple(parts))


_RELEASE = re.compile(r"\d+(\.\d+)*").fullmatch
VERSION_PARSERS = frozenset({"packaging.version.parse", "packaging.version.Version"})
PLAIN = (str, int, float, type(None))  # what `f"{x}"` joins (bool is an int)


@dataclass(frozen=True)
class BoundedTensor:
    """A runtime tensor known only by a bound on its values (the traced batch's `seq_lens_cpu`)."""

    limit: int


@dataclass(frozen=True)
class Partial:
    func: Value
    kwargs: tuple


@dataclass(frozen=True)
class Known:
    """What an expression may be: a set of values (None: unknown) and the open facts behind it."""

    values: frozenset | None
    opens: tuple = ()

    @property
    def unknown(self) -> bool:
        return self.values is None


NOTHING = Known(frozenset())


_UNKNOWN = Known(None)


def unknown(*opens: Condition) -> Known:
    return Known(None, opens) if opens else _UNKNOWN  # the common case, one shared (frozen) record


def known(*values: Any, opens: tuple = ()) -> Known:
    try:
        return Known(frozenset(values), opens)
    except TypeError:  # an unhashable value (a dict from a config): not worth tracking
        return Known(None, opens)


def merge(parts: Iterable[Known]) -> Known:
    values: set = set()
    opens: list = []
    for part in parts:
        opens.extend(o for o in part.opens if o not in opens)
        if part.values is None:
            values = None  # type: ignore[assignment]
        elif values is not None:
            values |= part.values
    if values is not None and len(values) > MAX_SET:
        values = None  # type: ignore[assignment]
    return Known(frozenset(values) if values is not None else None, tuple(opens[:6]))


def is_dataclass(summary) -> bool:
    return any((dotted(d[1] if d and d[0] == "c" else d) or "").rpartition(".")[2] == "dataclass"
               for d in summary.decorators)


def exists_probe(expr: Expr) -> bool:
    """`<path>.exists()` / `.is_file()` / `os.path.exists(...)`: a file-system probe."""
    return bool(expr) and expr[0] == "c" and bool(expr[1]) and expr[1][0] == "a" and \
        expr[1][2] in ("exists", "is_file", "isfile", "is_dir", "isdir")


def failed_command(test: Expr, taken: bool) -> bool:
    """The branch where `proc.returncode == 0` is false (or `!= 0` true): the command failed, an error path."""
    if not test or test[0] != "cmp" or len(test[2]) != 1:
        return False
    left, (op, right) = test[1], test[2][0]
    if not (left and left[0] == "a" and left[2] == "returncode" and right == ("k", 0)):
        return False
    return (op == "Equal" and not taken) or (op == "NotEqual" and taken)


def sets_once(test: Expr, fn) -> bool:
    """`if not warned:` where `warned` is the enclosing function's, rebound in `fn` (`nonlocal warned`):
    a flag the first call sets (FlashInfer 0.7.4's experimental-API wrapper, api_logging.py:2740-2747)."""
    return fn is not None and bool(test) and test[0] == "not" and bool(test[1]) and test[1][0] == "n" \
        and test[1][1] in fn.nonlocals_declared


def registers_once(test: Expr, local_names=()) -> bool:
    """`if key not in self._registry:` / `... not in REGISTRY`: work done the first time only. A warm-up
    before the compile (SGLang captures its decode CUDA graphs eagerly first) has done it already. A
    container local to the function (`local_names`: a table built on each call) is no registry:
    `if backend not in backend_modules: raise` is a check."""
    if not test or test[0] != "cmp" or len(test[2]) != 1 or test[2][0][0] != "NotIn":
        return False
    container = test[2][0][1]
    return bool(container) and (container[0] == "a" or container[0] == "n" and container[1] not in local_names)


_MIRROR = {"LessThan": "GreaterThan", "GreaterThan": "LessThan", "LessThanEqual": "GreaterThanEqual",
           "GreaterThanEqual": "LessThanEqual", "Equal": "Equal", "NotEqual": "NotEqual"}


def _bounded_compare(op: str, a: AtMost, b: Any) -> bool | None:
    """`n <= 2048` for n in 1..limit: decided only when the whole range agrees."""
    if isinstance(b, bool) or not isinstance(b, (int, float)):
        return None
    lo, hi = 1, a.limit
    table = {"LessThanEqual": (hi <= b, lo > b), "LessThan": (hi < b, lo >= b),
             "GreaterThan": (lo > b, hi <= b), "GreaterThanEqual": (lo >= b, hi < b),
             "Equal": (lo == hi == b, not lo <= b <= hi), "NotEqual": (not lo <= b <= hi, lo == hi == b)}
    always, never = table.get(op, (False, False))
    return True if always else False if never else None


def compare(op: str, a: Any, b: Any) -> bool | None:
    if isinstance(a, AtMost):
        return _bounded_compare(op, a, b)
    if isinstance(b, AtMost):
        return _bounded_compare(_MIRROR[op], b, a) if op in _MIRROR else None
    if isinstance(a, BoundedTensor) or isinstance(b, BoundedTensor):
        return (op == "IsNot") if op in ("Is", "IsNot") and (a is None or b is None) else None
    try:
        if op == "Equal":
            return a == b
        if op == "NotEqual":
            return a != b
        if op == "Is":
            return a is b or (a == b and isinstance(a, (Member, bool)) or (a is None and b is None))
        if op == "IsNot":
            return not (a is b or (a == b and isinstance(a, (Member, bool))) or (a is None and b is None))
        if op == "In":
            return a in b
        if op == "NotIn":
            return a not in b
        if isinstance(a, (Ref, Obj, Member, Partial)) or isinstance(b, (Ref, Obj, Member, Partial)):
            return None
        if op == "LessThan":
            return a < b
        if op == "GreaterThan":
            return a > b
        if op == "LessThanEqual":
            return a <= b
        if op == "GreaterThanEqual":
            return a >= b
    except Exception:  # noqa: BLE001 - a comparison Python itself refuses
        return None
    return None


def arith(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, AtMost) or isinstance(b, AtMost):
        return _bounded_arith(op, a, b)
    if not all(isinstance(x, (int, float, str, tuple)) and not isinstance(x, bool) or isinstance(x, bool)
               for x in (a, b)):
        return FACT_UNKNOWN
    try:
        return {"Add": lambda: a + b, "Subtract": lambda: a - b, "Multiply": lambda: a * b,
                "FloorDivide": lambda: a // b, "Modulo": lambda: a % b}[op]()
    except Exception:  # noqa: BLE001 - unknown operator or a failing operation
        return FACT_UNKNOWN


def _bounded_arith(op: str, a: Any, b: Any) -> Any:
    """Sums and products of bounded counts stay bounded (all values are at least 1)."""
    limits = [x.limit if isinstance(x, AtMost) else x for x in (a, b)]
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in limits):
        return FACT_UNKNOWN
    if op == "Multiply":
        return AtMost(limits[0] * limits[1])
    if op == "Add":
        return AtMost(limits[0] + limits[1])
    return FACT_UNKNOWN


OBJECT_FAMILY = {"server_args": ("flag", "server_args"), "model_config": ("config", "config"),
                 "device_properties": ("platform", "torch.cuda.get_device_properties()")}
# the HF config of a census cell, whose only known field is the architecture (facts.ARCH_FACT)
ARCHITECTURE_ONLY = Obj("model_architecture", ())
ARCHITECTURE_TESTS = frozenset({"Equal", "NotEqual", "In", "NotIn"})


class _Architecture:
    """`config.architectures[0]` of a census cell: a marker, the same for every model class, that only a
    comparison reads as a name (PartialEvaluator._architecture_test, which records the test). Compared
    any other way it raises, and `compare` then answers unknown: no answer silently depends on it."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Architecture):
            return True
        raise TypeError("the cell's architecture is compared through PartialEvaluator._architecture_test")

    def __hash__(self) -> int:
        return hash("dynacheck: the cell's architecture")

    def __repr__(self) -> str:
        return "<the cell's architecture>"


ARCHITECTURE = _Architecture()


class _Filled:
    """A container built empty and filled in place on the deployment's own path (one entry per visible
    GPU, `compilation_context.py:112-130`): not empty, its contents and size unknown. Truth is all it
    answers; `len`, iteration and comparison raise, so those answers stay unknown."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        raise TypeError("a filled container's size is not known")

    def __iter__(self):
        raise TypeError("a filled container's contents are not known")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Filled):
            return True
        raise TypeError("a filled container's contents are not known")

    def __hash__(self) -> int:
        return hash("dynacheck: a filled container")

    def __repr__(self) -> str:
        return "<filled at run time>"


FILLED = _Filled()


def answers_alike(tests, one: str, other: str) -> bool:
    """Whether two model classes answer every recorded architecture test alike (both named, or both not)."""
    if not tests:
        return True
    if not one or not other:
        return False
    return all(compare(op, one, constant) == compare(op, other, constant) for op, constant in tests)


def freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


LITERAL_TYPES = frozenset({"builtins.False", "builtins.True", "builtins.None"})


def external_guess(value: Value, attr: str) -> bool:
    """The evaluator's stand-in for an attribute it did not find on a class with an external base:
    `torch.nn.Module.<attr>` (classes.py), a name, not a value a branch can test."""
    return value.kind == "ext" and value.note == "method" and value.name.endswith(f".{attr}")


def argument_key(known_value: Known) -> Any:
    """A memo key for an argument's values: the values themselves with their types (True is not 1);
    hashing, not repr, since a server-args object has hundreds of fields."""
    return frozenset((type(v), v) for v in known_value.values) if known_value.values is not None else "?"


def as_value(result: Known) -> Value:
    """A partial-evaluation result as an evaluator Value (bound parameters carry it)."""
    if result.values is not None and len(result.values) == 1:
        only = next(iter(result.values))
        if isinstance(only, Ref):
            return only.value
    if result.values is None:
        return Value("unknown")
    return Value("known", name=known_name(result.values), items=tuple(result.values))


def known_name(values) -> str:
    """A Value name for known values: readable, and distinct for distinct values (Value.key() holds the
    name, so two values with one name are merged): a long one ends in a digest of the whole."""
    full = repr(sorted(map(_label, values)))
    if len(full) <= 80:
        return full
    return full[:60] + "..." + hashlib.blake2b(full.encode(), digest_size=8).hexdigest()


def flattened(kind: str, parts: tuple) -> list:
    """`a or b or c` as one list of operands: the parse nests it as `(a or b) or c`, and each level
    would spend one step of MAX_DEPTH (five `or`s left the first operands unevaluated). Same value,
    same order of evaluation."""
    out: list = []
    for part in parts:
        if part and part[0] == kind:
            out.extend(flattened(kind, part[1]))
        else:
            out.append(part)
    return out


_OBJECT_NUMBERS: dict = {}  # deployment object -> its number, in the (deterministic) order first seen


def _label(value: Any) -> str:
    """A short, stable name for a value: a server-args object's repr is hundreds of fields long, so
    deployment objects are numbered instead (equal objects, equal numbers)."""
    if isinstance(value, Obj):
        return f"{value.kind}#{_OBJECT_NUMBERS.setdefault(value, len(_OBJECT_NUMBERS))}"
    if isinstance(value, Ref):  # a dataclass repr of nested Values and scopes costs ~0.1 ms, and was cut at 80
        return allocation_label(value.value)
    if isinstance(value, Partial):
        return f"<partial {allocation_label(value.func)} {[(k, _known_label(v)) for k, v in value.kwargs]}>"
    return repr(value)


def _known_label(known_value: Any) -> str:
    if isinstance(known_value, Known):
        return "?" if known_value.values is None else repr(sorted(map(_label, known_value.values)))
    return _label(known_value)


def render_test(test: Expr) -> str:
    """A branch test as readable text for a condition."""
    kind = test[0] if test else "?"
    if kind == "exc":
        return "an exception was raised (except path)"
    if kind == "imp":
        return f"`import {test[1]}` succeeded"
    if kind == "cmp":
        ops = {"Equal": "==", "NotEqual": "!=", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
               "LessThan": "<", "GreaterThan": ">", "LessThanEqual": "<=", "GreaterThanEqual": ">="}
        text = render_test(test[1])
        for op, right in test[2]:
            text += f" {ops.get(op, op)} {render_test(right)}"
        return text
    if kind == "k":
        return repr(test[1]) if len(test) > 1 else "..."
    if kind in ("and", "or"):
        return f" {kind} ".join(render_test(t) for t in test[1])
    if kind == "not":
        return f"not {render_test(test[1])}"
    if kind == "c":
        return f"{render(test[1])}()"
    if kind == "op":
        symbol = {"Add": "+", "Subtract": "-", "Multiply": "*", "Divide": "/", "FloorDivide": "//",
                  "Modulo": "%", "BitAnd": "&", "BitOr": "|"}.get(test[3] if len(test) > 3 else "", "?")
        return f"{render_test(test[1])} {symbol} {render_test(test[2])}"
    return render(test)

"""Partial evaluation of branch tests over the deployment's known values.

A guard such as `if is_sm120_supported():` or `if get_moe_a2a_backend().is_mori():` is
evaluated by reading the functions it calls (their returns, return guards, local assignments,
`functools.partial` / `lru_cache` wrappers, Enum classes) down to the facts a deployment fixes:
platform probes (`torch.version.cuda`, `torch.cuda.get_device_capability()`), environment
reads, the server-args object, the model config, and the module globals SGLang's compiling
runner sets. The answer is True, False, or unknown; an unknown that depends on such a fact is
a *condition* the chain carries. Everything is bounded (depth, value-set size) and memoized.
"""

from __future__ import annotations

import hashlib

from dataclasses import dataclass
from typing import Any, Iterable

from dynacheck.deploy.facts import ALL_FACTS, GPU_FACT, GPU_PROBES, QUANT_ARGS, QUANT_FACT
from dynacheck.deploy.facts import UNKNOWN as FACT_UNKNOWN
from dynacheck.deploy.facts import Deployment
from dynacheck.model import Condition
from dynacheck.static.ir import Expr, dotted, render
from dynacheck.static.value_types import Scope, Value, evolve, receiver_key

MAX_DEPTH = 10
_NO_CUT = 1 << 30
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


def unknown(*opens: Condition) -> Known:
    return Known(None, tuple(opens))


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


class PartialEvaluator:
    def __init__(self, evaluator, deployment: Deployment | None) -> None:
        self.ev = evaluator
        self.dep = deployment or Deployment()
        self._memo: dict[tuple, tuple] = {}  # key -> (..., the facts read computing it), see _open_frame
        self._active: dict = {}  # key -> its depth on the stack of evaluations in progress
        self._low = _NO_CUT  # the shallowest evaluation a recursion cut-off re-entered, in this frame
        self._flow: tuple[int, int] | None = None  # (id of the guard's scope, the guard's line)
        self.reads = 0  # the facts (facts.GPU_FACT...) read by the evaluation in progress, see _open_frame

    # ----- tests -------------------------------------------------------------------------------

    def truth(self, test: Expr, scope: Scope) -> tuple[bool | None, tuple]:
        """Whether a branch test holds here: True, False or None (unknown) and the open facts."""
        if test and test[0] == "exc":
            return None, (Condition("an exception was raised (except path)", scope.module.path, test[1], "except"),)
        result = self.const(test, scope, 0)
        return self._bool(result), result.opens

    def guards(self, guards: tuple, scope: Scope) -> tuple[bool, tuple[Condition, ...]]:
        """(reachable, conditions) for a call under `guards`: False when a guard is decided against it."""
        conditions: list[Condition] = []
        for test, taken, line in guards:
            value, opens = self._guard_truth(test, scope, line)
            if value is not None:
                if value != taken:
                    return False, ()
                continue
            family = [o for o in opens if o.kind in FAMILY_KINDS or o.kind == "except"]
            if family:
                text = render_test(test) if test[0] == "exc" else f"{'' if taken else 'not '}{render_test(test)}"
                sized = next((o.text for o in family if o.text.startswith("a traced batch")), "")
                if sized:  # `not skip` says little: say what decides it
                    text = f"{text} ({sized})"
                kinds = sorted({o.kind for o in family})
                conditions.append(Condition(text, scope.module.path, line, kinds[0]))
            elif taken and self._builds_once(test, scope):
                conditions.append(Condition(f"first build only: {render_test(test)} (nothing was built before "
                                            "the compile)", scope.module.path, line, "first_call"))
            elif _failed_command(test, taken):
                conditions.append(Condition(f"the command failed: {'' if taken else 'not '}{render_test(test)}",
                                            scope.module.path, line, "except"))
            elif taken and _registers_once(test):
                conditions.append(Condition(f"first call only: {render_test(test)} (nothing registered it before "
                                            "the compile)", scope.module.path, line, "first_call"))
        return True, tuple(conditions)

    def _guard_truth(self, test: Expr, scope: Scope, line: int) -> tuple[bool | None, tuple]:
        """`truth` of a guard at its line, memoized per (test, scope): a function's guards are asked
        once per call site that reaches it. The scope is kept in the entry so its id is not reused."""
        key = ("guard", id(test), id(scope), line)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is scope and hit[1] is test:
            self.reads |= hit[3]
            return hit[2]
        saved, depth, opened = self._flow, len(self._active), self._open_frame()
        self._flow = (id(scope), line)
        try:
            answer = self.truth(test, scope)
        finally:
            self._flow = saved
        got = self._close_frame(opened, depth)
        if got is not None:
            self._memo[key] = (scope, test, answer, got)
        return answer

    # A result is memoized unless a recursion cut-off inside it re-entered an evaluation that was
    # already in progress when it started (its value then depends on how it was reached). A cut-off
    # back into the evaluation itself is its own fixpoint: `x = f(x)` gives the other assignments.

    #
    # A frame also collects the deployment facts read inside it (`reads`, facts.GPU_FACT): a memo
    # entry keeps them, a hit adds them to the evaluation that asked, so an evaluator can be
    # forked for a deployment that differs in those facts only, dropping what read them (fork()).

    def _open_frame(self) -> tuple[int, int]:
        opened = (self._low, self.reads)
        self._low, self.reads = _NO_CUT, 0
        return opened

    def _close_frame(self, opened: tuple[int, int], depth: int) -> int | None:
        """The frame's own reads when its result may be memoized, else None."""
        low, reads = opened
        clean = self._low >= depth
        self._low = min(low, self._low)
        got = self.reads
        self.reads = got | reads
        return got if clean else None

    def _cut(self, key) -> None:
        self._low = min(self._low, self._active[key])

    def _push(self, key) -> int:
        depth = self._active[key] = len(self._active)
        return depth

    def _builds_once(self, test: Expr, scope: Scope) -> bool:
        """`if not path.exists():` (directly or through a property that returns it): a file made the
        first time; an eager warm-up before the compile has made it already."""
        if not test or test[0] != "not":
            return False
        inner = test[1]
        if _exists_probe(inner):
            return True
        if inner and inner[0] == "a":
            base = self.const(inner[1], scope, 0)
            for value in base.values or ():
                if isinstance(value, Ref) and value.value.kind == "inst":
                    for member in self.ev.member(value.value, inner[2], 1):
                        fn = self.ev.index.function(member.module, member.name) if member.kind == "func" else None
                        if fn is not None and fn.returns and all(_exists_probe(r) for r in fn.returns):
                            return True
        return False

    @staticmethod
    def _bool(result: Known) -> bool | None:
        if result.values is None or not result.values:
            return None
        truths = set()
        for value in result.values:
            if isinstance(value, (AtMost, BoundedTensor)):
                return None
            if isinstance(value, (Ref, Obj, Member, Partial)):
                truths.add(True)
            else:
                try:
                    truths.add(bool(value))
                except Exception:  # noqa: BLE001 - a value whose truth is not plain
                    return None
        return truths.pop() if len(truths) == 1 else None

    # ----- expressions -------------------------------------------------------------------------

    def const(self, expr: Expr, scope: Scope, depth: int) -> Known:
        if depth > MAX_DEPTH or not expr:
            return unknown()
        kind = expr[0]
        handler = _HANDLERS.get(kind)
        if handler is None:
            return unknown()
        try:
            return handler(self, expr, scope, depth + 1)
        except RecursionError:
            self.reads = ALL_FACTS  # frames above were unwound without adding their reads: assume all
            return unknown()

    def _k(self, expr: Expr, scope: Scope, depth: int) -> Known:
        return known(expr[1]) if len(expr) > 1 else unknown()

    def _seq(self, expr: Expr, scope: Scope, depth: int) -> Known:
        parts = [self.const(e, scope, depth) for e in expr[1]]
        if any(p.values is None or len(p.values) != 1 for p in parts):
            return unknown(*[o for p in parts for o in p.opens])
        return known(tuple(next(iter(p.values)) for p in parts))

    def _not(self, expr: Expr, scope: Scope, depth: int) -> Known:
        inner = self.const(expr[1], scope, depth)
        value = self._bool(inner)
        return known(not value, opens=inner.opens) if value is not None else unknown(*inner.opens)

    def _andor(self, expr: Expr, scope: Scope, depth: int) -> Known:
        """Python's value, not only its truth: `a or b` is the first truthy operand, else the last
        (`home = env("A") or env("B"); if home is not None:` needs the None)."""
        is_and = expr[0] == "and"
        opens: list = []
        undecided = False
        result = NOTHING
        for part in _flattened(expr[0], expr[1]):
            result = self.const(part, scope, depth)
            value = self._bool(result)
            opens.extend(result.opens)
            if value is None:
                undecided = True
            elif value is not is_and:  # False in an `and`, True in an `or`: this operand is the value
                if undecided:
                    return known(value, opens=tuple(opens))  # its truth is known, its value is not
                return Known(result.values, tuple(opens[:6]))
        if undecided:
            return unknown(*opens)
        return Known(result.values, tuple(opens[:6])) if expr[1] else known(is_and)

    def _either(self, expr: Expr, scope: Scope, depth: int) -> Known:
        if len(expr) > 3:
            test = self.const(expr[3], scope, depth)
            decided = self._bool(test)
            if decided is not None:
                return self.const(expr[1] if decided else expr[2], scope, depth)
        return merge([self.const(expr[1], scope, depth), self.const(expr[2], scope, depth)])

    def _cmp(self, expr: Expr, scope: Scope, depth: int) -> Known:
        left = self.const(expr[1], scope, depth)
        opens = list(left.opens)
        result: Known | None = None
        for op, right_expr in expr[2]:
            right = self.const(right_expr, scope, depth)
            opens.extend(right.opens)
            if op in ("Is", "IsNot") and (left.values is None or right.values is None):
                result = self._identity(op, expr[1], right_expr, scope, depth)
            elif left.values is None or right.values is None:
                return unknown(*opens)
            else:
                outs = set()
                for a in left.values:
                    for b in right.values:
                        out = _compare(op, a, b)
                        if out is None:
                            bound = next((x for x in (a, b) if isinstance(x, AtMost)), None)
                            if bound is not None:  # the traced batch's size decides it
                                opens.append(Condition(f"a traced batch of more than {render_test(right_expr)} "
                                                       f"(up to {bound.limit}) tokens", "", 0, "runtime"))
                            return unknown(*opens)
                        outs.add(out)
                result = known(*outs)
            if result is None or result.values is None or len(result.values) != 1:
                return unknown(*opens)
            if not next(iter(result.values)):
                return known(False, opens=tuple(opens))
            left = right
        return known(True, opens=tuple(opens)) if result is not None else unknown(*opens)

    def _identity(self, op: str, left: Expr, right: Expr, scope: Scope, depth: int) -> Known | None:
        """`x is None` where x is a class or function the evaluator knows: never None."""
        if right != ("n", "None"):
            return None
        values = self.ev.eval(left, scope)
        if values and all(v.kind in ("func", "cls", "mod") for v in values):
            return known(op == "IsNot")
        return None

    def _op(self, expr: Expr, scope: Scope, depth: int) -> Known:
        left, right = self.const(expr[1], scope, depth), self.const(expr[2], scope, depth)
        opens = left.opens + right.opens
        if left.values is None or right.values is None or len(expr) < 4:
            return unknown(*opens)
        outs = set()
        for a in left.values:
            for b in right.values:
                out = _arith(expr[3], a, b)
                if out is FACT_UNKNOWN:
                    return unknown(*opens)
                outs.add(out)
        return known(*outs, opens=opens)

    def _sub(self, expr: Expr, scope: Scope, depth: int) -> Known:
        if len(expr) < 3:
            return unknown()
        base, index = self.const(expr[1], scope, depth), self.const(expr[2], scope, depth)
        if base.values is None or index.values is None:
            return unknown(*(base.opens + index.opens))
        outs = set()
        for b in base.values:
            for i in index.values:
                try:
                    outs.add(b[i] if not isinstance(b, Obj) else self._field(b, i))
                except Exception:  # noqa: BLE001 - an index that fails is not a value
                    return unknown(*base.opens)
        return known(*outs, opens=base.opens)

    def _unpacked(self, expr: Expr, scope: Scope, depth: int) -> Known:
        """`major, minor = probe()`: item i of a known tuple (`("idx", value, i)` in the summary)."""
        base = self.const(expr[1], scope, depth)
        if base.values is None or len(expr) < 3 or not isinstance(expr[2], int):
            return unknown(*base.opens)
        outs = set()
        for value in base.values:
            if not isinstance(value, tuple) or not -len(value) <= expr[2] < len(value):
                return unknown(*base.opens)
            outs.add(value[expr[2]])
        return known(*outs, opens=base.opens)

    def _slice(self, expr: Expr, scope: Scope, depth: int) -> Known:
        base = self.const(expr[1], scope, depth)
        lo, hi = self.const(expr[2], scope, depth), self.const(expr[3], scope, depth)
        if base.values is None or lo.values is None or hi.values is None or len(lo.values) != 1 \
                or len(hi.values) != 1:
            return unknown(*base.opens)
        a, b = next(iter(lo.values)), next(iter(hi.values))
        try:
            return known(*(v[a:b] for v in base.values), opens=base.opens)
        except Exception:  # noqa: BLE001
            return unknown(*base.opens)

    # ----- names and attributes ----------------------------------------------------------------

    def _name(self, expr: Expr, scope: Scope, depth: int) -> Known:
        name = expr[1]
        if name in ("True", "False", "None"):
            return known({"True": True, "False": False, "None": None}[name])
        current: Scope | None = scope
        while current is not None and current.function is not None:
            fn = current.function
            bound = next((values for bound_name, values in current.bound if bound_name == name), None)
            if bound is not None and name not in fn.assigns:
                return self._of_values(bound)
            if name in fn.assigns:
                key = ("local", id(fn), name, id(current))
                if key in self._active:
                    if bound is not None:  # `disabled = ... or disabled`: the parameter's own value
                        return self._of_values(bound)
                    self._cut(key)
                    return NOTHING  # x = f(x): the other assignments give the values
                flow = self._flow[1] if self._flow is not None and self._flow[0] == id(current) else 0
                memo = ("local", id(fn), name, id(current), flow)
                hit = self._memo.get(memo)
                if hit is not None and hit[0] is current:
                    self.reads |= hit[2]
                    return hit[1]
                frame, opened = self._push(key), self._open_frame()
                try:
                    result = merge([self.const(e, current, depth) if e[0] not in ("fn", "cls") else unknown()
                                    for e in self._reaching(fn, name, current)])
                finally:
                    del self._active[key]
                got = self._close_frame(opened, frame)
                if got is not None:
                    self._memo[memo] = (current, result, got)  # the scope is kept so its id is not reused
                return result
            if name in fn.params:
                if name == "self" and current.self_cls is not None:
                    return known(Ref(evolve(current.self_cls, kind="inst")))
                return self._param(name, fn, current, depth)
            if name in fn.local_imports:
                return self.imported(fn.local_imports[name], depth)
            current = current.parent
        return self.global_(scope.module.module, name, depth)

    def _reaching(self, fn, name: str, scope: Scope) -> list:
        """The assignments of a local a guard can see: in the guard's own function, those written
        above the guard (`x = env or None; if x is not None: return x` then `x = probe()` below),
        from the last one that surely runs when the first does (outside loops, its own guards
        decided true here):
        `skip = False; if batch.is_extend(): skip = n <= k` leaves only `n <= k`. Elsewhere all of
        them. Line 0 (a loop or `with` target) is kept: its place is not recorded."""
        values = fn.assigns[name]
        lines = fn.assign_lines.get(name, ())
        if self._flow is None or self._flow[0] != id(scope) or len(lines) != len(values):
            return values
        at = self._flow[1]
        before = [i for i, line in enumerate(lines) if line < at]
        if not before:
            return values
        guards = fn.assign_guards.get(name, ())
        if len(guards) == len(values):
            shared = set(guards[before[0]][0])  # tests both sit under (an early return above both)
            for i in reversed(before):
                if i == before[0]:
                    break
                assign_guards, in_loop = guards[i]
                extra = tuple(g for g in assign_guards if g not in shared)
                if lines[i] and not in_loop and self._surely(extra, scope):
                    before = before[before.index(i):]
                    break
        return [values[i] for i in before]

    def _surely(self, guards: tuple, scope: Scope) -> bool:
        """Whether every guard is decided the way the code under it needs, on this deployment."""
        saved = self._flow
        try:
            for test, taken, line in guards:
                self._flow = (id(scope), line)
                value, _ = self.truth(test, scope)
                if value is None or value != taken:
                    return False
            return True
        finally:
            self._flow = saved

    def _param(self, name: str, fn, scope: Scope, depth: int) -> Known:
        """A parameter the call did not bind: a deployment object when its annotation says so."""
        annotation = fn.param_types.get(name) or fn.annotations.get(name)
        if annotation is not None:
            for part in annotation[1] if annotation[0] == "q" else (annotation,):
                label = (dotted(part) or "").rpartition(".")[2]
                obj = self._object(self.dep.object_types.get(label, ""))
                if obj is not None:
                    return known(obj)
        return unknown()

    def _object(self, kind: str) -> Obj | None:
        if kind == "server_args" and self.dep.server_args:
            # the quantization is read through its fact bit (_field), not held in the object: the
            # object is then the same for every checkpoint format, and a census forks across them
            return Obj(kind, tuple(sorted(((k, v) for k, v in self.dep.server_args.items() if k not in QUANT_ARGS),
                                          key=lambda kv: kv[0])))
        if kind == "model_config" and self.dep.model_config:
            fields = tuple(sorted(((k, _freeze(v)) for k, v in self.dep.model_config.items()), key=lambda kv: kv[0]))
            return Obj(kind, fields)
        if kind == "traced_batch" and self.dep.traced_batch:
            return self._traced_batch()
        return None

    def _traced_batch(self) -> Obj | None:
        """The batch the compiling runner traces with: Enum members by `module:Class.MEMBER`, tensors
        bounded by a server-args field (`{at_most = "piecewise_cuda_graph_max_tokens"}`)."""
        key = ("traced_batch",)
        if key in self._memo:
            found, got = self._memo[key]
            self.reads |= got
            return found.values and next(iter(found.values))
        opened = self._open_frame()
        fields = []
        for name, fact in sorted(self.dep.traced_batch.items()):
            if isinstance(fact, str) and ":" in fact:
                module, _, dotted_member = fact.partition(":")
                cls_name, _, member_name = dotted_member.rpartition(".")
                member = self._enum_member(Value("cls", module, cls_name), member_name) if cls_name else None
                if member is not None:
                    fields.append((name, member))
            elif isinstance(fact, dict) and "at_most" in fact:
                limit = self.dep.server_args.get(str(fact["at_most"]))
                if isinstance(limit, int) and not isinstance(limit, bool):
                    fields.append((name, BoundedTensor(limit)))
            elif isinstance(fact, (bool, int, float, str)):
                fields.append((name, fact))
        obj = Obj("traced_batch", tuple(fields))
        self._memo[key] = (known(obj), self._close_frame(opened, 0))  # depth 0: always clean
        return obj

    def global_(self, module: str, name: str, depth: int) -> Known:
        fact = self.dep.runtime.get(f"{module}.{name}", FACT_UNKNOWN)
        if fact is not FACT_UNKNOWN:
            return known(fact)
        key = ("global", module, name)
        hit = self._memo.get(key)
        if hit is not None:
            self.reads |= hit[1]
            return hit[0]
        if key in self._active:
            self._cut(key)
            return NOTHING
        frame, opened = self._push(key), self._open_frame()
        try:
            result = self._global(module, name, depth)
        finally:
            del self._active[key]
        got = self._close_frame(opened, frame)
        if got is not None and (result.values is not None or result.opens):
            self._memo[key] = (result, got)  # an unknown with no open fact may come from a cut in the evaluator
        return result

    def _global(self, module: str, name: str, depth: int) -> Known:
        bindings = self.ev.index.global_bindings(module, name)
        if not bindings:
            return self._of_values(self.ev.global_value(module, name, depth))
        module = self.ev.index.defining_module(module, name)  # a star import: read it where it is bound
        summary = self.ev.index.module(module)
        scope = Scope(summary) if summary is not None else None
        parts: list[Known] = []
        if self.dep.given:
            bindings = self._at_compile_time(module, bindings)
        rebound = any(b.kind == "global" for b in bindings)
        for binding in bindings:
            if scope is not None and binding.guards:
                reachable, _ = self.guards(binding.guards, scope)
                if not reachable:
                    continue
            if binding.kind == "assign" and scope is not None:
                parts.append(self.const(binding.value, scope, depth))
            elif binding.kind == "global":
                qualname, value_expr = binding.value
                fscope = self.ev.function_scope(Value("func", module, qualname))
                parts.append(self.const(value_expr, fscope, depth) if fscope is not None else unknown())
            elif binding.kind == "import":
                parts.append(self.imported(binding.value, depth))
            elif binding.kind == "def":
                parts.append(known(Ref(Value("func", module, binding.value))))
            elif binding.kind == "class":
                parts.append(known(Ref(Value("cls", module, binding.value))))
        result = merge(parts)
        if rebound and result.values is not None and len(result.values) > 1:
            # a global set by the runner at run time: which value holds while compiling is a runtime fact
            return unknown(Condition(f"{module}.{name}", summary.path if summary else "", 0, "runtime"))
        return result

    def imported(self, target: str, depth: int) -> Known:
        """What `from a.b import c` binds: a module, or a module-level name read by partial evaluation."""
        split = self.ev.index.split_module(target)
        if split is None:
            return known(Ref(Value("ext", name=target)))
        module, rest = split
        if not rest:
            return known(Ref(Value("mod", name=module)))
        result = self.global_(module, rest[0], depth)
        for attr in rest[1:]:
            if result.values is None:
                return result
            result = merge([self._member(v, attr, Scope(self.ev.index.module(module)), depth) for v in result.values])
        return result

    def _at_compile_time(self, module: str, bindings: list) -> list:
        """The bindings of a module global that can hold while the runner compiles.

        A `global` rebinding inside a `@contextmanager` is temporary state (capture mode, a
        speculative-decoding override) that the deployment's runtime facts decide; without such a
        fact the state outside the context holds. A module-level `X = None` that a start-up function
        rebinds (`global X; X = ...`) is the value before start-up only.
        """
        kept = []
        for binding in bindings:
            if binding.kind == "global":
                fn = self.ev.index.function(module, binding.value[0])
                if fn is not None and any((dotted(d) or "").endswith("contextmanager") for d in fn.decorators):
                    continue
            kept.append(binding)
        startup = any(b.kind == "global" for b in kept)
        if startup:
            kept = [b for b in kept if not (b.kind == "assign" and b.value == ("n", "None"))]
        return kept or bindings

    def _of_values(self, values: Iterable[Value]) -> Known:
        out = set()
        for value in values:
            if value.kind == "known":
                out.update(value.items)
            elif value.kind in ("func", "cls", "mod", "inst", "ext", "extinst"):
                out.add(Ref(value))
            else:
                return unknown()
        return known(*out) if out else unknown()

    def _attr(self, expr: Expr, scope: Scope, depth: int) -> Known:
        name = dotted(expr)
        if name is not None:
            resolved = self._external_name(expr, scope)
            if resolved is not None:
                fact = self.dep.external(resolved)
                if fact is not FACT_UNKNOWN:
                    return known(fact)
                if resolved.startswith("torch.version."):
                    return unknown(Condition(resolved, scope.module.path, 0, "platform"))
        base = self.const(expr[1], scope, depth)
        if base.values is None:
            return base
        outs: list[Known] = []
        for value in base.values:
            outs.append(self._member(value, expr[2], scope, depth))
        return merge(outs)

    def _field(self, obj: Obj, name: Any) -> Any:
        """A deployment object's field; the server args' quantization through its fact bit."""
        if obj.kind == "server_args" and name in QUANT_ARGS:
            self.reads |= QUANT_FACT
            return self.dep.server_args.get(name, FACT_UNKNOWN)
        return obj.get(name)

    def _member(self, value: Any, attr: str, scope: Scope, depth: int) -> Known:
        if isinstance(value, Obj):
            got = self._field(value, attr)
            if got is FACT_UNKNOWN:
                if value.kind == "traced_batch":
                    return unknown()  # a runtime value of the batch, as before the batch had facts
                kind, label = _OBJECT_FAMILY.get(value.kind, ("config", "config"))
                return unknown(Condition(f"{label}.{attr}", "", 0, kind))
            return known(_freeze(got))
        if isinstance(value, Member):
            if attr == "value":
                return known(value.value)
            if attr == "name":
                return known(value.name)
            return known(Ref(Value("func", value.module, f"{value.cls}.{attr}", note="member")))
        if isinstance(value, Ref):
            ref = value.value
            if ref.kind == "cls" and self._is_enum(ref):
                member = self._enum_member(ref, attr)
                if member is not None:
                    return known(member)
            if ref.kind in ("mod",):
                return self.global_(ref.name, attr, depth)
            if ref.kind == "inst":
                found = self._instance_attr(ref, attr, depth)
                if found.values is not None or found.opens:
                    return found
            members = self.ev.member(ref, attr, 1)
            if ref.kind == "inst" and members and all(_external_guess(v, attr) for v in members) \
                    and self._assigned_on_self(ref, attr):
                return unknown()  # set by a method to a value not known here, not the external base's attribute
            if members and all(v.kind == "ext" and v.name in _LITERAL_TYPES for v in members):
                return unknown()  # `self.use_marlin = False` typed as bool: not a value (a Ref would be truthy)
            if ref.kind == "inst" and members and all(self._is_property(v) for v in members):
                # `self.is_aot` is the property's result, not a (truthy) method object
                return merge([self.call_function(v, [], {}, depth, receiver=value) for v in members])
            return self._of_values(members)
        if value is None:
            return NOTHING  # AttributeError on None: that value never gets here
        return unknown()

    def _assigned_on_self(self, inst: Value, attr: str) -> bool:
        """Whether a method of the instance's class or its bases assigns `self.attr`: its value is then
        that assignment's, never the external base's attribute (`torch.nn.Module.<attr>` is no object)."""
        return any(attr in fn.self_assigns for summary, module in self._class_summaries(inst)
                   for fn in map(module.functions.get, summary.methods.values()) if fn is not None)

    def _class_summaries(self, inst: Value):
        """(class summary, its module) for each scanned class in the instance's MRO."""
        for cls in self.ev.mro(inst):
            summary = self.ev.index.klass(cls.module, cls.name) if cls.kind == "cls" else None
            module = self.ev.index.module(cls.module) if summary is not None else None
            if module is not None:
                yield summary, module

    def _is_property(self, value: Value) -> bool:
        if value.kind != "func":
            return False
        fn = self.ev.index.function(value.module, value.name)
        return fn is not None and any((dotted(d) or "").rpartition(".")[2] in ("property", "cached_property")
                                      for d in fn.decorators)

    def _instance_attr(self, inst: Value, attr: str, depth: int) -> Known:
        """`self.attr` as a value: every `self.attr = ...` in the class and its bases, evaluated in
        its method (`self._enable_a2a_moe = get_moe_a2a_backend().is_deepep()` in `__init__`)."""
        # per allocation (its expression and the scope it was evaluated in), kept in the entry so that
        # neither id is reused: keyed by the expression's id alone, a freed allocation's answer was
        # read back for a later one (BailingMoE's `allow_reduce_scatter=True` for Bailing V2.5's False)
        key = ("attr", inst.module, inst.name, attr, id(inst.expr) if inst.expr else 0, id(inst.scope))
        hit = self._memo.get(key)
        if hit is not None and hit[0] is inst.expr and hit[1] is inst.scope:
            self.reads |= hit[3]
            return hit[2]
        if key in self._active:
            self._cut(key)
            return NOTHING
        frame, opened = self._push(key), self._open_frame()
        parts: list[Known] = []
        try:
            for summary, module in self._class_summaries(inst):
                for qualname in summary.methods.values():
                    fn = module.functions.get(qualname)
                    if fn is None or attr not in fn.self_assigns:
                        continue
                    scope = self._method_scope(inst, fn, module, depth)
                    parts.extend(self.const(e, scope, depth) for e in self._may_run(fn, attr, lambda: scope))
                field = self._field_argument(inst, attr, depth) if not parts and _is_dataclass(summary) else None
                if field is not None:  # the allocation's keyword, not the field's default
                    parts.append(field)
                elif summary.attrs.get(attr):
                    scope = Scope(module)
                    parts.extend(self.const(e, scope, depth) for e in summary.attrs[attr])
        finally:
            del self._active[key]
        result = merge(parts) if parts else Known(None)
        got = self._close_frame(opened, frame)
        if got is not None and (result.values is not None or result.opens):
            # an unknown with no open fact may come from a cut in the evaluator
            self._memo[key] = (inst.expr, inst.scope, result, got)
        return result

    def _method_scope(self, inst: Value, fn, module, depth: int) -> Scope:
        """A method of the instance's class as the instance runs it: `__init__` with the arguments
        its allocation passed bound."""
        scope = Scope(module, fn, evolve(inst, kind="cls"))
        if fn.name == "__init__":
            scope = evolve(scope, bound=self._constructor_arguments(inst, fn, depth, module))
        return scope

    def self_assignments(self, inst: Value, fn, module, attr: str) -> list:
        """The values of a method's `self.attr = ...` that may run for this instance: not those under a
        test decided against them (`if runner_backend.is_deep_gemm():` in a MoeRunner built with the
        Triton backend)."""
        return self._may_run(fn, attr, lambda: self._method_scope(inst, fn, module, 0))

    def _may_run(self, fn, attr: str, scope_of) -> list:
        """`fn`'s assignments of `self.attr` whose guards, read in the scope `scope_of()` gives (built
        only when one has guards), are not decided against them."""
        values, guards = fn.self_assigns.get(attr, ()), fn.self_assign_guards.get(attr, ())
        scope = None
        kept = []
        for i, value in enumerate(values):
            if i < len(guards) and guards[i]:
                scope = scope or scope_of()
                if self._decided_against(guards[i], scope):
                    continue
            kept.append(value)
        return kept

    def _decided_against(self, guards: tuple, scope: Scope) -> bool:
        for test, taken, _ in guards:
            value, _ = self.truth(test, scope)
            if value is not None and value != taken:
                return True
        return False

    def _allocation(self, inst: Value) -> tuple[list, dict, Scope] | None:
        """The constructor call that made this instance, its arguments as known values, where it ran."""
        call, scope = inst.expr, inst.scope
        if not call or call[0] != "c" or len(call) < 4 or not isinstance(scope, Scope):
            return None
        return call[2], dict(call[3]), scope

    def _constructor_arguments(self, inst: Value, init, depth: int, module=None) -> tuple:
        """`__init__`'s parameters bound to what the allocation passed (`TopK(topk_group=config.topk_group)`),
        and the defaults of those it did not pass (`TopK(top_k, layer_id)`: `use_grouped_topk=False`)."""
        allocation = self._allocation(inst)
        if allocation is None:
            return ()
        key = ("ctor", id(inst.expr), id(inst.scope), id(init))
        hit = self._memo.get(key)
        if hit is not None and hit[0] is inst.expr and hit[1] is inst.scope and hit[2] is init:
            self.reads |= hit[4]
            return hit[3]  # one allocation's arguments, asked once per attribute its methods read
        frame, opened = len(self._active), self._open_frame()
        bound = self._bind_constructor(allocation, init, depth, module)
        got = self._close_frame(opened, frame)
        if got is not None:
            self._memo[key] = (inst.expr, inst.scope, init, bound, got)
        return bound

    def _bind_constructor(self, allocation, init, depth: int, module) -> tuple:
        args, kwargs, scope = allocation
        params = [p for p in init.params if p not in ("self", "cls")]
        bound = []
        for name, arg in zip(params, args):
            bound.append((name, (_as_value(self.const(arg, scope, depth)),)))
        for name, arg in kwargs.items():
            if name in params:
                bound.append((name, (_as_value(self.const(arg, scope, depth)),)))
        given = {name for name, _ in bound}
        if module is not None and "*" not in kwargs:  # `TopK(**cfg)` may fill any of them
            for name in params[len(args):]:
                if name not in given and name in init.defaults:
                    bound.append((name, (_as_value(self.const(init.defaults[name], Scope(module), depth)),)))
        return tuple(b for b in bound if b[1][0].kind == "known")

    def _field_argument(self, inst: Value, attr: str, depth: int) -> Known | None:
        """A dataclass field's value: the keyword the allocation passed for it."""
        allocation = self._allocation(inst)
        if allocation is None or attr not in allocation[1]:
            return None
        return self.const(allocation[1][attr], allocation[2], depth)

    def _external_name(self, expr: Expr, scope: Scope) -> str | None:
        """`torch.version.cuda` written through any import alias, as its external dotted name."""
        head = expr
        while head and head[0] == "a":
            head = head[1]
        if not head or head[0] != "n":
            return None
        fn = scope.function
        if fn is not None and (head[1] in fn.params or head[1] in fn.assigns):
            return None  # `self.x`, a parameter's attribute: not a module path
        values = self.ev.eval(head, scope)
        if len(values) != 1 or values[0].kind != "ext":
            return None
        rest = (dotted(expr) or "").split(".")[1:]
        return ".".join([values[0].name, *rest])

    # ----- calls -------------------------------------------------------------------------------

    def _call(self, expr: Expr, scope: Scope, depth: int) -> Known:
        func_expr, args, kwargs = expr[1], expr[2], expr[3]
        if func_expr[0] == "a" and func_expr[2] in STR_METHODS:
            base = self.const(func_expr[1], scope, depth)
            if base.values and all(isinstance(v, str) for v in base.values):
                return self._str_method(base, func_expr[2], args, scope, depth)
        external = self._external_name(func_expr, scope) if func_expr[0] in ("a", "n") else None
        if external is not None:
            return self._external_call(external, args, kwargs, scope, depth)
        funcs = self.const(func_expr, scope, depth)
        if funcs.values is None:
            return unknown(*funcs.opens)
        outs = [self._apply(f, args, kwargs, scope, depth) for f in funcs.values]
        return merge(outs)

    def _apply(self, func: Any, args, kwargs, scope: Scope, depth: int) -> Known:
        if isinstance(func, Partial):
            return self.call_function(func.func, self._args(args, scope, depth),
                                      dict(func.kwargs) | self._kwargs(kwargs, scope, depth), depth)
        if not isinstance(func, Ref):
            return unknown()
        value = func.value
        if value.kind == "func":
            accessor = self.dep.accessors.get(f"{value.module}.{value.name}")
            if accessor == "device_capability":  # the framework's wrapper of the GPU probe (utils/common.py)
                return self._external_call("torch.cuda.get_device_capability", [], [], scope, depth)
            obj = self._object(accessor or "")
            if obj is not None:
                return known(obj)
            return self.call_function(value, self._args(args, scope, depth), self._kwargs(kwargs, scope, depth),
                                      depth)
        if value.kind == "ext" and value.name == "functools.identity_decorator" and args:
            return self.const(args[0], scope, depth)
        if value.kind == "cls" and self._is_enum(value) and len(args) == 1:
            arg = self.const(args[0], scope, depth)
            if arg.values is None:
                return unknown(*arg.opens)
            members = [self._enum_by_value(value, v) for v in arg.values]
            return known(*members, opens=arg.opens) if all(m is not None for m in members) else unknown(*arg.opens)
        if value.kind == "cls":  # remember the allocation: its arguments give the fields and __init__'s params
            return known(Ref(evolve(value, kind="inst", expr=("c", None, tuple(args), tuple(kwargs)), scope=scope)))
        return unknown()

    def _args(self, args, scope: Scope, depth: int) -> list[Known]:
        return [self.const(a, scope, depth) for a in args]

    def _kwargs(self, kwargs, scope: Scope, depth: int) -> dict[str, Known]:
        return {name: self.const(e, scope, depth) for name, e in kwargs}

    def call_function(self, func: Value, args: list[Known], kwargs: dict[str, Known], depth: int,
                      receiver: Any = None) -> Known:
        """The result of a scanned function for known arguments: its returns, in order, under their guards."""
        summary = self.ev.index.function(func.module, func.name)
        if summary is None:
            return unknown()
        params = list(summary.params)
        bound: dict[str, Known] = {}
        if receiver is not None and params[:1] == ["self"]:
            bound["self"] = known(receiver)
            params = params[1:]
        elif func.self_cls is not None and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        for name, value in zip(params, args):
            bound[name] = value
        for name, value in kwargs.items():
            if name in summary.params:
                bound[name] = value
        if depth > MAX_DEPTH and bound:
            return unknown()
        # the receiver is part of the question when `self` is not bound: `self.allow_reduce_scatter` in one
        # LayerCommunicator (BailingMoE's, True) is not another's (Bailing V2.5's, False)
        receiver_part = "" if "self" in bound else receiver_key(func.self_cls)
        key = ("call", func.module, func.name, receiver_part, tuple(sorted((k, _key(v)) for k, v in bound.items())))
        hit = self._memo.get(key)
        if hit is not None:
            self.reads |= hit[1]
            return hit[0]
        if key in self._active:
            self._cut(key)
            return unknown()
        frame, opened = self._push(key), self._open_frame()
        try:
            # a call without arguments (a platform probe: `can_auto_enable_marlin_fp8()`) has one answer
            # wherever it is asked: the depth limit starts again inside it, so a deep first ask (fp8's
            # `self.use_marlin` under a layer's guard) does not cut it to unknown
            result = self._returns(func, summary, bound, 0 if not bound else depth)
        finally:
            del self._active[key]
        got = self._close_frame(opened, frame)
        if got is not None and (result.values is not None or result.opens):
            self._memo[key] = (result, got)  # an unknown with no open fact may come from a cut in the evaluator
        return result

    def _returns(self, func: Value, summary, bound: dict[str, Known], depth: int) -> Known:
        scope = self.ev.function_scope(func)
        if scope is None:
            return unknown()
        values = []
        for name in summary.params:
            if name in bound:
                values.append((name, (_as_value(bound[name]),)))
            elif name in summary.defaults and name != "self":
                values.append((name, (_as_value(self.const(summary.defaults[name], scope, depth)),)))
        scope = evolve(scope, bound=tuple(values) + scope.bound)
        parts: list[Known] = []
        for expr, guards in zip(summary.returns, summary.return_guards):
            reachable, conditions = self.guards(guards, scope)
            if not reachable:
                continue
            result = self.const(expr, scope, depth)
            if conditions:
                result = unknown(*result.opens, *conditions)
            parts.append(result)
            if not guards or all(self.truth(t, scope)[0] is taken for t, taken, _ in guards):
                break  # this return always happens when reached: later ones never do
        if not parts:
            return unknown()
        return merge(parts)

    def _external_call(self, name: str, args, kwargs, scope: Scope, depth: int) -> Known:
        if name in ("functools.lru_cache", "functools.cache"):
            return known(Ref(Value("ext", name="functools.identity_decorator")))
        if name == "functools.partial" and args:
            funcs = self.const(args[0], scope, depth)
            if funcs.values is None or len(funcs.values) != 1:
                return unknown()
            func = next(iter(funcs.values))
            if not isinstance(func, Ref) or func.value.kind != "func":
                return unknown()
            return known(Partial(func.value, tuple(self._kwargs(kwargs, scope, depth).items())))
        if name in ENV_READERS and args:
            key = self.const(args[0], scope, depth)
            default = self.const(args[1], scope, depth) if len(args) > 1 else known(None)
            if key.values is None or len(key.values) != 1:
                return unknown()
            var = next(iter(key.values))
            value = self.dep.env_value(str(var), FACT_UNKNOWN)
            if value is FACT_UNKNOWN:
                if self.dep.env_complete:
                    return default
                return unknown(Condition(f"env {var}", scope.module.path, 0, "env"))
            return known(value)
        if name == "builtins.hasattr" and len(args) == 2:
            base = self._external_name(args[0], scope) if args[0][0] in ("n", "a") else None
            attr = self.const(args[1], scope, depth)
            if base == "torch" and attr.values is not None and len(attr.values) == 1:
                fact = self.dep.torch_has(str(next(iter(attr.values))))
                if fact is not FACT_UNKNOWN:
                    return known(fact)
                return unknown(Condition("the torch platform build", scope.module.path, 0, "platform"))
            return unknown()
        if name == "builtins.isinstance" and len(args) == 2:
            return self._isinstance(args[0], args[1], scope, depth)
        if name in ("builtins.tuple", "builtins.list", "builtins.int", "builtins.str", "builtins.len",
                    "builtins.bool", "builtins.map") and args:
            return self._builtin(name.rpartition(".")[2], args, scope, depth)
        if name in GPU_PROBES:
            self.reads |= GPU_FACT
        fact = self.dep.external_call(name)
        if fact is not FACT_UNKNOWN:
            return known(fact)
        if name.startswith(("torch.cuda.", "torch.version.", "torch.npu.", "torch.xpu.")):
            return unknown(Condition(f"{name}()", scope.module.path, 0, "platform"))
        if name in ("torch.compiler.is_compiling", "torch._dynamo.is_compiling"):
            return unknown(Condition(f"{name}()", scope.module.path, 0, "runtime"))
        return unknown()

    def _builtin(self, name: str, args, scope: Scope, depth: int) -> Known:
        if name == "map" and len(args) == 2:
            converter = {("n", "int"): int, ("n", "str"): str}.get(args[0])
            seq = self.const(args[1], scope, depth)
            if converter is None or seq.values is None:
                return unknown(*seq.opens)
            try:
                return known(*(tuple(converter(x) for x in v) for v in seq.values), opens=seq.opens)
            except Exception:  # noqa: BLE001
                return unknown(*seq.opens)
        arg = self.const(args[0], scope, depth)
        if arg.values is None:
            return arg
        fn = {"tuple": tuple, "list": tuple, "int": int, "str": str, "len": len, "bool": bool}[name]
        try:
            return known(*(fn(v) for v in arg.values), opens=arg.opens)
        except Exception:  # noqa: BLE001
            return unknown(*arg.opens)

    def _str_method(self, base: Known, method: str, args, scope: Scope, depth: int) -> Known:
        parts = [self.const(a, scope, depth) for a in args]
        if any(p.values is None or len(p.values) != 1 for p in parts):
            return unknown(*base.opens)
        call_args = [next(iter(p.values)) for p in parts]
        try:
            outs = [getattr(v, method)(*call_args) for v in base.values]
        except Exception:  # noqa: BLE001
            return unknown(*base.opens)
        return known(*(tuple(o) if isinstance(o, list) else o for o in outs), opens=base.opens)

    def _isinstance(self, obj_expr: Expr, cls_expr: Expr, scope: Scope, depth: int) -> Known:
        objs = self.const(obj_expr, scope, depth)
        classes = self.ev.eval(cls_expr, scope)
        if cls_expr and cls_expr[0] == "q":
            classes = [v for e in cls_expr[1] for v in self.ev.eval(e, scope)]
        targets = {(c.module, c.name) for c in classes if c.kind == "cls"}
        if objs.values is None or not targets or len(targets) != len(classes):
            return unknown(*objs.opens)
        outs = set()
        for value in objs.values:
            if not isinstance(value, Ref) or value.value.kind != "inst":
                return unknown(*objs.opens)
            mro = {(c.module, c.name) for c in self.ev.mro(value.value) if c.kind == "cls"}
            outs.add(bool(mro & targets))
        return known(*outs, opens=objs.opens)

    # ----- enums -------------------------------------------------------------------------------

    def _is_enum(self, cls: Value) -> bool:
        return any(c.kind == "ext" and c.name in ENUM_BASES for c in self.ev.mro(cls))

    def _enum_member(self, cls: Value, attr: str) -> Member | None:
        for klass in self.ev.mro(cls):
            summary = self.ev.index.klass(klass.module, klass.name) if klass.kind == "cls" else None
            if summary is None or attr not in summary.attrs:
                continue
            exprs = summary.attrs[attr]
            value = exprs[0][1] if exprs and exprs[0][0] == "k" and len(exprs[0]) > 1 else attr
            return Member(cls.module, cls.name, attr, value)
        return None

    def _enum_by_value(self, cls: Value, value: Any) -> Member | None:
        if isinstance(value, Member):
            return value
        summary = self.ev.index.klass(cls.module, cls.name)
        if summary is None:
            return None
        for attr, exprs in summary.attrs.items():
            if exprs and exprs[0][0] == "k" and len(exprs[0]) > 1 and exprs[0][1] == value:
                return Member(cls.module, cls.name, attr, value)
        if value is None:  # SGLang's _missing_ maps None to NONE; others raise
            return self._enum_member(cls, "NONE")
        return None

    def method_of_member(self, member: Member, name: str, depth: int) -> Known:
        qualname = f"{member.cls}.{name}"
        if self.ev.index.function(member.module, qualname) is None:
            return unknown()
        return self.call_function(Value("func", member.module, qualname), [], {}, depth, receiver=member)


def _is_dataclass(summary) -> bool:
    return any((dotted(d[1] if d and d[0] == "c" else d) or "").rpartition(".")[2] == "dataclass"
               for d in summary.decorators)


def _exists_probe(expr: Expr) -> bool:
    """`<path>.exists()` / `.is_file()` / `os.path.exists(...)`: a file-system probe."""
    return bool(expr) and expr[0] == "c" and bool(expr[1]) and expr[1][0] == "a" and \
        expr[1][2] in ("exists", "is_file", "isfile", "is_dir", "isdir")


def _failed_command(test: Expr, taken: bool) -> bool:
    """The branch where `proc.returncode == 0` is false (or `!= 0` true): the command failed, an error path."""
    if not test or test[0] != "cmp" or len(test[2]) != 1:
        return False
    left, (op, right) = test[1], test[2][0]
    if not (left and left[0] == "a" and left[2] == "returncode" and right == ("k", 0)):
        return False
    return (op == "Equal" and not taken) or (op == "NotEqual" and taken)


def _registers_once(test: Expr) -> bool:
    """`if key not in self._registry:` / `... not in REGISTRY`: work done the first time only. A warm-up
    before the compile (SGLang captures its decode CUDA graphs eagerly first) has done it already."""
    if not test or test[0] != "cmp" or len(test[2]) != 1 or test[2][0][0] != "NotIn":
        return False
    container = test[2][0][1]
    return bool(container) and container[0] in ("a", "n")


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


def _compare(op: str, a: Any, b: Any) -> bool | None:
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


def _arith(op: str, a: Any, b: Any) -> Any:
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


_OBJECT_FAMILY = {"server_args": ("flag", "server_args"), "model_config": ("config", "config")}


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


_LITERAL_TYPES = frozenset({"builtins.False", "builtins.True", "builtins.None"})


def _external_guess(value: Value, attr: str) -> bool:
    """The evaluator's stand-in for an attribute it did not find on a class with an external base:
    `torch.nn.Module.<attr>` (classes.py), a name, not a value a branch can test."""
    return value.kind == "ext" and value.note == "method" and value.name.endswith(f".{attr}")


def _key(known_value: Known) -> Any:
    """A memo key for an argument's values: the values themselves with their types (True is not 1);
    hashing, not repr, since a server-args object has hundreds of fields."""
    return frozenset((type(v), v) for v in known_value.values) if known_value.values is not None else "?"


def _as_value(result: Known) -> Value:
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


def _flattened(kind: str, parts: tuple) -> list:
    """`a or b or c` as one list of operands: the parse nests it as `(a or b) or c`, and each level
    would spend one step of MAX_DEPTH (five `or`s left the first operands unevaluated). Same value,
    same order of evaluation."""
    out: list = []
    for part in parts:
        if part and part[0] == kind:
            out.extend(_flattened(kind, part[1]))
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


_ALLOCATIONS: dict = {}  # (id(expr), id(scope)) -> (number, expr, scope): both kept alive, so no id is reused


def allocation_label(value: Value) -> str:
    """An entity's name; an instance also names its allocation (`TopK(..., use_grouped_topk=False)` in
    one layer is not the TopK of another), numbered in the order the walk first meets it."""
    owner = value.self_cls.name if value.self_cls is not None else ""
    where = ""
    if value.expr is not None:
        key = (id(value.expr), id(value.scope))
        entry = _ALLOCATIONS.get(key)
        if entry is None:
            entry = _ALLOCATIONS[key] = (len(_ALLOCATIONS), value.expr, value.scope)
        where = f" #{entry[0]}"
    return f"<{value.kind} {value.module}:{value.name}{' of ' + owner if owner else ''}{where}>"


def _known_label(known_value: Any) -> str:
    if isinstance(known_value, Known):
        return "?" if known_value.values is None else repr(sorted(map(_label, known_value.values)))
    return _label(known_value)


def render_test(test: Expr) -> str:
    """A branch test as readable text for a condition."""
    kind = test[0] if test else "?"
    if kind == "exc":
        return "an exception was raised (except path)"
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


def _method_call(self: PartialEvaluator, expr: Expr, scope: Scope, depth: int) -> Known:
    """Calls, with methods of Enum members evaluated on the member (`backend.is_mori()`)."""
    func_expr = expr[1]
    if func_expr and func_expr[0] == "a":
        base = self.const(func_expr[1], scope, depth)
        if base.values is not None and base.values and all(isinstance(v, Member) for v in base.values):
            return merge([self.method_of_member(v, func_expr[2], depth) for v in base.values])
        if base.values and all(isinstance(v, BoundedTensor) for v in base.values) and \
                func_expr[2] in ("max", "min", "item"):
            make = AtMost if func_expr[2] == "item" else BoundedTensor
            return known(*(make(v.limit) for v in base.values), opens=base.opens)
        if base.values is not None and None in base.values and len(base.values) > 1:
            rest = Known(frozenset(v for v in base.values if v is not None), base.opens)
            if all(isinstance(v, Member) for v in rest.values):
                return merge([self.method_of_member(v, func_expr[2], depth) for v in rest.values])
    return PartialEvaluator._call(self, expr, scope, depth)


_HANDLERS = {
    "k": PartialEvaluator._k,
    "n": PartialEvaluator._name,
    "a": PartialEvaluator._attr,
    "c": _method_call,
    "cmp": PartialEvaluator._cmp,
    "not": PartialEvaluator._not,
    "and": PartialEvaluator._andor,
    "or": PartialEvaluator._andor,
    "if": PartialEvaluator._either,
    "q": PartialEvaluator._seq,
    "s": PartialEvaluator._sub,
    "idx": PartialEvaluator._unpacked,
    "sl": PartialEvaluator._slice,
    "op": PartialEvaluator._op,
}

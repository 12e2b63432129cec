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

from contextlib import contextmanager

from dynacheck.deploy.facts import ALL_FACTS, ARCH_FACT, UNKNOWN as FACT_UNKNOWN, Deployment
from dynacheck.model import Condition
from dynacheck.static.ir import Expr
from dynacheck.static.memo import Memo
from dynacheck.static.value_types import Scope
from dynacheck.static.partial_calls import CallEvaluation
from dynacheck.static.partial_members import MemberEvaluation
from dynacheck.static.partial_names import NameEvaluation
from dynacheck.static.partial_values import (
    ARCHITECTURE, ARCHITECTURE_TESTS, FAMILY_KINDS, MAX_DEPTH, MAX_SET, NO_CUT, NOTHING, PLAIN, AtMost,
    BoundedTensor, Known, Member, Obj, Partial, Ref, arith, compare, exists_probe, failed_command, flattened, known,
    merge, registers_once, render_test, sets_once, unknown,
)


class PartialEvaluator(NameEvaluation, MemberEvaluation, CallEvaluation):
    """Branch tests and the expressions under them, evaluated over one deployment's facts, with
    the memo and the facts read shared by its parts (names, attributes, calls)."""

    # whether a function's returns are read with the pairs that together cover their outer guards
    # (partial_calls._covering): only the start-up proof's own evaluator does (startup_refute.py)
    covering = False

    def __init__(self, evaluator, deployment: Deployment | None) -> None:
        self.ev = evaluator
        self.dep = deployment or Deployment()
        self._memo: dict[tuple, tuple] = Memo()  # key -> (..., the facts read computing it), see _open_frame
        self._active: dict = {}  # key -> its depth on the stack of evaluations in progress
        self._low = NO_CUT  # the shallowest evaluation a recursion cut-off re-entered, in this frame
        self._flow: tuple[int, int] | None = None  # (id of the guard's scope, the guard's line)
        self.reads = 0  # the facts (facts.GPU_FACT...) read by the evaluation in progress, see _open_frame
        # how many answers so far were cut short by where they were asked (a depth limit, or a recursion
        # guard of the value evaluator): an unknown computed with none inside is the question's own answer
        self.cuts = 0
        # (op, constant) tests of a census cell's architecture since its evaluator last dropped what read it
        self.architecture_tests: set[tuple] = set()

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
            elif failed_command(test, taken):
                conditions.append(Condition(f"the command failed: {'' if taken else 'not '}{render_test(test)}",
                                            scope.module.path, line, "except"))
            elif once := self._first_call_test(test, scope):
                if self.dep.cold:  # nothing ran before the compile: the first-call way is the only one
                    if not taken:
                        return False, ()
                    continue
                if taken:
                    conditions.append(Condition(f"first call only: {render_test(test)} ({once} before the "
                                                "compile)", scope.module.path, line, "first_call"))
        return True, tuple(conditions)

    def _first_call_test(self, test: Expr, scope: Scope) -> str:
        """What the first call has not done yet when `test` holds, or "": set a flag of the enclosing
        function's (`if not warned:`), or register a key (`if key not in REGISTRY:`)."""
        if sets_once(test, scope.function):
            return "no call set it"
        if registers_once(test, scope.function.assigns if scope.function is not None else ()) \
                and not self._constant_container(test[2][0][1], scope):
            return "nothing registered it"
        return ""

    def _guard_truth(self, test: Expr, scope: Scope, line: int) -> tuple[bool | None, tuple]:
        """`truth` of a guard at its line, memoized per (test, scope): a function's guards are asked
        once per call site that reaches it. The scope is kept in the entry so its id is not reused."""
        key = ("guard", id(test), id(scope), line)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is scope and hit[1] is test:
            self.reads |= hit[3]
            return hit[2]
        depth, opened = len(self._active), self._open_frame()
        with self.at_line(scope, line):
            answer = self.truth(test, scope)
        got = self._close_frame(opened, depth)
        if got is not None:
            self._memo[key] = (scope, test, answer, got)
        return answer

    @contextmanager
    def at_line(self, scope: Scope, line: int):
        """Locals of `scope` read as assigned above `line` while inside (a guard's or a call's line)."""
        saved, self._flow = self._flow, (id(scope), line)
        try:
            yield
        finally:
            self._flow = saved

    # A result is memoized unless a recursion cut-off inside it re-entered an evaluation that was
    # already in progress when it started (its value then depends on how it was reached). A cut-off
    # back into the evaluation itself is its own fixpoint: `x = f(x)` gives the other assignments.

    #
    # A frame also collects the deployment facts read inside it (`reads`, facts.GPU_FACT): a memo
    # entry keeps them, a hit adds them to the evaluation that asked, so an evaluator can be
    # forked for a deployment that differs in those facts only, dropping what read them (fork()).

    def _open_frame(self) -> tuple[int, int]:
        opened = (self._low, self.reads)
        self._low, self.reads = NO_CUT, 0
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

    def _constant_container(self, container: Expr, scope: Scope) -> bool:
        """A container known as an immutable constant (`_SUPPORTED_HEADS = (8, 12, 16)`): a membership
        test of it is a check, not a registry's first-call test."""
        result = self.const(container, scope, 0)
        return bool(result.values) and all(isinstance(v, (tuple, frozenset, str)) and v for v in result.values)

    def _builds_once(self, test: Expr, scope: Scope) -> bool:
        """`if not path.exists():` (directly or through a property that returns it): a file made the
        first time; an eager warm-up before the compile has made it already."""
        if not test or test[0] != "not":
            return False
        inner = test[1]
        if exists_probe(inner):
            return True
        if inner and inner[0] == "a":
            base = self.const(inner[1], scope, 0)
            for value in base.values or ():
                if isinstance(value, Ref) and value.value.kind == "inst":
                    for member in self.ev.member(value.value, inner[2], 1):
                        fn = self.ev.index.function(member.module, member.name) if member.kind == "func" else None
                        if fn is not None and fn.returns and all(exists_probe(r) for r in fn.returns):
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
            self.cuts += bool(expr)
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

    def _imported(self, expr: Expr, scope: Scope, depth: int) -> Known:
        """`("imp", module)`: whether an import in a try body succeeded. A package the framework
        facts list as absent from a stock install (`absent_packages`) never imports, so what follows
        it in the try body never runs; any other import may have succeeded."""
        top = expr[1].partition(".")[0] if len(expr) > 1 else ""
        return known(False) if top and top in self.dep.framework.get("absent_packages", ()) else unknown()

    def _k(self, expr: Expr, scope: Scope, depth: int) -> Known:
        return known(expr[1]) if len(expr) > 1 else unknown()

    def _fstring(self, expr: Expr, scope: Scope, depth: int) -> Known:
        """`f"{major}{minor}"`: the text of each joining of its parts' known values."""
        texts, opens = {""}, []
        for part in expr[1]:
            got = self.const(part, scope, depth)
            opens.extend(got.opens)
            if got.values is None or not all(isinstance(v, PLAIN) for v in got.values):
                return unknown(*opens)
            texts = {text + format(v) for text in texts for v in got.values}
            if len(texts) > MAX_SET:
                return unknown(*opens)
        return known(*texts, opens=tuple(opens))

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
        for part in flattened(expr[0], expr[1]):
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
            if op in ("In", "NotIn") and self._is_environ(right_expr, scope):
                right = self._environ(left, scope)  # {True} when set, {False} when unset, else unknown
                if right.values is None:
                    return unknown(*opens, *right.opens)
                result = known(*(v == (op == "In") for v in right.values))
                left = right
                if not next(iter(result.values)):
                    return known(False, opens=tuple(opens))
                continue
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
                        out = (self._architecture_test(op, a, b) if a is ARCHITECTURE or b is ARCHITECTURE
                               else compare(op, a, b))
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

    def _architecture_test(self, op: str, a, b) -> bool | None:
        """`architectures[0] in [...]` / `== "X"`: the one place the cell's architecture is read as a name
        (everything else sees a marker, the same for every class). The test is recorded: a class that
        answers every recorded test alike gets the same walk (ScanSession.engine, census/run.py)."""
        other = b if a is ARCHITECTURE else a
        if not self.dep.architecture or op not in ARCHITECTURE_TESTS or other is ARCHITECTURE \
                or (a is not ARCHITECTURE and op in ("In", "NotIn")):
            return None
        if not (isinstance(other, str) or (isinstance(other, (tuple, frozenset))
                                            and all(isinstance(x, str) for x in other))):
            return None
        self.reads |= ARCH_FACT
        self.architecture_tests.add((op, other))
        return compare(op, self.dep.architecture, other)

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
                out = arith(expr[3], a, b)
                if out is FACT_UNKNOWN:
                    return unknown(*opens)
                outs.add(out)
        return known(*outs, opens=opens)

    def _is_environ(self, expr: Expr, scope: Scope) -> bool:
        return bool(expr) and expr[0] == "a" and expr[2] == "environ" and \
            self._external_name(expr, scope) == "os.environ"

    def _environ(self, key: Known, scope: Scope, value: bool = False) -> Known:
        """Whether the variable named by `key` is set (its value with `value`) on this deployment:
        `"X" in os.environ`, `os.environ["X"]`. An unset one is known unset only when the deployment
        gives its whole environment (unset stays unknown otherwise: an env condition)."""
        if key.values is None or len(key.values) != 1:
            return unknown(*key.opens)
        var = str(next(iter(key.values)))
        if var in self.dep.env:
            return known(self.dep.env[var] if value else True)
        if self.dep.env_complete:
            return unknown() if value else known(False)  # os.environ[...] of an unset one raises
        return unknown(Condition(f"env {var}", scope.module.path, 0, "env"))

    def _sub(self, expr: Expr, scope: Scope, depth: int) -> Known:
        if len(expr) < 3:
            return unknown()
        if self._is_environ(expr[1], scope):
            return self._environ(self.const(expr[2], scope, depth), scope, value=True)
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
    "fs": PartialEvaluator._fstring,
    "s": PartialEvaluator._sub,
    "idx": PartialEvaluator._unpacked,
    "sl": PartialEvaluator._slice,
    "op": PartialEvaluator._op,
    "imp": PartialEvaluator._imported,
}

"""What Dynamo does at a function boundary: decorators read from their bodies, and compile-time branches.

Names prove nothing (FlashInfer 0.6.x's `register_custom_op` returns `lambda x: x`), so a user
decorator is judged by what applying it returns; only torch's and the stdlib's own decorators are
known by name, with the semantics measured in FIELD_NOTES.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dynacheck import model as m
from dynacheck.static.ir import Expr, dotted
from dynacheck.static.memo import drop_reading
from dynacheck.static.values import Evaluator, Scope, Value

TRANSPARENT = "transparent"  # Dynamo inlines the function as if undecorated
WRAPPER = "wrapper"  # the call goes through a wrapper function that calls the original
DISABLE = "disable"  # torch.compiler.disable: a graph break at the call
OPAQUE = "opaque"  # a torch op (custom_op, leaf_function): Dynamo does not look inside
OPAQUE_NO_FAKE = "custom_op_without_fake"  # a custom op with no fake implementation: hard error
ALLOW_IN_GRAPH = "allow_in_graph"
NONSTRICT = "nonstrict_trace"
CONSTANT = "assume_constant_result"

_KNOWN: dict[str, tuple[str, str]] = {}


def _known(kind: str, note: str, *names: str) -> None:
    for name in names:
        _KNOWN[name] = (kind, note)


_known(TRANSPARENT, "functools.cache: Dynamo traces through the cache wrapper, warm or cold",
       "functools.cache", "functools.lru_cache", "functools.cached_property")
_known(TRANSPARENT, "", "functools.wraps", "builtins.staticmethod", "builtins.classmethod", "builtins.property",
       "abc.abstractmethod", "typing.overload", "typing.final", "torch.no_grad", "torch.inference_mode",
       "torch.enable_grad", "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
       "contextlib.contextmanager", "torch.jit.ignore", "torch.jit.unused", "typing_extensions.override",
       "typing.override", "dataclasses.dataclass")
_known(DISABLE, "torch.compiler.disable: Dynamo does not trace it and breaks the graph at the call (GB0098)",
       "torch.compiler.disable", "torch._dynamo.disable", "torch._disable_dynamo",
       "torch._dynamo.eval_frame.disable", "torch._dynamo.decorators.disable")
_known(OPAQUE, "torch.library.custom_op: an opaque op to Dynamo (its fake implementation gives shapes)",
       "torch.library.custom_op", "torch._library.custom_ops.custom_op", "torch.library.impl",
       "torch._dynamo.decorators.leaf_function", "torch._dynamo.leaf_function", "torch.compiler.leaf_function")
_known(ALLOW_IN_GRAPH, "allow_in_graph: no break; the body runs at trace time (fake tensors) and at run time",
       "torch._dynamo.allow_in_graph", "torch.compiler.allow_in_graph", "torch._dynamo.decorators.allow_in_graph")
_known(NONSTRICT, "nonstrict_trace: no break; the body runs at trace time and at run time",
       "torch._dynamo.nonstrict_trace", "torch.compiler.nonstrict_trace", "torch._dynamo.decorators.nonstrict_trace")
_known(CONSTANT, "assume_constant_result: runs once at trace time; its value is frozen into the graph",
       "torch._dynamo.assume_constant_result", "torch.compiler.assume_constant_result",
       "torch._dynamo.decorators.assume_constant_result")

IS_COMPILING = frozenset({
    "torch.compiler.is_compiling", "torch.compiler.is_dynamo_compiling", "torch._dynamo.is_compiling",
    "torch._dynamo.external_utils.is_compiling", "torch._utils.is_compiling",
    "torch.compiler.is_exporting",
})

TORCH_LIBRARY_PREFIXES = ("torch.library.", "torch._library.", "torch.ops.")


@dataclass
class Effect:
    """What calling a decorated function means to Dynamo."""

    kind: str = TRANSPARENT
    notes: list[str] = field(default_factory=list)
    wrappers: list[tuple[Value, tuple]] = field(default_factory=list)  # (wrapper func, bound params)
    calls_original: bool = True  # the original body runs under Dynamo (transparent or via a wrapper)


class Boundaries:
    def __init__(self, evaluator: Evaluator) -> None:
        self.ev = evaluator
        # (module, name) -> (answer, the deployment facts its computation read)
        self._effects: dict[tuple, tuple[Effect, int]] = {}
        self._probes: dict[tuple, tuple[bool, int]] = {}
        self._library: dict[tuple, tuple[bool, int]] = {}

    def fork(self, evaluator: Evaluator, dirty: int) -> "Boundaries":
        """These boundaries for a forked evaluator (Evaluator.fork): what read no fact in `dirty`."""
        child = Boundaries(evaluator)
        for table in ("_effects", "_probes", "_library"):
            setattr(child, table, {k: v for k, v in getattr(self, table).items() if not v[-1] & dirty})
        return child

    def forget(self, facts: int) -> None:
        """Drop, in place, what read any of `facts` (Evaluator.forget)."""
        for table in (self._effects, self._probes, self._library):
            drop_reading(table, facts)

    # ----- decorators --------------------------------------------------------------------------

    def _memoized(self, table: dict, func: Value, guard, compute):
        """`compute()` once per function for these boundaries' life, kept with the deployment facts it
        read (values.Evaluator.reads_begin), which a hit adds to the computation that asked; `guard`
        answers a recursive ask while it runs."""
        key = (func.module, func.name)
        hit = table.get(key)
        if hit is not None:
            self.ev.partial.reads |= hit[1]
            return hit[0]
        table[key] = (guard, 0)
        saved = self.ev.reads_begin()
        value = compute()
        table[key] = (value, self.ev.reads_end(saved))
        return value

    def effect(self, func: Value) -> Effect:
        return self._memoized(self._effects, func, Effect(), lambda: self._compute(func))

    def _compute(self, func: Value) -> Effect:
        scope = self.ev.function_scope(func)
        effect = Effect()
        if scope is None or scope.function is None or not scope.function.decorators:
            return effect
        decl_scope = scope.parent or self.ev.module_scope(func.module)
        if scope.function.cls:
            decl_scope = self.ev.module_scope(func.module)
        if decl_scope is None:
            return effect
        for decorator in scope.function.decorators:  # outermost first
            kind, note, wrappers = self._one(decorator, decl_scope, func)
            if note:
                effect.notes.append(note)
            if kind in (DISABLE, OPAQUE, OPAQUE_NO_FAKE, ALLOW_IN_GRAPH, NONSTRICT, CONSTANT):
                effect.kind = kind
                effect.calls_original = False
                return effect
            if kind == WRAPPER:
                effect.kind = WRAPPER
                effect.wrappers.extend(wrappers)
        return effect

    def _one(self, decorator: Expr, scope: Scope, target: Value) -> tuple[str, str, list]:
        is_factory_call = decorator and decorator[0] == "c"
        head = decorator[1] if is_factory_call else decorator
        for value in self.ev.eval(head, scope):
            if value.kind == "func" and self._is_overload_stub(value):
                continue  # typing.overload stubs say nothing about what the decorator does
            if value.kind == "ext":
                kind, note = _KNOWN.get(value.name, (TRANSPARENT, ""))
                if kind == OPAQUE and value.name.endswith("custom_op") and not self._has_fake(target):
                    return OPAQUE_NO_FAKE, "torch.library.custom_op with no register_fake in its module", []
                return kind, note, []
            if value.kind == "func":
                return self._user_decorator(value, is_factory_call, target)
            if value.kind == "lam" and value.expr == ("n", "x"):
                return TRANSPARENT, "", []
        return TRANSPARENT, "", []

    def _is_overload_stub(self, func: Value) -> bool:
        summary = self.ev.index.function(func.module, func.name)
        return summary is not None and any((dotted(d) or "").endswith("overload") for d in summary.decorators)

    def _has_fake(self, target: Value) -> bool:
        summary = self.ev.index.module(target.module)
        if summary is None:
            return True
        return summary.string_fakes or target.name.rpartition(".")[2] in summary.fakes

    def _user_decorator(self, deco: Value, is_factory_call: bool, target: Value) -> tuple[str, str, list]:
        """Apply a decorator defined in the scanned code to `target` by reading what it returns."""
        label = deco.name.rpartition(".")[2]
        if self.reaches_torch_library(deco):
            return OPAQUE, f"@{label} registers a torch op (its body reaches torch.library): opaque to Dynamo", []
        appliers = self.ev.returns(deco, 1) if is_factory_call else [deco]
        identity = False
        wrappers: list[tuple[Value, tuple]] = []
        for applier in appliers:
            if applier.kind == "lam":
                if applier.expr and applier.expr[0] == "n":
                    identity = True
                continue
            if applier.kind != "func":
                continue
            fn_scope = self.ev.function_scope(applier)
            if fn_scope is None or fn_scope.function is None or not fn_scope.function.params:
                continue
            param = fn_scope.function.params[0]
            bound = ((param, (target,)),)
            for ret in self._returns_with(applier, bound):
                if ret.kind == "func" and (ret.module, ret.name) == (target.module, target.name):
                    identity = True
                elif ret.kind == "func":
                    wrappers.append((replace(ret, via=m.VIA_DECORATOR), bound))
        if wrappers:
            if identity:  # the wrapper is only one branch of the decorator: a weaker belief
                note = (f"@{label} read: returns the function unchanged on one branch and a wrapper on "
                        "another; the wrapper's calls happen only on that branch")
                wrappers = [(replace(w, confidence="low", note=note), b) for w, b in wrappers]
                return WRAPPER, f"@{label} read: returns the function unchanged or a wrapper; both followed", \
                    wrappers
            return WRAPPER, f"@{label} read: returns a wrapper that calls the function", wrappers
        if identity:
            return TRANSPARENT, f"@{label} read: returns the function unchanged (no torch op is registered)", []
        return TRANSPARENT, "", []

    def _returns_with(self, func: Value, bound: tuple) -> list[Value]:
        scope = self.ev.function_scope(func, bound)
        if scope is None or scope.function is None:
            return []
        out: list[Value] = []
        fn = scope.function
        for i, expr in enumerate(fn.returns):
            if i < len(fn.return_guards) and fn.return_guards[i] and self.ev.partial.dep.given:
                reachable, _ = self.ev.partial.guards(fn.return_guards[i], scope)
                if not reachable:  # `if LOG_LEVEL == 0: return func` decided by the deployment
                    continue
            out.extend(self.ev.eval(expr, scope))
            if expr[0] == "c":  # return decorator(func): what the inner decorator returns for the target
                for inner in self.ev.eval(expr[1], scope):
                    if inner.kind == "func":
                        inner_scope = self.ev.function_scope(inner)
                        if inner_scope and inner_scope.function and inner_scope.function.params:
                            rebound = ((inner_scope.function.params[0], bound[0][1]),)
                            out.extend(self._returns_plain(inner, rebound))
        return out

    def _returns_plain(self, func: Value, bound: tuple) -> list[Value]:
        scope = self.ev.function_scope(func, bound)
        if scope is None or scope.function is None:
            return []
        return [v for expr in scope.function.returns for v in self.ev.eval(expr, scope)]

    def reaches_torch_library(self, func: Value, depth: int = 0) -> bool:
        return self._memoized(self._library, func, False, lambda: self._reaches_torch_library(func, depth))

    def _reaches_torch_library(self, func: Value, depth: int) -> bool:
        key = (func.module, func.name)
        found = False
        summary = self.ev.index.module(func.module)
        fn = summary.functions.get(func.name) if summary else None
        if fn is not None and depth <= 3:
            names = [fn.qualname, *fn.nested]
            for qualname in names:
                inner = summary.functions.get(qualname)
                if inner is None:
                    continue
                scope = self.ev.function_scope(Value("func", func.module, qualname))
                for call in inner.calls:
                    for value in self.ev.eval(call.func, scope) if scope else []:
                        if value.kind == "ext" and value.name.startswith(TORCH_LIBRARY_PREFIXES):
                            found = True
                        elif value.kind == "func" and (value.module, value.name) != key and depth < 3:
                            found = found or self.reaches_torch_library(value, depth + 1)
                        elif value.kind == "cls" and depth < 3:  # a wrapper object that registers lazily
                            found = found or self._class_reaches_torch_library(value, depth + 1)
                    if found:
                        break
                if found:
                    break
        return found

    def _class_reaches_torch_library(self, cls: Value, depth: int) -> bool:
        summary = self.ev.index.klass(cls.module, cls.name)
        if summary is None:
            return False
        return any(self.reaches_torch_library(Value("func", cls.module, qualname), depth)
                   for qualname in summary.methods.values())

    # ----- compile-time branches ---------------------------------------------------------------

    def compile_time_value(self, test: Expr, scope: Scope) -> bool | None:
        """True/False if the test's value under Dynamo is known (is_compiling() and friends), else None."""
        kind = test[0] if test else "?"
        if kind == "not":
            inner = self.compile_time_value(test[1], scope)
            return None if inner is None else not inner
        if kind in ("and", "or"):
            values = [self.compile_time_value(t, scope) for t in test[1]]
            if kind == "and":
                return False if False in values else (True if all(v is True for v in values) else None)
            return True if True in values else (False if all(v is False for v in values) else None)
        if kind == "c":
            for value in self.ev.eval(test[1], scope):
                if value.kind == "ext" and value.name in IS_COMPILING:
                    return True
                if value.kind == "func" and self._is_compiling_probe(value):
                    return True
        return None

    def _is_compiling_probe(self, func: Value) -> bool:
        """A helper whose body returns is_compiling() (SGLang's and FlashInfer's own equivalents)."""
        return self._memoized(self._probes, func, False, lambda: self._returns_is_compiling(func))

    def _returns_is_compiling(self, func: Value) -> bool:
        scope = self.ev.function_scope(func)
        if scope is None or scope.function is None or not scope.function.returns:
            return False
        return all(self.compile_time_value(r, scope) is True for r in scope.function.returns)

    def pruned_under_compile(self, guards, scope: Scope) -> str:
        """The guard text when Dynamo never takes this branch, else ''."""
        for test, taken, _line in guards:
            value = self.compile_time_value(test, scope)
            if value is not None and value != taken:
                from dynacheck.static.ir import render

                return f"{'' if taken else 'not '}{render(test)}"
        return ""

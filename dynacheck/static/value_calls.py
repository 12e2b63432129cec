"""What a call returns: scanned functions (their returns under their guards, with the arguments
their returns read bound), classes, external factories, and the lambdas factories call.
"""

from __future__ import annotations

from dynacheck import model as m
from dynacheck.static.ir import Expr, names_in
from dynacheck.static.value_types import (
    CONTAINER_FACTORIES, EXTERNAL_FACTORIES, ITERATOR_VIEWS, MAX_VALUES, NAMESPACE_FACTORIES, UNKNOWN, Scope,
    Value, bound_key, dedupe, evolve, passes_ctx, receiver_key, vague, with_conditions,
)


class CallValues:
    """Calls and returns (a part of values.Evaluator)."""

    def _call(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        if expr[1] == ("n", "super") and scope.self_cls is not None and scope.function is not None:
            owner = scope.function.cls
            return [evolve(scope.self_cls, kind="super", via=m.VIA_SUPER, note=f"{scope.module.module}:{owner}")]
        out: list[Value] = []
        for func in self.eval(expr[1], scope, depth + 1):
            out.extend(self.call_result(func, expr, scope, depth + 1))
        if any(a and (a[0] == "l" or _is_closure(a, scope)) for a in (*expr[2], *(v for _, v in expr[3]))):
            products = [p for p in self.factory_products(expr, scope, depth) if p.kind != "unknown"]
            if products and not _holds_any(out, products):
                # make_layers(n, lambda i: Block(i)): a container of what the lambda builds, beside
                # what the factory's returns gave (its pipeline-parallel placeholders)
                return [v for v in out if not vague(v)] + [Value("cont", items=tuple(products), via=m.VIA_FACTORY)]
        return out

    def call_result(self, func: Value, call_expr: Expr, scope: Scope, depth: int) -> list[Value]:
        kind = func.kind
        if kind == "cls":  # the instance remembers where it was made: its constructor's arguments
            return [evolve(func, kind="inst", expr=call_expr, scope=scope)]
        if kind == "func":
            bound = self._bind_for_returns(func, call_expr, scope, depth)
            return self.returns(func, depth, bound) if bound else self.returns(func, depth)
        if kind == "ext":
            name = func.name
            if name in EXTERNAL_FACTORIES:
                return [Value("extinst", name=EXTERNAL_FACTORIES[name])]
            if name in NAMESPACE_FACTORIES:
                items = tuple((k, evolve(v, via=m.VIA_RETURN) if v.kind == "func" else v)
                              for k, e in call_expr[3] for v in self.eval(e, scope, depth + 1)[:4])
                return [Value("ns", items=items, via=m.VIA_RETURN)]
            if name in ITERATOR_VIEWS and call_expr[2]:  # `islice(self.layers, start, end)`: the same items
                return [v if v.kind == "cont" else UNKNOWN for v in self.eval(call_expr[2][0], scope, depth + 1)]
            if name in CONTAINER_FACTORIES:
                return [self._container(call_expr[2], scope, depth)]
            return [Value("extinst", name=f"{name}()")]
        if kind == "extinst":
            return [Value("extinst", name=f"{func.name}()")]
        return [UNKNOWN]

    def returns(self, func: Value, depth: int, bound: tuple = ()) -> list[Value]:
        key = func.key() + (receiver_key(func.self_cls), bound_key(bound))
        cached = self._returns.get(key)
        if cached is not None:
            self.partial.reads |= cached[1]
            return list(cached[0])
        if key in self._active:
            self.partial.cuts += 1
            return [UNKNOWN]
        self._active.add(key)
        saved = self.reads_begin()
        try:
            scope = self.function_scope(func, bound)
            values: list[Value] = []
            if scope is not None and scope.function is not None:
                values = self._guarded_returns(scope, 0)
            result = tuple(evolve(v, via=m.VIA_RETURN) if v.kind == "func" else v for v in dedupe(values))
        finally:
            self._active.discard(key)
        self._returns[key] = (result[:MAX_VALUES], self.reads_end(saved))
        return list(result)

    def _guarded_returns(self, scope: Scope, depth: int) -> list[Value]:
        """Return values in source order, without those under branches the deployment never takes.

        A return whose every guard is decided true ends the list: the returns after it never run.
        The values of a return under an open deployment fact carry that fact as a condition.
        """
        fn = scope.function
        values: list[Value] = []
        guards_list = fn.return_guards if len(fn.return_guards) == len(fn.returns) else [()] * len(fn.returns)
        for expr, guards in zip(fn.returns, guards_list):
            reachable, conditions = self.partial.guards(guards, scope) if guards else (True, ())
            if not reachable:
                continue
            found = self.eval(expr, scope, depth + 1)
            values.extend(with_conditions(v, conditions) for v in found) if conditions else values.extend(found)
            if not conditions and all(self.partial.truth(t, scope)[0] is taken for t, taken, _ in guards):
                break
        return values

    def _bind_for_returns(self, func: Value, call_expr: Expr, scope: Scope, depth: int) -> tuple:
        """Bind the callee's parameters that its returns read (factories: `return Linear(self)`,
        `if isinstance(layer, LinearBase)`) to what this call passes; () when none matter."""
        fn = self.index.function(func.module, func.name)
        if fn is None or not fn.returns or len(call_expr) < 4:
            return ()
        wanted = _names_in_returns(fn)
        params = list(fn.params)
        if func.self_cls is not None and params[:1] in (["self"], ["cls"]) or passes_ctx(func, params):
            params = params[1:]
        bound = []
        for name, arg in zip(params, call_expr[2]):
            if name in wanted:
                bound.append((name, tuple(self.eval(arg, scope, depth + 1)[:8])))
        for name, arg in call_expr[3]:
            if name in wanted and name in fn.params:
                bound.append((name, tuple(self.eval(arg, scope, depth + 1)[:8])))
        return tuple(b for b in bound if b[1] and not all(v.kind == "unknown" for v in b[1]))


def _is_closure(arg: Expr, scope: Scope) -> bool:
    """A name of a function defined in the calling function (a layer factory passed by name)."""
    return arg[0] == "n" and scope.function is not None and \
        any(v[0] == "fn" for v in scope.function.assigns.get(arg[1], ()))


def _holds_any(values: list[Value], products: list[Value]) -> bool:
    """Whether a call's result already holds one of the instances its lambda makes (the factory
    called the lambda and returned what it made, directly or in a container)."""
    wanted = {p.key() for p in products}
    return any(v.key() in wanted or (v.kind == "cont" and any(i.key() in wanted for i in v.items)) for v in values)


_RETURN_NAMES: dict[int, tuple] = {}  # id -> (summary, names): the summary is kept so its id is not reused


def _names_in_returns(fn) -> frozenset:
    """Bare names read by a function's returns and their guards (memoized per summary object)."""
    key = id(fn)
    if key not in _RETURN_NAMES or _RETURN_NAMES[key][0] is not fn:
        names = names_in(list(fn.returns) + [t for guards in fn.return_guards for t, _, _ in guards])
        _RETURN_NAMES[key] = (fn, frozenset(names & set(fn.params)))
    return _RETURN_NAMES[key][1]

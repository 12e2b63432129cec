"""What containers hold: list, tuple and dict literals (dispatch tables), subscripts, slices,
unpacking, and the layers a container-building factory makes (`make_layers`, `ModuleList`).
"""

from __future__ import annotations

from dynacheck import model as m
from dynacheck.static.ir import Expr
from dynacheck.static.value_types import ITERATOR_VIEWS, MAX_VALUES, UNKNOWN, Scope, Value, dedupe, evolve


class ContainerValues:
    """Containers and their items (a part of values.Evaluator)."""

    def _container(self, elements, scope: Scope, depth: int) -> Value:
        items: list[Value] = []
        for element in elements:
            if element and element[0] == "q":
                for inner in element[1]:
                    items.extend(self.eval(inner, scope, depth + 1))
            else:
                items.extend(self.eval(element, scope, depth + 1))
        return Value("cont", items=tuple(dedupe(items))[:MAX_VALUES], via=m.VIA_FACTORY)

    def _subscript(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        base = expr[1]
        if base and base[0] in ("c", "idx") and not self._is_view(base, scope, depth):
            return self.factory_products(base if base[0] == "c" else base[1], scope, depth)
        out: list[Value] = []
        for value in self.eval(base, scope, depth + 1):
            if value.kind == "cont":
                picked = self._keyed(value, expr, scope, depth)
                items = value.items if picked is None else picked
                out.extend(evolve(v, via=value.via if v.via == m.VIA_IMPORT else v.via) for v in items)
            else:
                out.append(UNKNOWN)
        return out

    def _is_view(self, call: Expr, scope: Scope, depth: int) -> bool:
        """A call of `islice`/`reversed`/`iter`: its items are its argument's."""
        return call[0] == "c" and any(f.kind == "ext" and f.name in ITERATOR_VIEWS
                                      for f in self.eval(call[1], scope, depth + 1))

    def _slice(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        """`self.layers[self.start_layer:self.end_layer]`: a slice of a container holds its items."""
        return [v if v.kind == "cont" else UNKNOWN for v in self.eval(expr[1], scope, depth + 1)]

    def _index(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        call, position = expr[1], expr[2]
        if position == 0 and call and call[0] == "c":
            values = self.eval(call, scope, depth + 1)
            useful = [v for v in values if v.kind not in ("unknown", "const")]
            products = self.factory_products(call, scope, depth)
            if products and any(p.kind != "unknown" for p in products):
                return [Value("cont", items=tuple(products), via=m.VIA_FACTORY)]
            return useful or [UNKNOWN]
        return [UNKNOWN]

    def factory_products(self, call: Expr, scope: Scope, depth: int) -> list[Value]:
        """What a container-building call holds: the instances its factory lambdas or classes make."""
        out: list[Value] = []
        arguments = list(call[2]) + [v for _, v in call[3]]
        for arg in arguments:
            if arg and arg[0] == "l":
                for v in self.eval(arg[2], scope, depth + 1):
                    if v.kind == "inst":
                        out.append(evolve(v, via=m.VIA_FACTORY))
            elif arg and arg[0] in ("n", "a"):
                for v in self.eval(arg, scope, depth + 1):
                    if v.kind == "cls":
                        out.append(evolve(v, kind="inst", via=m.VIA_FACTORY))
                    elif v.kind == "func" and v.via == m.VIA_LOCAL:  # `def get_layer(idx, prefix): return Layer(...)`
                        out.extend(evolve(r, via=m.VIA_FACTORY) for r in self._closure_returns(v, scope, depth)
                                   if r.kind == "inst")
            elif arg and arg[0] == "q":
                for inner in arg[1]:
                    out.extend(v for v in self.eval(inner, scope, depth + 1) if v.kind == "inst")
        return out or [UNKNOWN]

    def _closure_returns(self, func: Value, scope: Scope, depth: int) -> list[Value]:
        """What a function defined in `scope` returns, its free names read in `scope` itself (the
        constructor's bound `layer_type`, its receiver), not in an unbound copy of it."""
        fn = scope.module.functions.get(func.name)
        if fn is None:
            return [UNKNOWN]
        inner = Scope(scope.module, fn, scope.self_cls, (), scope)
        return [v for expr in fn.returns for v in self.eval(expr, inner, depth + 1)]

    def _lambda(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return [Value("lam", module=scope.module.module, scope=scope, expr=expr[2])]

    def _seq(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return [self._container(expr[1], scope, depth)]

    def _dict(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        items = [v for e in expr[1] for v in self.eval(e, scope, depth + 1)]
        keyed = len(expr) > 2  # the literal and its scope stay with the value, for a subscript by a known key
        return [Value("cont", items=tuple(dedupe([evolve(v, via=m.VIA_DISPATCH) for v in items]))[:MAX_VALUES],
                      via=m.VIA_DISPATCH, expr=expr if keyed else None, scope=scope if keyed else None)]

    def _keyed(self, table: Value, expr: Expr, scope: Scope, depth: int) -> list[Value] | None:
        """`backend_modules[backend]` where the deployment decides `backend`: the entries of those keys
        (FlashInfer's FP4 module by compute capability). None when the key or a key of the literal is
        not known; [] when no entry matches (a KeyError: nothing is called)."""
        literal = table.expr
        if literal is None or len(expr) < 3 or table.scope is None:
            return None
        index = self.partial.const(expr[2], scope, 0)
        if index.values is None or index.opens:
            return None
        keys = [self.partial.const(k, table.scope, 0) for k in literal[2]]
        if any(k.values is None or len(k.values) != 1 for k in keys):
            return None
        wanted = [value for key, value in zip(keys, literal[1]) if next(iter(key.values)) in index.values]
        return [v for e in wanted for v in self.eval(e, table.scope, depth + 1)]

    def _either(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        if len(expr) > 3:  # `a if test else b`: one side when the deployment decides the test
            decided, _ = self.partial.truth(expr[3], scope)
            if decided is not None:
                return self.eval(expr[1] if decided else expr[2], scope, depth + 1)
        return self.eval(expr[1], scope, depth + 1) + self.eval(expr[2], scope, depth + 1)

    def _iterated(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return self._subscript(("s", expr[1]), scope, depth)

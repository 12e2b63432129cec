"""What an expression may evaluate to, statically: the resolver behind every hop.

Values carry how they were believed (`via`) and how sure we are (`confidence`), so a chain can
say "self method", "attribute type", "class hierarchy fallback" hop by hop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dynacheck import model as m
from dynacheck.static.index import Index
from dynacheck.static.ir import Expr, dotted
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
CONTAINER_FACTORIES = {
    "builtins.list", "builtins.tuple", "builtins.set", "builtins.dict",
    "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential",
    "torch.nn.modules.container.ModuleList",
}
NAMESPACE_FACTORIES = {"types.SimpleNamespace", "argparse.Namespace"}
NN_MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module"}
BUILTINS = frozenset(dir(__import__("builtins")))


@dataclass(frozen=True)
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

    def key(self) -> tuple:
        return (self.kind, self.module, self.name, self.self_cls.name if self.self_cls else "")


UNKNOWN = Value("unknown")
CONST = Value("const")


@dataclass(eq=False)
class Scope:
    """Where names are looked up: a function (with its receiver class and bound params) in a module."""

    module: ModuleSummary
    function: FunctionSummary | None = None
    self_cls: Value | None = None
    bound: tuple[tuple[str, tuple[Value, ...]], ...] = ()
    parent: "Scope | None" = None


def weaker(a: str, b: str) -> str:
    return a if m.confidence_rank(a) < m.confidence_rank(b) else b


class Evaluator:
    def __init__(self, index: Index) -> None:
        self.index = index
        self._returns: dict[tuple, tuple[Value, ...]] = {}
        self._attrs: dict[tuple, tuple[Value, ...]] = {}
        self._mro: dict[tuple[str, str], tuple[Value, ...]] = {}
        self._active: set = set()
        self._names: dict[tuple, tuple[Value, ...]] = {}
        self._globals: dict[tuple, tuple[Value, ...]] = {}

    # ----- scopes ------------------------------------------------------------------------------

    def module_scope(self, module: str) -> Scope | None:
        summary = self.index.module(module)
        return Scope(summary) if summary is not None else None

    def function_scope(self, func: Value, bound: tuple = ()) -> Scope | None:
        summary = self.index.module(func.module)
        if summary is None:
            return None
        fn = summary.functions.get(func.name)
        if fn is None:
            return None
        parent = None
        if fn.parent:
            parent_fn = summary.functions.get(fn.parent)
            if parent_fn is not None:
                parent = Scope(summary, parent_fn, func.self_cls)
        return Scope(summary, fn, func.self_cls, bound, parent)

    # ----- expressions -------------------------------------------------------------------------

    def eval(self, expr: Expr, scope: Scope, depth: int = 0) -> list[Value]:
        if depth > MAX_DEPTH or not expr:
            return [UNKNOWN]
        kind = expr[0]
        handler = _HANDLERS.get(kind)
        values = handler(self, expr, scope, depth) if handler else [UNKNOWN]
        return _dedupe(values)

    def _name(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return self.lookup(expr[1], scope, depth)

    def lookup(self, name: str, scope: Scope, depth: int) -> list[Value]:
        """A name in a function scope (memoized per function, receiver and bound params) or a module."""
        if scope.function is None:
            return self.global_value(scope.module.module, name, depth)
        key = (scope.module.module, scope.function.qualname, scope.self_cls.name if scope.self_cls else "",
               _bound_key(scope.bound), name)
        cached = self._names.get(key)
        if cached is not None:
            return list(cached)
        # Memoized even when a cycle was cut below: a little precision for linear time, and the
        # walk order (hence the answer) is the same on every run.
        values = self._lookup(name, scope, depth)
        self._names[key] = tuple(values)
        return values

    def _lookup(self, name: str, scope: Scope, depth: int) -> list[Value]:
        current: Scope | None = scope
        while current is not None and current.function is not None:
            for bound_name, values in current.bound:
                if bound_name == name:
                    return list(values)
            fn = current.function
            if name == "self" and current.self_cls is not None and fn.params[:1] == ("self",):
                return [replace(current.self_cls, kind="inst", via=m.VIA_SELF)]
            if name in fn.local_imports:
                return self.resolve_dotted(fn.local_imports[name])
            if name in fn.assigns:
                out: list[Value] = []
                for value_expr in fn.assigns[name]:
                    out.extend(self._local_value(value_expr, current, depth))
                if name in fn.annotations:
                    out.extend(self._annotated(fn.annotations[name], current, depth))
                return out
            if name in fn.params:
                if name in fn.annotations:
                    return self._annotated(fn.annotations[name], current, depth)
                return [UNKNOWN]
            current = current.parent
        return self.global_value(scope.module.module, name, depth)

    def _local_value(self, value_expr: Expr, scope: Scope, depth: int) -> list[Value]:
        if value_expr[0] == "fn":
            return [Value("func", scope.module.module, value_expr[1], m.VIA_LOCAL, self_cls=None)]
        if value_expr[0] == "cls":
            return [Value("cls", scope.module.module, value_expr[1], m.VIA_LOCAL)]
        key = (id(scope.function), id(value_expr))
        if key in self._active:
            return [UNKNOWN]
        self._active.add(key)
        try:
            return self.eval(value_expr, scope, depth + 1)
        finally:
            self._active.discard(key)

    def global_value(self, module: str, name: str, depth: int) -> list[Value]:
        key = (module, name)
        cached = self._globals.get(key)
        if cached is not None:
            return list(cached)
        values = self._global_value(module, name, depth)
        self._globals[key] = tuple(values)
        return values

    def _global_value(self, module: str, name: str, depth: int) -> list[Value]:
        bindings = self.index.global_bindings(module, name)
        if not bindings:
            if self.index.has_module(f"{module}.{name}"):
                return [Value("mod", name=f"{module}.{name}")]
            if name in BUILTINS:
                return [Value("ext", name=f"builtins.{name}")]
            return [UNKNOWN]
        out: list[Value] = []
        for binding in bindings:
            if binding.kind == "import":
                out.extend(self.resolve_dotted(binding.value))
            elif binding.kind == "def":
                out.append(Value("func", module, binding.value, m.VIA_IMPORT))
            elif binding.kind == "class":
                out.append(Value("cls", module, binding.value, m.VIA_IMPORT))
            elif binding.kind == "global":
                qualname, expr = binding.value
                scope = self.function_scope(Value("func", module, qualname))
                key = ("global", module, name, binding.line)
                if scope is not None and key not in self._active:
                    self._active.add(key)
                    try:
                        out.extend(self.eval(expr, scope, depth + 1))
                    finally:
                        self._active.discard(key)
            else:
                key = ("global", module, name, binding.line)
                if key in self._active:
                            continue
                self._active.add(key)
                try:
                    scope = self.module_scope(module)
                    if scope is not None:
                        out.extend(self.eval(binding.value, scope, depth + 1))
                finally:
                    self._active.discard(key)
        return out

    def resolve_dotted(self, target: str, depth: int = 0) -> list[Value]:
        """`a.b.c` to values: a module in the trees and attributes within it, else external."""
        split = self.index.split_module(target)
        if split is None:
            return [Value("ext", name=target)]
        module, rest = split
        values = [Value("mod", name=module)]
        for attr in rest:
            values = [v for base in values for v in self.member(base, attr, depth + 1)]
        return values

    def _attr(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        out: list[Value] = []
        for base in self.eval(expr[1], scope, depth + 1):
            out.extend(self.member(base, expr[2], depth + 1, via_self=base.via == m.VIA_SELF))
        return out

    def member(self, base: Value, attr: str, depth: int, via_self: bool = False) -> list[Value]:
        kind = base.kind
        if kind == "mod":
            if depth > MAX_DEPTH:
                return [UNKNOWN]
            return [replace(v, confidence=weaker(v.confidence, base.confidence))
                    for v in self.global_value(base.name, attr, depth + 1)]
        if kind in ("cls", "inst"):
            return self._class_member(base, attr, depth, via_self)
        if kind == "super":
            return self._super_member(base, attr, depth)
        if kind == "ext":
            return [Value("ext", name=f"{base.name}.{attr}", confidence=base.confidence)]
        if kind == "extinst":
            return [Value("ext", name=f"{base.name}.{attr}", confidence=base.confidence, note="method")]
        if kind == "ns":
            return [v for name, v in base.items if name == attr] or [UNKNOWN]
        return [Value("unknown", name=attr)]

    def _class_member(self, base: Value, attr: str, depth: int, via_self: bool) -> list[Value]:
        is_instance = base.kind == "inst"
        external: Value | None = None
        for cls in self.mro(base):
            if cls.kind == "ext":
                external = external or cls
                continue
            summary = self.index.klass(cls.module, cls.name)
            if summary is None:
                continue
            if attr in summary.methods:
                via = m.VIA_SELF if via_self else (m.VIA_ATTR_TYPE if base.via not in (m.VIA_HIERARCHY,) else base.via)
                return [Value("func", cls.module, summary.methods[attr], via, base.confidence,
                              self_cls=replace(base, kind="cls") if is_instance else None)]
            if attr in summary.attrs:
                scope = self.module_scope(cls.module)
                if scope is not None:
                    return [v for e in summary.attrs[attr] for v in self.eval(e, scope, depth + 1)]
        if is_instance:
            found = self.instance_attribute(base, attr, depth)
            if any(v.kind != "unknown" for v in found) or external is None:
                return found
        if external is not None:
            return [Value("ext", name=f"{external.name}.{attr}", confidence=base.confidence, note="method")]
        return [Value("unknown", name=attr)]

    def _super_member(self, base: Value, attr: str, depth: int) -> list[Value]:
        """super().attr: look past the class that defines the calling method in self's MRO."""
        owner_module, _, owner = base.note.partition(":")
        inst = replace(base, kind="inst", note="")
        order = self.mro(inst)
        past = False
        for cls in order:
            if past:
                if cls.kind == "ext":
                    return [Value("ext", name=f"{cls.name}.{attr}", note="method")]
                summary = self.index.klass(cls.module, cls.name)
                if summary is not None and attr in summary.methods:
                    return [Value("func", cls.module, summary.methods[attr], m.VIA_SUPER, base.confidence,
                                  self_cls=replace(inst, kind="cls"))]
            elif (cls.module, cls.name) == (owner_module, owner):
                past = True
        return [Value("unknown", name=attr)]

    def instance_attribute(self, inst: Value, attr: str, depth: int) -> list[Value]:
        """`self.attr` from assignments in any method of the class and its bases; hierarchy if unknown."""
        key = (inst.module, inst.name, attr)
        if key in self._attrs:
            return list(self._attrs[key])
        if key in self._active:
            return [UNKNOWN]
        self._active.add(key)
        values: list[Value] = []
        annotations: list[tuple] = []
        try:
            for cls in self.mro(inst):
                summary = self.index.klass(cls.module, cls.name)
                module = self.index.module(cls.module)
                if summary is None or module is None:
                    continue
                for method_qualname in summary.methods.values():
                    fn = module.functions.get(method_qualname)
                    if fn is None:
                        continue
                    scope = Scope(module, fn, replace(inst, kind="cls"))
                    for expr in fn.self_assigns.get(attr, ()):
                        values.extend(self.eval(expr, scope, depth + 1))
                    if f"self.{attr}" in fn.annotations:
                        annotations.append((fn.annotations[f"self.{attr}"], scope))
            known = [v for v in values if v.kind not in ("unknown", "const")]
            if annotations and len(known) < len(values) or (annotations and not values):
                for annotation, scope in annotations:
                    known.extend(self._annotated(annotation, scope, depth, hierarchy=True))
            result = tuple(_dedupe([replace(v, via=m.VIA_ATTR_TYPE) if v.via in (m.VIA_IMPORT, m.VIA_LOCAL)
                                    else v for v in known], limit=MAX_HIERARCHY))
        finally:
            self._active.discard(key)
        self._attrs[key] = result
        return list(result) or [Value("unknown", name=attr)]

    def _annotated(self, annotation: Expr, scope: Scope, depth: int, hierarchy: bool = False) -> list[Value]:
        parts = annotation[1] if annotation and annotation[0] == "q" else (annotation,)
        classes = [v for part in parts for v in self.eval(part, scope, depth + 1) if v.kind == "cls"]
        out: list[Value] = []
        for cls in classes:
            out.append(replace(cls, kind="inst", via=m.VIA_ATTR_TYPE, confidence="medium"))
            if hierarchy:
                for sub in self.subclasses(cls):
                    out.append(replace(sub, kind="inst", via=m.VIA_HIERARCHY, confidence="low",
                                       note=f"subclass of {cls.name}; the attribute's class is not known statically"))
        return out

    def _call(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        if expr[1] == ("n", "super") and scope.self_cls is not None and scope.function is not None:
            owner = scope.function.cls
            return [replace(scope.self_cls, kind="super", via=m.VIA_SUPER, note=f"{scope.module.module}:{owner}")]
        out: list[Value] = []
        for func in self.eval(expr[1], scope, depth + 1):
            out.extend(self.call_result(func, expr, scope, depth + 1))
        if all(_vague(v) for v in out) and any(a and a[0] == "l" for a in (*expr[2], *(v for _, v in expr[3]))):
            products = [p for p in self.factory_products(expr, scope, depth) if p.kind != "unknown"]
            if products:  # make_layers(n, lambda i: Block(i)): a container of what the lambda builds
                return [Value("cont", items=tuple(products), via=m.VIA_FACTORY)]
        return out

    def call_result(self, func: Value, call_expr: Expr, scope: Scope, depth: int) -> list[Value]:
        kind = func.kind
        if kind == "cls":
            return [replace(func, kind="inst")]
        if kind == "func":
            return self.returns(func, depth)
        if kind == "ext":
            name = func.name
            if name in EXTERNAL_FACTORIES:
                return [Value("extinst", name=EXTERNAL_FACTORIES[name])]
            if name in NAMESPACE_FACTORIES:
                items = tuple((k, replace(v, via=m.VIA_RETURN) if v.kind == "func" else v)
                              for k, e in call_expr[3] for v in self.eval(e, scope, depth + 1)[:4])
                return [Value("ns", items=items, via=m.VIA_RETURN)]
            if name in CONTAINER_FACTORIES:
                return [self._container(call_expr[2], scope, depth)]
            return [Value("extinst", name=f"{name}()")]
        if kind == "extinst":
            return [Value("extinst", name=f"{func.name}()")]
        return [UNKNOWN]

    def returns(self, func: Value, depth: int) -> list[Value]:
        key = func.key()
        if key in self._returns:
            return list(self._returns[key])
        if key in self._active or depth > MAX_DEPTH:
            return [UNKNOWN]
        self._active.add(key)
        try:
            scope = self.function_scope(func)
            values: list[Value] = []
            if scope is not None and scope.function is not None:
                for expr in scope.function.returns:
                    values.extend(self.eval(expr, scope, depth + 1))
            result = tuple(replace(v, via=m.VIA_RETURN) if v.kind == "func" else v for v in _dedupe(values))
        finally:
            self._active.discard(key)
        self._returns[key] = result[:MAX_VALUES]
        return list(result)

    def _container(self, elements, scope: Scope, depth: int) -> Value:
        items: list[Value] = []
        for element in elements:
            if element and element[0] == "q":
                for inner in element[1]:
                    items.extend(self.eval(inner, scope, depth + 1))
            else:
                items.extend(self.eval(element, scope, depth + 1))
        return Value("cont", items=tuple(_dedupe(items))[:MAX_VALUES], via=m.VIA_FACTORY)

    def _subscript(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        base = expr[1]
        if base and base[0] in ("c", "idx"):
            return self.factory_products(base if base[0] == "c" else base[1], scope, depth)
        out: list[Value] = []
        for value in self.eval(base, scope, depth + 1):
            if value.kind == "cont":
                out.extend(replace(v, via=value.via if v.via == m.VIA_IMPORT else v.via) for v in value.items)
            elif value.kind == "inst":
                products = self._container_attr_products(value, depth)
                out.extend(products or [UNKNOWN])
            else:
                out.append(UNKNOWN)
        return out

    def _container_attr_products(self, value: Value, depth: int) -> list[Value]:
        return []

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
                        out.append(replace(v, via=m.VIA_FACTORY))
            elif arg and arg[0] in ("n", "a"):
                for v in self.eval(arg, scope, depth + 1):
                    if v.kind == "cls":
                        out.append(replace(v, kind="inst", via=m.VIA_FACTORY))
            elif arg and arg[0] == "q":
                for inner in arg[1]:
                    out.extend(v for v in self.eval(inner, scope, depth + 1) if v.kind == "inst")
        return out or [UNKNOWN]

    def _lambda(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return [Value("lam", module=scope.module.module, scope=scope, expr=expr[2])]

    def _seq(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return [self._container(expr[1], scope, depth)]

    def _dict(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        items = [v for e in expr[1] for v in self.eval(e, scope, depth + 1)]
        return [Value("cont", items=tuple(_dedupe([replace(v, via=m.VIA_DISPATCH) for v in items]))[:MAX_VALUES],
                      via=m.VIA_DISPATCH)]

    def _either(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return self.eval(expr[1], scope, depth + 1) + self.eval(expr[2], scope, depth + 1)

    def _iterated(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return self._subscript(("s", expr[1]), scope, depth)

    # ----- classes -----------------------------------------------------------------------------

    def mro(self, cls: Value) -> tuple[Value, ...]:
        """Classes in method-resolution order (depth-first, left to right, duplicates dropped)."""
        key = (cls.module, cls.name)
        if key in self._mro:
            return self._mro[key]
        self._mro[key] = (replace(cls, kind="cls"),)  # cycle guard
        order: list[Value] = [replace(cls, kind="cls")]
        summary = self.index.klass(cls.module, cls.name)
        if summary is not None:
            scope = self.module_scope(cls.module)
            for base_expr in summary.bases:
                for base in self.eval(base_expr, scope, 1) if scope else []:
                    if base.kind == "cls":
                        order.extend(b for b in self.mro(base) if b.key() not in {o.key() for o in order})
                    elif base.kind == "ext":
                        order.append(base)
        result = tuple(order)
        self._mro[key] = result
        return result

    def is_nn_module(self, cls: Value) -> bool:
        for base in self.mro(cls):
            if base.kind == "ext" and (base.name in NN_MODULE_BASES or base.name.endswith("nn.Module")):
                return True
        return False

    def subclasses(self, cls: Value) -> list[Value]:
        """Every class in the trees that inherits from `cls` (parsing only files that name a base)."""
        found: list[Value] = []
        seen = {(cls.module, cls.name)}
        frontier = [cls]
        while frontier and len(found) < 200:
            current = frontier.pop()
            short = current.name.rpartition(".")[2]
            for module in sorted(self.index.modules_naming_base(short)):
                summary = self.index.module(module)
                if summary is None:
                    continue
                scope = Scope(summary)
                for qualname, klass in summary.classes.items():
                    if (module, qualname) in seen:
                        continue
                    for base_expr in klass.bases:
                        if (dotted(base_expr) or "").rpartition(".")[2] != short:
                            continue
                        if any(b.kind == "cls" and (b.module, b.name) == (current.module, current.name)
                               for b in self.eval(base_expr, scope, 1)):
                            sub = Value("cls", module, qualname, m.VIA_HIERARCHY, "low")
                            seen.add((module, qualname))
                            found.append(sub)
                            frontier.append(sub)
                            break
        return found


def _bound_key(bound: tuple) -> tuple:
    return tuple((name, tuple(v.key() for v in values)) for name, values in bound)


def _vague(value: Value) -> bool:
    """Nothing known: an unknown, or a container of unknowns."""
    if value.kind == "unknown":
        return True
    return value.kind == "cont" and all(v.kind == "unknown" for v in value.items)


def _dedupe(values: list[Value], limit: int = MAX_VALUES) -> list[Value]:
    seen: set = set()
    out: list[Value] = []
    for value in values:
        key = value.key() + (value.kind != "cont" or id(value),)
        if key in seen:
            continue
        seen.add(key)
        out.append(value)
    return out[:limit] if len(out) > limit else out


_HANDLERS = {
    "n": Evaluator._name,
    "a": Evaluator._attr,
    "c": Evaluator._call,
    "s": Evaluator._subscript,
    "idx": Evaluator._index,
    "it": Evaluator._iterated,
    "l": Evaluator._lambda,
    "q": Evaluator._seq,
    "d": Evaluator._dict,
    "if": Evaluator._either,
    "k": lambda self, expr, scope, depth: [CONST],
}

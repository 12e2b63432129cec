"""What an expression may evaluate to, statically: the resolver behind every hop.

Names and attributes are evaluated here, calls and returns in `value_calls.py`, containers and
factories in `value_containers.py` (parts of one Evaluator); the class side (MRO, super(),
instance attributes, subclasses) lives in `classes.py`.
"""

from __future__ import annotations


from dynacheck import model as m
from dynacheck.static.classes import ClassModel, is_plain_property
from dynacheck.static.index import Index
from dynacheck.static.ir import Expr, annotation_expr
from dynacheck.static.memo import Memo, drop_reading
from dynacheck.static.value_calls import CallValues
from dynacheck.static.value_containers import ContainerValues
from dynacheck.static.value_types import (  # noqa: F401 - re-exported: the rest of the engine imports them here
    BUILTINS,
    evolve,
    CONST,
    EXTERNAL_INSTANCES,
    MAX_DEPTH,
    PATH_TYPES,
    UNKNOWN,
    Scope,
    Value,
    bound_key,
    receiver_key,
    dedupe,
    vague,
    weaker,
    with_conditions,
)


class Evaluator(CallValues, ContainerValues, ClassModel):
    def __init__(self, index: Index, deployment=None) -> None:
        from dynacheck.static.partial import PartialEvaluator

        self.index = index
        self.partial = PartialEvaluator(self, deployment)
        self.pins = dict(self.partial.dep.type_pins)  # "module:Base" -> "module:Concrete"
        # the class the checkpoint's quantization pins (pin_quantization), pinned or not: asking
        # for it reads the quantization (facts.QUANT_FACT), also where nothing is pinned (bf16)
        self.quant_base = str(self.partial.dep.framework.get("quantization_base", ""))
        # memo tables: key -> (values, the deployment facts their computation read; see fork)
        # (Memo: a dict that knows which entries read a fact, so a fork need not look at the rest)
        self._returns: dict[tuple, tuple[tuple[Value, ...], int]] = Memo()
        self._attrs: dict[tuple, tuple[tuple[Value, ...], int]] = Memo()
        self._mro: dict[tuple[str, str], tuple[tuple[Value, ...], int]] = Memo()
        self._active: set = set()
        self._names: dict[tuple, tuple[tuple[Value, ...], int]] = Memo()
        self._globals: dict[tuple, tuple[tuple[Value, ...], int]] = Memo()
        self._constructors: dict[tuple, tuple[tuple, int]] = Memo()  # classes.constructor_bindings
        self._scopes: dict[tuple, Scope | bool] = {}
        # walk_scope: an allocation's canonical receiver, and the first receiver met per signature
        self._receivers: dict[tuple, tuple] = Memo()
        self._signatures: dict[tuple, Value] = Memo()
        # per call site and scope, what the walk asks every time it reaches them (reach.py): the
        # callees and the constants they are called with; a census walks the same sites per forward
        self.sites: dict[tuple, tuple] = Memo()

    # ----- facts read ---------------------------------------------------------------------------
    # Each memo entry here keeps the deployment facts its computation read (facts.GPU_FACT), last
    # in its tuple, and a hit adds them to the computation that asked: an evaluator forked for
    # another GPU keeps only the entries that read no GPU fact (fork).

    # the evaluator's own memo tables (beside them: the partial evaluator's and the sites)
    _TABLES = ("_names", "_globals", "_returns", "_attrs", "_mro", "_constructors", "_receivers", "_signatures")

    def fork(self, deployment, dirty: int) -> "Evaluator":
        """An evaluator for `deployment` that starts with what this one memoized without reading a
        fact in `dirty`: a census walks every forward on sm90, sm100 and sm120 alike, and most of
        what it works out (names, attributes, returns, guards, expansions) never asks the GPU."""
        child = Evaluator(self.index, deployment)
        child._scopes = dict(self._scopes)  # built from the index alone
        for table in self._TABLES:
            setattr(child, table, getattr(self, table).kept(dirty))
        child.partial._memo = self.partial._memo.kept(dirty)
        child.sites = self.sites.kept(dirty)  # its tuple entries: objects kept there are per deployment
        return child

    def reading_only(self, facts: int) -> dict[str, dict]:
        """Per memo table, the entries that read some of `facts` and nothing else (Memo.reading_only)."""
        tables = {name: getattr(self, name) for name in self._TABLES}
        tables["partial"], tables["sites"] = self.partial._memo, self.sites
        return {name: table.reading_only(facts) for name, table in tables.items()}

    def restore(self, kept: dict[str, dict]) -> None:
        """Put back what `reading_only` kept on an evaluator whose deployment gives the same answers to
        those facts (the same GPU, in one chain); an entry this one has already is left as it is."""
        for name, entries in kept.items():
            table = self.partial._memo if name == "partial" else getattr(self, name)
            table.restore(entries)

    def forget(self, facts: int) -> None:
        """Drop, in place, what read any of `facts` (a census switching the model class between two
        forwards of one deployment: ScanSession.engine). Scopes are built from the index alone: kept."""
        for table in [getattr(self, name) for name in self._TABLES] + [self.partial._memo, self.sites]:
            drop_reading(table, facts)

    def reads_begin(self) -> int:
        saved, self.partial.reads = self.partial.reads, 0
        return saved

    def reads_end(self, saved: int) -> int:
        got = self.partial.reads
        self.partial.reads = got | saved
        return got

    # ----- scopes ------------------------------------------------------------------------------

    def module_scope(self, module: str) -> Scope | None:
        """One scope object per module: what is allocated at module level remembers it (an instance's
        scope is part of its identity in every memo key), so a new object per ask made a new instance."""
        key = ("module", module)
        cached = self._scopes.get(key)
        if cached is None:
            summary = self.index.module(module)
            cached = self._scopes[key] = Scope(summary) if summary is not None else False
        return cached or None

    def function_scope(self, func: Value, bound: tuple = ()) -> Scope | None:
        """The scope of a function with these bound parameters: one object per (function, receiver,
        bindings), so what the partial evaluator memoizes per scope holds for every call that shares it."""
        key = (func.module, func.name, func.self_cls, bound)
        try:
            cached = self._scopes.get(key)
        except TypeError:  # an unhashable bound value: build one for this call
            return self._new_scope(func, bound)
        if cached is None:
            cached = self._scopes[key] = self._new_scope(func, bound) or False
        return cached or None

    def method_scope(self, module, fn, self_cls: Value, bound: tuple = ()) -> Scope:
        """The scope a method of a receiver runs in, one object per (method, receiver, bindings): what
        a constructor allocates there remembers it, and the same instance then has the same identity
        each time it is read, in every evaluator forked from this one (a census's next deployment)."""
        key = ("method", module.module, fn.qualname, self_cls, bound)
        try:
            cached = self._scopes.get(key)
        except TypeError:  # an unhashable bound value
            return Scope(module, fn, self_cls, bound)
        if cached is None:
            cached = self._scopes[key] = Scope(module, fn, self_cls, bound)
        return cached

    def walk_scope(self, func: Value, bound: tuple = ()) -> Scope | None:
        """The scope the walk expands a node in: a receiver built like one met before (the same class,
        and every constructor argument the same, as a known value and as the classes and functions it
        evaluates to, which are all that binds the constructor: `constructor_bindings`) is that
        one, so its methods are expanded once. A census walks 100+ models whose layers are the same
        `RowParallelLinear(..., quant_config=quant_config, prefix=...)` allocated in each model's
        own constructor; what the evaluator can tell of an instance comes from its class and those
        arguments only, so the expansion is the same."""
        receiver = func.self_cls
        if receiver is not None and receiver.expr is not None:
            canonical = self._canonical_receiver(receiver)
            if canonical is not receiver:
                func = evolve(func, self_cls=canonical)
        return self.function_scope(func, bound)

    def _canonical_receiver(self, inst: Value) -> Value:
        # one call may allocate several classes (`layer_class(config, ...)` in a layer factory): the
        # class and how the value was believed are part of the key, as of the signature
        key = (id(inst.expr), id(inst.scope)) + _believed(inst)
        try:
            hit = self._receivers.get(key)
        except TypeError:  # an unhashable part: this receiver stands alone
            return inst
        if hit is not None and hit[0] is inst.expr and hit[1] is inst.scope:
            self.partial.reads |= hit[3]
            return hit[2]
        saved = self.reads_begin()
        signature = self._receiver_signature(inst)
        reads = self.reads_end(saved)
        canonical = inst
        if signature is not None:
            try:
                # the first receiver met with this signature, and the facts its own signature read
                canonical, first_reads = self._signatures.setdefault(signature, (inst, reads))
                reads |= first_reads
            except TypeError:  # an unhashable argument value: this allocation stands alone
                pass
        # expression and scope kept: their ids are not reused; a fork keeps what read no fact it changed
        self._receivers[key] = (inst.expr, inst.scope, canonical, reads)
        return canonical

    def _receiver_signature(self, inst: Value) -> tuple | None:
        """Everything the evaluator can read of an allocation: its class, how the value was believed,
        and each argument of the constructor call, as the partial evaluator sees it and as the classes and
        functions `eval` gives (an unknown named `hidden_size` and one named `size` tell it the same)."""
        allocation = self.partial.allocation(inst)
        if allocation is None:
            return None
        args, kwargs, scope = allocation
        parts = []
        for tag, expr in [*enumerate(args), *sorted(kwargs.items())]:
            parts.append((tag, self.partial.const(expr, scope, 0),
                          tuple(v for v in self.eval(expr, scope) if v.kind in ("cls", "func"))))
        return _believed(inst) + (tuple(parts),)

    def _new_scope(self, func: Value, bound: tuple) -> Scope | None:
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
            self.partial.cuts += bool(expr)  # an answer cut short by where it was asked (PartialEvaluator.cuts)
            return [UNKNOWN]
        kind = expr[0]
        handler = _HANDLERS.get(kind)
        values = handler(self, expr, scope, depth) if handler else [UNKNOWN]
        return dedupe(values)

    def _name(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        return self.lookup(expr[1], scope, depth)

    def lookup(self, name: str, scope: Scope, depth: int) -> list[Value]:
        """A name in a function scope (memoized per function, receiver and bound params) or a module."""
        if scope.function is None:
            return self.global_value(scope.module.module, name, depth)
        key = (_scope_key(scope), name)
        cached = self._names.get(key)
        if cached is not None:
            self.partial.reads |= cached[1]
            return list(cached[0])
        # Memoized even when a cycle was cut below: a little precision for linear time, and the
        # walk order (hence the answer) is the same on every run. The depth limit starts again at a
        # memoized boundary (here, globals, returns): an answer is the same whoever asks, however
        # deep (asked first at the limit, `_TP` was memoized as unknown for every later reader).
        saved = self.reads_begin()
        values = self._lookup(name, scope, 0)
        self._names[key] = (tuple(values), self.reads_end(saved))
        return values

    def _lookup(self, name: str, scope: Scope, depth: int) -> list[Value]:
        current: Scope | None = scope
        while current is not None and current.function is not None:
            for bound_name, values in current.bound:
                if bound_name == name:
                    return list(values)
            fn = current.function
            if name == "self" and current.self_cls is not None and fn.params[:1] == ("self",):
                return [evolve(current.self_cls, kind="inst", via=m.VIA_SELF)]
            if name == "cls" and fn.cls and fn.params[:1] == ("cls",):
                # a classmethod's (or `__new__`'s) first parameter: the class it is called on, else the one
                # defining it (`Tuner.get()` reaches `with cls._class_lock:`)
                owner = current.self_cls or Value("cls", current.module.module, fn.cls)
                return [evolve(owner, kind="cls", via=m.VIA_SELF)]
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
                if name in fn.param_types:
                    if self.pins or self.quant_base:  # pinned() records the quantization read
                        pinned = self._pinned_param(fn.param_types[name], current, depth)
                        if pinned != [UNKNOWN]:
                            return pinned
                    return self._external_instance(fn.param_types[name], current) or [UNKNOWN]
                return [UNKNOWN]
            current = current.parent
        module = scope.module.module
        return [evolve(v, via=m.VIA_MODULE) if v.via == m.VIA_IMPORT and v.module == module
                and v.kind in ("func", "cls") else v for v in self.global_value(module, name, depth)]

    def _pinned_param(self, annotation: Expr, scope: Scope, depth: int) -> list[Value]:
        """A parameter annotated with a class the deployment pins (`quant_config: QuantizationConfig`)."""
        parts = annotation[1] if annotation and annotation[0] == "q" else (annotation,)
        found = [p for part in parts for v in self.eval(part, scope, depth + 1) if v.kind == "cls"
                 for p in self.pinned(v)]
        return found or [UNKNOWN]

    def _local_value(self, value_expr: Expr, scope: Scope, depth: int) -> list[Value]:
        if value_expr[0] == "fn":
            return [Value("func", scope.module.module, value_expr[1], m.VIA_LOCAL, self_cls=None)]
        if value_expr[0] == "cls":
            return [Value("cls", scope.module.module, value_expr[1], m.VIA_LOCAL)]
        key = (id(scope.function), id(value_expr))
        if key in self._active:
            self.partial.cuts += 1
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
            self.partial.reads |= cached[1]
            return list(cached[0])
        saved = self.reads_begin()
        values = self._global_value(module, name, 0)
        self._globals[key] = (tuple(values), self.reads_end(saved))
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
        module = self.index.defining_module(module, name)  # `from m import *`: the names live in m
        summary = self.index.module(module)
        for binding in bindings:
            conditions: tuple = ()
            if binding.guards and summary is not None:
                reachable, conditions = self.partial.guards(binding.guards, Scope(summary))
                if not reachable:
                    continue  # a branch the deployment never takes (`if is_sm120_supported():` on sm100)
            start = len(out)
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
                self.partial.cuts += key in self._active
                if scope is not None and key not in self._active:
                    self._active.add(key)
                    try:
                        out.extend(self.eval(expr, scope, depth + 1))
                    finally:
                        self._active.discard(key)
            else:
                key = ("global", module, name, binding.line)
                if key in self._active:
                    self.partial.cuts += 1
                    continue
                self._active.add(key)
                try:
                    scope = self.module_scope(module)
                    if scope is not None:
                        out.extend(self.eval(binding.value, scope, depth + 1))
                finally:
                    self._active.discard(key)
            if conditions:
                out[start:] = [with_conditions(v, conditions) for v in out[start:]]
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
            found = self.member(base, expr[2], depth + 1, via_self=base.via == m.VIA_SELF)
            if base.kind == "inst" and any(v.kind == "func" for v in found):
                found = [r for v in found for r in (self._property_value(v, depth) or [v])]
            out.extend(found)
        return out

    def _property_value(self, func: Value, depth: int) -> list[Value]:
        """What reading a property gives (`self.aot_path` is the Path its getter returns, so
        `self.aot_path.exists()` is `pathlib.Path.exists`); [] when `func` is no plain property. The
        getter's `-> T` types it when its returns say nothing (T an external class with known methods)."""
        fn = self.index.function(func.module, func.name)
        if not is_plain_property(fn):
            return []
        values = self.returns(func, depth)
        if all(vague(v) for v in values) and fn.returns_annotation:
            scope = self.module_scope(func.module)
            typed = self._external_instance(annotation_expr(fn.returns_annotation), scope) if scope else []
            return typed or values
        return values

    def _external_instance(self, annotation: Expr | None, scope: Scope) -> list[Value]:
        """An instance of the external class an annotation names (`workdir: Path`), when that class is
        one whose instances the rules know (pathlib.Path, logging.Logger...): [] otherwise."""
        if not annotation or annotation[0] not in ("n", "a"):
            return []
        return [Value("extinst", name=v.name) for v in self.eval(annotation, scope, 1)
                if v.kind == "ext" and v.name in EXTERNAL_INSTANCES]

    def _binary(self, expr: Expr, scope: Scope, depth: int) -> list[Value]:
        """`base / "name"` on a path is a path (FlashInfer's JIT folders: `FLASHINFER_JIT_DIR / name`)."""
        if len(expr) > 3 and expr[3] == "Divide":
            if any(v.kind == "extinst" and v.name in PATH_TYPES for v in self.eval(expr[1], scope, depth + 1)):
                return [Value("extinst", name="pathlib.Path")]
        return [UNKNOWN]

    def member(self, base: Value, attr: str, depth: int, via_self: bool = False) -> list[Value]:
        kind = base.kind
        if kind == "mod":
            if depth > MAX_DEPTH:
                self.partial.cuts += 1
                return [UNKNOWN]
            return [evolve(v, confidence=weaker(v.confidence, base.confidence))
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


def _scope_key(scope: Scope) -> tuple:
    """A function scope in a memo key: its function, receiver, bindings and enclosing scopes. Kept in the
    scope, whose fields never change (`evolve` drops it from a copy)."""
    state = scope.__dict__
    key = state.get("_key")
    if key is None:
        key = state["_key"] = (scope.module.module, scope.function.qualname, receiver_key(scope.self_cls),
                               bound_key(scope.bound), _enclosing_key(scope.parent))
    return key


def _enclosing_key(parent: Scope | None) -> tuple:
    """What a nested function's free names are read in: the enclosing scopes' receivers and bindings
    (a layer factory evaluated inside its constructor's bound scope is not the same function read alone)."""
    out = []
    while parent is not None and parent.function is not None:
        out.append((receiver_key(parent.self_cls), bound_key(parent.bound)))
        parent = parent.parent
    return tuple(out)


def _believed(value: Value) -> tuple:
    """A value's fields other than where it was allocated: its class and how it was believed."""
    return (value.kind, value.module, value.name, value.via, value.confidence, value.cond, value.note,
            value.items, value.self_cls)


_HANDLERS = {
    "n": Evaluator._name,
    "a": Evaluator._attr,
    "c": Evaluator._call,
    "s": Evaluator._subscript,
    "idx": Evaluator._index,
    "it": Evaluator._iterated,
    "sl": Evaluator._slice,
    "l": Evaluator._lambda,
    "q": Evaluator._seq,
    "d": Evaluator._dict,
    "if": Evaluator._either,
    "k": lambda self, expr, scope, depth: [CONST],
    "fs": lambda self, expr, scope, depth: [CONST],
    "op": Evaluator._binary,
}


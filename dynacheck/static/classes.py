"""The class side of evaluation: members through the MRO, super(), instance attributes, subclasses.

A mixin of the evaluator: `self.eval`, `self.index` and the memo tables live there.
"""

from __future__ import annotations


from dynacheck import model as m
from dynacheck.deploy.facts import QUANT_FACT
from dynacheck.static.cst_nodes import STARRED
from dynacheck.static.ir import Expr, dotted
from dynacheck.static.value_types import (AUTOGRAD_FUNCTION_BASES, MAX_HIERARCHY, NN_MODULE_BASES, NONE_VALUE, UNKNOWN, Scope,
                                          Value, dedupe, evolve, receiver_key)


class ClassModel:
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
                              self_cls=evolve(base, kind="cls") if is_instance else None)]
            if attr in summary.attrs:
                scope = self.module_scope(cls.module)
                if scope is not None:
                    return [v for e in summary.attrs[attr] for v in self.eval(e, scope, depth + 1)]
        if is_instance:
            found = self.instance_attribute(base, attr, depth)
            if any(v.kind != "unknown" for v in found) or external is None:
                return found
        if external is not None:
            if attr == "apply" and not is_instance and external.name in AUTOGRAD_FUNCTION_BASES:
                forward = self._autograd_forward(base)
                if forward is not None:
                    return [forward]
            return [Value("ext", name=f"{external.name}.{attr}", confidence=base.confidence, note="method")]
        return [Value("unknown", name=attr)]

    def _autograd_forward(self, cls: Value) -> Value | None:
        """The `forward` that `cls.apply(...)` runs, for a subclass of torch.autograd.Function: Dynamo traces
        it as part of the frame (measured: a subprocess call in it fails fullgraph with GB0007)."""
        for klass in self.mro(cls):
            summary = self.index.klass(klass.module, klass.name) if klass.kind == "cls" else None
            if summary is not None and "forward" in summary.methods:
                return Value("func", klass.module, summary.methods["forward"], m.VIA_AUTOGRAD_APPLY, cls.confidence,
                             self_cls=evolve(cls, kind="cls"))
        return None

    def _super_member(self, base: Value, attr: str, depth: int) -> list[Value]:
        """super().attr: look past the class that defines the calling method in self's MRO."""
        owner_module, _, owner = base.note.partition(":")
        inst = evolve(base, kind="inst", note="")
        order = self.mro(inst)
        past = False
        for cls in order:
            if past:
                if cls.kind == "ext":
                    return [Value("ext", name=f"{cls.name}.{attr}", note="method")]
                summary = self.index.klass(cls.module, cls.name)
                if summary is not None and attr in summary.methods:
                    return [Value("func", cls.module, summary.methods[attr], m.VIA_SUPER, base.confidence,
                                  self_cls=evolve(inst, kind="cls"))]
            elif (cls.module, cls.name) == (owner_module, owner):
                past = True
        return [Value("unknown", name=attr)]

    def instance_attribute(self, inst: Value, attr: str, depth: int) -> list[Value]:
        """`self.attr` from assignments in any method of the class and its bases; hierarchy if unknown."""
        key = (inst.module, inst.name, attr, receiver_key(inst) if inst.expr is not None else "")
        cached = self._attrs.get(key)
        if cached is not None:
            self.partial.reads |= cached[1]
            return list(cached[0])
        if key in self._active:
            self.partial.cuts += 1
            return [UNKNOWN]
        self._active.add(key)
        saved = self.reads_begin()
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
                    bound = self.constructor_bindings(inst, cls, fn) if fn.name == "__init__" else ()
                    scope = self.method_scope(module, fn, evolve(inst, kind="cls"), bound)
                    for expr in self.partial.self_assignments(inst, fn, module, attr):
                        values.extend(self.eval(expr, scope, depth + 1))
                    if f"self.{attr}" in fn.annotations:
                        annotations.append((fn.annotations[f"self.{attr}"], scope))
            known = [v for v in values if v.kind not in ("unknown", "const")]
            decided = bool(known) and self.partial.dep.given  # the deployment resolved the assignments
            if not decided and (annotations and len(known) < len(values) or (annotations and not values)):
                for annotation, scope in annotations:
                    known.extend(self._annotated(annotation, scope, depth, hierarchy=True))
            result = tuple(dedupe([evolve(v, via=m.VIA_ATTR_TYPE) if v.via in (m.VIA_IMPORT, m.VIA_LOCAL, m.VIA_MODULE)
                                    else v for v in known], limit=MAX_HIERARCHY))
        finally:
            self._active.discard(key)
        self._attrs[key] = (result, self.reads_end(saved))
        return list(result) or [Value("unknown", name=attr)]

    def constructor_bindings(self, inst: Value, owner: Value, init) -> tuple:
        """The class-or-function parameters of `owner.__init__` as the instance was built: what the
        nearest subclass's `super().__init__(..., decoder_layer_type=Qwen3DecoderLayer)` passes, else
        the default (`decoder_layer_type=Qwen2DecoderLayer`). SGLang picks decoder layers this way,
        inside the lambda given to `make_layers`; unbound, the layer class was unknown and the
        layers were never walked. Parameters of other kinds stay unbound (a `quant_config=None`
        default says nothing about the call)."""
        key = (inst.module, inst.name, receiver_key(inst) if inst.expr is not None else "", owner.module, owner.name)
        cached = self._constructors.get(key)
        if cached is not None:
            self.partial.reads |= cached[1]
            return cached[0]
        self._constructors[key] = ((), 0)  # cycle guard
        saved = self.reads_begin()
        bound = self._constructor_bindings(inst, owner, init, 0)  # depth starts again at a memoized boundary
        self._constructors[key] = (bound, self.reads_end(saved))
        return bound

    def _constructor_bindings(self, inst: Value, owner: Value, init, depth: int) -> tuple:
        order = [c for c in self.mro(inst) if c.kind == "cls"]
        if not any((c.module, c.name) == (owner.module, owner.name) for c in order):
            return ()
        sub = self.calling_subclass(inst, owner)
        if sub is not None:
            passed = self._super_init_arguments(inst, sub, self._own_init(sub), init, depth)
            call = next((c for c in self._own_init(sub).calls if _is_super_init(c.func)), None)
            known_call = call is not None and not any(k == STARRED for k, _ in call.kwargs)
            given = set(init.params[1:1 + call.positional]) | set(call.keywords) if call is not None else set()
        else:  # the allocation runs this `__init__` itself: `Qwen2Model(config, decoder_layer_type=JetLayer)`
            passed = self._allocation_arguments(inst, init, depth)
            call = inst.expr
            known_call = bool(call) and call[0] == "c" and len(call) >= 4 and isinstance(inst.scope, Scope) \
                and not any(k == STARRED for k, _ in call[3])
            given = set(init.params[1:1 + len(call[2])]) | {k for k, _ in call[3]} if known_call else set()
        bound = []
        for name in init.params[1:]:
            if name in passed:
                values = passed[name]
            elif name in init.defaults:
                if known_call and name not in given and init.defaults[name] == ("n", "None") \
                        and self._quant_config_param(init, owner, name):
                    bound.append((name, (NONE_VALUE,)))  # not passed: the default None (a layer built unquantized)
                    continue
                scope = self.module_scope(owner.module)
                values = self.eval(init.defaults[name], scope, depth + 1) if scope is not None else []
            else:
                continue
            if name in passed and values and all(v.kind == "known" and v.items == (None,) for v in values) \
                    and self._quant_config_param(init, owner, name):
                bound.append((name, (NONE_VALUE,)))  # `quant_config=quant_config`, itself None above
                continue
            values = [v for v in values if v.kind in ("cls", "func")]
            if values:
                bound.append((name, tuple(values[:8])))
        return tuple(bound)

    def built_unquantized(self, inst: Value) -> bool:
        """Whether the allocation that made `inst` gives its nearest `__init__` None for a quant-config
        parameter (constructor_bindings)."""
        for cls in self.mro(inst):
            init = self._own_init(cls) if cls.kind == "cls" else None
            if init is not None:
                return any(values == (NONE_VALUE,) for _, values in self.constructor_bindings(inst, cls, init))
        return False

    def _quant_config_param(self, init, owner: Value, name: str) -> bool:
        """A parameter annotated with the framework's quantization config base (`quant_config:
        Optional[QuantizationConfig] = None`), which the deployment otherwise pins to its config class: a
        constructor given None for it builds its layers unquantized (GPT-OSS's attention, `gpt_oss.py:455-469`
        in 0.5.10), so None is bound, not the pin."""
        annotation = init.param_types.get(name)
        if not self.quant_base or not annotation:
            return False
        scope = self.module_scope(owner.module)
        parts = annotation[1] if annotation[0] == "q" else (annotation,)
        return scope is not None and any(f"{v.module}:{v.name}" == self.quant_base for part in parts
                                         for v in self.eval(part, scope, 1) if v.kind == "cls")

    def calling_subclass(self, inst: Value, owner: Value) -> Value | None:
        """The nearest class before `owner` in `inst`'s MRO that defines `__init__` (its
        `super().__init__` runs the owner's), or None."""
        order = [c for c in self.mro(inst) if c.kind == "cls"]
        at = next((i for i, c in enumerate(order) if (c.module, c.name) == (owner.module, owner.name)), None)
        if at is None:
            return None
        return next((c for c in reversed(order[:at]) if self._own_init(c) is not None), None)

    def _own_init(self, cls: Value):
        summary = self.index.klass(cls.module, cls.name)
        qualname = summary.methods.get("__init__") if summary is not None else None
        return self.index.function(cls.module, qualname) if qualname else None

    def _super_init_arguments(self, inst: Value, sub: Value, sub_init, init, depth: int) -> dict:
        """Parameter name -> values that `sub.__init__`'s `super().__init__(...)` call passes to `init`."""
        call = next((c for c in sub_init.calls if _is_super_init(c.func)), None)
        module = self.index.module(sub.module)
        if call is None or module is None:
            return {}
        scope = self.method_scope(module, sub_init, evolve(inst, kind="cls"), self.constructor_bindings(inst, sub, sub_init))
        passed = [*zip(init.params[1:], call.args), *((n, a) for n, a in call.kwargs if n in init.params)]
        # only names (a parameter, a global, `module.Class`): an argument read from `self` or a call would
        # evaluate the instance's attributes, whose own bindings are the ones being worked out here
        return {name: self.eval(arg, scope, depth + 1) for name, arg in passed
                if _plain_name(arg, sub_init) and not _binds_nothing(arg, scope)}

    def _allocation_arguments(self, inst: Value, init, depth: int) -> dict:
        """Parameter name -> values the allocation that made `inst` passes to `init` (plain names only, as
        `_super_init_arguments`), read where the allocation was evaluated."""
        call, scope = inst.expr, inst.scope
        if not call or call[0] != "c" or len(call) < 4 or not isinstance(scope, Scope) or scope.function is None:
            return {}
        passed = [*zip(init.params[1:], call[2]), *((n, a) for n, a in call[3] if n in init.params)]
        return {name: self.eval(arg, scope, depth + 1) for name, arg in passed
                if arg and arg[0] != "*" and _plain_name(arg, scope.function) and not _binds_nothing(arg, scope)}

    def property_getter(self, cls: Value, attr: str) -> Value | None:
        """The getter a read of `attr` on an instance of `cls` runs, when `attr` is a plain `property`
        of a scanned class in its MRO (Dynamo traces the getter at each read); None otherwise. A
        `cached_property` runs once per instance, before the compile when anything read it eagerly."""
        for klass in self.mro(cls):
            if klass.kind == "ext":
                return None
            summary = self.index.klass(klass.module, klass.name)
            if summary is None:
                continue
            if attr in summary.methods:
                qualname = summary.methods[attr]
                if not is_plain_property(self.index.function(klass.module, qualname)):
                    return None
                return Value("func", klass.module, qualname, m.VIA_PROPERTY, self_cls=evolve(cls, kind="cls"))
            if attr in summary.attrs:
                return None
        return None

    def _annotated(self, annotation: Expr, scope: Scope, depth: int, hierarchy: bool = False) -> list[Value]:
        parts = annotation[1] if annotation and annotation[0] == "q" else (annotation,)
        classes = [v for part in parts for v in self.eval(part, scope, depth + 1) if v.kind == "cls"]
        out: list[Value] = []
        pinned = [p for c in classes for p in self.pinned(c)]
        if pinned:  # the deployment decides the concrete class (the checkpoint's quantization config)
            return pinned
        for cls in classes:
            out.append(evolve(cls, kind="inst", via=m.VIA_ATTR_TYPE, confidence="medium"))
            if hierarchy:
                for sub in self.subclasses(cls):
                    out.append(evolve(sub, kind="inst", via=m.VIA_HIERARCHY, confidence="low",
                                       note=f"subclass of {cls.name}; the attribute's class is not known statically"))
        return out

    def pinned(self, cls: Value) -> list[Value]:
        """The deployment's concrete class for an annotated base class, as an instance; [] if none."""
        key = f"{cls.module}:{cls.name}"
        if key == self.quant_base:
            self.partial.reads |= QUANT_FACT
        target = self.pins.get(key)
        if not target:
            return []
        module, _, qualname = target.partition(":")
        if self.index.klass(module, qualname) is None:
            return []
        return [Value("inst", module, qualname, m.VIA_ATTR_TYPE, "high", note="the deployment's class")]

    # ----- classes -----------------------------------------------------------------------------

    def mro(self, cls: Value) -> tuple[Value, ...]:
        """Classes in method-resolution order (depth-first, left to right, duplicates dropped)."""
        key = (cls.module, cls.name)
        cached = self._mro.get(key)
        if cached is not None:
            self.partial.reads |= cached[1]
            return cached[0]
        self._mro[key] = ((evolve(cls, kind="cls"),), 0)  # cycle guard
        saved = self.reads_begin()
        order: list[Value] = [evolve(cls, kind="cls")]
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
        self._mro[key] = (result, self.reads_end(saved))
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


def is_plain_property(fn) -> bool:
    """A function decorated with `@property` (not `cached_property`, which runs once per instance)."""
    return fn is not None and any((dotted(d) or "").rpartition(".")[2] == "property" for d in fn.decorators)


def _is_super_init(func) -> bool:
    """`super().__init__` (the call expression's function part)."""
    return bool(func) and func[0] == "a" and func[2] == "__init__" and bool(func[1]) and func[1][0] == "c" \
        and func[1][1] == ("n", "super")


def _binds_nothing(arg, scope: Scope) -> bool:
    """Whether `arg` is a bare name that `scope` reads as its function's own unbound parameter. Such a
    name evaluates to instances only (its annotated class, or the class the deployment pins, or an
    external instance: `Evaluator._lookup`), never to the class or function a constructor binding
    keeps, so it is not evaluated there: evaluating `quant_config` reads the quantization (its pinned
    class), and every instance built below a model then read it too, so a census's fork to another
    checkpoint format dropped what did not depend on it (about 80 % of what it dropped, 0.5.9)."""
    fn = scope.function
    if not arg or arg[0] != "n" or fn is None:
        return False
    name = arg[1]
    return name in fn.params and name != "self" and name not in fn.local_imports and name not in fn.assigns \
        and all(bound != name for bound, _ in scope.bound)


def _plain_name(expr, fn) -> bool:
    """A name, or a dotted name (`layers.Qwen3Layer`), whose head is neither `self` nor one of `fn`'s locals."""
    name = dotted(expr)
    head = name.partition(".")[0] if name else ""
    return bool(head) and head != "self" and head not in fn.assigns

"""The partial evaluator's names: locals (flow-sensitively), parameters, the deployment objects
annotations name, module globals and imports, each down to the facts a deployment fixes.
"""

from __future__ import annotations

from typing import Iterable

from dynacheck.deploy.facts import QUANT_ARGS, UNKNOWN as FACT_UNKNOWN
from dynacheck.model import Condition
from dynacheck.static.ir import Expr, dotted
from dynacheck.static.value_types import Scope, Value, evolve
from dynacheck.static.partial_values import (
    ARCHITECTURE_ONLY, BoundedTensor, freeze, Known, known, merge, NOTHING, Obj, Ref, unknown,
)


class NameEvaluation:
    """Names, parameters, globals and imports (a part of PartialEvaluator)."""

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
                    reaching, entry = self._reaching(fn, name, current)
                    parts = [self.const(e, current, depth) if e[0] not in ("fn", "cls") else unknown()
                             for e in reaching]
                    if entry:  # a parameter no assignment surely replaced: the value it came in with
                        parts.append(self._of_values(bound) if bound is not None
                                     else self._param(name, fn, current, depth))
                    result = merge(parts)
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

    def _reaching(self, fn, name: str, scope: Scope) -> tuple[list, bool]:
        """The assignments of a local a guard can see, and whether a parameter's own value still can.
        In the guard's own function, those written above the guard (`x = env or None; if x is not
        None: return x` then `x = probe()` below), from the last one that surely runs when the first
        does (outside loops, its own guards decided true here):
        `skip = False; if batch.is_extend(): skip = n <= k` leaves only `n <= k`. Elsewhere all of
        them. Line 0 (a loop or `with` target) is kept: its place is not recorded.

        A parameter comes in with a value before any assignment runs: it reaches a guard until an
        assignment above it surely runs (`if backend in ("120", "121"): backend = "120f"` leaves
        both the caller's value and "120f" at the line below). Read at no known line (a return), it
        reaches unless an assignment runs whatever the deployment (no guard, no loop)."""
        values = fn.assigns[name]
        param = name in fn.params
        lines = fn.assign_lines.get(name, ())
        guards = fn.assign_guards.get(name, ())
        if self._flow is None or self._flow[0] != id(scope) or len(lines) != len(values):
            if param and len(guards) == len(values) == len(lines):  # read anywhere: the return, most often
                param = not any(line and not guards[i][0] and not guards[i][1] for i, line in enumerate(lines))
            return values, param
        at = self._flow[1]
        before = [i for i, line in enumerate(lines) if line < at]
        if not before:
            if param and len(guards) == len(values):  # only an assignment in a loop can come round to it
                return [values[i] for i in range(len(values)) if guards[i][1]], True
            return values, param
        if len(guards) == len(values):
            if param:
                before = [i for i in before if not self._never(guards[i][0], scope)]
                for i in reversed(before):
                    assign_guards, in_loop = guards[i]
                    if lines[i] and not in_loop and self._surely(assign_guards, scope):
                        return [values[j] for j in before[before.index(i):]], False
                return [values[i] for i in before], True
            shared = set(guards[before[0]][0])  # tests both sit under (an early return above both)
            for i in reversed(before):
                if i == before[0]:
                    break
                assign_guards, in_loop = guards[i]
                extra = tuple(g for g in assign_guards if g not in shared)
                if lines[i] and not in_loop and self._surely(extra, scope):
                    before = before[before.index(i):]
                    break
        return [values[i] for i in before], param

    def _never(self, guards: tuple, scope: Scope) -> bool:
        """Whether a guard is decided against the code under it, on this deployment."""
        return self._decided(guards, scope) == "against"

    def _surely(self, guards: tuple, scope: Scope) -> bool:
        """Whether every guard is decided the way the code under it needs, on this deployment."""
        return self._decided(guards, scope) == "taken"

    def _decided(self, guards: tuple, scope: Scope) -> str:
        """"against" when a guard is decided against the code under it, "taken" when every one is decided
        for it, else ""."""
        open_ = False
        for test, taken, line in guards:
            with self.at_line(scope, line):
                value, _ = self.truth(test, scope)
            if value is None:
                open_ = True
            elif value != taken:
                return "against"
        return "" if open_ else "taken"

    def _param(self, name: str, fn, scope: Scope, depth: int) -> Known:
        """A parameter the call did not bind: a deployment object when its annotation says so."""
        annotation = fn.param_types.get(name) or fn.annotations.get(name)
        if annotation is not None:
            for part in annotation[1] if annotation[0] == "q" else (annotation,):
                obj = self._object(self._object_kind(part, scope))
                if obj is not None:
                    return known(obj)
        return unknown()

    def _object_kind(self, annotation: Expr, scope: Scope) -> str:
        """The deployment object a parameter annotated `annotation` holds: its class's name or a base's
        (`config: Qwen3VLConfig`, a PretrainedConfig subclass, is the model config too), or ""."""
        label = (dotted(annotation) or "").rpartition(".")[2]
        kind = self.dep.object_types.get(label, "")
        if kind or not label or not self.dep.object_types:
            return kind
        key = ("object kind", id(annotation), scope.module.module)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is annotation:
            return hit[1]
        saved = self.ev.reads_begin()
        kinds = [self.dep.object_types.get(base.name.rpartition(".")[2], "")
                 for cls in self.ev.eval(annotation, scope, 1) if cls.kind == "cls" for base in self.ev.mro(cls)[1:]]
        kind = next(filter(None, kinds), "")
        if not self.ev.reads_end(saved):  # a class bound under a fact is asked again after a fork
            self._memo[key] = (annotation, kind, 0)
        return kind

    def _object(self, kind: str) -> Obj | None:
        if kind == "server_args" and self.dep.server_args:
            # the quantization is read through its fact bit (_field), not held in the object: the
            # object is then the same for every checkpoint format, and a census forks across them
            # frozen like the model config's: a list default (`encoder_urls=[]` from add_argument) would
            # make the object, and every memo key holding it, unhashable
            return Obj(kind, tuple(sorted(((k, freeze(v)) for k, v in self.dep.server_args.items()
                                           if k not in QUANT_ARGS), key=lambda kv: kv[0])))
        if kind == "model_config" and self.dep.model_config:
            fields = tuple(sorted(((k, freeze(v)) for k, v in self.dep.model_config.items()), key=lambda kv: kv[0]))
            return Obj(kind, fields)
        if kind == "model_config" and (self.dep.architecture or self.dep.config_copies):
            # one object for every model: only comparisons read its architecture, and the fields the
            # framework sets from its launch flags (deploy/config_copies.py) are known
            return ARCHITECTURE_ONLY
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
        frame, opened, cuts = self._push(key), self._open_frame(), self.cuts
        try:
            result = self._global(module, name, depth)
        finally:
            del self._active[key]
        got = self._close_frame(opened, frame)
        if got is not None and (result.values is not None or result.opens or self.cuts == cuts):
            self._memo[key] = (result, got)  # an unknown cut short where it was asked is not kept
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

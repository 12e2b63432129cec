"""The partial evaluator's attributes: fields of deployment objects, Enum members, and instance
attributes read from the constructors and methods that assign them, for the allocation at hand.
"""

from __future__ import annotations

from typing import Any

from dynacheck.deploy.facts import QUANT_ARGS, QUANT_FACT, UNKNOWN as FACT_UNKNOWN
from dynacheck.model import Condition
from dynacheck.static.cst_nodes import loop_text
from dynacheck.static.ir import Expr, dotted
from dynacheck.static.value_types import Scope, Value, evolve
from dynacheck.static.partial_values import (
    ARCHITECTURE, ARCHITECTURE_ONLY, as_value, external_guess, freeze, is_dataclass, Known, known, LITERAL_TYPES,
    FILLED, Member, merge, NOTHING, Obj, OBJECT_FAMILY, Ref, unknown,
)

# methods that fill a container in place: an attribute built empty and filled by one is not known empty
FILLING_METHODS = frozenset({"add", "append", "appendleft", "extend", "insert", "setdefault", "update"})


def _over_gpus(fn, loop: str) -> bool:
    """Whether the loop a call sits in (its iterable's text) is `for i in range(torch.cuda.device_count())`:
    found as the iterable a loop variable of the function is bound to (`("it", iterable)`)."""
    for values in fn.assigns.values():
        for value in values:
            if value and value[0] == "it" and loop_text(value[1]) == loop:
                iterable = value[1]
                if iterable[0] == "c" and iterable[1] == ("n", "range") and len(iterable[2]) == 1:
                    count = iterable[2][0]
                    if count and count[0] == "c" and (dotted(count[1]) or "").endswith("cuda.device_count"):
                        return True
    return False


def _empty(value: Any) -> bool:
    return isinstance(value, (tuple, list, dict, set, frozenset)) and not value


class MemberEvaluation:
    """Attributes of values (a part of PartialEvaluator)."""

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
            # a tensor's shape is the traced batch's: what picked the tensor (`_TP` behind an
            # all-reduce) does not decide `hidden_states.shape[0] == 0`
            return unknown() if expr[2] == "shape" else base
        outs: list[Known] = []
        for value in base.values:
            outs.append(self._member(value, expr[2], scope, depth))
        return merge(outs)

    def _field(self, obj: Obj, name: Any) -> Any:
        """A deployment object's field; the server args' quantization through its fact bit."""
        if obj.kind == "server_args" and name in QUANT_ARGS:
            self.reads |= QUANT_FACT
            return self.dep.server_args.get(name, FACT_UNKNOWN)
        if obj.kind in (ARCHITECTURE_ONLY.kind, "model_config") and name in self.dep.config_copies:
            return self.dep.config_copies[name]  # set from a launch flag at start-up, whatever the checkpoint says
        if obj.kind == ARCHITECTURE_ONLY.kind:
            return (ARCHITECTURE,) if name == "architectures" else FACT_UNKNOWN  # read as a name by tests only
        got = obj.get(name)
        if got is FACT_UNKNOWN and obj.kind == "server_args" and name in self.dep.server_args_segments:
            return obj  # a namespace's bag (`get_exec().graph`): its fields are the flat server args
        return got

    def _member(self, value: Any, attr: str, scope: Scope, depth: int) -> Known:
        if isinstance(value, Obj):
            got = self._field(value, attr)
            if got is FACT_UNKNOWN:
                if value.kind in ("traced_batch", ARCHITECTURE_ONLY.kind):
                    return unknown()  # a runtime value of the batch, or a config field no checkpoint fixes here
                kind, label = OBJECT_FAMILY.get(value.kind, ("config", "config"))
                return unknown(Condition(f"{label}.{attr}", "", 0, kind))
            return known(freeze(got))
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
            if ref.kind == "inst" and members and all(external_guess(v, attr) for v in members) \
                    and self._assigned_on_self(ref, attr):
                return unknown()  # set by a method to a value not known here, not the external base's attribute
            if members and all(v.kind == "ext" and v.name in LITERAL_TYPES for v in members):
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
        frame, opened, cuts = self._push(key), self._open_frame(), self.cuts
        parts: list[Known] = []
        try:
            for summary, module in self._class_summaries(inst):
                for qualname in summary.methods.values():
                    fn = module.functions.get(qualname)
                    if fn is None or attr not in fn.self_assigns:
                        continue
                    scope = self._method_scope(inst, fn, module, depth)
                    parts.extend(self.const(e, scope, depth) for e in self._may_run(fn, attr, lambda: scope))
                field = self._field_argument(inst, attr, depth) if not parts and is_dataclass(summary) else None
                if field is not None:  # the allocation's keyword, not the field's default
                    parts.append(field)
                elif summary.attrs.get(attr):
                    scope = Scope(module)
                    parts.extend(self.const(e, scope, depth) for e in summary.attrs[attr])
        finally:
            del self._active[key]
        result = merge(parts) if parts else Known(None)
        if (any(map(_empty, result.values)) if result.values is not None else not result.opens):
            fills = self._fills(inst, attr)
            # `self.archs = set()` then `self.archs.add(...)` per visible GPU: filled where the deployment
            # runs the fill (a GPU host, the way its tests go), else how full it is is a run-time fact
            if fills and any(self._fill_runs(inst, fn, module, call, depth) for fn, module, call in fills):
                result = known(FILLED)
            elif fills:
                result = unknown(Condition(f"{inst.name.rpartition('.')[2]}.{attr} (filled at run time)", "", 0,
                                           "runtime"))
        got = self._close_frame(opened, frame)
        if got is not None and (result.values is not None or result.opens or self.cuts == cuts):
            # an unknown cut short where it was asked (a depth limit, the value evaluator's recursion guard) is not kept
            self._memo[key] = (inst.expr, inst.scope, result, got)
        return result

    def _fills(self, inst: Value, attr: str) -> list:
        """(method, its module, call) for each call that adds to `self.attr` in place (`self.attr.add(x)`)."""
        target = ("a", ("n", "self"), attr)
        return [(fn, module, call) for summary, module in self._class_summaries(inst)
                for fn in map(module.functions.get, summary.methods.values()) if fn is not None
                for call in fn.calls if call.func and call.func[:2] == ("a", target) and call.func[2] in FILLING_METHODS]

    def _fill_runs(self, inst: Value, fn, module, call, depth: int) -> bool:
        """Whether the constructor's fill runs at least once on this deployment: its tests all hold, and
        it is not in a loop, or in one over the visible GPUs (`range(torch.cuda.device_count())`) on a
        deployment with a GPU."""
        if fn.name != "__init__" or not self.dep.gpu:
            return False
        if call.loop and not _over_gpus(fn, call.loop):
            return False
        if call.guards:
            reachable, conditions = self.guards(call.guards, self._method_scope(inst, fn, module, depth))
            if not reachable or conditions:
                return False
        return True

    def _method_scope(self, inst: Value, fn, module, depth: int) -> Scope:
        """A method of the instance's class as the instance runs it: `__init__` with the arguments
        its allocation passed bound."""
        bound = self._constructor_arguments(inst, fn, depth, module) if fn.name == "__init__" else ()
        return self.ev.method_scope(module, fn, evolve(inst, kind="cls"), bound)

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

    def allocation(self, inst: Value) -> tuple[list, dict, Scope] | None:
        """The constructor call that made this instance, its arguments as known values, where it ran."""
        call, scope = inst.expr, inst.scope
        if not call or call[0] != "c" or len(call) < 4 or not isinstance(scope, Scope):
            return None
        return call[2], dict(call[3]), scope

    def _constructor_arguments(self, inst: Value, init, depth: int, module=None) -> tuple:
        """`__init__`'s parameters bound to what the allocation passed (`TopK(topk_group=config.topk_group)`),
        and the defaults of those it did not pass (`TopK(top_k, layer_id)`: `use_grouped_topk=False`)."""
        allocation = self.allocation(inst)
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
            bound.append((name, (as_value(self.const(arg, scope, depth)),)))
        for name, arg in kwargs.items():
            if name in params:
                bound.append((name, (as_value(self.const(arg, scope, depth)),)))
        given = {name for name, _ in bound}
        if module is not None and "*" not in kwargs:  # `TopK(**cfg)` may fill any of them
            for name in params[len(args):]:
                if name not in given and name in init.defaults:
                    bound.append((name, (as_value(self.const(init.defaults[name], Scope(module), depth)),)))
        return tuple(b for b in bound if b[1][0].kind == "known")

    def _field_argument(self, inst: Value, attr: str, depth: int) -> Known | None:
        """A dataclass field's value: the keyword the allocation passed for it."""
        allocation = self.allocation(inst)
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

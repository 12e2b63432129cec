"""The partial evaluator's calls: scanned functions run on known arguments (their returns under
their guards), platform probes and environment reads, builtins, string methods and Enums.
"""

from __future__ import annotations

from typing import Any

from dynacheck.deploy.facts import GPU_FACT, GPU_PROBES, UNKNOWN as FACT_UNKNOWN
from dynacheck.deploy.piecewise_off import FALSE_WHEN_COMPILED
from dynacheck.model import Condition
from dynacheck.static.ir import Expr
from dynacheck.static.value_types import Scope, Value, evolve, passes_ctx, receiver_key
from dynacheck.static.partial_values import (
    argument_key, as_value, ENUM_BASES, ENV_READERS, known, Known, MAX_DEPTH, Member, merge, Obj, Partial, Ref,
    release, STR_METHODS, unknown, VERSION_PARSERS,
)


BUILTIN_CONTAINERS = frozenset({"builtins.dict", "builtins.list", "builtins.tuple", "builtins.str", "builtins.set"})


# bases that define no attribute a scanned class's instance could be asked for
PLAIN_BASES = frozenset({"object", "builtins.object", "abc.ABC", "ABC", "typing.Generic", "Generic"})


class CallEvaluation:
    """Calls and Enum classes (a part of PartialEvaluator)."""

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
            if accessor == FALSE_WHEN_COMPILED:  # true, the release would not compile (deploy/piecewise_off.py)
                return known(False)
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
        elif func.self_cls is not None and params[:1] in (["self"], ["cls"]) or passes_ctx(func, params):
            params = params[1:]
        for name, value in zip(params, args):
            bound[name] = value
        for name, value in kwargs.items():
            if name in summary.params:
                bound[name] = value
        if depth > MAX_DEPTH and bound:
            self.cuts += 1
            return unknown()
        # the receiver is part of the question when `self` is not bound: `self.allow_reduce_scatter` in one
        # LayerCommunicator (BailingMoE's, True) is not another's (Bailing V2.5's, False)
        receiver_part = "" if "self" in bound else receiver_key(func.self_cls)
        key = ("call", func.module, func.name, receiver_part, tuple(sorted((k, argument_key(v)) for k, v in bound.items())))
        hit = self._memo.get(key)
        if hit is not None:
            self.reads |= hit[1]
            return hit[0]
        if key in self._active:
            self._cut(key)
            return unknown()
        frame, opened, cuts = self._push(key), self._open_frame(), self.cuts
        try:
            # a call has one answer wherever it is asked, as its memo entry says: the depth limit starts
            # again inside it (recursion is cut by `_active`), so a deep first ask does not cut it to
            # unknown (fp8's `self.use_marlin` under a layer's guard), and the answer does not depend
            # on which model asked first (`moe_tensor_model_parallel_all_reduce(x)` carried `_TP` as an
            # open fact when BailingMoE asked it shallow, nothing when Qwen3 asked it deep)
            result = self._returns(func, summary, bound, 0)
        finally:
            del self._active[key]
        got = self._close_frame(opened, frame)
        if got is not None and (result.values is not None or result.opens or self.cuts == cuts):
            self._memo[key] = (result, got)  # an unknown cut short where it was asked is not kept
        return result

    def _returns(self, func: Value, summary, bound: dict[str, Known], depth: int) -> Known:
        scope = self.ev.function_scope(func)
        if scope is None:
            return unknown()
        values = []
        for name in summary.params:
            if name in bound:
                values.append((name, (as_value(bound[name]),)))
            elif name in summary.defaults and name != "self":
                values.append((name, (as_value(self.const(summary.defaults[name], scope, depth)),)))
        scope = evolve(scope, bound=tuple(values) + scope.bound)
        parts: list[Known] = []
        covered: set[tuple] = set()  # guards under which some return surely happens (_covering)
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
            if self.covering and any(all(self.truth(t, scope)[0] is taken for t, taken, _ in always)
                                     for always in _covering(covered, tuple(guards))):
                break  # two returns together always happen when reached (the start-up proof's reading)
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
            return self._hasattr(args[0], attr, scope, depth)
        if name in VERSION_PARSERS and len(args) == 1:
            text = self.const(args[0], scope, depth)
            parsed = {release(v) for v in text.values} if text.values is not None else {None}
            return known(*parsed, opens=text.opens) if None not in parsed else unknown(*text.opens)
        if name == "builtins.isinstance" and len(args) == 2:
            return self._isinstance(args[0], args[1], scope, depth)
        if name == "builtins.getattr" and len(args) in (2, 3):
            return self._getattr(args, scope, depth)
        if name in ("builtins.tuple", "builtins.list", "builtins.int", "builtins.str", "builtins.len",
                    "builtins.bool", "builtins.map") and args:
            return self._builtin(name.rpartition(".")[2], args, scope, depth)
        if name in GPU_PROBES:
            self.reads |= GPU_FACT
        if name == "torch.cuda.get_device_properties":  # FlashInfer's get_compute_capability reads .major/.minor
            capability = self.dep.external_call("torch.cuda.get_device_capability")
            if capability is not FACT_UNKNOWN:
                return known(Obj("device_properties", (("major", capability[0]), ("minor", capability[1]))))
            return unknown(Condition(f"{name}()", scope.module.path, 0, "platform"))
        fact = self.dep.external_call(name)
        if fact is not FACT_UNKNOWN:
            return known(fact)
        if name.startswith(("torch.cuda.", "torch.version.", "torch.npu.", "torch.xpu.")):
            return unknown(Condition(f"{name}()", scope.module.path, 0, "platform"))
        if name in ("torch.compiler.is_compiling", "torch._dynamo.is_compiling"):
            return unknown(Condition(f"{name}()", scope.module.path, 0, "runtime"))
        return unknown()

    def _hasattr(self, obj_expr: Expr, attr: Known, scope: Scope, depth: int) -> Known:
        """`hasattr(x, "name")` on instances of scanned classes: True when a class of its MRO defines
        the name, False when none does and nothing can set it (no method assigns `self.name`, no
        `setattr` or `__getattr__`, no base outside the scan but `object`/`ABC`), else unknown."""
        objs = self.const(obj_expr, scope, depth)
        if objs.values is None or not objs.values or attr.values is None or len(attr.values) != 1:
            return unknown(*objs.opens)
        name = next(iter(attr.values))
        if not isinstance(name, str) or not all(isinstance(v, Ref) and v.value.kind == "inst" for v in objs.values):
            return unknown(*objs.opens)
        outs = {self._has_member(v.value, name) for v in objs.values}
        return known(*outs, opens=objs.opens) if None not in outs else unknown(*objs.opens)

    def _has_member(self, inst: Value, name: str) -> bool | None:
        classes = self.ev.mro(inst)
        if any(c.kind != "cls" and c.name not in PLAIN_BASES for c in classes):
            return None  # a base outside the scan may define it
        summaries = list(self._class_summaries(inst))
        if len(summaries) != sum(1 for c in classes if c.kind == "cls"):
            return None
        if any(name in summary.attrs or name in summary.methods for summary, _ in summaries):
            return True
        for summary, module in summaries:
            if "__getattr__" in summary.methods or "__getattribute__" in summary.methods:
                return None
            for fn in map(module.functions.get, summary.methods.values()):
                if fn is None or name in fn.self_assigns or any(c.func == ("n", "setattr") for c in fn.calls):
                    return None
        return False

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

    def _getattr(self, args: tuple, scope: Scope, depth: int) -> Known:
        """`getattr(config, "architectures", None)` on a deployment object: its attribute (a field the
        deployment does not fix stays unknown, as `config.x` does; the default is not assumed)."""
        base = self.const(args[0], scope, depth)
        attr = self.const(args[1], scope, depth)
        if base.values is None or not base.values or not all(isinstance(v, Obj) for v in base.values) \
                or attr.values is None or len(attr.values) != 1 or not isinstance(next(iter(attr.values)), str):
            return unknown(*base.opens)
        return self.const(("a", args[0], next(iter(attr.values))), scope, depth)

    def _isinstance(self, obj_expr: Expr, cls_expr: Expr, scope: Scope, depth: int) -> Known:
        objs = self.const(obj_expr, scope, depth)
        classes = self.ev.eval(cls_expr, scope)
        if cls_expr and cls_expr[0] == "q":
            classes = [v for e in cls_expr[1] for v in self.ev.eval(e, scope)]
        if objs.values and all(isinstance(v, Obj) for v in objs.values) and classes \
                and all(c.kind == "ext" and c.name in BUILTIN_CONTAINERS for c in classes):
            return known(False, opens=objs.opens)  # a config or server-args object is no dict, list or str
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


def _covering(covered: set[tuple], guards: tuple) -> set[tuple]:
    """Add a return's guards to `covered`, with what two returns cover together: `if t: return a`
    then `return b` are guarded by (..., t True) and (..., t False), so one of them returns whenever
    their shared outer guards hold (`Fp8Config.get_quant_method`'s `return None` after them is dead when
    `isinstance(layer, LinearBase)` is true, sglang 0.5.9 `quantization/fp8.py:200-208`)."""
    todo = [guards]
    while todo:
        current = todo.pop()
        if current in covered:
            continue
        covered.add(current)
        if current:
            test, taken, line = current[-1]
            if current[:-1] + ((test, not taken, line),) in covered:
                todo.append(current[:-1])
    return covered

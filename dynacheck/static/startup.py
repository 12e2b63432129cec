"""Layers a deployment cannot build: a constructor's `assert self.x is not None` that the checkpoint's
quantization config makes false.

SGLang builds every linear layer with `self.quant_method = quant_config.get_quant_method(self, prefix)`
when the model hands it a quant config, and ReplicatedLinear, ColumnParallelLinear and
RowParallelLinear then `assert self.quant_method is not None` (sglang 0.5.9 `layers/linear.py:176`,
`:216`, `:330`, `:1338`). On CUDA, `Mxfp4Config.get_quant_method` returns None for every LinearBase
(`layers/quantization/mxfp4.py:268-285`: `ignored_layers`, which would pick the unquantized method, is
never set by `from_config`), so a model that passes its quant config to its linear layers stops in
its constructor; GPT-OSS builds its attention without one (`models/gpt_oss.py:396-410`). A census
cell of such a model is a server that never starts, not a list of graph breaks; a scan of it says so first.

The check starts at the model class the loader builds, with the loader's config as its `quant_config`,
and follows what its constructors allocate into their attributes (and into containers such as
`make_layers`' list), down through each allocated instance. For each instance, its constructors'
unguarded `assert self.A is not None` are read against the values of `self.A` those `__init__`s
assign, with each parameter they read bound by where it came from: the argument of the allocation
(or of the `super().__init__` call) that made the instance, a parameter of the constructor above it,
and so on up to the model class. Only plain parameter names, a closure's names, a conditional expression
that keeps the parameter, a `self` helper's argument, and literal `None` are followed; anything else leaves the
parameter unknown, and an unknown never fails an assert. The config the loader passes is what the
config class's `from_config` returns (`model_loader/weight_utils.py:get_quant_config`, for a checkpoint
with a quantization config; one without gets `quant_cls()`, `:237-240`, which for Mxfp4Config leaves
`ignored_layers` unset too).

Known limit: a layer built inside a `lambda` whose own parameter is named like the constructor's
(`lambda quant_config: Layer(quant_config=quant_config)`) is read as the constructor's; no SGLang
release from 0.5.9 to 0.5.23 has one.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass

from dynacheck.static.classes import _is_super_init
from dynacheck.static.cst_nodes import STARRED
from dynacheck.static.ir import UNKNOWN as UNKNOWN_EXPR, names_in
from dynacheck.static.value_types import NONE_VALUE, Scope, Value, allocation_label, evolve

MAX_INSTANCES = 2000  # layers followed down from one model class
LOADER_PARAM = "quant_config"  # the keyword SGLang's loader builds every model class with (model_loader/loader.py)
NONE, UNKNOWN = "none", "unknown"
# allocation label -> the instance whose constructor made it, for the walk down from one model class: a
# layer built in a closure (`def layer_fn(idx)` inside `__init__`) has a scope that does not name it
_BUILT_BY: ContextVar[dict] = ContextVar("built_by", default={})
# (the loader's config, the model class) of the walk in progress: a local reassigned under a test of the
# config (`if quant_config and hasattr(quant_config, "ignore")`) is decided with the config bound
_LOADER: ContextVar[tuple] = ContextVar("loader", default=())


@dataclass(frozen=True)
class Unbuildable:
    """One layer a model class cannot build on the deployment."""

    layer: str  # the layer's class
    path: str  # where the model holds it: `self.model.layers[].self_attn.qkv_proj`
    attr: str  # the attribute its constructor asserts is not None
    config: str  # the quantization config class the loader builds
    file: str  # where the assert is
    line: int
    # where the checkpoint's config chooses what is built, when every choice fails (startup_branches.py)
    choice: str = ""

    def reason(self, model: str, where: str) -> str:
        text = (f"{model} does not start on this deployment: {self.layer}.__init__ asserts "
                f"`self.{self.attr} is not None` ({where}:{self.line}), and it is None for the layer at "
                f"`{self.path}`, which {model} builds with the {self.config} it is given as quant_config")
        if self.choice:
            what = f"{model}.__init__" if self.choice == "self" else f"`{self.choice}`"
            text += f"; the checkpoint's config picks what {what} builds, and each pick builds a layer that fails this way"
        return text


def model_class_module(locator, package: str, name: str) -> str:
    """The module of `package` that defines class `name` (`class Name` at the start of a line; one that
    also registers it in a one-line `EntryClass` first), or ''. Read as bytes, nothing imported: a scan
    needs it once, for its model config's architecture."""
    folder = locator.find(package) if package else None
    if folder is not None and folder.name == "__init__.py":  # a package is found as its __init__
        folder = folder.parent
    if folder is None or not folder.is_dir():
        return ""
    defines = re.compile(rb"^class " + re.escape(name.encode()) + rb"\b", re.MULTILINE)
    registers = re.compile(rb"^EntryClass\b[^\n]*\b" + re.escape(name.encode()) + rb"\b", re.MULTILINE)
    needle = b"class " + name.encode()  # a substring test first: the regex over 3 MB of models took 17 ms
    found = []
    for path in sorted(folder.glob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if needle in data and defines.search(data):
            found.append((not registers.search(data), f"{package}.{path.stem}"))  # the registering file first
    return min(found)[1] if found else ""


def model_unbuildable(evaluator, module: str, name: str) -> Unbuildable | None:
    """A layer model class `module:name` builds (its constructors' attributes, followed down through
    the instances and containers they allocate) that the deployment's quantization config cannot
    build, when the loader's config reaches it; None when none is found. Kept in the evaluator's site
    memo with the facts it read: a census asks once per class and deployment, and a fork drops what
    read a fact the deployments differ in."""
    if not evaluator.pins:
        return None
    return pinned_memo(evaluator, ("startup", module, name), lambda: _unbuildable(evaluator, module, name))


def _unbuildable(evaluator, module: str, name: str) -> Unbuildable | None:
    from dynacheck.static.startup_refute import no_layer_fails  # it reads this module's helpers

    configs = _loader_configs(evaluator)
    if not configs or no_layer_fails(evaluator, configs[0], module):
        return None
    return _first_failure(evaluator, Value("inst", module, name), configs)


def pinned_memo(ev, key: tuple, work):
    """`work()` once per key and pinned config classes for the evaluator's life, in its site memo with the
    deployment facts it read (a hit adds them to the computation that asked; a fork drops the entry when
    the deployments differ in one)."""
    memo = key + (tuple(sorted(ev.pins.items())),)
    hit = ev.sites.get(memo)
    if hit is not None:
        ev.partial.reads |= hit[-1]
        return hit[0]
    saved = ev.reads_begin()
    try:
        answer = work()
    finally:
        reads = ev.reads_end(saved)
    ev.sites[memo] = (answer, reads)
    return answer


def _first_failure(ev, model: Value, configs: list[Value]) -> Unbuildable | None:
    """Breadth-first over what the model's constructors surely allocate (`_built`), in their order."""
    queue, seen, built_by = [(model, "self")], {}, {}  # seen: allocation label -> given the config
    made_by: dict[tuple, list] = {}  # (allocation label, id of the assigned expression) -> what it makes
    token, loader = _BUILT_BY.set(built_by), _LOADER.set((configs[0], model))
    try:
        while queue and len(seen) < MAX_INSTANCES:
            inst, path = queue.pop(0)
            for made, where in _built(ev, inst, path, made_by):
                label = allocation_label(made)
                if label in seen:
                    continue
                built_by[label] = inst
                seen[label] = _given_the_config(ev, made, model)
                if not seen[label]:
                    continue  # nothing it builds can be given the config through it
                failure = _failing_assert(ev, made, configs, model, where)
                if failure is not None:
                    return failure
                queue.append((made, where))
        if queue:
            return None  # the budget ran out: no claim
        from dynacheck.static.startup_branches import failing_every_way  # it reads this module's helpers

        return failing_every_way(ev, model, configs, seen, made_by)
    finally:
        _BUILT_BY.reset(token)
        _LOADER.reset(loader)


def _given_the_config(ev, inst: Value, model: Value) -> bool:
    """Whether a parameter of the constructor that builds `inst`, passed as a plain name, comes from the
    model class's `quant_config` (the BFS goes no further down a branch the config does not reach)."""
    owner = _first_init_owner(ev, inst)
    init = ev._own_init(owner) if owner is not None else None
    if init is None or inst.expr is None:
        return False
    top = ("top", (model.module, model.name), LOADER_PARAM)
    for param in init.params[1:]:
        arg = _passed(inst, init, param)
        if arg is not None and arg != ("n", "None") and _plain(arg) and _origin(ev, inst, owner, param, 0) == top:
            return True
    chain = _init_chain(ev, inst)
    if len(chain) > 1 and any(_is_super_init(c.func) and _hands_on(c, init) for c in init.calls):
        base = chain[1]  # `DsV3MLA(**kwargs)` hands every keyword on: the base's parameters are the ones passed
        return any(_plain(arg) and _origin(ev, inst, base, name, 0) == top
                   for name, arg in inst.expr[3] if name != STARRED and name in ev._own_init(base).params)
    return False


def _built(ev, inst: Value, path: str, made_by: dict | None = None) -> list[tuple[Value, str]]:
    """The instances `inst`'s constructors surely build into its attributes, with their attribute path:
    an assignment in a constructor that surely runs (`_init_chain`), under tests all decided its way,
    whose value is one allocation, or a container of one (`make_layers` gives a list of what its
    lambda builds: `layers[]`). A layer built only on some checkpoints proves nothing about this one."""
    out: list[tuple[Value, str]] = []
    for cls in _init_chain(ev, inst):
        init = ev._own_init(cls)
        scope = _init_scope(ev, inst, cls, init, ev.constructor_bindings(inst, cls, init))
        for attr, values in init.self_assigns.items():
            for expr, guards in zip(values, init.self_assign_guards.get(attr, ())):
                if not _a_call(expr):  # a layer is built by a call (a class, or a factory such as make_layers)
                    continue
                if not all(_surely(ev, test, taken, scope) for test, taken, _ in guards):
                    continue
                made = ev.eval(expr, scope, 1)
                if made_by is not None:  # for startup_branches, which asks again
                    made_by[(allocation_label(inst), id(expr))] = made
                where = f"{path}.{attr}"
                listed = [i for v in made if v.kind == "cont" for i in v.items
                          if i.kind == "inst" and i.expr is not None]
                if len(made) == 1 and made[0].kind == "inst" and made[0].expr is not None:
                    out.append((made[0], where))
                elif len(listed) == 1 and not any(v.kind == "inst" for v in made):
                    # what a layer factory calls its lambda for (every layer of a checkpoint whose pipeline
                    # stage holds any), beside the factory's own return (its list and layer range)
                    out.append((listed[0], where + "[]"))
    return out


def _surely(ev, test, taken: bool, scope: Scope) -> bool:
    """Whether a branch test is decided `taken` on this deployment, with no open fact behind it."""
    value, opens = ev.partial.truth(test, scope)
    return value is taken and not opens


def _a_call(expr) -> bool:
    """A call, or an item of one (`self.layers, self.start, self.end = make_layers(...)`)."""
    return bool(expr) and (expr[0] == "c" or (expr[0] == "idx" and bool(expr[1]) and expr[1][0] == "c"))


# ----- where a constructor parameter's value came from ----------------------------------------------

def _origin(ev, inst: Value, owner: Value | None, param: str, depth: int):
    """Where `param` of `owner.__init__`, run for `inst`, got its value: NONE (a literal None or a None
    default), ("top", (module, class), name) (a parameter of the constructor of a receiver built
    outside the scanned allocations), or UNKNOWN."""
    if owner is None or depth > 24:
        return UNKNOWN
    init = ev._own_init(owner)
    if init is None or param not in init.params:
        return UNKNOWN
    first = _first_init_owner(ev, inst)
    if first is not None and (first.module, first.name) == (owner.module, owner.name):
        if inst.expr is None:
            return ("top", (inst.module, inst.name), param)
        arg = _passed(inst, init, param)
        return _expr_origin(ev, arg, inst.scope, init, param, depth, _BUILT_BY.get().get(allocation_label(inst)))
    sub = ev.calling_subclass(inst, owner)
    if sub is None:
        return UNKNOWN
    sub_init = ev._own_init(sub)
    scope = _init_scope(ev, inst, sub, sub_init)
    origins = set()
    for call in sub_init.calls:
        if not _is_super_init(call.func):
            continue
        arg = _argument(("c", None, call.args, call.kwargs), init, param)
        if arg == UNKNOWN_EXPR and _hands_on(call, sub_init):  # `def __init__(self, **kwargs): super().__init__(**kwargs)`
            origins.add(_origin_of_keyword(ev, inst, sub, init, param, depth))
        else:  # `if ...: super().__init__(...)` else too
            origins.add(_expr_origin(ev, arg, scope, init, param, depth))
    return origins.pop() if len(origins) == 1 else UNKNOWN


def _hands_on(call, init) -> bool:
    """A `super().__init__(**kwargs)` that hands on the whole `**kwargs` of an `__init__` taking nothing else
    (`DsV3MLA.__init__(self, **kwargs)`, models/bailing_moe_linear.py:115-117)."""
    return (init.params == ("self", init.params[-1]) and init.arity[3] and not call.args
            and call.kwargs == ((STARRED, ("n", init.params[-1])),))


def _origin_of_keyword(ev, inst: Value, sub: Value, init, param: str, depth: int):
    """`param` of the base's `__init__` when the subclass hands on its `**kwargs`: what the allocation that
    made `inst` passes for it by keyword (the subclass's own defaults cannot apply)."""
    first = _first_init_owner(ev, inst)
    if first is None or (first.module, first.name) != (sub.module, sub.name) or inst.expr is None:
        return UNKNOWN
    arg = next((value for name, value in inst.expr[3] if name == param), None) if len(inst.expr) > 3 else None
    if arg is None:  # not passed by name: the base's default, unless a star may pass it
        if any(name == STARRED for name, _ in inst.expr[3]):
            return UNKNOWN
    return _expr_origin(ev, arg, inst.scope, init, param, depth, _BUILT_BY.get().get(allocation_label(inst)))


def _expr_origin(ev, arg, scope: Scope | None, init, param: str, depth: int, maker: Value | None = None):
    """`maker`: the instance whose constructor made the allocation, when known (`_BUILT_BY`)."""
    if depth > 24:  # locals handed to each other in a ring (`x = y`, `y = x`): no origin
        return UNKNOWN
    if arg is None:  # not passed: the default
        return NONE if init.defaults.get(param) == ("n", "None") else UNKNOWN
    if arg == ("n", "None"):
        return NONE
    if scope is not None and scope.function is not None and _plain(arg) and arg[0] == "a":
        kept = _kept_attribute(ev, scope, arg[2])
        return _expr_origin(ev, kept, scope, init, param, depth + 1, maker) if kept is not None else UNKNOWN
    if arg[0] != "n" or scope is None or scope.function is None:
        return UNKNOWN
    name, fn = arg[1], scope.function
    if name not in fn.params and name not in fn.assigns and scope.parent is not None:
        return _expr_origin(ev, arg, scope.parent, init, param, depth, maker)  # a closure: `def layer_fn(idx)`
    if scope.self_cls is None and (maker is None or fn.qualname not in _init_names(ev, maker)):
        return UNKNOWN
    receiver = evolve(scope.self_cls or maker, kind="inst")
    if name not in fn.params:
        kept = _kept_local(ev, fn, name, receiver, scope)
        return _expr_origin(ev, kept, scope, init, param, depth + 1, maker) if kept is not None else UNKNOWN
    if not _kept(ev, fn, name, scope):
        return UNKNOWN  # replaced by another value
    if fn.name != "__init__":
        return _helper_origin(ev, receiver, fn, name, depth)
    owner = _owner_of(ev, receiver, scope.module.module, fn.qualname)
    return _origin(ev, receiver, owner, name, depth + 1)


def _kept(ev, fn, name: str, scope: Scope) -> bool:
    """Whether the parameter still holds what came in: never assigned, or only by a conditional
    expression that keeps it on this deployment (`quant_config = None if _disable_hip_linear_quant else
    quant_config`, linear.py, with the test decided)."""
    for value in fn.assigns.get(name, ()):
        if value[0] != "if":
            return False
        taken = True if _surely(ev, value[3], True, scope) else False if _surely(ev, value[3], False, scope) else None
        if taken is None or (value[1] if taken else value[2]) != ("n", name):
            return False
    return True


def _plain(arg) -> bool:
    """A name, or `self.name`: what the origin of an argument is followed through."""
    return bool(arg) and (arg[0] == "n" or (arg[0] == "a" and arg[1] == ("n", "self")))


def _kept_attribute(ev, scope: Scope, attr: str):
    """What `self.attr` holds in the constructor running in `scope`: its one assignment there, unguarded,
    when no method of the class or its bases assigns it anywhere else (`self.quant_config = quant_config`
    then `SolarModel(quant_config=self.quant_config)`, models/solar.py:427-431); else None."""
    fn = scope.function
    if fn.name != "__init__" or scope.self_cls is None:
        return None
    values, guards = fn.self_assigns.get(attr, ()), fn.self_assign_guards.get(attr, ())
    if len(values) != 1 or guards[0] or not values[0] or values[0][0] != "n":
        return None
    assigning = [f for summary, module in ev.partial._class_summaries(scope.self_cls)
                 for f in map(module.functions.get, summary.methods.values()) if f is not None and attr in f.self_assigns]
    return values[0] if assigning == [fn] else None


def _kept_local(ev, fn, name: str, receiver: Value, scope: Scope):
    """The one value a local of a constructor holds when every other assignment of it is decided not to
    run, with the loader's config bound to the parameters that came from the model's `quant_config`
    (`qkv_quant_config = quant_config`, then `= None` under `if quant_config and hasattr(quant_config,
    "ignore") and ...`: exaone_moe.py:352-358); else None."""
    if fn.name != "__init__" or not _LOADER.get():
        return None
    config, model = _LOADER.get()
    owner = _owner_of(ev, receiver, scope.module.module, fn.qualname)
    plain, others = [], []
    for value, (guards, in_loop) in zip(fn.assigns.get(name, ()), fn.assign_guards.get(name, ())):
        (others if guards or in_loop else plain).append((value, guards))
    if len(plain) != 1 or owner is None:
        return None
    for _, guards in others:
        bindings = _bindings(ev, receiver, owner, fn, ("n", "None"), guards, config, model)
        if bindings is None:
            return None
        decided = _init_scope(ev, receiver, owner, fn, bindings)
        if not any(_surely(ev, test, not taken, decided) for test, taken, _ in guards):
            return None
    value = plain[0][0]
    if value and value[0] == "if":  # `None if quant_config and quant_config.get_name() == "modelopt_fp4" else
        # quant_config` (qwen3_5.py:322-326): the branch the test takes with the loader's config bound
        bindings = _bindings(ev, receiver, owner, fn, value, (), config, model)
        decided = _init_scope(ev, receiver, owner, fn, bindings) if bindings is not None else None
        taken = next((t for t in (True, False) if decided is not None and _surely(ev, value[3], t, decided)), None)
        return None if taken is None else value[1] if taken else value[2]
    return value


def _helper_origin(ev, receiver: Value, fn, name: str, depth: int):
    """A parameter of a method the receiver's constructors call on `self` (`self.model =
    self._init_model(config, quant_config, prefix)`): the origin every such call's argument agrees on."""
    if not fn.cls:
        return UNKNOWN
    origins = set()
    for cls in _init_chain(ev, receiver):
        init = ev._own_init(cls)
        scope = _init_scope(ev, receiver, cls, init)
        for call in init.calls:
            if call.func == ("a", ("n", "self"), fn.name):
                arg = _argument(("c", None, call.args, call.kwargs), fn, name)
                origins.add(_expr_origin(ev, arg, scope, fn, name, depth + 1))
    return origins.pop() if len(origins) == 1 else UNKNOWN


def _init_names(ev, inst: Value) -> set[str]:
    return {f"{c.name}.__init__" for c in ev.mro(inst) if c.kind == "cls"}


def _owner_of(ev, receiver: Value, module: str, qualname: str) -> Value | None:
    return next((c for c in ev.mro(receiver) if c.kind == "cls" and c.module == module
                 and f"{c.name}.__init__" == qualname), None)


def _argument(call_expr, init, param: str):
    """The expression a call passes for `param` of `init` (its `self` not counted), or None."""
    args, kwargs = call_expr[2], call_expr[3]
    for name, value in kwargs:
        if name == param:
            return value
    positional = list(init.params[1:])
    if param in positional and positional.index(param) < len(args):
        arg = args[positional.index(param)]
        return None if arg and arg[0] == "*" else arg
    if any(name == STARRED for name, _ in kwargs):
        return UNKNOWN_EXPR  # `f(*xs)` / `f(**kw)` may pass it: not the default
    return None


def _passed(inst: Value, init, param: str):
    """What the allocation that made `inst` passes for `param`: `_argument`, or, past a lone `**name`, what
    that dict literal gives it (`_splat_items`; a key it lacks is not passed: the default)."""
    arg = _argument(inst.expr, init, param)
    if arg != UNKNOWN_EXPR:
        return arg
    items = _splat_items(inst)
    return arg if items is None else items.get(("k", param))


def _splat_items(inst: Value) -> dict | None:
    """`Layer(config, **decoder_kwargs)` where the allocating function sets `decoder_kwargs = {"quant_config":
    quant_config, ...}` once, unguarded, and calls no method on it (`bailing_moe_linear.py:923-927`): the
    dict's key -> value expressions, else None. A key set later by subscript is not seen (an assumption)."""
    call, scope = inst.expr, inst.scope
    splat = next((v for k, v in call[3] if k == STARRED), None) if call and call[0] == "c" and len(call) > 3 else None
    if not splat or splat[0] != "n" or not isinstance(scope, Scope) or scope.function is None:
        return None
    fn, local = scope.function, splat[1]
    values, guards = fn.assigns.get(local, ()), fn.assign_guards.get(local, ())
    if len(values) != 1 or guards[0] != ((), False) or not values[0] or values[0][0] != "d":
        return None
    if any(c.func and c.func[0] == "a" and c.func[1] == ("n", local) for c in fn.calls):
        return None  # `decoder_kwargs.update(...)`: not the literal any more
    _, items, keys = values[0]
    return dict(zip(keys, items))


def _init_scope(ev, inst: Value, cls: Value, init, bound: tuple = ()) -> Scope:
    """`cls.__init__` run for `inst`, with these parameters bound: the evaluator's one scope object for
    it (Evaluator.function_scope), so what is memoized per scope is found again."""
    func = Value("func", cls.module, init.qualname, self_cls=evolve(inst, kind="cls"))
    return ev.function_scope(func, bound) or Scope(ev.index.module(cls.module), init, func.self_cls, bound)


def _first_init_owner(ev, inst: Value) -> Value | None:
    """The class whose `__init__` runs when `inst` is built (the first in its MRO that defines one)."""
    for cls in ev.mro(inst):
        if cls.kind != "cls":
            return None
        if ev._own_init(cls) is not None:
            return cls
    return None


def _init_chain(ev, inst: Value) -> list[Value]:
    """The classes whose `__init__` surely runs for `inst`: the first that defines one, then each reached
    by a `super().__init__` call that surely runs (unguarded, or in both branches of one `if`)."""
    chain: list[Value] = []
    for cls in ev.mro(inst):
        if cls.kind != "cls":
            break
        init = ev._own_init(cls)
        if init is None:
            continue
        chain.append(cls)
        if not _surely_calls_super(init):
            break
    return chain


def _surely_calls_super(init) -> bool:
    guards = [c.guards for c in init.calls if _is_super_init(c.func)]
    if any(not g for g in guards):
        return True
    branches = {(g[:-1], g[-1][0], g[-1][1]) for g in guards}
    return any((outer, test, not taken) in branches for outer, test, taken in branches if not outer)


# ----- the config the loader builds and the asserts it fails -----------------------------------------

def _loader_configs(ev) -> list[Value]:
    """The instances the pinned quantization config class's `from_config` can return on this
    deployment, when each is a plain `cls(...)` (else none: the check says nothing)."""
    out: list[Value] = []
    for target in ev.pins.values():
        module, _, name = target.partition(":")
        cls = Value("cls", module, name)
        method = next((v for v in ev.member(cls, "from_config", 0) if v.kind == "func"), None)
        fn = ev.index.function(method.module, method.name) if method is not None else None
        if fn is None or not fn.returns:
            return []
        scope = ev.function_scope(evolve(method, self_cls=cls))
        for expr, guards in zip(fn.returns, fn.return_guards):
            reachable, conditions = ev.partial.guards(guards, scope) if guards else (True, ())
            if not reachable:
                continue
            if conditions or expr[0] != "c" or expr[1] != ("n", "cls"):
                return []
            out.append(evolve(cls, kind="inst", expr=("c", None, expr[2], expr[3]), scope=scope))
    return out if len(out) == 1 else []  # several possible configs: each would have to fail alone


def _failing_assert(ev, inst: Value, configs: list[Value], model: Value, path: str) -> Unbuildable | None:
    for cls in _init_chain(ev, inst):
        init = ev._own_init(cls)
        for test, line, guards in init.asserts:
            attr = _checked_attribute(test)
            if attr is not None and not guards and _none_everywhere(ev, inst, attr, configs[0], model):
                module = ev.index.module(cls.module)
                return Unbuildable(inst.name, path, attr, configs[0].name, module.path if module else cls.module,
                                   line)
    return None


def _checked_attribute(test) -> str | None:
    """`A` of `self.A is not None`."""
    if test and test[0] == "cmp" and len(test[2]) == 1 and test[2][0] == ("IsNot", ("n", "None")):
        left = test[1]
        if left and left[0] == "a" and left[1] == ("n", "self"):
            return left[2]
    return None


def _none_everywhere(ev, inst: Value, attr: str, config: Value, model: Value) -> bool:
    """Whether every assignment of `self.attr` the constructors may run gives None, with the loader's
    config bound to each parameter that came from the model class's `quant_config` (one must) and
    None to each that came from a literal None."""
    assigned = 0
    for cls in _init_chain(ev, inst):
        init = ev._own_init(cls)
        module = ev.index.module(cls.module)
        for value, guards in zip(init.self_assigns.get(attr, ()), init.self_assign_guards.get(attr, ())):
            bindings = _bindings(ev, inst, cls, init, value, guards, config, model)
            if bindings is None:
                return False
            scope = _init_scope(ev, inst, cls, init, bindings)
            reachable, conditions = ev.partial.guards(guards, scope) if guards else (True, ())
            if not reachable:
                continue
            result = ev.partial.const(value, scope, 0)
            if conditions or result.values is None or result.opens or set(result.values) != {None}:
                return False
            assigned += 1
    return assigned > 0


def _bindings(ev, inst: Value, owner: Value, init, value, guards, config: Value, model: Value):
    """The parameters an assignment reads, bound by their origin; None unless one of them is the model
    class's `quant_config` (then the loader's config)."""
    read = names_in([value] + [t for t, _, _ in guards]) & set(init.params[1:])
    bound, from_model = [], False
    for name in sorted(read):
        origin = _origin(ev, inst, owner, name, 0)
        if origin == NONE:
            bound.append((name, (NONE_VALUE,)))
        elif origin == ("top", (model.module, model.name), LOADER_PARAM):
            bound.append((name, (config,)))
            from_model = True
    return tuple(bound) if from_model else None

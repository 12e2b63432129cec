"""Breadth-first walk from the entries over what Dynamo would trace, collecting hazard hits.

Breadth-first means the first chain that reaches a site is a shortest one. Each node is a
function together with its receiver class (virtual dispatch differs per subclass) and, for
decorator wrappers, the function the wrapper wraps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from dynacheck import model as m
from dynacheck.static import dynamo
from dynacheck.static.argument_calls import argument_called
from dynacheck.static.dynamo import Boundaries
from dynacheck.static.ir import names_in
from dynacheck.static.summary import CallSite
from dynacheck.static.partial_values import Obj, Ref, known_name, sets_once
from dynacheck.static.startup import _surely
from dynacheck.static.value_types import allocation_label, passes_ctx, receiver_key
from dynacheck.static.value_uses import TENSOR
from dynacheck.static.values import Evaluator, Scope, Value, evolve, weaker

MAX_NODES = 20_000
MAX_OTHER_CALLERS = 8

TRACE = "trace"  # Dynamo traces this code: untraceable calls break the graph
TRACE_TIME = "trace_time"  # allow_in_graph / nonstrict_trace body: runs at trace and run time
CONSTANT = "constant"  # assume_constant_result body: runs once at trace time


class NodeKey(NamedTuple):
    """A tuple, so its hash and comparison run in C: a census replays each expansion's keys into
    the tables of many walks."""

    module: str
    qualname: str
    self_cls: str = ""
    bound: tuple = ()
    mode: str = TRACE


@dataclass
class Node:
    key: NodeKey
    func: Value
    bound: tuple
    parent: NodeKey | None
    call_line: int  # line in the parent where this node is called
    via: str
    confidence: str
    note: str = ""
    loop: str = ""  # the parent's call is inside this loop
    others: list["Node"] = field(default_factory=list)  # other calls that reach the same node
    conditions: tuple = ()  # model.Condition: what this edge (the call into the node) depends on
    conditional: bool = False  # this edge or one above it depends on an open deployment fact
    chained: int = 0  # calls inside the callee expression (`f(x).g()` calls f first): trace order on a line
    scope: Scope | None = None  # the scope the walk expanded this node in (Evaluator.walk_scope), once expanded


@dataclass
class Hit:
    """One hazard reached: the call site in node `at`, and what it is."""

    at: NodeKey
    call: CallSite
    callee: str  # external qualified name, method name, or the boundary's function
    kind: str  # call | method | boundary | pruned
    boundary: str = ""  # for kind=boundary: disable | allow_in_graph | ...; for pruned: the guard text
    mode: str = TRACE
    confidence: str = "high"
    note: str = ""
    conditions: tuple = ()  # what the hazard call itself depends on (its guards, its callee's binding)


@dataclass
class Walk:
    nodes: dict[NodeKey, Node] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    unresolved: int = 0
    truncated: bool = False
    entry_defaults: bool = False  # entries were called with their required arguments only (Reacher.walk)
    wrapper_roots: dict = field(default_factory=dict)  # root key of a decorator's wrapper -> (module, name) of its entry
    # (root key, call, parameter): an entry called with required arguments only calls what the caller passes
    argument_calls: list = field(default_factory=list)
    # (node, the expansion replayed for it or None), in the order the walk expanded them: what the walk is
    # made of (static/scan_reuse.py checks a later deployment's scan of the same entry against it)
    expanded: list = field(default_factory=list)


class Reacher:
    def __init__(self, evaluator: Evaluator, boundaries: Boundaries,
                 is_hazard: Callable[[str, str], bool]) -> None:
        self.ev = evaluator
        self.bd = boundaries
        self.is_hazard = is_hazard  # (kind "call"|"method", name) -> a rule matches
        self._prefetch = evaluator.index.prefetch  # told what the walk has queued (prefetch.py)

    def walk(self, entries: list[Value], defaults: bool = False) -> Walk:
        """Breadth-first, unconditional edges first: every node reachable on the deployment as given
        is reached (with a shortest such chain) before any node that needs an open fact. With
        `defaults`, each entry is called with its required arguments only (entry_defaults)."""
        result = Walk(entry_defaults=defaults)
        queue: deque[NodeKey] = deque()
        self._deferred: deque[NodeKey] = deque()
        self._entry_keys: dict[tuple[str, str], tuple] = {}
        done: set[NodeKey] = set()
        for entry in entries:
            bound = self.entry_defaults(entry) if defaults else ()
            key = self._key(entry, bound, TRACE)
            if defaults:
                self._wrapper_roots(entry, bound, key, result, queue)
            if key not in result.nodes:
                result.nodes[key] = Node(key, entry, bound, None, 0, m.VIA_ENTRY, "high")
                queue.append(key)
        while queue or self._deferred:
            if len(result.nodes) > MAX_NODES:
                result.truncated = True
                break
            key = queue.popleft() if queue else self._deferred.popleft()
            if key in done:
                continue
            done.add(key)
            node = result.nodes[key]
            scope = node.scope = self.ev.walk_scope(node.func, node.bound)
            if scope is None or scope.function is None:
                result.expanded.append((node, None))
                continue
            expansion = self._expansion(key, scope)
            result.expanded.append((node, expansion))
            self._replay(node, expansion, result, queue)
        return result

    def _wrapper_roots(self, entry: Value, bound: tuple, key: NodeKey, result: Walk, queue: deque) -> None:
        """An API entry is called through what its decorators return: a wrapper with a first-call flag is a
        root walked first (FlashInfer 0.7.4's experimental-API wrapper warns on its first call before the
        body runs, api_logging.py:2740-2747), and every call of the entry from there links to the entry's
        own root, which keeps its required-arguments reading (a wrapper passes `*args, **kwargs`).

        Only such wrappers: a dispatch wrapper (`@backend_requirement`, utils.py:1364) is read without its
        factory's arguments (`backend_checks={}`), which the decorator reading does not bind, and walked
        as a root it named a warning no call reaches as `nvfp4_kv_dequantize`'s first break (measured)."""
        effect = self.bd.effect(entry) if entry.kind == "func" else None
        if effect is None or effect.kind != dynamo.WRAPPER:
            return
        for wrapper, wrapper_bound in effect.wrappers:
            fn = self.ev.index.function(wrapper.module, wrapper.name)
            if fn is None or not _first_call_flag(fn):
                continue
            self._entry_keys[(entry.module, entry.name)] = (bound, key)
            root = self._key(wrapper, wrapper_bound, TRACE)
            if root not in result.nodes:
                result.nodes[root] = Node(root, wrapper, wrapper_bound, None, 0, m.VIA_ENTRY, "high")
                result.wrapper_roots[root] = (entry.module, entry.name)
                queue.append(root)

    def _key(self, func: Value, bound: tuple, mode: str) -> NodeKey:
        """A function with its receiver class and bound parameters; a receiver built without the quant
        config its class takes is its own node: its quant method differs from its quantized siblings'
        (GPT-OSS's attention projections beside its MLP's, sglang `models/gpt_oss.py:455-469`)."""
        bound_key = tuple((name, tuple(v.key() for v in values)) for name, values in bound)
        receiver = func.self_cls
        name = receiver.name if receiver is not None else ""
        if receiver is not None and receiver.expr is not None and self.ev.built_unquantized(receiver):
            name += " (unquantized)"
        return NodeKey(func.module, func.name, name, bound_key, mode)

    # A node's expansion (the hazards its calls hit and the functions they enter) depends on its
    # scope (function, receiver, bound parameters) and mode only, so it is worked out once for the
    # evaluator's life and replayed: a census walks the same layers from every model's forward.
    # Confidences in it are the calls' own; a replay lowers them to the node's.

    def _expansion(self, key: NodeKey, scope: Scope) -> tuple:
        memo = ("expand", id(scope), key.mode)
        hit = self.ev.sites.get(memo)
        if hit is not None and hit[0] is scope:
            self.ev.partial.reads |= hit[2]  # the walk replaying it reads what computing it read
            return hit[1]
        saved = self.ev.reads_begin()
        actions: list[tuple] = []
        for call in _in_order(scope.function.calls, self._property_reads(scope)):
            self._visit_call(key, scope, call, actions)
        expansion = tuple(actions)
        self.ev.sites[memo] = (scope, expansion, self.ev.reads_end(saved))
        return expansion

    def _replay(self, node: Node, actions: tuple, result: Walk, queue: deque) -> None:
        for action in actions:
            kind = action[0]
            if kind == "hit":
                _, call, callee, hit_kind, boundary, confidence, note, conditions = action
                result.hits.append(Hit(node.key, call, callee, hit_kind, boundary, node.key.mode,
                                       weaker(node.confidence, confidence), note, conditions))
            elif kind == "push":
                func = action[2]
                root = self._entry_keys.get((func.module, func.name)) if self._entry_keys else None
                if root is not None and action[4] != root[1]:  # through a wrapper: the entry's own root
                    action = action[:3] + root + action[5:]
                self._link(node, action, result, queue)
            elif kind == "argument":
                if node.parent is None and result.entry_defaults:  # the entry's own argument, left unbound
                    result.argument_calls.append((node.key, action[1], action[2]))
            else:
                result.unresolved += 1

    def _visit_call(self, key: NodeKey, scope: Scope, call: CallSite, out: list) -> None:
        pruned = self.bd.pruned_under_compile(call.guards, scope) if call.guards else ""
        conditions: tuple = ()
        if call.guards and not pruned:
            reachable, conditions = self.ev.partial.guards(call.guards, scope)
            if not reachable:
                return  # a branch this deployment never takes
        self._call_conditions = conditions
        self._scope = scope
        if call.kind == "prop":
            getter = self.ev.property_getter(scope.self_cls, call.func[2]) if scope.self_cls is not None else None
            targets = [getter] if getter is not None else []
        else:
            targets = self._callees(call, scope)
        if call.kind == "with":
            targets = [self._enter(t) for t in targets]
        before = len(out)
        for target in targets:
            confidence = target.confidence
            if pruned:
                name = self._hazard_name(target, call)
                if name:
                    out.append(("hit", call, name, "pruned", pruned, confidence, "", conditions + target.cond))
                continue
            kind = target.kind
            if kind == "func" and target.confidence == "low" and not self._fits(target, call):
                continue  # a hierarchy candidate whose signature cannot take this call
            if kind == "func":
                self._enter_function(key, call, target, confidence, out)
            elif kind == "cls":
                init = self.ev.member(evolve(target, kind="inst"), "__init__", 1)
                for fn in init:
                    if fn.kind == "func":
                        self._push(key, call, evolve(fn, via=m.VIA_CONSTRUCTOR), confidence, out)
                    elif fn.kind == "ext" and self.is_hazard("call", target_name(target)):
                        out.append(("hit", call, target_name(target), "call", "", confidence, "",
                                    conditions + target.cond))
            elif kind == "inst":
                method = "forward" if self.ev.is_nn_module(target) else "__call__"
                via = m.VIA_MODULE_CALL if method == "forward" else target.via
                for fn in self.ev.member(target, method, 1):
                    if fn.kind == "func" and self._fits(fn, call, bound_method=True):
                        self._push(key, call, evolve(fn, via=via if target.via != m.VIA_HIERARCHY else target.via,
                                                     confidence=weaker(fn.confidence, target.confidence)),
                                   confidence, out)
            elif kind in ("ext", "extinst"):
                name = target.name
                if kind == "extinst":
                    name = f"{name}.__call__"
                if self.is_hazard("call", name):
                    out.append(("hit", call, name, "call", "", confidence, "", conditions + target.cond))
            elif kind == "unknown" and target.name and call.func and call.func[0] == "a":
                if self.is_hazard("method", target.name):
                    out.append(("hit", call, target.name, "method", "", weaker(confidence, "medium"), "",
                                conditions))
                else:
                    out.append(("unresolved",))
            elif kind == "unknown":
                out.append(("unresolved",))
        if not pruned and all(action[0] == "unresolved" for action in out[before:]):
            self._argument(call, scope, out)

    @staticmethod
    def _argument(call: CallSite, scope: Scope, out: list) -> None:
        """A call the walk neither follows nor names (its target unknown, or an opaque value such as
        `getattr(p, "x")`'s): when what it calls is a required argument left unbound, or read from one, which
        argument: an API entry's verdict then depends on what its caller passes (argument_calls.py)."""
        fn = scope.function
        param = argument_called(call, fn, fn.params[:fn.arity[1]])
        if param is not None and all(name != param for name, _ in scope.bound):  # bound: its default, known
            out.append(("argument", call, param))

    def _property_reads(self, scope: Scope) -> tuple:
        """`self.x` reads of the function that run a property's getter on this receiver, as calls
        of kind "prop" at the line of the read (`if self.is_aot:` runs `is_aot`, which probes a path)."""
        fn, receiver = scope.function, scope.self_cls
        if receiver is None or not fn.self_reads:
            return ()
        key = ("props", id(fn), receiver_key(receiver))
        hit = self.ev.sites.get(key)
        if hit is not None and hit[0] is fn:
            self.ev.partial.reads |= hit[2]
            return hit[1]
        saved = self.ev.reads_begin()
        reads = tuple(CallSite(line, ("a", ("n", "self"), attr), guards=guards, loop=loop, kind="prop")
                      for attr, line, guards, loop in fn.self_reads
                      if self.ev.property_getter(receiver, attr) is not None)
        self.ev.sites[key] = (fn, reads, self.ev.reads_end(saved))
        return reads

    def _callees(self, call: CallSite, scope: Scope) -> list[Value]:
        """What the call's function expression is, once per (call, scope) for the evaluator's life."""
        key = ("callees", id(call), id(scope))
        hit = self.ev.sites.get(key)
        if hit is not None and hit[0] is call and hit[1] is scope:
            self.ev.partial.reads |= hit[3]
            return list(hit[2])
        saved = self.ev.reads_begin()
        with self.ev.partial.at_line(scope, call.line):  # locals as assigned above the call (a dispatch key)
            targets = self.ev.eval(call.func, scope)
        self.ev.sites[key] = (call, scope, tuple(targets), self.ev.reads_end(saved))
        return targets

    def _fits(self, func: Value, call: CallSite, bound_method: bool | None = None) -> bool:
        """Whether the call's arguments fit the function's parameters (narrows hierarchy fallbacks)."""
        scope = self.ev.function_scope(func)
        if scope is None or scope.function is None:
            return True
        positional, required, varargs, varkw = scope.function.arity
        bound = func.self_cls is not None if bound_method is None else bound_method
        if bound and scope.function.params[:1] in (("self",), ("cls",)) or passes_ctx(func, scope.function.params):
            positional, required = positional - 1, max(required - 1, 0)
        given = call.positional
        if given > positional and not varargs:
            return False
        names = set(scope.function.params)
        if not varkw and any(name not in names for name in call.keywords):
            return False
        return given + len(call.keywords) >= required or varargs or varkw

    def _enter(self, value: Value) -> Value:
        """`with x:` calls x.__enter__."""
        if value.kind in ("ext", "extinst"):
            return Value("ext", name=f"{value.name}.__enter__", confidence=value.confidence)
        if value.kind == "inst":
            found = self.ev.member(value, "__enter__", 1)
            return found[0] if found else Value("unknown")
        return Value("unknown")

    def _hazard_name(self, target: Value, call: CallSite) -> str:
        if target.kind in ("ext", "extinst") and self.is_hazard("call", target.name):
            return target.name
        if target.kind == "unknown" and target.name and self.is_hazard("method", target.name):
            return target.name
        return ""

    def _enter_function(self, key: NodeKey, call: CallSite, func: Value, confidence: str, out: list) -> None:
        effect = self.bd.effect(func)
        kind = effect.kind
        note = "; ".join(n for n in effect.notes if n)
        if kind == dynamo.DISABLE:
            out.append(("hit", call, qualified(func), "boundary", "disable", confidence, note,
                        self._call_conditions + func.cond))
            return
        if kind == dynamo.OPAQUE:
            return
        if kind == dynamo.OPAQUE_NO_FAKE:
            out.append(("hit", call, qualified(func), "boundary", kind, confidence, note,
                        self._call_conditions + func.cond))
            return
        if kind in (dynamo.ALLOW_IN_GRAPH, dynamo.NONSTRICT, dynamo.CONSTANT):
            out.append(("hit", call, qualified(func), "boundary", kind, confidence, note,
                        self._call_conditions + func.cond))
            inner_mode = CONSTANT if kind == dynamo.CONSTANT else TRACE_TIME
            self._push(key, call, func, confidence, out, mode=inner_mode, note=note)
            return
        if kind == dynamo.WRAPPER:
            inside = any((key.module, key.qualname) == (w.module, w.name) for w, _ in effect.wrappers)
            if inside:  # the wrapper's own call of the function it wraps: the body, under the wrapper's guards
                self._push(key, call, func, confidence, out, note=note)
                return
            for wrapper, bound in effect.wrappers:
                self._push(key, call, wrapper, confidence, out, bound=bound, note=note)
            if all(self._calls_wrapped(wrapper, bound) for wrapper, bound in effect.wrappers):
                return  # the body is reached through the wrapper's own call (a dict cache's `if key not in`)
        self._push(key, call, func, confidence, out, note=note)

    def _calls_wrapped(self, wrapper: Value, bound: tuple) -> bool:
        """Whether the wrapper calls the function it wraps by the decorator's parameter name."""
        fn = self.ev.index.function(wrapper.module, wrapper.name)
        names = {name for name, _ in bound}
        return fn is not None and any(c.func and c.func[0] == "n" and c.func[1] in names for c in fn.calls)

    def _push(self, key: NodeKey, call: CallSite, func: Value, confidence: str, out: list,
              bound: tuple = (), mode: str | None = None, note: str = "") -> None:
        """Record a call into `func`: its node key and the edge's facts (replayed by `_link`)."""
        mode = mode or key.mode
        if not bound and func.kind == "func" and self.ev.partial.dep.given:
            bound = self._constant_arguments(func, call)
        conditions = self._call_conditions + tuple(c for c in func.cond if c not in self._call_conditions)
        out.append(("push", call, func, bound, self._key(func, bound, mode), weaker(confidence, func.confidence),
                    func.note or note, conditions, _calls_in(call.func)))

    def _link(self, node: Node, action: tuple, result: Walk, queue: deque) -> None:
        """A recorded call out of `node`: its callee's node, reached first or again."""
        key, conditions = action[4], action[7]  # the node is built (`_edge`) only when the walk keeps it
        conditional = node.conditional or bool(conditions)
        existing = result.nodes.get(key)
        if existing is not None:
            if existing.conditional and not conditional:
                # a way in that holds on this deployment: it becomes the node's chain
                edge = _edge(node, action, conditional)
                edge.others = [existing, *existing.others][:MAX_OTHER_CALLERS]
                existing.others = []
                result.nodes[key] = edge
                queue.append(key)
                return
            if existing.parent != node.key and len(existing.others) < MAX_OTHER_CALLERS:
                if all(o.parent != node.key for o in existing.others):
                    existing.others.append(_edge(node, action, conditional))
            return
        result.nodes[key] = _edge(node, action, conditional)
        (self._deferred if conditional else queue).append(key)
        if self._prefetch is not None:
            self._prefetch.queued(key.module, key.qualname)

    def _constant_arguments(self, func: Value, call: CallSite) -> tuple:
        """Parameters the callee branches on, bound to the constants this call passes (or their
        defaults): `build(need_lock=False)` never takes the lock; () when nothing is decided.
        Once per (call, scope, callee) for the evaluator's life: the walk starts with nothing in
        progress, so the answer does not depend on how the site was reached."""
        key = ("arguments", id(call), id(self._scope), func.module, func.name, func.self_cls)
        hit = self.ev.sites.get(key)
        if hit is not None and hit[0] is call and hit[1] is self._scope:
            self.ev.partial.reads |= hit[3]
            return hit[2]
        saved = self.ev.reads_begin()
        bound = self._bind_arguments(func, call)
        self.ev.sites[key] = (call, self._scope, bound, self.ev.reads_end(saved))
        return bound

    def _bind_arguments(self, func: Value, call: CallSite) -> tuple:
        fn = self.ev.index.function(func.module, func.name)
        if fn is None:
            return ()
        wanted = _guard_names(fn, self.ev.index.module(func.module))
        if not wanted:
            return ()
        params = list(fn.params)
        if params[:1] in (["self"], ["cls"]) and (func.self_cls is not None or call.func[:1] == ("a",)) \
                or passes_ctx(func, params):
            params = params[1:]
        given: dict[str, tuple] = {}
        for name, arg in zip(params, call.args):
            given[name] = arg
        for name, arg in call.kwargs:
            given[name] = arg
        if call.positional > len(call.args) or call.positional > len(params):
            return ()  # *args: positions are not known
        return self._bound(func, fn, wanted, given)

    def entry_defaults(self, func: Value) -> tuple:
        """An entry called with its required arguments only: the parameters it branches on that have
        defaults, bound to them (`deterministic=True` decides `if deterministic:`), as for a call.

        A parameter whose default the function refuses is required at run time and left unbound (a
        caller that works passes it): `if cu_seqlens is None: raise ValueError(...)` in FlashInfer
        0.7.4's `chunk_gated_delta_product` (gdp_prefill.py:168), reached with the other defaults."""
        fn = self.ev.index.function(func.module, func.name)
        if fn is None:
            return ()
        wanted = _guard_names(fn, self.ev.index.module(func.module))
        bound = self._bound(func, fn, wanted, {}) if wanted else ()
        refused = self._refused_defaults(func, fn, bound)
        return tuple((name, values) for name, values in bound if name not in refused)

    def _refused_defaults(self, func: Value, fn, bound: tuple) -> set[str]:
        """The bound parameters `p` (default None) of each `raise` run under `if p is None:` whose other
        tests are all decided its way with the defaults bound (outside any `try`: summary.raises); a test
        of a required argument is the caller's choice, not decided."""
        none_bound = {name for name, values in bound if fn.defaults.get(name) == ("n", "None")}
        refused: set[str] = set()
        scope = None
        for _, guards in fn.raises:
            names = [_none_tested(test) if taken else None for test, taken, _ in guards]
            at = next((i for i, name in enumerate(names) if name in none_bound), None)
            if at is None:
                continue
            others = guards[:at] + guards[at + 1:]
            if others:
                scope = scope or self.ev.function_scope(func, bound)
                if scope is None or not all(_surely(self.ev, test, taken, scope) for test, taken, _ in others):
                    continue  # `elif input_layout in (...): if block_tables is None: raise`: one way of many
            refused.add(names[at])
        return refused

    def _bound(self, func: Value, fn, wanted: frozenset, given: dict[str, tuple]) -> tuple:
        bound = []
        callee_scope = None
        for name in sorted(wanted):
            if name in given:
                result = self.ev.partial.const(given[name], self._scope, 0)
            elif name in fn.defaults:
                callee_scope = callee_scope or self.ev.function_scope(func)
                if callee_scope is None:
                    continue
                result = self.ev.partial.const(fn.defaults[name], callee_scope, 0)
            else:
                continue
            if result.values is not None and len(result.values) == 1:
                only = next(iter(result.values))
                if isinstance(only, (bool, int, float, str, type(None), Obj)):
                    bound.append((name, (Value("known", name=known_name((only,)), items=(only,)),)))
                elif isinstance(only, Ref) and only.value.kind == "inst" and only.value.expr:
                    # an object built from known arguments (a config dataclass): one node per allocation
                    label = f"{only.value.name}@{allocation_label(only.value)}"  # no id(): a stored evaluator keeps it
                    bound.append((name, (Value("known", name=label, items=(only,)),)))
        return tuple(bound)


def _edge(node: Node, action: tuple, conditional: bool) -> Node:
    """The callee's node as reached by this call out of `node` (a `_push` action)."""
    _, call, func, bound, key, confidence, note, conditions, chained = action
    return Node(key, func, bound, node.key, call.line, func.via, weaker(node.confidence, confidence),
                note, call.loop, conditions=conditions, conditional=conditional, chained=chained)


def _in_order(calls: list, reads: tuple):
    """The function's calls in their recorded order, each property read before the first call at
    or after its line (the arguments of `FileLock(self.lock_path)` are read before the call)."""
    if not reads:
        yield from calls
        return
    pending = sorted(reads, key=lambda r: r.line)
    at = 0
    for call in calls:
        while at < len(pending) and pending[at].line <= call.line:
            yield pending[at]
            at += 1
        yield call
    yield from pending[at:]


def _calls_in(expr) -> int:
    count, stack = 0, [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple) and node:
            count += node[0] == "c"
            stack.extend(x for x in node[1:] if isinstance(x, tuple))
    return count


_GUARD_NAMES: dict[int, tuple] = {}  # id -> (summary, names): the summary is kept so its id is not reused


def _first_call_flag(fn) -> bool:
    """A call of the function under `if not flag:` where `flag` is the enclosing function's (`nonlocal`)."""
    return bool(fn.nonlocals_declared) and any(taken and sets_once(test, fn)
                                               for call in fn.calls for test, taken, _ in call.guards)


def _none_tested(test) -> str | None:
    """`p` of the test `p is None`."""
    if test and test[0] == "cmp" and len(test[2]) == 1 and test[2][0] == ("Is", ("n", "None")) \
            and test[1] and test[1][0] == "n":
        return test[1][1]
    return None


def _guard_names(fn, module=None) -> frozenset:
    """Parameters that decide branches here or below: read by a branch test (directly or through a
    local assigned from them: `use_grouped = config.use_grouped`), or passed on to a call, where the
    callee may branch on them (`select_experts(topk_config=...)` -> `if topk_group * n_group >= topk`)."""
    key = id(fn)
    if key not in _GUARD_NAMES or _GUARD_NAMES[key][0] is not fn:
        tests = [t for call in fn.calls for t, _, _ in call.guards]
        names = names_in(tests)
        for local in list(names):
            for value in fn.assigns.get(local, ()):
                if value and value[0] not in ("fn", "cls"):
                    names |= names_in([value])
        # an f-string argument is text (a name, a message): the callee does not branch on the parameters in it
        names |= names_in([a for call in fn.calls if not _introspection(call, fn, module)
                           for a in (*call.args, *(v for _, v in call.kwargs)) if a and a[0] != "fs"])
        _GUARD_NAMES[key] = (fn, frozenset(names & set(fn.params) - {"self", "cls"} - _tensors_only(fn)))
    return _GUARD_NAMES[key][1]


INTROSPECTION = frozenset({"getattr", "hasattr", "isinstance", "issubclass"})


def _introspection(call: CallSite, fn, module) -> bool:
    """A call of Python's own `getattr`/`hasattr`/`isinstance`/`issubclass` (the name bound nowhere in the
    function or its module): the walk enters no body there, so a parameter passed only to it decides no
    callee's branch (`use_intel_amx_backend(layer)` returns `getattr(layer, ...)`; bound, each linear
    layer of a census was its own node). What it returns still counts where a test reads it."""
    func = call.func
    if not func or func[0] != "n" or func[1] not in INTROSPECTION:
        return False
    name = func[1]
    return not (name in fn.params or name in fn.assigns or name in fn.local_imports
                or (module is not None and name in module.bindings))


def _tensors_only(fn) -> set[str]:
    """Parameters that can hold nothing but a tensor (`hidden_states: torch.Tensor`, no default): no
    value the walk binds (a bool, a number, a string, None, a config object) can be passed there, so
    their arguments are not evaluated. `Optional[torch.Tensor]` and a `= None` default are kept:
    `residual=None` picks the branch (`if residual is None:`)."""
    return {name for name, kind in fn.param_annotations.items()
            if kind == TENSOR and name not in fn.defaults and fn.param_types.get(name, ("q",))[0] != "q"}


def qualified(func: Value) -> str:
    return f"{func.module}.{func.name}" if func.module else func.name


def target_name(value: Value) -> str:
    return value.name if value.kind in ("ext", "extinst") else qualified(value)

"""Which values are tensors, and where a tensor is used as a Python value (value hazards).

A small dataflow over the functions the walk reached, run after the walk:
- seeds: the entry's parameters (except `self`), parameters annotated `Tensor`, and parameters
  whose argument is a tensor at a call the walk followed (caller to callee, in walk order);
- a name is a tensor if any value assigned to it is (flow-insensitive: one set per function,
  no kills; a name that is a tensor on one path counts everywhere in the function);
- tensors come from torch functions and classes (`torch.*`, `nn.Parameter`), calls of nn.Module
  instances, tensor methods other than the few that return Python values (`size`, `dim`...),
  arithmetic and comparisons with a tensor, indexing and iterating a tensor, `self.x` assigned a
  torch value, and calls of functions that return one (annotated `-> Tensor` or analysed).
A "scalar" is a Python number read out of a tensor (`.item()`, `int(t)`): branching on one is a
data-dependent expression that fullgraph rejects. What it does not see: containers of tensors,
tensors stored on objects other than `self`, buffers registered by name, dynamic attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dynacheck.static.ir import Expr, dotted, render
from dynacheck.static.memo import drop_reading
from dynacheck.static.reach import TRACE, Hit, NodeKey, Walk
from dynacheck.static.summary import CallSite, FunctionSummary
from dynacheck.static.value_types import passes_ctx
from dynacheck.static.value_uses import TENSOR, is_tensor_annotation
from dynacheck.static.values import Evaluator, Scope, Value, evolve

# Tensor methods and attributes whose result is not a tensor.
PYTHON_METHODS = frozenset({
    "item", "tolist", "size", "dim", "ndimension", "numel", "nelement", "element_size", "stride",
    "is_contiguous", "is_floating_point", "is_complex", "data_ptr", "get_device", "type", "storage_offset",
    "untyped_storage", "numpy", "__len__", "is_pinned", "is_shared", "has_names", "requires_grad_",
    "register_hook", "backward", "dim_order", "is_signed", "is_set_to", "storage", "nbytes", "itemsize",
})
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "grad", "data", "real", "imag"})
SCALAR_METHODS = frozenset({"item"})
# Tensor methods whose output shape depends on the data (GB0036).
DYNAMIC_SHAPE_METHODS = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "bincount"})
# torch callables that do not return tensors.
NOT_TENSOR_PREFIXES = ("torch.compiler.", "torch._dynamo.", "torch.cuda.", "torch.distributed.", "torch.jit.",
                       "torch.backends.", "torch.library.", "torch.utils.", "torch._C.", "torch.autograd.graph.",
                       "torch.is_", "torch.get_", "torch.set_", "torch.are_", "torch.finfo", "torch.iinfo",
                       "torch.Size", "torch.device", "torch.dtype", "torch.Generator", "torch.no_grad",
                       "torch.enable_grad", "torch.inference_mode", "torch.manual_seed", "torch.save", "torch.load",
                       "torch.ops.", "torch.typename", "torch.numel", "torch.cond", "torch.cpu.")
SCALAR_ANNOTATIONS = frozenset({"bool", "int", "float", "str", "None", "bytes"})
TENSOR_CLASSES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})
# Tensor methods whose result holds integers (for `.tolist()`: GB0033 on integers, GB0109 on floats).
INT_METHODS = frozenset({"long", "int", "short", "argmax", "argmin", "argsort", "nonzero", "bincount", "numel"})
KEEP_DTYPE_METHODS = frozenset({"abs", "clamp", "remainder", "flatten", "view", "reshape", "contiguous", "clone",
                                "sum", "cumsum", "max", "min", "flip", "squeeze", "unsqueeze", "t", "cpu", "cuda"})
INT_TOLIST = "int_tensor_tolist"
SHAPE_CHECKED = {"torch.nn.functional.one_hot": ("num_classes", 2)}  # needs this keyword or positional count

CLASS_KIND = "class_in_compiled_function"
FORMATTED = "tensor_formatted"  # a formatted tensor becomes text (DC115)
FORMATTED_METHOD = "tensor_formatted_method"  # a str method of a formatted tensor: another break (GB0156)
LOOP_KIND = "break_in_layer_loop"
# Comparisons that are Python bools whatever the operands hold, as a branch test reads them too
# (value_uses._NAME_TESTS): `fixed = cu_seqlens is None` then `if fixed:` asks no tensor's truth.
BOOL_COMPARISONS = frozenset({"Is", "IsNot", "In", "NotIn"})
# Value hazards that are graph breaks under the default compile (a loop around one is GB7000).
ADDRESS_KIND = "tensor_address_arithmetic"
BREAKING = frozenset({"tensor_branch", "tensor_to_scalar", "tensor_in_math", "tensor_in_builtin", "tensor_repr",
                      ADDRESS_KIND,
                      FORMATTED, FORMATTED_METHOD, "data_dependent_shape", "one_hot_without_classes",
                      CLASS_KIND})


@dataclass
class _Env:
    """What one reached function knows, decided name by name on demand (most locals are never asked).

    Each fact is flow-insensitive: a name is a tensor if any value assigned to it is one. While a
    name is being decided it counts as "no" (a cycle such as `y = y + t` is then decided by `t`).
    """

    scope: Scope
    seeds: set[str]
    depth: int = 0
    facts: dict[tuple[str, str], bool] = field(default_factory=dict)  # (fact, name) -> value
    partial: object = None  # the evaluator's partial evaluator: its `reads` (deployment facts read)
    reads: int = 0  # every deployment fact any decision of this environment read (facts.GPU_FACT...)

    def decide(self, fact: str, name: str, test: Callable[[Expr], bool]) -> bool:
        """A decision reads what the evaluator reads for it; the environment keeps them all, and a
        decision taken from it adds them all to the computation that asked (a fork keeps an
        environment only when none is a fact the deployments differ in: TensorHazards.fork)."""
        key = (fact, name)
        partial = self.partial
        if key not in self.facts:
            self.facts[key] = False  # recursion guard
            saved, partial.reads = partial.reads, 0
            try:
                values = self.scope.function.assigns.get(name, ())
                self.facts[key] = any(test(v) for v in values if isinstance(v, tuple))
            finally:
                got = partial.reads
                self.reads |= got
                partial.reads = got | saved
        else:
            partial.reads |= self.reads
        return self.facts[key]


class TensorHazards:
    """Finds value hazards in the functions a walk reached; returns them as walk hits."""

    def __init__(self, evaluator: Evaluator, breaks_at: Callable[[str], bool] = lambda name: False,
                 compile_time: Callable[[Expr, Scope], bool | None] | None = None) -> None:
        self.ev = evaluator
        self.breaks_at = breaks_at  # external callable name -> a graph-break rule matches it
        self.compile_time = compile_time  # a test's value under Dynamo when known (is_compiling()), else None
        # memo tables; each entry keeps the deployment facts its computation read, last (see fork)
        self._returns: dict[tuple, tuple[bool, int]] = {}
        self._evals: dict[tuple, tuple] = {}  # (id(scope), expr) -> (scope kept alive, values, reads)
        self._nodes: dict[tuple, tuple] = {}  # (id(scope), seeds) -> (scope, its environment, its hits, reads)
        self._seed_sets: dict[tuple, tuple] = {}  # (id(function), its callers' (id(env), line)) -> seeds

    def fork(self, evaluator: Evaluator, compile_time, dirty: int) -> "TensorHazards":
        """These hazards for a forked evaluator (Evaluator.fork: the census walks each deployment of
        a chain with a fork of the one before): the entries whose computation, and whose environment's
        decisions, read no fact in `dirty`. Scopes are the forked evaluator's too, so ids still name them.
        Seed sets are keyed by environments and not kept."""
        child = TensorHazards(evaluator, self.breaks_at, compile_time)
        child._returns = {k: v for k, v in self._returns.items() if not v[1] & dirty}
        child._evals = {k: v for k, v in self._evals.items() if not v[2] & dirty}
        child._nodes = {k: v for k, v in self._nodes.items() if not (v[3] | v[1].reads) & dirty}
        for _, env, _, _ in child._nodes.values():
            env.partial = evaluator.partial
        return child

    def forget(self, facts: int) -> None:
        """Drop, in place, what read any of `facts` (Evaluator.forget); seed sets name environments by
        id, so they go too."""
        drop_reading(self._returns, facts)
        drop_reading(self._evals, facts)
        drop_reading(self._nodes, facts, lambda entry: entry[3] | entry[1].reads)
        self._seed_sets.clear()

    def hits(self, walk: Walk, used: list | None = None) -> list[Hit]:
        """A function's hazards depend on its scope and which of its parameters hold tensors only, so
        they are found once per such pair for this object's life (a census keeps one per deployment).
        `used`, when given, receives each node's memo key and entry (static/scan_reuse.py)."""
        envs: dict[NodeKey, _Env] = {}
        found: list[Hit] = []
        for key, node in walk.nodes.items():  # insertion order is the walk's breadth-first order
            if key.mode != TRACE:
                continue
            scope = node.scope or self.ev.walk_scope(node.func, node.bound)
            if scope is None or scope.function is None:
                continue
            seeds = self._seeds(scope.function, node, walk, envs)
            memo = (id(scope), seeds)
            cached = self._nodes.get(memo)
            if cached is None or cached[0] is not scope:
                saved = self.ev.reads_begin()
                env = self.environment(scope, seeds)
                found_here = self._hazards(key, env)
                cached = self._nodes[memo] = (scope, env, found_here, self.ev.reads_end(saved))
            else:
                self.ev.partial.reads |= cached[3] | cached[1].reads
            if used is not None:
                used.append((memo, cached))
            envs[key] = cached[1]
            found.extend(hit if hit.at == key else evolve(hit, at=key) for hit in cached[2])
        return found

    # ----- tensor-ness ---------------------------------------------------------------------

    def _eval(self, expr: Expr, scope: Scope) -> list[Value]:
        """The evaluator's candidates (first four), once per scope and expression: the fixpoint repeats."""
        key = (id(scope), expr)
        found = self._evals.get(key)
        if found is None:
            saved = self.ev.reads_begin()
            values = self.ev.eval(expr, scope)[:4]
            found = self._evals[key] = (scope, values, self.ev.reads_end(saved))
        else:
            self.ev.partial.reads |= found[2]
        return found[1]

    def environment(self, scope: Scope, seeds: set[str], depth: int = 0) -> _Env:
        return _Env(scope, set(seeds), depth, partial=self.ev.partial)

    def is_tensor(self, expr: Expr, env: _Env, depth: int = 0) -> bool:
        kind = expr[0] if expr else "?"
        if kind == "n":
            name = expr[1]
            return name in env.seeds or env.decide("tensor", name, lambda v: self.is_tensor(v, env, depth))
        if kind == "a":
            base = expr[1]
            if self.is_tensor(base, env, depth):
                return expr[2] in TENSOR_ATTRS
            if base == ("n", "self"):
                return any(self._tensor_value(v) for v in self._eval(expr, env.scope))
            return False
        if kind == "c":
            return self._call_is_tensor(expr, env, depth)
        if kind == "cmp" and len(expr) > 2 and all(op in BOOL_COMPARISONS for op, _ in expr[2]):
            return False  # `t is None` is a Python bool whatever `t` holds
        if kind in ("op", "cmp", "s", "sl", "it"):
            return self.is_tensor(expr[1], env, depth) or (kind == "op" and self.is_tensor(expr[2], env, depth))
        if kind == "idx":
            return self.is_tensor(expr[1], env, depth)
        if kind == "and":  # `a and b` is `b` whenever `a` is a true Python value
            return bool(expr[1]) and self.is_tensor(expr[1][-1], env, depth)
        if kind == "or":
            return any(self.is_tensor(e, env, depth) for e in expr[1])
        if kind == "if":
            return self.is_tensor(expr[1], env, depth) or self.is_tensor(expr[2], env, depth)
        if kind == "not":
            return False  # `not t` is a Python bool (the hazard is recorded where it is evaluated)
        return False

    def is_scalar(self, expr: Expr, env: _Env, depth: int = 0) -> bool:
        kind = expr[0] if expr else "?"
        if kind == "n":
            return env.decide("scalar", expr[1], lambda v: self.is_scalar(v, env, depth))
        if kind == "c":
            func = expr[1]
            if func and func[0] == "a" and func[2] in SCALAR_METHODS:
                return True  # `.item()` only exists on tensors (the engine matches it on any receiver too)
            if func in (("n", "int"), ("n", "float"), ("n", "bool")) and expr[2]:
                return self.is_tensor(expr[2][0], env, depth)
            return False
        if kind == "cmp" and len(expr) > 2 and all(op in BOOL_COMPARISONS for op, _ in expr[2]):
            return False
        if kind in ("op", "cmp"):
            return self.is_scalar(expr[1], env, depth) or (kind == "op" and self.is_scalar(expr[2], env, depth))
        if kind in ("and", "or"):
            return any(self.is_scalar(e, env, depth) for e in expr[1])
        if kind == "not":
            return self.is_scalar(expr[1], env, depth)
        return False

    def _call_is_tensor(self, expr: Expr, env: _Env, depth: int) -> bool:
        func, args = expr[1], expr[2]
        if func and func[0] == "a" and self.is_tensor(func[1], env, depth):
            return func[2] not in PYTHON_METHODS
        if func and func[0] == "n" and func[1] in ("int", "float", "bool", "len", "str", "repr", "isinstance"):
            return False
        for target in self._eval(func, env.scope):
            if target.kind == "ext" and _torch_returns_tensor(target.name):
                return True
            if target.kind == "extinst" and target.name.startswith("torch.nn."):
                return True  # calling an nn.Module instance built from torch.nn
            if target.kind == "inst" and self.ev.is_nn_module(target):
                return True
            if target.kind == "func" and depth < 3 and self._returns_tensor(target, args, env, depth + 1):
                return True
        return False

    def _returns_tensor(self, func: Value, args: tuple, env: _Env, depth: int) -> bool:
        scope = self.ev.function_scope(func)
        if scope is None or scope.function is None:
            return False
        fn = scope.function
        if is_tensor_annotation(fn.returns_annotation):
            return True
        if fn.returns_annotation in SCALAR_ANNOTATIONS:
            return False  # `def is_cpu() -> bool`: whatever its `and` chain ends with, a bool comes back
        params = _positional(fn, func.self_cls is not None)
        seeds = {p for p, a in zip(params, args) if self.is_tensor(a, env, depth)} | _annotated(fn)
        key = (func.key(), frozenset(seeds))
        if key not in self._returns:
            self._returns[key] = (False, 0)  # recursion guard
            saved = self.ev.reads_begin()
            inner = self.environment(scope, seeds, depth)
            # a function that also returns tuples (state bundles) is not taken as returning a tensor:
            # unpacking its result would otherwise make every element a tensor
            answer = (not any(r and r[0] == "q" for r in fn.returns)
                      and any(self.is_tensor(r, inner, depth) for r in fn.returns))
            self._returns[key] = (answer, self.ev.reads_end(saved) | inner.reads)
        else:
            self.ev.partial.reads |= self._returns[key][1]
        return self._returns[key][0]

    @staticmethod
    def _tensor_value(value: Value) -> bool:
        if value.kind != "extinst" or not value.name.endswith("()"):
            return False
        return _torch_returns_tensor(value.name[:-2])

    # ----- seeds -----------------------------------------------------------------------------

    def _seeds(self, fn: FunctionSummary, node, walk: Walk, envs: dict[NodeKey, _Env]) -> frozenset[str]:
        """Annotated tensors; for the entry its unannotated parameters when it annotates none (those
        with defaults left out when the walk called it with its required arguments only); otherwise
        the parameters whose argument is a tensor at a followed call (unless annotated with another type)."""
        if node.parent is None:
            seeds = _annotated(fn)
            params = tuple(p for p in _positional(fn, True) if p not in fn.param_annotations or p in seeds)
            seeds = seeds if seeds else seeds | set(params)
            return frozenset(seeds - set(fn.defaults) if walk.entry_defaults else seeds)
        # the callers' environments are this object's own (kept for its life), so their ids name them
        memo = (id(fn), tuple((id(envs.get(edge.parent)), edge.call_line) for edge in (node, *node.others)))
        found = self._seed_sets.get(memo)
        if found is None or found[0] is not fn:
            found = self._seed_sets[memo] = (fn, frozenset(self._caller_seeds(fn, node, envs)))
        return found[1]

    def _caller_seeds(self, fn: FunctionSummary, node, envs: dict[NodeKey, _Env]) -> set[str]:
        seeds = _annotated(fn)
        # each parameter keeps its position (a call's arguments are matched by it): one annotated with
        # another type, or with a default (usually a flag or an option), takes no caller's tensor
        required = fn.arity[1] - (len(fn.params[:fn.arity[0]]) - len(_positional(fn, True)))
        params = tuple(p if i < required and (p not in fn.param_annotations or p in seeds) else ""
                       for i, p in enumerate(_positional(fn, True)))
        for edge in (node, *node.others):
            caller = envs.get(edge.parent)
            if caller is None:
                continue
            # `F.apply(x, w)` passes x to forward's second parameter: ctx is autograd's
            given = params[1:] if passes_ctx(edge, _positional(fn, True)) else params
            callee = "apply" if given is not params else fn.name
            for call in _calls_at(caller.scope.function, edge.call_line, callee):
                seeds |= {p for p, a in zip(given, call.args) if p and self.is_tensor(a, caller)}
        return seeds

    # ----- hazards ---------------------------------------------------------------------------

    def _hazards(self, key: NodeKey, env: _Env) -> list[Hit]:
        out: list[Hit] = []
        for kind, line, expr, extra, in_loop, *guarded in env.scope.function.value_uses:
            hazard = self._classify(kind, expr, extra, env)
            if hazard == FORMATTED:
                line, hazard = self._formatted_at(line, extra, env)
                if not line:
                    continue  # never turned into text here: Dynamo never formats it
                extra = None
            if hazard:  # its statement's tests are read only for a hazard (most uses are none)
                conditions = self._use_conditions(guarded[0], env.scope) if guarded else ()
                if conditions is None:
                    continue  # under a test this deployment (or the compile) decides against it
                out.append(_hit(key, line, hazard, _label(kind, expr, extra), conditions))
                if in_loop and hazard in BREAKING:
                    out.append(_hit(key, line, LOOP_KIND, _label(kind, expr, extra), conditions))
        for call in env.scope.function.calls:
            hazard = self._call_hazard(call, env)
            if hazard:
                out.append(_hit(key, call.line, hazard, render(call.func)))
            # a break in a loop over a tensor (value hazards: any loop) makes Dynamo skip the frame
            if call.loop and (hazard in BREAKING or (self.is_tensor(("n", call.loop), env) and self._breaking_call(call, env))):
                out.append(_hit(key, call.line, LOOP_KIND, render(call.func)))
        return out

    def _use_conditions(self, guards: tuple, scope: Scope) -> tuple | None:
        """What a value use depends on, as for a call under the same tests (Reacher._visit_call); None
        when a test is decided against it (`if check_nan:` with check_nan=False, or under
        `if not torch.compiler.is_compiling():`)."""
        if self.compile_time is not None and any(self.compile_time(test, scope) not in (None, taken)
                                                 for test, taken, _ in guards):
            return None
        reachable, conditions = self.ev.partial.guards(guards, scope)
        return conditions if reachable else None

    def _formatted_at(self, line: int, goes, env: _Env) -> tuple[int, str]:
        """Where Dynamo turns a lazily formatted string into text (0: not in this function), and how.
        Giving it to a function or class of the scanned code, or to an exception's constructor, keeps
        it lazy (measured on torch 2.13: no break); a builtin or library call taking it, or an
        expression around it (`+`, `%`, `==`, `in`) formats it (GB0088 for `len`), and a method of it
        is an unsupported str method (GB0156). `goes`: value_uses' "format" extra."""
        if goes is None:
            return line, FORMATTED
        if isinstance(goes, tuple):  # ("arg", callee): given straight to a call
            return (line if self._takes_text(goes[1], env) else 0), FORMATTED
        needle = ("n", goes)
        for call in sorted((c for c in env.scope.function.calls if c.line > line), key=lambda c: c.line):
            if call.func and call.func[0] == "a" and call.func[1] == needle:
                return call.line, FORMATTED_METHOD  # `msg.startswith(...)`
            if needle in call.args:
                if self._takes_text(call.func, env):
                    return call.line, FORMATTED
            elif any(_mentions(a, needle) for a in call.args):
                return call.line, FORMATTED
        return 0, FORMATTED

    def _takes_text(self, func: Expr, env: _Env) -> bool:
        """Whether calling `func` with a lazily formatted string makes Dynamo format it."""
        targets = self._eval(func, env.scope)
        return not targets or not all(t.kind in ("func", "cls") or (t.kind == "ext" and _is_exception(t.name))
                                      for t in targets)

    def _breaking_call(self, call: CallSite, env: _Env) -> bool:
        """A call to an external callable that a graph-break rule matches (the walk reported it)."""
        return any(t.kind in ("ext", "extinst") and self.breaks_at(t.name if t.kind == "ext" else f"{t.name}.__call__")
                   for t in self._eval(call.func, env.scope))

    def _classify(self, kind: str, expr: Expr, extra, env: _Env) -> str:
        if kind == "class":
            return CLASS_KIND
        if kind == "test":
            expr = self._compiled_test(expr, env)
            if self._test_reads_tensor(expr, env):
                return "tensor_branch"
            return "branch_on_tensor_scalar" if self.is_scalar(expr, env) else ""
        if kind == "mask":
            return "data_dependent_shape" if self.is_tensor(extra, env) and self.is_tensor(expr, env) else ""
        if kind == "address":  # `data_ptr()` is a tensor's (or storage's) method: any receiver, as `.item()`
            return ADDRESS_KIND
        if not self.is_tensor(expr, env):
            return ""
        if kind == "convert":
            return "tensor_to_scalar"
        if kind == "index":
            if self.is_tensor(extra, env):
                return "data_dependent_shape" if _is_mask(expr, env, self) else ""
            # only a Python container indexed by a tensor calls `__index__` (an unknown base may be a tensor)
            containers = [v for v in self._eval(extra, env.scope) if v.kind == "cont"]
            return "tensor_to_scalar" if containers else ""
        if kind == "math":
            return "tensor_in_math"
        if kind == "builtin":
            return "tensor_repr" if extra == "repr" else "tensor_in_builtin"
        if kind == "format":
            return FORMATTED
        return ""

    def _compiled_test(self, expr: Expr, env: _Env) -> Expr:
        """The operands of an `and`/`or` test that Dynamo evaluates: `not is_compiling() and x.item() > 0`
        stops at the first operand, whose value under compile is known to decide the test."""
        if not expr or expr[0] not in ("and", "or") or self.compile_time is None:
            return expr
        decides = expr[0] == "or"  # `and` stops at a False operand, `or` at a True one
        kept = []
        for operand in expr[1]:
            kept.append(operand)
            if self.compile_time(operand, env.scope) is decides:
                return (expr[0], tuple(kept))
        return expr

    def _test_reads_tensor(self, expr: Expr, env: _Env) -> bool:
        """A test asks for the truth of every `and`/`or`/`not` operand it evaluates."""
        if expr and expr[0] in ("and", "or"):
            return any(self._test_reads_tensor(e, env) for e in expr[1])
        if expr and expr[0] == "not":
            return self._test_reads_tensor(expr[1], env)
        return self.is_tensor(expr, env)

    def is_int_tensor(self, expr: Expr, env: _Env) -> bool:
        """A tensor of integers: `.long()`, `argmax()`... and dtype-keeping methods or `%` on one."""
        kind = expr[0] if expr else "?"
        if kind == "n":
            return env.decide("int", expr[1], lambda v: self.is_int_tensor(v, env))
        if kind == "c" and expr[1] and expr[1][0] == "a":
            method, base = expr[1][2], expr[1][1]
            if method in INT_METHODS:
                return self.is_tensor(base, env)
            return method in KEEP_DTYPE_METHODS and self.is_int_tensor(base, env)
        if kind == "op":
            return self.is_int_tensor(expr[1], env) and not self.is_tensor(expr[2], env)
        return False

    def _call_hazard(self, call: CallSite, env: _Env) -> str:
        func = call.func
        if func and func[0] == "a" and func[2] == "tolist" and self.is_int_tensor(func[1], env):
            return INT_TOLIST
        if func and func[0] == "a" and func[2] in DYNAMIC_SHAPE_METHODS and self.is_tensor(func[1], env):
            return "data_dependent_shape"
        if func and func[0] == "a" and func[2] == "repeat_interleave":
            repeats = call.args[1:2] if not self.is_tensor(func[1], env) else call.args[:1]
            if repeats and self.is_tensor(repeats[0], env):
                return "data_dependent_shape"
        name = dotted(func) or ""
        if name.rpartition(".")[2] in ("one_hot",):
            for target in self._eval(func, env.scope)[:2]:
                keyword, count = SHAPE_CHECKED.get(target.name, ("", 0))
                if keyword and keyword not in call.keywords and call.positional < count:
                    return "one_hot_without_classes"
        return ""


def _hit(key: NodeKey, line: int, hazard: str, label: str, conditions: tuple = ()) -> Hit:
    return Hit(key, CallSite(line, ("n", label)), label, "boundary", hazard, TRACE, "medium", conditions=conditions)


def _is_exception(name: str) -> bool:
    """A builtin exception class (`builtins.ValueError`): its constructor keeps the message lazy."""
    short = name.removeprefix("builtins.")
    return "." not in short and (short.endswith(("Error", "Exception", "Warning")) or short == "Exception")


def _mentions(expr: tuple, needle: Expr) -> bool:
    """Whether `needle` occurs in an expression (or a tuple of them, such as call arguments)."""
    if expr == needle:
        return True
    parts = expr[1:] if expr and isinstance(expr[0], str) else expr
    return any(isinstance(e, tuple) and _mentions(e, needle) for e in parts)


def _label(kind: str, expr: Expr, extra) -> str:
    text = render(expr)
    if kind in ("convert", "builtin"):
        return f"{extra}({text})"
    if kind == "math":
        return f"{render(extra)}({text})"
    if kind in ("index", "mask"):
        return f"{render(extra)}[{text}]"
    if kind == "format":
        return f"f\"{{{text}}}\""
    if kind == "class":
        return f"class {text}"
    if kind == "address":
        return f"{text}.data_ptr() arithmetic"
    return text if text != "..." else "a tensor"


def _torch_returns_tensor(name: str) -> bool:
    if name in TENSOR_CLASSES:
        return True
    if not name.startswith("torch.") or name.startswith(NOT_TENSOR_PREFIXES):
        return False
    parts = name.split(".")
    if any(part[:1].isupper() for part in parts[:-1]) and not name.startswith("torch.Tensor."):
        return False  # an attribute of a class (`torch.nn.Module.cfg.get`): not a torch function
    if any(part.startswith("__") for part in parts[1:]):
        return False  # a module's metadata (`torch.__version__.split()`, `torch.__path__`): not a tensor
    return not parts[-1][:1].isupper()  # a class: a module or an object, not a tensor


def _is_mask(expr: Expr, env: _Env, hazards: TensorHazards, depth: int = 0) -> bool:
    if expr and expr[0] == "n":
        return env.decide("mask", expr[1], lambda v: _is_mask(v, env, hazards, depth))
    return bool(expr) and expr[0] == "cmp" and hazards.is_tensor(expr[1], env, depth)


def _annotated(fn: FunctionSummary) -> set[str]:
    return {p for p, kind in fn.param_annotations.items() if kind == TENSOR}


def _positional(fn: FunctionSummary, bound: bool) -> tuple[str, ...]:
    """The positional parameters (not `*args`/`**kwargs`, whose contents are not tracked)."""
    params = fn.params[:fn.arity[0]]
    if bound and params[:1] in (("self",), ("cls",)):
        return params[1:]
    return params


def _calls_at(fn: FunctionSummary, line: int, callee: str) -> list[CallSite]:
    """The caller's calls on the edge's line, narrowed to those naming the callee when several."""
    at = [c for c in fn.calls if c.line == line and c.kind == "call"]
    if len(at) <= 1:
        return at
    named = [c for c in at if (render(c.func).rpartition(".")[2] in (callee, "__init__")) or callee == "forward"]
    return named or at

"""A model that fails to build on every choice its checkpoint's config can make.

`startup._first_failure` follows only the layers a model surely builds, so a model whose layer type
the checkpoint picks was left walked even when every type it can pick fails: Qwen3-Next builds each
layer from `ALL_DECODER_LAYER_TYPES[config.layers_block_type[idx]]` (`models/qwen3_next.py:826`),
LFM2-MoE builds `self_attn` or `conv` by `if self.is_attention_layer:`, MiMo-V2-Flash builds the same
attention in both branches of `if self.is_swa_layer():`, and on an MXFP4 checkpoint each of those
layers hands the config to a linear layer that asserts it got a method (`layers/linear.py:330`).

Here, when that walk finds nothing, each constructor is read as a set of *worlds*: every way its
undecided branch tests can go (each `if` read independently, so worlds that cannot happen are read
too, which only makes a claim harder). In each world, the allocations whose tests all agree with it
run, and the world fails when one of them fails. An allocation fails when each instance it can make
fails: the classes a dict lookup by a config key can give (`ALL_DECODER_LAYER_TYPES[...]`), or the
items a layer factory's list holds. An instance fails when its own assert does (startup._failing_assert)
or when every world of its constructors fails; a world that runs a `raise` (outside a `try`) fails too,
but at least one world must fail at a layer, which is what the reason names. The model does not start when every world of its own
constructors fails.

Assumptions, as startup.py's: an assignment's `if` tests are its only guards (a `for` body is read as
run, a `match` case as taken), and a layer factory builds at least one layer. A constructor with
more than MAX_TESTS undecided tests is not split (no claim)."""

from __future__ import annotations

from dataclasses import replace
from itertools import product

from dynacheck.static import startup
from dynacheck.static.value_types import Value, allocation_label

MAX_TESTS = 6  # undecided tests one constructor is split over: 2**6 worlds
MAX_DEPTH = 40  # instances followed down from the model class


def failing_every_way(ev, model: Value, configs: list[Value], checked: dict[str, bool],
                      made_by: dict[tuple, list]) -> startup.Unbuildable | None:
    """The failure of the first world of `model`'s constructors when every world of them fails, else
    None. Call with the loader's context set, after startup._first_failure found nothing: `checked`
    holds whether each instance it reached is given the config (its own asserts did not fail), and
    `made_by` what each allocation it read makes."""
    return _Ways(ev, configs, model, checked, made_by).fails(model, "self", 0, top=True)


class _Ways:
    def __init__(self, ev, configs: list[Value], model: Value, checked: dict[str, bool],
                 made_by: dict[tuple, list]) -> None:
        self.ev, self.configs, self.model, self.checked, self.made_by = ev, configs, model, checked, made_by
        self.memo: dict[str, startup.Unbuildable | None] = {}  # allocation label -> its failure
        self.active: set[str] = set()
        self.count = 0

    def fails(self, inst: Value, path: str, depth: int, top: bool = False) -> startup.Unbuildable | None:
        label = allocation_label(inst)
        if label in self.memo:
            return self.memo[label]
        if label in self.active or depth > MAX_DEPTH or self.count >= startup.MAX_INSTANCES:
            return None  # a cycle or a budget spent: no claim
        self.count += 1
        self.active.add(label)
        try:
            if top or self.checked.get(label):  # the first walk read its asserts: none fails
                found = self._every_world(inst, path, depth)
            elif label in self.checked or not startup._given_the_config(self.ev, inst, self.model):
                found = None  # nothing it builds can be given the config through it
            else:
                found = startup._failing_assert(self.ev, inst, self.configs, self.model, path) \
                    or self._every_world(inst, path, depth)
        finally:
            self.active.discard(label)
        self.memo[label] = found
        return found

    def _every_world(self, inst: Value, path: str, depth: int) -> startup.Unbuildable | None:
        allocations = self._allocations(inst, path)
        sure = next((f for open_tests, made, where in allocations
                     if not open_tests and (f := self._all_fail(made, inst, where, depth)) is not None), None)
        if sure is not None:  # built whatever the tests say: the choice, if any, is above
            return sure
        raising = self._raising(inst)
        tests = list(dict.fromkeys([key for open_tests, _, _ in allocations for key, _ in open_tests]
                                   + [key for open_tests in raising for key, _ in open_tests]))
        if len(tests) > MAX_TESTS:
            return None
        first = None
        for world in product((True, False), repeat=len(tests)):
            taken = dict(zip(tests, world))
            failure = next((f for open_tests, made, where in allocations
                            if all(taken[key] is want for key, want in open_tests)
                            and (f := self._all_fail(made, inst, where, depth)) is not None), None)
            if failure is None:
                if any(all(taken[key] is want for key, want in open_tests) for open_tests in raising):
                    continue  # this world raises (`else: raise ValueError(...)`): it does not start either
                return None
            first = first or failure
        return replace(first, choice=first.choice or path) if first is not None else None

    def _all_fail(self, made: list[tuple[Value, str]], maker: Value, where: str,
                  depth: int) -> startup.Unbuildable | None:
        """The first instance's failure when every instance an allocation can make fails."""
        built_by = startup._BUILT_BY.get()
        failures = []
        for inst, suffix in made:
            built_by.setdefault(allocation_label(inst), maker)
            failure = self.fails(inst, where + suffix, depth + 1)
            if failure is None:
                return None
            failures.append(failure)
        first = failures[0]
        if len(made) > 1 and not first.choice:
            first = replace(first, choice=where + made[0][1])
        return first

    def _constructors(self, inst: Value):
        """Each `__init__` that surely runs for `inst`, with the scope it runs in (its class arguments bound)."""
        for cls in startup._init_chain(self.ev, inst):
            init = self.ev._own_init(cls)
            yield init, startup._init_scope(self.ev, inst, cls, init, self.ev.constructor_bindings(inst, cls, init))

    def _raising(self, inst: Value) -> list[tuple]:
        """The undecided tests of each `raise` its constructors may run outside a `try` (summary.raises)."""
        out = []
        for init, scope in self._constructors(inst):
            for _, guards in init.raises:
                open_tests = _open_tests(self.ev, guards, scope)
                if open_tests:  # one that always runs says nothing of a layer: no claim rests on it
                    out.append(open_tests)
        return out

    def _allocations(self, inst: Value, path: str) -> list[tuple[tuple, list, str]]:
        """Each allocation its constructors may run: (its undecided tests as ((test, line), taken)
        pairs, the instances it can make with their path suffix, where the instance holds it)."""
        ev, out, label = self.ev, [], allocation_label(inst)
        for init, scope in self._constructors(inst):
            for expr, guards, attr in _allocating(init):
                open_tests = _open_tests(ev, guards, scope)
                if open_tests is None:
                    continue  # decided against on this deployment
                made = self.made_by.get((label, id(expr)))
                made = _instances(made if made is not None else ev.eval(expr, scope, 1))
                if made:
                    out.append((open_tests, made, f"{path}.{attr}"))
        return out


def _allocating(init) -> list[tuple]:
    """(call, its guards, the attribute that keeps what it made) for each call whose result a
    constructor keeps in an attribute: `self.attn = Attention(...)`, or a local it keeps
    (`layers = make_layers(...)`, then `self.start, self.end, self.layers = layers` in one branch and
    `self.layers = layers` in the other: the local's own call is what builds, under its own guards;
    one in a loop may run no time and is left out)."""
    out, locals_kept = [], {}
    for attr, values in init.self_assigns.items():
        for expr, guards in zip(values, init.self_assign_guards.get(attr, ())):
            local = _local_of(expr)
            if local is not None and local not in init.params:
                if local not in locals_kept or expr[0] == "n":  # named after a plain `self.attr = local`
                    locals_kept[local] = attr
            elif startup._a_call(expr):
                out.append((expr, guards, attr))
    for local, attr in locals_kept.items():
        for value, (guards, in_loop) in zip(init.assigns.get(local, ()), init.assign_guards.get(local, ())):
            if startup._a_call(value) and not in_loop:
                out.append((value, guards, attr))
    return out


def _local_of(expr) -> str | None:
    """`x` of `x`, or of an item of it (`self.a, self.b = x`)."""
    if expr and expr[0] in ("s", "idx") and expr[1] and expr[1][0] == "n":
        expr = expr[1]
    return expr[1] if expr and expr[0] == "n" else None


def _open_tests(ev, guards, scope) -> tuple | None:
    """The guards left undecided, or None when one is decided against."""
    out = []
    for test, taken, line in guards:
        value, opens = ev.partial.truth(test, scope)
        if value is not None and not opens:
            if value is not taken:
                return None
            continue
        out.append(((test, line), taken))
    return tuple(out)


def _instances(made: list[Value]) -> list[tuple[Value, str]]:
    """The instances an allocation can make: each of its values when all are instances, else the
    instances a layer factory's list holds (`[]`); none when it can be anything else."""
    if made and all(v.kind == "inst" and v.expr is not None for v in made):
        return [(v, "") for v in made]
    listed = {allocation_label(i): i for v in made if v.kind == "cont" for i in v.items
              if i.kind == "inst" and i.expr is not None}
    if listed and not any(v.kind == "inst" for v in made):
        return [(i, "[]") for i in listed.values()]
    return []

"""What the evaluator keeps inside its values and scopes (an allocation's label, a scope's memo key)
belongs to that object only: a copy made with another field works it out again, and pickling leaves it out."""

from __future__ import annotations

import pickle

from dynacheck.static.summary import FunctionSummary, ModuleSummary
from dynacheck.static.value_types import Scope, Value, allocation_label, evolve
from dynacheck.static.values import _scope_key


def _scope(module: str = "pkg.mod", qualname: str = "Layer.__init__") -> Scope:
    summary = ModuleSummary(module=module, path=f"/tmp/{module}.py", is_package=False)
    return Scope(summary, FunctionSummary(qualname=qualname, name=qualname.rpartition(".")[2], line=1))


def test_a_copy_of_an_allocation_gets_its_own_label():
    where = _scope()
    inst = Value("inst", "pkg.mod", "TopK", expr=("c", ("n", "TopK"), (), ()), scope=where)
    label = allocation_label(inst)
    assert allocation_label(inst) is label  # kept: asked again, the same string
    as_class = evolve(inst, kind="cls")
    assert allocation_label(as_class) != label and allocation_label(as_class).startswith("<cls ")
    elsewhere = evolve(inst, expr=("c", ("n", "TopK"), (("k", 1),), ()))
    assert allocation_label(elsewhere) != label  # another allocation, another number
    renamed = evolve(inst, name="GroupedTopK")
    assert "GroupedTopK" in allocation_label(renamed)


def test_a_label_is_not_pickled_with_its_value():
    inst = Value("inst", "pkg.mod", "TopK", expr=("c", ("n", "TopK"), (), ()), scope=None)
    allocation_label(inst)
    hash(inst)
    state = pickle.loads(pickle.dumps(inst)).__dict__
    assert "_label" not in state and "_hash" not in state  # numbered per process, like str hashes


def test_a_scope_copied_with_other_bindings_has_its_own_memo_key():
    scope = _scope()
    key = _scope_key(scope)
    assert _scope_key(scope) is key
    bound = evolve(scope, bound=(("quant_config", (Value("const"),)),))
    assert _scope_key(bound) != key and _scope_key(bound)[3] == (("quant_config", (("const", "", "", ""),)),)
    receiver = evolve(scope, self_cls=Value("cls", "pkg.mod", "Layer"))
    assert _scope_key(receiver)[2] == "Layer" and _scope_key(receiver) != key


def test_a_value_built_by_its_own_init_is_the_dataclass_it_declares():
    """Value sets its fields straight into its dict (fast); it must still be the frozen dataclass the
    engine compares, hashes, copies and pickles: every field in order, its defaults, no assignment."""
    import dataclasses

    import pytest

    names = [f.name for f in dataclasses.fields(Value)]
    args = ("inst", "pkg.mod", "TopK", "self method", "medium", (1,), None, None, ("n", "x"), "a note", ("c",))
    built = Value(*args)
    assert [getattr(built, n) for n in names] == list(args)
    assert Value("ext") == Value(kind="ext", module="", name="", confidence="high", items=(), note="", cond=())
    assert Value("ext").via == dataclasses.fields(Value)[names.index("via")].default
    assert built == Value(**dict(zip(names, args))) and hash(built) == hash(Value(*args))
    assert dataclasses.replace(built, name="X") == Value(*args[:2], "X", *args[3:])
    assert pickle.loads(pickle.dumps(built)) == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.kind = "cls"

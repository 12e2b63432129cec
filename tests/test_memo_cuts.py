"""The partial evaluator keeps an unknown answer only when nothing inside it was cut short by where it
was asked (PartialEvaluator.cuts): a question asked too deep first must not poison the same question
asked shallow later, and an answer that is unknown on its own is worked out once."""

from __future__ import annotations

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.sources.resolve import resolve_target
from dynacheck.static.partial_values import MAX_DEPTH, known
from dynacheck.static.scan import ScanSession
from dynacheck.static.value_types import Value

MODULE = '''
class Layer:
    def __init__(self):
        self.size = 1 + (1 + (1 + 1))
        self.token = mystery()

    def forward(self, x):
        return self.size + self.token
'''


def _forward_scope(tmp_path, scan_cache):
    package = tmp_path / "memofx"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(MODULE)
    session = ScanSession.open([resolve_target(str(tmp_path), cache_dir=scan_cache)], scan_cache)
    evaluator = session.engine(DeploymentSpec())[1]
    layer = Value("cls", "memofx.model", "Layer")
    return evaluator.partial, evaluator.function_scope(Value("func", "memofx.model", "Layer.forward", self_cls=layer))


def test_an_answer_cut_short_by_a_deep_ask_is_not_kept_for_a_shallow_one(tmp_path, scan_cache):
    partial, scope = _forward_scope(tmp_path, scan_cache)
    size = ("a", ("n", "self"), "size")
    before = partial.cuts
    # asked so deep that `self.size` is found but its value's innermost `1 + 1` is past the depth limit
    assert partial.const(size, scope, MAX_DEPTH - 3).values is None
    assert partial.cuts > before
    assert partial.const(size, scope, 0).values == {4}  # asked again from the top: the assignment's value


def test_an_answer_unknown_on_its_own_is_kept(tmp_path, scan_cache):
    partial, scope = _forward_scope(tmp_path, scan_cache)
    token = ("a", ("n", "self"), "token")
    before = partial.cuts
    got = partial.const(token, scope, 0)
    assert got.values is None and not got.opens and partial.cuts == before  # `mystery()`: nothing cut it
    kept = [key for key in partial._memo if key[:4] == ("attr", "memofx.model", "Layer", "token")]
    assert len(kept) == 1
    expr, where, _, reads = partial._memo[kept[0]]
    partial._memo[kept[0]] = (expr, where, known(7), reads)  # a marker: the next ask must read the memo
    assert partial.const(token, scope, 0).values == {7}

"""The short proof that no model class fails the start-up check (static/startup_refute.py). It may only
skip a walk that would find nothing: each test pairs what it proves with what building the fixture for
real (or the full walk) says."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import startup_refute
from dynacheck.static.scan import ScanSession
from dynacheck.static.startup import _first_failure, _loader_configs, model_unbuildable
from dynacheck.static.value_types import Value

FIXTURE = Path(__file__).parent / "fixtures" / "startup"

# a subclass named through an import alias, which a `picky` config gives no method (its isinstance test
# names the subclass, so reading the base class alone would prove the wrong thing)
SPECIAL = '''import torch

from startfx.layers import Linear as BaseLinear


class SpecialLinear(BaseLinear):
    pass


class SpecialModel(torch.nn.Module):
    def __init__(self, config, quant_config=None, prefix: str = ""):
        super().__init__()
        self.proj = SpecialLinear(8, quant_config=quant_config)

    def forward(self, x):
        return self.proj(x)
'''
# the same, the subclass's base named through a module-level assignment (`BaseLinear = layers.Linear`)
ALIASED = '''import torch

from startfx import layers

BaseLinear = layers.Linear


class AliasedLinear(BaseLinear):
    pass


class AliasedModel(torch.nn.Module):
    def __init__(self, config, quant_config=None, prefix: str = ""):
        super().__init__()
        self.proj = AliasedLinear(8, quant_config=quant_config)

    def forward(self, x):
        return self.proj(x)
'''
PICKY = '''

class PickyConfig(FullConfig):
    def get_quant_method(self, layer, prefix):
        from startfx.aliased import AliasedLinear
        from startfx.special import SpecialLinear

        if isinstance(layer, SpecialLinear) or isinstance(layer, AliasedLinear):
            return None
        return super().get_quant_method(layer, prefix)


QUANTIZATION_METHODS = {"full": FullConfig, "moeonly": MoeOnlyConfig, "picky": PickyConfig}
'''
# an asserting layer no `full` config can build, in a module only `islander` imports
ISLAND = '''import torch


class Island(torch.nn.Module):
    def __init__(
        self,
        quant_config=None,
        prefix: str = "",
    ):
        super().__init__()
        self.quant_method = quant_config.get_quant_method(self, prefix)
        assert (
            self.quant_method is not None
        )
'''
# a model module whose imports reach the fixture's layers only
PLAIN = '''import torch

from startfx.layers import Linear, MoE


class PlainModel(torch.nn.Module):
    def __init__(self, config, quant_config=None, prefix: str = ""):
        super().__init__()
        self.proj = Linear(8, quant_config=quant_config, prefix=prefix + ".proj")
        self.moe = MoE(quant_config=quant_config)

    def forward(self, x):
        return self.moe(self.proj(x))
'''
ISLANDER = '''import torch

from startfx.island import Island


class IslandModel(torch.nn.Module):
    def __init__(self, config, quant_config=None, prefix: str = ""):
        super().__init__()
        self.island = Island(quant_config=quant_config)
'''


@pytest.fixture()
def tree(tmp_path) -> Path:
    root = tmp_path / "startup"
    shutil.copytree(FIXTURE, root)
    package = root / "startfx"
    (package / "special.py").write_text(SPECIAL)
    (package / "aliased.py").write_text(ALIASED)
    (package / "island.py").write_text(ISLAND)
    (package / "islander.py").write_text(ISLANDER)
    (package / "plain.py").write_text(PLAIN)
    quant = package / "quant.py"
    quant.write_text(quant.read_text().replace('QUANTIZATION_METHODS = {"full": FullConfig, "moeonly": MoeOnlyConfig}\n',
                                               PICKY))
    return root


def _evaluator(root: Path, cache: Path, quantization: str):
    session = ScanSession.open([resolve_target(str(root), cache_dir=cache)], cache)
    spec = DeploymentSpec(framework=root / "startfx.toml", gpu="sm100", platform="cuda",
                          server_args=f"--quantization {quantization}")
    return session.engine(spec)[1]


def _fails_for_real(root: Path, monkeypatch, module: str, name: str, quantization: str) -> bool:
    monkeypatch.syspath_prepend(str(root))
    for loaded in [m for m in sys.modules if m == "startfx" or m.startswith("startfx.")]:
        monkeypatch.delitem(sys.modules, loaded)
    quant = importlib.import_module("startfx.quant")
    config = quant.QUANTIZATION_METHODS[quantization].from_config({"quant_method": quantization})
    try:
        getattr(importlib.import_module(module), name)({"use_proj": True}, quant_config=config)
    except AssertionError:
        return True
    return False


def _unproved_found_and_real(picky, root: Path, monkeypatch, module: str, model: str, layer: str) -> None:
    """No proof for `module` under the picky config, the walk down names `layer`, and building it fails."""
    assert not startup_refute.no_layer_fails(picky, _loader_configs(picky)[0], module)
    found = model_unbuildable(picky, module, model)
    assert found is not None and found.layer == layer
    assert _fails_for_real(root, monkeypatch, module, model, "picky")


def test_a_config_that_gives_every_layer_a_method_is_proved_and_one_that_gives_none_is_not(tree, tmp_path,
                                                                                              monkeypatch):
    full, moeonly = (_evaluator(tree, tmp_path / "cache", q) for q in ("full", "moeonly"))
    assert startup_refute.no_layer_fails(full, _loader_configs(full)[0], "startfx.plain")
    assert not startup_refute.no_layer_fails(moeonly, _loader_configs(moeonly)[0], "startfx.plain")
    # what the proof skips is a walk that finds nothing, and a build that does not fail
    assert _first_failure(full, Value("inst", "startfx.plain", "PlainModel"), _loader_configs(full)) is None
    assert not _fails_for_real(tree, monkeypatch, "startfx.plain", "PlainModel", "full")
    assert _fails_for_real(tree, monkeypatch, "startfx.plain", "PlainModel", "moeonly")
    # startfx.model can name `Holder`, whose method is the config's when its `method` is None: a `full`
    # config gives a Holder None, so no proof there (its models are walked, and start: test_startup.py)
    assert not startup_refute.no_layer_fails(full, _loader_configs(full)[0], "startfx.model")


def test_a_subclass_named_through_an_import_alias_is_read_as_itself(tree, tmp_path, monkeypatch):
    picky = _evaluator(tree, tmp_path / "cache", "picky")
    _unproved_found_and_real(picky, tree, monkeypatch, "startfx.special", "SpecialModel", "SpecialLinear")
    # a module that cannot name SpecialLinear is proved: the picky config's own module imports
    # startfx.special only inside get_quant_method, and the proof reads the config's imports too
    assert not startup_refute.no_layer_fails(picky, _loader_configs(picky)[0], "startfx.plain")


def test_a_subclass_whose_base_is_named_through_an_assignment_is_read_as_itself(tree, tmp_path, monkeypatch):
    picky = _evaluator(tree, tmp_path / "cache", "picky")
    _unproved_found_and_real(picky, tree, monkeypatch, "startfx.aliased", "AliasedModel", "AliasedLinear")
    # the control: without the assignment read as an alias, the proof holds for a model that does not start
    blind = _evaluator(tree, tmp_path / "other-cache", "picky")
    text = startup_refute._text_index(blind.index.locator)
    text.aliases.get("Linear", set()).discard("BaseLinear")
    assert startup_refute.no_layer_fails(blind, _loader_configs(blind)[0], "startfx.aliased")


def test_a_class_whose_bases_hold_a_call_may_subclass_anything():
    index = startup_refute._TextIndex.__new__(startup_refute._TextIndex)
    index.aliases, index.headers, index._subclasses = {}, [], {}
    index._read("pkg.mod", b"\nclass Made(make_base()):\n    pass\nclass Plain(Other):\n    pass\n", "pkg")
    assert index.subclasses(frozenset({"Linear"})) == [("pkg.mod", "Made", False)]


def test_only_the_layers_a_model_module_can_import_are_read(tree, tmp_path, monkeypatch):
    full = _evaluator(tree, tmp_path / "cache", "full")
    config = _loader_configs(full)[0]
    assert startup_refute.no_layer_fails(full, config, "startfx.plain")
    assert not startup_refute.no_layer_fails(full, config, "startfx.islander")
    found = model_unbuildable(full, "startfx.islander", "IslandModel")
    assert found is not None and found.layer == "Island"  # the assert split over lines is found too
    assert _fails_for_real(tree, monkeypatch, "startfx.islander", "IslandModel", "full")


@pytest.mark.parametrize(("source", "row", "maybe"), [
    ("class A:\n    def __init__(\n        self,\n        x=None,\n    ):\n        assert self.x is not None\n", 5, True),
    ("class A:\n    def forward(self):\n        if self.a:\n            assert self.x is not None\n", 3, False),
    ("class A:\n    def forward(self):\n        y = f(\n'''\n''')\n        assert self.x is not None\n", 5, True),
    ("class A:\n    assert_x = 1\n    x = None\n", 2, False),
])
def test_an_assert_is_placed_in_its_function_or_kept_when_the_text_is_unsure(source, row, maybe):
    assert startup_refute._maybe_in_init(source.encode().split(b"\n"), row) is maybe


def test_imports_are_read_with_relative_names_submodules_and_aliases(tmp_path):
    index = startup_refute._TextIndex.__new__(startup_refute._TextIndex)
    index.aliases = {}
    index.headers = []
    text = b"\nfrom . import sibling\nfrom ..up import (A as B,\n    C)\nimport x.y as z, w\nclass K(B, m.C):\n    pass\n"
    imported = index._read("pkg.sub.mod", text, "pkg.sub")
    assert {"pkg.sub", "pkg.sub.sibling", "pkg.up", "pkg.up.A", "pkg.up.C", "x.y", "w"} <= imported
    assert index.aliases == {"A": {"B"}}
    assert index.headers == [("pkg.sub.mod", "K", False, frozenset({"B", "m", "C"}), False)]


def test_two_returns_under_opposite_branches_of_one_test_cover_their_outer_guards():
    from dynacheck.static.partial_calls import _covering

    outer, inner = (("n", "is_linear"), True, 200), (("n", "skipped"), True, 201)
    covered: set = set()
    assert _covering(covered, (outer, inner)) == {(outer, inner)}
    flipped = (inner[0], False, inner[2])
    assert (outer,) in _covering(covered, (outer, flipped))  # `if skipped: return A` then `return B`
    assert () not in covered  # the trailing `return None` still runs when `is_linear` is false
    assert () in _covering(covered, ((outer[0], False, outer[2]),))

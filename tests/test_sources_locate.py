"""ModuleLocator: dotted names to files and back over folders the tests write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dynacheck.model import Target
from dynacheck.sources import ModuleLocator


def _tree(base: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return base.resolve()


def _target(root: Path, name: str = "t") -> Target:
    return Target(spec=str(root), name=name, version="", root=str(root), kind="wheel")


@pytest.fixture
def first(tmp_path: Path) -> Path:
    return _tree(
        tmp_path / "first",
        {
            "pkg/__init__.py": "",
            "pkg/mod.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/deep.py": "",
            "pkg/tests/test_a.py": "",
            "pkg/__pycache__/mod.cpython-311.py": "",
            "pkg/csrc-kernels/gen.py": "",  # not importable: skipped
            "pkg/notes.txt": "",
            "ns/portion/leaf.py": "",  # ns and ns.portion are namespace packages
            "clash/__init__.py": "",  # package beats module beats namespace
            "clash.py": "",
            "solo.py": "",
            "shared/__init__.py": "FIRST = 1\n",
            "shared/only_first.py": "",
            "pkg-1.0.dist-info/METADATA": "",
        },
    )


@pytest.fixture
def second(tmp_path: Path) -> Path:
    return _tree(
        tmp_path / "second",
        {
            "shared/__init__.py": "SECOND = 1\n",
            "shared/only_second.py": "",
            "other/__init__.py": "",
            "ns/elsewhere.py": "",
        },
    )


@pytest.fixture
def locator(first: Path, second: Path) -> ModuleLocator:
    return ModuleLocator([_target(first, "first"), _target(second, "second")])


def test_find_modules_packages_and_namespace_packages(locator, first):
    assert locator.find("pkg") == first / "pkg" / "__init__.py"
    assert locator.find("pkg.mod") == first / "pkg" / "mod.py"
    assert locator.find("pkg.sub.deep") == first / "pkg" / "sub" / "deep.py"
    assert locator.find("ns") == first / "ns"
    assert locator.find("ns.portion.leaf") == first / "ns" / "portion" / "leaf.py"
    assert locator.find("solo") == first / "solo.py"
    assert locator.find("clash") == first / "clash" / "__init__.py"


def test_find_misses(locator):
    for missing in ("pkg.absent", "absent", "pkg.mod.inner", "pkg.notes", "pkg.__pycache__", "", "pkg..mod", "1bad"):
        assert locator.find(missing) is None, missing


def test_is_package(locator):
    assert locator.is_package("pkg") and locator.is_package("pkg.sub") and locator.is_package("ns")
    assert not locator.is_package("pkg.mod") and not locator.is_package("absent")


def test_first_target_wins_and_later_targets_fill_gaps(locator, first, second):
    assert locator.find("shared") == first / "shared" / "__init__.py"
    assert locator.find("shared.only_first") == first / "shared" / "only_first.py"
    assert locator.find("shared.only_second") == second / "shared" / "only_second.py"
    assert locator.find("other") == second / "other" / "__init__.py"
    assert locator.find("ns.elsewhere") == second / "ns" / "elsewhere.py"
    assert locator.target_of(second / "other" / "__init__.py").name == "second"
    assert locator.target_of(first / "pkg" / "mod.py").name == "first"


def test_module_names_and_display_paths_round_trip(locator, first, second):
    assert locator.module_name_of(first / "pkg" / "sub" / "__init__.py") == "pkg.sub"
    assert locator.module_name_of(first / "pkg" / "sub" / "deep.py") == "pkg.sub.deep"
    assert locator.module_name_of(first / "ns" / "portion") == "ns.portion"
    assert locator.module_name_of(str(second / "other" / "__init__.py")) == "other"
    assert locator.display_path(first / "pkg" / "sub" / "deep.py") == "pkg/sub/deep.py"
    for module in ("pkg", "pkg.mod", "ns.portion.leaf", "shared.only_second", "solo"):
        assert locator.module_name_of(locator.find(module)) == module


def test_paths_outside_every_target(locator, tmp_path):
    outside = tmp_path / "elsewhere" / "x.py"
    assert locator.target_of(outside) is None
    assert locator.display_path(outside) == str(outside)
    assert locator.module_name_of(outside) is None


def test_paths_through_a_symlinked_root(tmp_path, first):
    link = tmp_path / "link"
    os.symlink(first, link)
    locator = ModuleLocator([_target(link)])
    assert locator.find("pkg.mod") == first / "pkg" / "mod.py"
    assert locator.display_path(link / "pkg" / "mod.py") == "pkg/mod.py"
    assert locator.module_name_of(link / "pkg" / "mod.py") == "pkg.mod"


def test_iter_files_lists_each_importable_module_once(locator, first, second):
    files = list(locator.iter_files())
    assert len(files) == len(set(files))
    shown = {(locator.target_of(f).name, locator.display_path(f)) for f in files}
    assert shown == {
        ("first", "pkg/__init__.py"),
        ("first", "pkg/mod.py"),
        ("first", "pkg/sub/__init__.py"),
        ("first", "pkg/sub/deep.py"),
        ("first", "pkg/tests/test_a.py"),
        ("first", "ns/portion/leaf.py"),
        ("first", "clash/__init__.py"),
        ("first", "solo.py"),
        ("first", "shared/__init__.py"),
        ("first", "shared/only_first.py"),
        ("second", "shared/only_second.py"),
        ("second", "other/__init__.py"),
        ("second", "ns/elsewhere.py"),
    }


def test_top_level_names_first_target_first(locator):
    assert locator.top_level_names() == ["clash", "ns", "pkg", "shared", "solo", "other"]


def test_listings_are_cached(first):
    locator = ModuleLocator([_target(first)])
    assert locator.find("pkg.mod") is not None
    (first / "pkg" / "late.py").write_text("")
    assert locator.find("pkg.late") is None  # the folder was listed once, before the file appeared
    assert ModuleLocator([_target(first)]).find("pkg.late") == first / "pkg" / "late.py"

"""Resolving target specs: folders, wheels, pip requirements (with a fake pip), installed dists."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from dynacheck.errors import UserError
from dynacheck.sources import ModuleLocator, default_cache_dir, resolve_target, resolve_targets

_BUILDERS = Path(__file__).parent / "fixtures" / "sources" / "builders.py"
_spec = importlib.util.spec_from_file_location("sources_builders", _BUILDERS)
builders = importlib.util.module_from_spec(_spec)
sys.modules["sources_builders"] = builders
_spec.loader.exec_module(builders)
FakePip, make_wheel, write_tree = builders.FakePip, builders.make_wheel, builders.write_tree

PKG = {"tinypkg/__init__.py": "from .core import run\n", "tinypkg/core.py": "def run():\n    return 1\n"}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


# --- folders -----------------------------------------------------------------------------------


def test_site_packages_like_folder_is_named_from_its_single_dist_info(tmp_path, cache):
    site = write_tree(
        tmp_path / "site",
        {**PKG, "tinypkg-1.2.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.2\n"},
    )
    target = resolve_target(str(site), cache_dir=cache)
    assert (target.kind, target.name, target.version) == ("folder", "tinypkg", "1.2")
    assert Path(target.root) == site.resolve()


def test_src_layout_roots_at_src_and_reads_pyproject(tmp_path, cache):
    repo = write_tree(
        tmp_path / "repo",
        {
            "pyproject.toml": '[project]\nname = "tiny-pkg"\nversion = "0.3"\n',
            "tests/test_x.py": "",
            **{f"src/{k}": v for k, v in PKG.items()},
        },
    )
    target = resolve_target(str(repo), cache_dir=cache)
    assert Path(target.root) == (repo / "src").resolve()
    assert (target.name, target.version) == ("tiny-pkg", "0.3")


def test_folder_that_is_a_package_roots_at_its_parent_and_only_claims_itself(tmp_path, cache):
    base = write_tree(tmp_path / "base", {**PKG, "sibling/__init__.py": ""})
    target = resolve_target(str(base / "tinypkg"), cache_dir=cache)
    assert Path(target.root) == base.resolve()
    assert (target.name, target.version) == ("tinypkg", "")
    locator = ModuleLocator([target])
    assert locator.find("tinypkg.core") == (base / "tinypkg" / "core.py").resolve()
    assert locator.find("sibling") is None
    assert locator.top_level_names() == ["tinypkg"]


def test_folder_without_python_is_a_user_error(tmp_path, cache):
    empty = write_tree(tmp_path / "docs", {"index.md": "# hi\n"})
    with pytest.raises(UserError, match="holds no Python packages"):
        resolve_target(str(empty), cache_dir=cache)


def test_existing_file_that_is_not_a_wheel_is_a_user_error(tmp_path, cache):
    script = write_tree(tmp_path, {"tool.py": "print(1)\n"}) / "tool.py"
    with pytest.raises(UserError, match="is a file, not a folder or a wheel"):
        resolve_target(str(script), cache_dir=cache)


# --- wheels ------------------------------------------------------------------------------------


def test_wheel_file_unpacks_sources_only_into_the_cache(tmp_path, cache):
    wheel = make_wheel(
        tmp_path / "dl",
        "tiny-pkg",
        "2.0",
        {**PKG, "tinypkg/kernel.cu": "__global__ void k() {}\n", "tinypkg/data.json": "{}"},
        extra_members={"tiny_pkg-2.0.data/purelib/tinyextra.py": "X = 1\n", "tiny_pkg-2.0.data/scripts/run": "#!"},
    )
    target = resolve_target(str(wheel), cache_dir=cache)
    tree = Path(target.root)
    assert tree == cache / "trees" / "tiny_pkg-2.0"
    assert (target.kind, target.name, target.version) == ("wheel", "tiny-pkg", "2.0")
    kept = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    assert kept == [
        ".dynacheck-tree.json",
        "tiny_pkg-2.0.dist-info/METADATA",
        "tinyextra.py",
        "tinypkg/__init__.py",
        "tinypkg/core.py",
    ]


def test_second_resolve_of_a_wheel_does_not_unpack_again(tmp_path, cache):
    wheel = make_wheel(tmp_path / "dl", "tinypkg", "1.0", PKG)
    first: list[tuple[str, int, int]] = []
    second: list[tuple[str, int, int]] = []
    a = resolve_target(str(wheel), cache_dir=cache, progress=lambda *e: first.append(e))
    b = resolve_target(str(wheel), cache_dir=cache, progress=lambda *e: second.append(e))
    assert a == b
    assert first[-1][1:] == (3, 3)  # two modules and METADATA
    assert second == []


def test_a_rebuilt_wheel_with_the_same_version_replaces_the_tree(tmp_path, cache):
    wheel = make_wheel(tmp_path / "dl", "tinypkg", "1.0", PKG)
    root = Path(resolve_target(str(wheel), cache_dir=cache).root)
    make_wheel(tmp_path / "dl", "tinypkg", "1.0", {**PKG, "tinypkg/extra_module.py": "Y = 2\n"})
    assert Path(resolve_target(str(wheel), cache_dir=cache).root) == root
    assert (root / "tinypkg" / "extra_module.py").is_file()
    assert [p.name for p in root.parent.iterdir()] == [root.name]


@pytest.mark.parametrize("member", ["../evil.py", "/abs/evil.py", "tinypkg/../../evil.py", "..\\evil.py"])
def test_zip_slip_members_reject_the_wheel_and_write_nothing(tmp_path, cache, member):
    wheel = make_wheel(tmp_path / "dl", "tinypkg", "1.0", PKG, extra_members={member: "import os\n"})
    with pytest.raises(UserError, match="unsafe member path"):
        resolve_target(str(wheel), cache_dir=cache)
    assert not (tmp_path / "evil.py").exists() and not (cache / "evil.py").exists()
    assert list((cache / "trees").iterdir()) == []  # no tree, no half-written temporary folder


def test_interrupted_unpack_leaves_no_half_tree(tmp_path, cache):
    wheel = make_wheel(tmp_path / "dl", "tinypkg", "1.0", PKG)

    def interrupt(label: str, done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        resolve_target(str(wheel), cache_dir=cache, progress=interrupt)
    assert list((cache / "trees").iterdir()) == []
    target = resolve_target(str(wheel), cache_dir=cache)
    assert (Path(target.root) / "tinypkg" / "core.py").is_file()


def test_missing_or_corrupt_wheel_file_is_a_user_error(tmp_path, cache):
    with pytest.raises(UserError, match="No wheel file"):
        resolve_target(str(tmp_path / "absent-1.0-py3-none-any.whl"), cache_dir=cache)
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="not a readable wheel"):
        resolve_target(str(bad), cache_dir=cache)


# --- pip requirements --------------------------------------------------------------------------


def test_pip_requirement_downloads_once_then_reuses_the_cache(cache):
    pip = FakePip({"tinypkg==1.0": ("1.0", PKG)})
    first = resolve_target("tinypkg==1.0", cache_dir=cache, pip=pip)
    second = resolve_target("tinypkg==1.0", cache_dir=cache, pip=pip)
    assert first == second
    assert (first.kind, first.name, first.version) == ("pip", "tinypkg", "1.0")
    assert len(pip.calls) == 1
    args = pip.calls[0]
    assert args[0] == "download" and "--no-deps" in args and "--only-binary=:all:" in args
    assert args[args.index("-d") + 1] == str(cache / "wheels")
    assert ModuleLocator([first]).find("tinypkg.core") == Path(first.root) / "tinypkg" / "core.py"
    assert resolve_target("tinypkg==1.0", cache_dir=cache, offline=True, pip=pip) == first
    assert len(pip.calls) == 1


@pytest.mark.parametrize(
    ("spec", "version"),
    [
        ("flashinfer-python==0.6.3", "0.6.3"),
        ("Flashinfer.Python>=0.6", "0.6.3"),
        ("flashinfer_python<0.6.3", "0.6.2"),
        ("flashinfer-python", "0.6.3"),
    ],
)
def test_cached_wheel_satisfies_requirement_with_canonical_names(cache, spec, version):
    for v in ("0.6.2", "0.6.3"):
        make_wheel(cache / "wheels", "flashinfer-python", v, {"flashinfer/__init__.py": f"V = {v!r}\n"})
    pip = FakePip()
    target = resolve_target(spec, cache_dir=cache, pip=pip)
    assert pip.calls == []
    assert (target.kind, target.name, target.version) == ("pip", "flashinfer-python", version)
    assert Path(target.root).name == f"flashinfer_python-{version}"


def test_url_requirement_takes_the_wheel_pip_saved_and_reports_progress(cache):
    spec = "tinypkg @ https://example.invalid/tinypkg-4.2-py3-none-any.whl"
    pip = FakePip({spec: ("4.2", PKG)})
    events: list[tuple[str, int, int]] = []
    target = resolve_target(spec, cache_dir=cache, pip=pip, progress=lambda *e: events.append(e))
    assert (target.kind, target.name, target.version) == ("pip", "tinypkg", "4.2")
    assert events[0] == (f"downloading {spec} with pip", 0, 0)
    assert events[-1] == ("unpacking tinypkg-4.2-py3-none-any.whl", 3, 3)


def test_offline_without_a_cached_wheel_names_the_spec_and_the_fix(cache):
    pip = FakePip()
    with pytest.raises(UserError) as caught:
        resolve_target("sglang==0.5.9", cache_dir=cache, offline=True, pip=pip)
    assert pip.calls == []
    assert "Cannot fetch sglang==0.5.9: running offline" in caught.value.message
    assert str(cache / "wheels") in caught.value.hint and "pass a folder" in caught.value.hint


def test_pip_network_failure_reads_as_offline(cache):
    with pytest.raises(UserError) as caught:
        resolve_target("sglang==0.5.9", cache_dir=cache, pip=FakePip(fail=builders.OFFLINE_PIP))
    assert caught.value.message == (
        "Cannot fetch sglang==0.5.9: pip could not reach the package index "
        "(Temporary failure in name resolution)."
    )
    assert "pip download --no-deps" in caught.value.hint


def test_pip_finding_nothing_says_no_such_distribution(cache):
    with pytest.raises(UserError, match="pip found no such distribution.*no wheel named zzz-nothing"):
        resolve_target("zzz-nothing==1.0", cache_dir=cache, pip=FakePip(fail=builders.NO_SUCH_NAME_PIP))
    with pytest.raises(UserError, match=r"no wheel of sglang matches sglang==99 \(versions on the index: 0.5.7"):
        resolve_target("sglang==99", cache_dir=cache, pip=FakePip(fail=builders.NO_SUCH_VERSION_PIP))


def test_pip_command_comes_from_the_environment(tmp_path, cache, monkeypatch):
    script = tmp_path / "fake_pip.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(_BUILDERS.parent)!r})
            from builders import make_wheel
            from pathlib import Path
            args = sys.argv[1:]
            assert args[0] == "download", args
            make_wheel(Path(args[args.index("-d") + 1]), "envpkg", "3.1", {{"envpkg/__init__.py": ""}})
            """
        )
    )
    monkeypatch.setenv("DYNACHECK_PIP", f"{sys.executable} {script}")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    target = resolve_target("envpkg==3.1", cache_dir=cache)
    assert (target.name, target.version, target.kind) == ("envpkg", "3.1", "pip")


def test_resolving_and_locating_never_run_the_scanned_code(tmp_path, cache):
    sentinel = tmp_path / "ran.txt"
    bomb = {
        "tinybomb/__init__.py": f"open({str(sentinel)!r}, 'w').write('imported')\nraise SystemExit(3)\n",
        "tinybomb/inner.py": f"open({str(sentinel)!r}, 'w').write('imported')\n",
    }
    wheel = make_wheel(tmp_path / "dl", "tinybomb", "1.0", bomb)
    folder = write_tree(tmp_path / "tree", bomb)
    pip = FakePip({"tinybomb==1.0": ("1.0", bomb)})
    targets = resolve_targets(
        [str(wheel), str(folder), str(folder / "tinybomb"), "tinybomb==1.0"],
        cache_dir=cache,
        pip=pip,
    )
    assert [t.kind for t in targets] == ["wheel", "folder", "folder", "pip"]
    for target in targets:
        locator = ModuleLocator([target])
        assert locator.find("tinybomb.inner") is not None and locator.is_package("tinybomb")
        assert len(list(locator.iter_files())) == 2
    assert not sentinel.exists()
    assert "tinybomb" not in sys.modules


# --- installed distributions and unknown specs -------------------------------------------------


def test_installed_distribution_is_found_without_importing_it(cache, monkeypatch):
    monkeypatch.delitem(sys.modules, "click", raising=False)
    target = resolve_target("click", cache_dir=cache, pip=FakePip())
    assert target.kind == "installed" and target.name == "click"
    assert (Path(target.root) / "click" / "__init__.py").is_file()
    assert "click" not in sys.modules
    locator = ModuleLocator([target])
    assert locator.find("click.core") == Path(target.root) / "click" / "core.py"
    assert locator.top_level_names() == ["click"]  # site-packages is shared; only click's own names
    assert locator.find("pytest") is None


def test_import_name_finds_its_distribution(cache):
    target = resolve_target("_pytest", cache_dir=cache, pip=FakePip())
    assert target.kind == "installed" and target.name == "pytest"


def test_editable_install_is_located_through_the_path_finder(tmp_path, cache, monkeypatch):
    from importlib import metadata

    try:
        metadata.distribution("dynacheck")
    except metadata.PackageNotFoundError:
        pytest.skip("dynacheck is not installed (editable) here")
    monkeypatch.chdir(tmp_path)  # so "dynacheck" is not a folder in the current directory
    target = resolve_target("dynacheck", cache_dir=cache, pip=FakePip())
    assert target.kind == "installed"
    assert (Path(target.root) / "dynacheck" / "__init__.py").is_file()


def test_unknown_name_offline_suggests_close_installed_names(cache):
    pip = FakePip()
    with pytest.raises(UserError) as caught:
        resolve_target("pytset", cache_dir=cache, offline=True, pip=pip)
    assert caught.value.message.startswith(
        "There is no folder, wheel, installed distribution or pip requirement named pytset"
    )
    assert "pytest" in caught.value.hint
    assert pip.calls == []


def test_unknown_name_online_keeps_pips_answer_and_suggests(cache):
    with pytest.raises(UserError) as caught:
        resolve_target("pytset", cache_dir=cache, pip=FakePip(fail=builders.NO_SUCH_NAME_PIP))
    assert "pip found no such distribution" in caught.value.message
    assert caught.value.hint == "Did you mean pytest?"


@pytest.mark.parametrize("spec", ["./no/such/dir", "no such thing", ""])
def test_specs_that_name_nothing_are_user_errors(cache, spec):
    pip = FakePip()
    with pytest.raises(UserError):
        resolve_target(spec, cache_dir=cache, pip=pip)
    assert pip.calls == []


def test_default_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNACHECK_CACHE", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("DYNACHECK_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "dynacheck"

"""[tool.dynacheck] parsing, walking up to the pyproject, command-line overrides, bad keys named."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.errors import UserError
from dynacheck.gate.config import load_config, with_overrides


def write(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_values_are_read_and_paths_start_at_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[project]\nname = "x"\n[tool.dynacheck]\ntargets = ["src", "flashinfer-python==0.6.3"]\n'
        'entries = ["pkg.m:Model.forward"]\nfail_on = "warning"\nignore = ["DC010"]\nbaseline = "ci/base.json"\n'
        'format = "github"\n',
    )
    (tmp_path / "src").mkdir()
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    config = load_config(start=nested)
    assert config.targets == ("src", "flashinfer-python==0.6.3")
    assert config.entries == ("pkg.m:Model.forward",)
    assert config.fail_on == "warning"
    assert config.ignore == ("DC010",)
    assert config.format == "github"
    assert config.baseline_path() == tmp_path / "ci" / "base.json"
    assert config.target_specs_for_scan() == [str(tmp_path / "src"), "flashinfer-python==0.6.3"]


def test_defaults_without_a_table(tmp_path: Path) -> None:
    write(tmp_path, '[project]\nname = "x"\n')
    config = load_config(start=tmp_path)
    assert (config.fail_on, config.format, config.baseline, config.targets) == (
        "error", "terminal", "dynacheck-baseline.json", ()
    )


def test_walk_up_skips_a_pyproject_without_the_table(tmp_path: Path) -> None:
    write(tmp_path, '[tool.dynacheck]\npreset = "glm5"\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    write(inner, '[project]\nname = "inner"\n')
    assert load_config(start=inner).preset == "glm5"


def test_command_line_wins_and_unset_options_keep_the_file(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, '[tool.dynacheck]\ntargets = ["a"]\nentries = ["m:f"]\nfail_on = "info"\n')
    monkeypatch.chdir(tmp_path)
    config = with_overrides(load_config(path), fail_on="error", targets=(), entries=("m:g",), preset=None)
    assert config.fail_on == "error"
    assert config.entries == ("m:g",)
    assert config.targets == ("a",)


def test_command_line_target_paths_start_at_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    path = write(config_dir, '[tool.dynacheck]\ntargets = ["x"]\n')
    (tmp_path / "tree").mkdir()
    monkeypatch.chdir(tmp_path)
    config = with_overrides(load_config(path), targets=("tree",))
    assert config.target_specs_for_scan() == [str(tmp_path.resolve() / "tree")]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ('[tool.dynacheck]\ntarget = ["a"]\n', "target"),
        ('[tool.dynacheck]\nfail_on = "fatal"\n', "fail_on"),
        ('[tool.dynacheck]\nformat = "xml"\n', "format"),
        ('[tool.dynacheck]\nignore = ["E501"]\n', "E501"),
        ('[tool.dynacheck]\nentries = [1, 2]\n', "entries"),
        ('[tool.dynacheck]\nbaseline = 3\n', "baseline"),
        ("[tool.dynacheck\n", "not valid TOML"),
    ],
)
def test_bad_keys_and_values_are_named(tmp_path: Path, body: str, named: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(UserError) as info:
        load_config(path)
    assert named in str(info.value)


def test_bad_command_line_value_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="fail_on"):
        with_overrides(load_config(start=tmp_path), fail_on="loud")


def test_config_file_must_exist_and_hold_the_table(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    path = write(tmp_path, '[project]\nname = "x"\n')
    with pytest.raises(UserError, match=r"no \[tool.dynacheck\]"):
        load_config(path)

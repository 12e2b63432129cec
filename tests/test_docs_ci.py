"""docs/ci.md and the README can be copied as written: every snippet parses, every command exists."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import click
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from dynacheck.cli import cli
from dynacheck.gate.config import parse_table

ROOT = Path(__file__).resolve().parent.parent
CI_DOC = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def dynacheck_commands(text: str) -> list[list[str]]:
    """Every `dynacheck ...` command line in a text (continuation lines joined, comments and `|| ...` cut)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        line = re.sub(r"^(- )?(run: )?", "", line).split("||", 1)[0].split("&&")[-1].strip()
        if line.startswith("dynacheck ") and " ... " not in line:  # `...` marks a synopsis, not a command
            commands.append(shlex.split(line))
    return commands


def test_ci_doc_has_no_placeholders_or_unpublished_installs():
    assert "<owner>" not in CI_DOC
    assert not re.search(r"pip install dynacheck\s*$", CI_DOC, flags=re.M), "dynacheck is not on PyPI"
    for block in blocks(CI_DOC, "yaml"):
        assert "pip install dynacheck\n" not in block


def test_ci_doc_yaml_and_toml_parse_and_the_config_is_accepted(tmp_path):
    yaml = pytest.importorskip("yaml")
    for block in blocks(CI_DOC, "yaml"):
        yaml.safe_load(block.replace("  diff:\n", "diff:\n", 1) if block.startswith("  diff:") else block)
    (toml,) = blocks(CI_DOC, "toml")
    table = tomllib.loads(toml)["tool"]["dynacheck"]
    config = parse_table(table, tmp_path / "pyproject.toml")
    assert config.fail_on == "error" and config.preset == "glm5"


@pytest.mark.parametrize("source", ["docs/ci.md", "README.md"])
def test_every_documented_command_parses(source):
    text = (ROOT / source).read_text(encoding="utf-8")
    commands = dynacheck_commands(text)
    assert commands, source
    for argv in commands:
        args = [a for a in argv[1:] if a not in ("[--fix]",)]
        name = args[0]
        command = cli.get_command(click.Context(cli), name)
        if command is None:  # an optional room (trace, capture) not built into this install
            continue
        try:
            command.make_context(name, list(args[1:]), resilient_parsing=False)
        except click.BadParameter as exc:
            if "does not exist" not in str(exc):  # an input file the reader makes first is fine
                pytest.fail(f"{source}: `{' '.join(argv)}` does not parse: {exc}")
        except click.UsageError as exc:  # pragma: no cover - the failure message names the command
            pytest.fail(f"{source}: `{' '.join(argv)}` does not parse: {exc}")
        except click.exceptions.Exit:
            pass


def test_version_pins_agree_between_readme_and_ci_doc():
    def pins(text: str) -> set[str]:
        return set(re.findall(r"(?:sglang|flashinfer-python)==[0-9][0-9a-z.]*", text))

    assert pins(CI_DOC) <= pins(README), pins(CI_DOC) - pins(README)


def test_pre_commit_hook_in_the_doc_matches_the_shipped_one():
    yaml = pytest.importorskip("yaml")
    shipped = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (doc,) = [b for b in blocks(CI_DOC, "yaml") if "pre-commit-config" in b]
    hook = yaml.safe_load(doc)["repos"][0]["hooks"][0]
    assert hook["id"] == shipped[0]["id"] and hook["entry"] == shipped[0]["entry"]
    assert hook["files"] == shipped[0]["files"]


@pytest.mark.slow
def test_the_documented_wheel_build_gives_the_file_the_workflow_installs(tmp_path):
    (build,) = [line for block in blocks(CI_DOC, "bash") for line in block.splitlines() if line.startswith("pip wheel")]
    argv = shlex.split(build.split("#", 1)[0])
    assert argv[:4] == ["pip", "wheel", "--no-deps", "-w"]
    out = tmp_path / "tools"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {done.stderr.strip()[-200:]}")
    wheels = sorted(out.glob("dynacheck-*.whl"))  # the glob the workflow uses
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert any(n.startswith("dynacheck/rules_data/") and n.endswith(".toml") for n in names)


def test_measured_counts_in_the_docs_agree_with_bench_results():
    """README and docs quote the benchmark; the numbers come from bench/RESULTS.md, one source."""
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    parsed = re.search(r"\| files parsed by the scan \| (\d+)", results).group(1)
    in_trees = re.search(r"\| files in the two trees \| (\d+)", results).group(1)
    readme = re.search(r"([\d,]+) of ([\d,]+) files parsed", README)
    assert (readme.group(1).replace(",", ""), readme.group(2).replace(",", "")) == (parsed, in_trees)
    schema_doc = (ROOT / "docs" / "json-schema.md").read_text(encoding="utf-8")
    for found in re.findall(r'"files_parsed": (\d+)', schema_doc):
        assert found == parsed
    # the README's speed figures are the benchmark's own, not remembered ones
    ratio = re.search(r"\| cold / floor \| \*\*([\d.]+)x\*\*", results).group(1)
    warm = re.search(r"\| warm scan: a new process.*?\| \*\*([\d.]+) s\*\*", results).group(1)
    census = re.search(r"\| census / flagship[^|]*\| \*\*([\d.]+)x\*\*", results).group(1)
    rss = re.search(r"census peak memory: the largest sum of its processes' PSS[^|]*\| \*\*(\d+) MB\*\*", results).group(1)
    assert f"cold scan {ratio}x a bare single-core" in README
    assert f"engine an earlier scan stored) {warm} s" in README
    assert f"takes {census}x one cold flagship scan, peak memory {rss} MB" in README
    bound = re.search(r"\| half of it / the flagship scans around it[^|]*\| \*\*([\d.]+)x\*\*", results).group(1)
    assert f"\n  {bound}x a cold flagship scan when its time is halved" in README
    cache_doc = (ROOT / "docs" / "cache.md").read_text(encoding="utf-8")
    cold = re.search(r"\| cold scan \(empty summary cache\) \| ([\d.]+) s", results).group(1)
    assert f"{warm} s warm against {cold} s cold" in cache_doc


def test_ci_runs_the_readme_test_command_in_parallel():
    (setup,) = [b for b in blocks(README, "bash") if "'.[dev]'" in b]
    command = setup.strip().split("&&")[-1].strip()
    assert command.startswith("pytest -n auto"), command  # pytest-xdist: the suite on every core
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"python3 -m {command}" in ci
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("pytest-xdist") for d in dev)


def test_readme_says_what_the_first_command_exits_with():
    first = README[README.index("pip install -e . && dynacheck scan"):][:900]
    assert "exits 1" in first and "--fail-on never" in first

"""`dynacheck scan` as a new user meets it: config, suppressions, exit codes, paths, the first screen."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dynacheck.cli import main

GATEFX = Path(__file__).parent / "fixtures" / "gate" / "v1"
ENTRY = "gatefx.model:Model.forward"
CONFIG = f'[tool.dynacheck]\ntargets = ["src"]\nentries = ["{ENTRY}"]\n'

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


@pytest.fixture()
def project(tmp_path: Path, monkeypatch) -> Path:
    """A git checkout with a src/ layout holding gatefx and a [tool.dynacheck] table; cwd is its root."""
    root = tmp_path / "proj"
    shutil.copytree(GATEFX, root / "src")
    (root / ".git").mkdir()
    (root / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.setenv("DYNACHECK_CACHE", str(tmp_path / "cache"))
    return root


def add_comment(path: Path, line: int, comment: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] += f"  {comment}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def findings_of(out: str) -> list[dict]:
    return json.loads(out)["findings"]


# --- item 3: scan reads [tool.dynacheck] -----------------------------------------------------------

def test_scan_without_arguments_scans_the_configured_targets(project: Path, capsys) -> None:
    code, out, err = run(["scan", "--offline", "--format", "json"], capsys)
    assert "scanning the targets of" in err and "no target given" not in err
    rules = sorted(f["rule"] for f in findings_of(out))
    assert rules == ["DC021", "DC030", "DC040"]
    assert code == 1  # two error findings at the default --fail-on error


def test_config_fail_on_and_ignore_decide_the_exit_code(project: Path, capsys) -> None:
    (project / "pyproject.toml").write_text(CONFIG + 'ignore = ["DC021", "DC040"]\n', encoding="utf-8")
    code, out, _ = run(["scan", "--offline", "--format", "json"], capsys)
    statuses = {f["rule"]: f["status"] for f in findings_of(out)}
    assert statuses == {"DC021": "suppressed", "DC040": "suppressed", "DC030": "predicted"}
    assert code == 0
    (project / "pyproject.toml").write_text(CONFIG + 'ignore = ["DC021", "DC040"]\nfail_on = "warning"\n')
    code, _, _ = run(["scan", "--offline", "--format", "json"], capsys)
    assert code == 1


# --- item 2: inline suppressions in scan, and their SARIF kind -------------------------------------

def test_scan_honours_inline_suppressions(project: Path, capsys) -> None:
    add_comment(project / "src/gatefx/helpers.py", 12, "# dynacheck: ignore[DC040] timing read once at load")
    add_comment(project / "src/gatefx/quant.py", 5, "# dynacheck: ignore[DC021] path probe is constant")
    code, out, _ = run(["scan", "--offline", "--format", "json"], capsys)
    by_rule = {f["rule"]: f for f in findings_of(out)}
    assert by_rule["DC040"]["status"] == "suppressed"
    assert "timing read once at load" in by_rule["DC040"]["note"]
    assert code == 0  # what is left is a warning
    _, sarif, _ = run(["scan", "--offline", "--format", "sarif"], capsys)
    results = json.loads(sarif)["runs"][0]["results"]
    kinds = [s["kind"] for r in results for s in r.get("suppressions", ())]
    assert kinds == ["inSource", "inSource"]


def test_config_ignores_are_external_suppressions_in_sarif(project: Path, capsys) -> None:
    (project / "pyproject.toml").write_text(CONFIG + 'ignore = ["DC040"]\n', encoding="utf-8")
    _, sarif, _ = run(["scan", "--offline", "--format", "sarif"], capsys)
    results = json.loads(sarif)["runs"][0]["results"]
    kinds = [s["kind"] for r in results for s in r.get("suppressions", ())]
    assert kinds == ["external"]


# --- item 7: unknown rule ids are errors -----------------------------------------------------------

def test_unknown_rule_in_a_comment_is_an_error(project: Path, capsys) -> None:
    add_comment(project / "src/gatefx/helpers.py", 12, "# dynacheck: ignore[DC999] typo")
    code, _, err = run(["scan", "--offline"], capsys)
    assert code == 2 and "unknown rule DC999" in err and "Traceback" not in err


def test_unknown_rule_in_config_is_an_error_naming_the_closest(project: Path, capsys) -> None:
    (project / "pyproject.toml").write_text(CONFIG + 'ignore = ["DC0300"]\n', encoding="utf-8")
    code, _, err = run(["scan", "--offline"], capsys)
    assert code == 2 and "Unknown rule id 'DC0300'" in err and "DC030" in err.split("DC0300", 2)[-1]


# --- item 4: annotation paths are relative to the repository root ---------------------------------

def test_github_paths_are_relative_to_the_repository_root(project: Path, capsys, monkeypatch) -> None:
    _, out, _ = run(["scan", "--offline", "--format", "github"], capsys)
    assert "file=src/gatefx/helpers.py" in out
    monkeypatch.chdir(project / "src")  # from a subfolder the paths stay repository-relative
    _, out, _ = run(["scan", "--offline", "--format", "github", "--target", ".", "--entry", ENTRY], capsys)
    assert "file=src/gatefx/helpers.py" in out and "file=gatefx/" not in out


def test_gate_github_paths_match_scan(project: Path, capsys) -> None:
    code, _, _ = run(["gate", "--update-baseline"], capsys)
    assert code == 0
    (project / "dynacheck-baseline.json").write_text(
        json.dumps({**json.loads((project / "dynacheck-baseline.json").read_text()), "findings": []}))
    _, out, _ = run(["gate", "--offline", "--format", "github"], capsys)
    assert "file=src/gatefx/helpers.py" in out


# --- item 1: the terminal report ends with the summary and why the exit code is what it is --------

def test_terminal_report_ends_with_counts_and_exit_reason(project: Path, capsys) -> None:
    code, out, _ = run(["scan", "--offline"], capsys)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 1
    assert lines[-1].startswith("exit 1: 2 findings of severity error or worse at 2 sites")
    assert lines[-2].startswith("3 findings at 3 sites")
    assert out.index("fix plan") < out.index("calls time.perf_counter")
    code, out, _ = run(["scan", "--offline", "--fail-on", "never"], capsys)
    assert code == 0 and out.rstrip().splitlines()[-1].startswith("exit 0: --fail-on never")


@pytest.mark.wheels
def test_default_scan_is_short_and_exits_1_as_the_readme_says(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code, out, err = run(["scan", "--offline"], capsys)
    except Exception:  # pragma: no cover - depends on the cache
        pytest.skip("pinned wheels not cached")
    if code == 2:
        pytest.skip(f"pinned wheels unavailable: {err.strip()}")
    lines = out.splitlines()
    assert code == 1
    assert len(lines) < 400, len(lines)
    head = "\n".join(lines[:25])
    assert "fix plan" in head and "flashinfer.fp4_quantization.fp4_quantize" in head
    assert lines[-1].startswith("exit 1:")
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    assert "exits 1" in readme


def test_report_applies_the_same_config_to_a_saved_scan(project: Path, capsys) -> None:
    run(["scan", "--offline", "--format", "json", "--out", "scan.json"], capsys)
    (project / "pyproject.toml").write_text(CONFIG + 'ignore = ["DC030"]\n', encoding="utf-8")
    code, out, _ = run(["report", "--scan", "scan.json", "--format", "json"], capsys)
    statuses = {f["rule"]: f["status"] for f in json.loads(out)["scan"]["findings"]}
    assert code == 0 and statuses["DC030"] == "suppressed" and statuses["DC040"] == "predicted"


def test_a_mistyped_entry_suggests_each_name_once(project: Path, capsys) -> None:
    code, _, err = run(["scan", "--offline", "--target", "src", "--entry", "gatefx.model:Model.forwad"], capsys)
    assert code == 2 and "Did you mean" in err
    suggestions = err.split("Did you mean:", 1)[1].strip().rstrip("?").split(", ")
    assert "Model.forward" in suggestions and len(suggestions) == len(set(suggestions))


def test_gate_sarif_marks_comment_suppressions_in_source(project: Path, capsys) -> None:
    add_comment(project / "src/gatefx/helpers.py", 12, "# dynacheck: ignore[DC040] timing read once at load")
    assert run(["gate", "--update-baseline"], capsys)[0] == 0
    _, sarif, _ = run(["gate", "--offline", "--format", "sarif"], capsys)
    results = json.loads(sarif)["runs"][0]["results"]
    kinds = [s["kind"] for r in results for s in r.get("suppressions", ())]
    assert kinds == ["inSource"]


def test_gate_says_why_it_passed(project: Path, capsys) -> None:
    assert run(["gate", "--update-baseline"], capsys)[0] == 0
    code, _, err = run(["gate", "--offline"], capsys)
    assert code == 0 and "dynacheck gate: passed: no new finding at or above 'error'" in err


def test_gate_counts_conditional_findings_only_when_configured(project: Path, capsys) -> None:
    from dataclasses import replace as _replace

    from dynacheck.gate.config import load_config
    from dynacheck.gate.diff import Comparison
    from dynacheck.gate.run import judge
    from dynacheck.model import Condition, Diff, ScanResult

    assert run(["scan", "--offline", "--format", "json", "--out", "s.json"], capsys)[0] == 1
    scan = _replace(ScanResult.from_dict(json.loads((project / "s.json").read_text())), deployment={"name": "custom", "gpu": "sm120"})
    conditional = tuple(_replace(f, conditions=(Condition("flag", "x.py", 1, "flag"),)) for f in scan.findings)
    comparison = Comparison(diff=Diff(before=(), after=(), added=conditional), previous={})
    assert judge(comparison, "info", scan).failing == ()
    assert len(judge(comparison, "info", scan, include_conditional=True).failing) == len(conditional)
    (project / "pyproject.toml").write_text(CONFIG + "include_conditional = true\n", encoding="utf-8")
    assert load_config().include_conditional is True

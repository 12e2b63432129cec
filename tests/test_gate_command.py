"""`dynacheck gate` / `dynacheck diff` end to end on the gatefx fixture versions, through the real engine."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dynacheck.cli import main
from dynacheck.gate.config import load_config
from dynacheck.gate.run import gate as run_gate

FIXTURES = Path(__file__).parent / "fixtures" / "gate"
V1, V2, V1_MOVED = FIXTURES / "v1", FIXTURES / "v2", FIXTURES / "v1_moved"
ENTRY = "gatefx.model:Model.forward"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


def gate_argv(target: Path, baseline: Path, *extra: str) -> list[str]:
    return ["gate", "--target", str(target), "--entry", ENTRY, "--baseline", str(baseline), "--fail-on", "info", *extra]


# --- errors that need no scan --------------------------------------------------------------------


def test_missing_baseline_is_exit_2_and_says_how(tmp_path: Path, capsys) -> None:
    code, _, err = run(gate_argv(V1, tmp_path / "none.json"), capsys)
    assert code == 2
    assert "does not exist" in err and "--update-baseline" in err


def test_no_targets_is_exit_2(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["gate", "--entry", ENTRY], capsys)
    assert code == 2 and "No targets" in err


def test_bad_config_key_is_exit_2(tmp_path: Path, capsys) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.dynacheck]\nfail_on = "sometimes"\n')
    code, _, err = run(["gate", "--config", str(config)], capsys)
    assert code == 2 and "fail_on" in err


# --- end to end through the static engine --------------------------------------------------------

def needs_engine():
    return pytest.importorskip("dynacheck.static.scan", reason="needs the static engine (dynacheck.static.scan)")


@pytest.fixture()
def engine():
    return needs_engine()


def scan_findings(root: Path):
    return needs_engine().scan_roots([root], [ENTRY]).findings


@pytest.fixture(scope="module")
def v1_callees() -> set[str]:
    callees = {f.site.callee for f in scan_findings(V1)}
    assert callees, "the engine must find the v1 hazards for these tests to mean anything"
    return callees


@pytest.fixture()
def v1_baseline(tmp_path: Path, capsys, v1_callees) -> Path:
    path = tmp_path / "baseline.json"
    code, out, _ = run(gate_argv(V1, path, "--update-baseline"), capsys)
    assert code == 0 and "written" in out
    return path


def test_v1_is_green_against_its_own_baseline(v1_baseline: Path, capsys) -> None:
    assert json.loads(v1_baseline.read_text())["findings"], "v1 has hazards: the baseline must list them"
    code, out, _ = run(gate_argv(V1, v1_baseline), capsys)
    assert code == 0
    assert "0 added, 0 removed" in out


def test_planted_hazard_fails_and_is_named(v1_baseline: Path, capsys) -> None:
    code, out, err = run(gate_argv(V2, v1_baseline), capsys)
    assert code == 1
    new_lines = [line for line in out.splitlines() if line.startswith("ADDED")]
    assert any("subprocess.run" in line and "gatefx.quant.nvcc_version" in line for line in new_lines), out
    assert "FAILED" in err


def test_removed_hazard_is_reported_as_fixed(v1_baseline: Path, capsys) -> None:
    _, out, _ = run(gate_argv(V2, v1_baseline), capsys)
    fixed = [line for line in out.splitlines() if line.startswith("REMOVED")]
    assert any("perf_counter" in line for line in fixed), out


def test_moved_code_stays_green(v1_baseline: Path, capsys) -> None:
    code, out, _ = run(gate_argv(V1_MOVED, v1_baseline), capsys)
    assert code == 0, out
    assert "0 added, 0 removed, 0 changed" in out


def test_moved_code_gives_the_same_fingerprints() -> None:
    assert {f.fingerprint for f in scan_findings(V1)} == {f.fingerprint for f in scan_findings(V1_MOVED)}
    assert all(f.fingerprint for f in scan_findings(V1))


def test_baseline_is_byte_identical_across_updates_and_code_moves(v1_baseline: Path, tmp_path: Path, capsys) -> None:
    first = v1_baseline.read_bytes()
    code, out, _ = run(gate_argv(V1, v1_baseline, "--update-baseline"), capsys)
    assert code == 0 and "already up to date" in out
    assert v1_baseline.read_bytes() == first
    moved = tmp_path / "moved.json"
    run(gate_argv(V1_MOVED, moved, "--update-baseline"), capsys)
    assert json.loads(moved.read_text())["findings"] == json.loads(first)["findings"]


def copy_v2(tmp_path: Path) -> Path:
    root = tmp_path / "v2copy"
    shutil.copytree(V2, root)
    return root


def planted(root: Path):
    return next(f for f in scan_findings(root) if f.site.callee.startswith("subprocess"))


def annotate(root: Path, file: str, line: int, comment: str) -> None:
    path = root / file
    lines = path.read_text().splitlines()
    lines[line - 1] += f"  {comment}"
    path.write_text("\n".join(lines) + "\n")


def test_suppression_with_reason_silences_one_finding(v1_baseline: Path, tmp_path: Path, capsys) -> None:
    root = copy_v2(tmp_path)
    hazard = planted(root)
    annotate(root, hazard.site.file, hazard.site.line, f"# dynacheck: ignore[{hazard.rule}] version probe, hoisted in prod")
    code, out, _ = run(gate_argv(root, v1_baseline), capsys)
    assert code == 0, out
    suppressed = [line for line in out.splitlines() if line.startswith("SUPPRESSED")]
    assert len([line for line in suppressed if "subprocess" in line]) == 1, out
    assert "reason: version probe, hoisted in prod" in out

    config = load_config(start=tmp_path)
    verdict, _ = run_gate(replace(config, targets=(str(root),), entries=(ENTRY,), baseline=str(v1_baseline)))
    statuses = {f.site.callee: f.status for f in verdict.scan.findings}
    assert statuses[hazard.site.callee] == "suppressed"
    assert sum(s == "suppressed" for s in statuses.values()) == 1


def test_suppression_on_the_hop_in_own_package_silences_the_chain(v1_baseline: Path, tmp_path: Path, capsys) -> None:
    root = copy_v2(tmp_path)
    hazard = planted(root)
    hop = next(h for h in hazard.chain if h.function == "gatefx.quant.quantize")
    annotate(root, hop.file, hop.line, f"# dynacheck: ignore[{hazard.rule}] nvcc probe is cached before compile")
    code, out, _ = run(gate_argv(root, v1_baseline), capsys)
    assert code == 0, out
    assert "nvcc probe is cached before compile" in out


def test_suppression_without_reason_is_exit_2_naming_the_line(v1_baseline: Path, tmp_path: Path, capsys) -> None:
    root = copy_v2(tmp_path)
    hazard = planted(root)
    annotate(root, hazard.site.file, hazard.site.line, f"# dynacheck: ignore[{hazard.rule}]")
    code, _, err = run(gate_argv(root, v1_baseline), capsys)
    assert code == 2
    assert f"{hazard.site.file}:{hazard.site.line}" in err and "reason" in err


def test_github_format_annotates_the_new_hazard(v1_baseline: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(FIXTURES.parent.parent.parent)
    out_file = tmp_path / "annotations.txt"
    code, _, _ = run(gate_argv(V2, v1_baseline, "--format", "github", "--out", str(out_file)), capsys)
    assert code == 1
    text = out_file.read_text()
    assert "::error file=tests/fixtures/gate/v2/gatefx/quant.py,line=" in text
    assert "subprocess.run" in text


def test_checked_in_ci_baseline_is_green(engine, capsys) -> None:
    code, out, _ = run(["gate", "--config", str(FIXTURES / "pyproject.toml")], capsys)
    assert code == 0, out


def test_diff_between_versions(engine, tmp_path: Path, capsys) -> None:
    out_file = tmp_path / "diff.md"
    code, _, err = run(
        ["diff", "--from", str(V1), "--to", str(V2), "--entry", ENTRY, "--format", "markdown", "--out", str(out_file)],
        capsys,
    )
    assert code == 0
    text = out_file.read_text()
    assert "subprocess.run" in text and "perf_counter" in text
    assert "1 new" in err or "added" in text
    code, _, _ = run(["diff", "--from", str(V1), "--to", str(V2), "--entry", ENTRY, "--fail-on", "info"], capsys)
    assert code == 1

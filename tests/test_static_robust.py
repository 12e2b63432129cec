"""Bad input never crashes the scan: syntax errors, cycles, huge files, unknown entries and targets."""

from __future__ import annotations

import shutil

import pytest

from conftest import FIXTURES
from dynacheck.cli import main
from dynacheck.errors import UserError
from dynacheck.static.scan import scan_roots

ROOT = FIXTURES / "robust"


def test_cycles_and_syntax_errors_are_reported_not_fatal(scan_cache):
    result = scan_roots([ROOT], ["robfx.model:Model.forward"], cache_dir=scan_cache)
    sites = {f.site.function for f in result.findings}
    assert "robfx.cycle_a.ping" in sites  # reached through an import cycle and mutual recursion
    problems = [p for p in result.problems if p.kind == "syntax_error"]
    assert [p.file for p in problems] == ["robfx/broken.py"]
    assert "SyntaxError" in problems[0].message or "Syntax" in problems[0].message


def test_huge_file_is_skipped_and_counted(tmp_path, scan_cache):
    root = tmp_path / "tree"
    shutil.copytree(ROOT, root)
    (root / "robfx" / "cycle_b.py").write_text(
        "from robfx import cycle_a\n\n\ndef pong(n):\n    return cycle_a.ping(n)\n" + "# filler\n" * 600_000)
    result = scan_roots([root], ["robfx.model:Model.forward"], cache_dir=scan_cache)
    too_large = [p for p in result.problems if p.kind == "too_large"]
    assert [p.file for p in too_large] == ["robfx/cycle_b.py"]
    assert any(f.site.function == "robfx.cycle_a.ping" for f in result.findings)


def test_unknown_entry_suggests_the_closest_names(scan_cache):
    with pytest.raises(UserError) as info:
        scan_roots([ROOT], ["robfx.model:Model.forwrd"], cache_dir=scan_cache)
    assert "Model.forward" in str(info.value)
    with pytest.raises(UserError) as info:
        scan_roots([ROOT], ["robfx.modle:Model.forward"], cache_dir=scan_cache)
    assert "robfx.model" in str(info.value)
    with pytest.raises(UserError):
        scan_roots([ROOT], ["no-colon-here"], cache_dir=scan_cache)


def _run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_cli_exit_codes(capsys, scan_cache):
    root = str(ROOT)
    code, out, _ = _run(capsys, "scan", "-t", root, "-e", "robfx.model:Model.forward", "--fail-on", "warning",
                        "--cache-dir", str(scan_cache))
    assert code == 1 and "robfx/cycle_a.py" in out
    # the only hazard is a print (a warning): the default threshold, error, lets it pass
    code, _, _ = _run(capsys, "scan", "-t", root, "-e", "robfx.model:Model.forward", "--cache-dir", str(scan_cache))
    assert code == 0
    code, _, _ = _run(capsys, "scan", "-t", root, "-e", "robfx.model:Model.clean", "--cache-dir", str(scan_cache))
    assert code == 0
    code, _, _ = _run(capsys, "scan", "-t", root, "-e", "robfx.model:Model.forward", "--fail-on", "never",
                      "--cache-dir", str(scan_cache))
    assert code == 0


@pytest.mark.parametrize("argv, words", [
    (["-t", "/no/such/folder/anywhere"], "no folder"),
    (["-t", str(ROOT), "-e", "robfx.model:Nope.forward"], "names no function"),
    (["-t", str(ROOT)], "No entry"),
])
def test_cli_bad_input_is_one_sentence_and_exit_2(capsys, scan_cache, argv, words):
    code, _, err = _run(capsys, "scan", *argv, "--cache-dir", str(scan_cache))
    assert code == 2
    assert words.lower() in err.lower()
    assert "Traceback" not in err


def test_cli_offline_without_cached_wheel_says_so(capsys, tmp_path):
    code, _, err = _run(capsys, "scan", "-t", "sglang==0.0.1", "--preset", "glm5", "--offline",
                        "--cache-dir", str(tmp_path))
    assert code == 2
    assert "offline" in err.lower() and "sglang==0.0.1" in err


def test_the_embedded_default_is_a_demonstration_that_exits_0(capsys, monkeypatch, scan_cache):
    import dynacheck.static.scan as engine

    seen = {}

    def fake_scan(targets, entries, preset, **options):  # no download in this test: record what was asked
        seen.update(targets=targets, entries=entries, preset=preset)
        return engine.scan_roots([ROOT], ["robfx.model:Model.forward"], cache_dir=scan_cache)

    monkeypatch.setattr(engine, "scan", fake_scan)
    code, out, err = _run(capsys, "scan", "--fail-on", "info")
    assert seen == {"targets": ["sglang==0.5.9", "flashinfer-python==0.6.3"], "entries": [], "preset": "glm5"}
    assert code == 1 and "scanning the default" in err
    code, _, _ = _run(capsys, "scan")
    assert code == 0

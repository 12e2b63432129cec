"""The gate's own outputs: GitHub annotations, markdown for PR comments, terminal lines, paths."""

from __future__ import annotations

from pathlib import Path

from dynacheck.gate.annotations import render_github
from dynacheck.gate.output import relative_to_workdir
from dynacheck.gate.text import render_markdown, render_terminal
from dynacheck.model import Diff, Finding, Hop, Outcome, Site, Target


def finding(callee: str, severity: str = "error", file: str = "pkg/quant.py") -> Finding:
    return Finding(
        rule="DC001",
        title="Process spawn on the compiled path",
        severity=severity,
        site=Site(file, 12, "pkg.quant.nvcc_version", callee, column=10),
        chain=(Hop("pkg.model.Model.forward", "pkg/model.py", 25, "entry"), Hop("pkg.quant.quantize", file, 18, "import")),
        outcome=Outcome("graph_break", "GB0007", fatal_under_fullgraph=True),
        status="suppressed" if severity == "info" else "predicted",
        note="probe runs once (pkg/quant.py:12)" if severity == "info" else "",
    )


def diff() -> Diff:
    return Diff(
        before=("v1",), after=("v2",),
        added=(finding("subprocess.run"), finding("os.getcwd", severity="warning")),
        removed=(finding("time.perf_counter"),),
        suppressed=(finding("os.path.exists", severity="info"),),
    )


def test_github_annotations_for_new_findings_only() -> None:
    lines = render_github(diff()).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error file=pkg/quant.py,line=12,col=10,title=dynacheck DC001 (added)::")
    assert lines[1].startswith("::warning ")
    assert "subprocess.run in pkg.quant.nvcc_version [GB0007, fatal under fullgraph]" in lines[0]
    assert "%0Avia pkg.model.Model.forward → pkg.quant.quantize → pkg.quant.nvcc_version" in lines[0]


def test_markdown_table_lists_each_kind() -> None:
    text = render_markdown(diff(), title="dynacheck diff")
    assert text.startswith("### dynacheck diff: 2 added, 1 removed, 0 changed, 0 unchanged, 1 suppressed")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert [row.split("|")[1].strip() for row in rows] == ["added", "added", "removed", "suppressed"]
    assert "`subprocess.run`" in rows[0] and "GB0007, fatal under fullgraph" in rows[0]


def test_markdown_when_nothing_changed() -> None:
    assert "No Dynamo hazards were added or removed" in render_markdown(Diff(before=("a",), after=("b",)))


def test_terminal_lines_name_new_fixed_and_suppressed_with_reason() -> None:
    text = render_terminal(diff())
    assert "ADDED      error   DC001 subprocess.run in pkg.quant.nvcc_version (pkg/quant.py:12)" in text
    assert "REMOVED    error   DC001 time.perf_counter" in text
    assert "reason: probe runs once (pkg/quant.py:12)" in text


def test_paths_become_relative_to_the_working_directory(tmp_path: Path) -> None:
    root = tmp_path / "fixtures" / "v2"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "quant.py").write_text("x = 1\n")
    target = Target(spec=str(root), name="pkg", version="", root=str(root), kind="folder")
    moved = relative_to_workdir(diff(), (target,), workdir=tmp_path)
    assert moved.added[0].site.file == "fixtures/v2/pkg/quant.py"
    assert moved.added[0].chain[1].file == "fixtures/v2/pkg/quant.py"
    assert moved.added[0].chain[0].file == "pkg/model.py"  # not on disk: left alone
    outside = relative_to_workdir(diff(), (target,), workdir=tmp_path / "elsewhere")
    assert outside.added[0].site.file == "pkg/quant.py"


def test_own_renderers_are_used_when_the_report_room_is_absent(monkeypatch) -> None:
    import sys

    import pytest

    from dynacheck.errors import UserError
    from dynacheck.gate.output import render_diff

    monkeypatch.setitem(sys.modules, "dynacheck.report", None)  # import now fails as if not installed
    assert render_diff(diff(), "github") == render_github(diff())
    assert render_diff(diff(), "markdown") == render_markdown(diff())
    with pytest.raises(UserError, match="report module"):
        render_diff(diff(), "sarif")


def test_report_room_draws_the_formats_it_knows(monkeypatch) -> None:
    import sys
    import types

    from dynacheck.gate.output import render_diff

    fake = types.ModuleType("dynacheck.report")
    fake.FORMATS = ("sarif",)
    fake.render = lambda d, fmt: f"{fmt}:{len(d.added)}"
    monkeypatch.setitem(sys.modules, "dynacheck.report", fake)
    assert render_diff(diff(), "sarif") == "sarif:2"
    assert render_diff(diff(), "terminal") == render_terminal(diff())  # not in its FORMATS: ours


def test_terminal_lists_a_few_unchanged_and_counts_the_rest() -> None:
    many = Diff(before=("a",), after=("b",), unchanged=tuple(finding(f"mod.call{i}") for i in range(13)))
    lines = render_terminal(many).splitlines()
    assert sum(line.startswith("UNCHANGED  error") for line in lines) == 10
    assert lines[-1] == "UNCHANGED  ... and 3 more (all listed with --format json)"


def test_terminal_shows_what_changed() -> None:
    changed = Diff(before=("a",), after=("b",), changed=(Finding.from_dict({**finding("x.y").to_dict(), "note": "was warning, GB0291"}),))
    assert "note: was warning, GB0291" in render_terminal(changed)


def test_a_note_without_a_file_names_none(capsys):
    """A deployment's note (`piecewise_off`, `runner_missing`) has no file: the line says no `in :`."""
    from types import SimpleNamespace

    from dynacheck.gate.command import _say_problems
    from dynacheck.model import Problem

    _say_problems(SimpleNamespace(problems=(Problem("piecewise_off", "", "SGLang turns it off"),
                                            Problem("syntax_error", "a.py", "bad"))))
    _say_problems(SimpleNamespace(problems=(Problem("syntax_error", "a.py", "bad"),)))
    err = capsys.readouterr().err.splitlines()
    assert err == ["dynacheck: note: piecewise_off: SGLang turns it off (and 1 more)",
                   "dynacheck: note: syntax_error in a.py: bad"]


def test_a_diff_carries_what_changes_the_meaning_of_a_side():
    """`dynacheck diff` from 0.5.9 to 0.5.10 on GLM-5: 0.5.10 does not compile the model by default, so its rows
    are those of an enforced launch; every output says so before the rows (gate/command.side_notes)."""
    from types import SimpleNamespace

    from dynacheck.gate.command import side_notes
    from dynacheck.model import Problem
    from dynacheck.report import render

    after = SimpleNamespace(problems=(Problem("piecewise_off", "", "SGLang turns piecewise CUDA graphs off for X"),
                                      Problem("syntax_error", "a.py", "bad")))
    notes = side_notes(SimpleNamespace(problems=()), after)
    assert notes == ("after: SGLang turns piecewise CUDA graphs off for X",)
    noted = Diff(before=("v1",), after=("v2",), added=(finding("subprocess.run"),), notes=notes)
    assert "> **Note** after: SGLang turns piecewise CUDA graphs off for X" in render_markdown(noted)
    assert "  note: after: SGLang turns piecewise CUDA graphs off for X" in render_terminal(noted)
    assert "> **Note** after: SGLang turns piecewise CUDA graphs off for X" in render(noted, "markdown")
    assert "<strong>Note</strong> after: SGLang turns piecewise CUDA graphs off for X" in render(noted, "html")
    assert Diff.from_dict(noted.to_dict()).notes == notes
    assert "Note" not in render_markdown(Diff(before=("a",), after=("b",), added=(finding("subprocess.run"),)))

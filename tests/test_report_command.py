"""`dynacheck report`: every format from a saved scan, trace wiring, and one-sentence errors (exit 2)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.cli import main  # noqa: E402
from dynacheck.model import Review  # noqa: E402
from dynacheck.report import render  # noqa: E402


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


@pytest.fixture
def scan_file(tmp_path) -> Path:
    path = tmp_path / "scan.json"
    path.write_text(render(samples.flagship_scan(), "json"))
    return path


@pytest.mark.parametrize("fmt,marker", [("json", '"findings"'), ("sarif", '"version": "2.1.0"'),
                                        ("markdown", "## dynacheck"), ("github", "::error file="),
                                        ("terminal", "calls subprocess.check_output")])
def test_formats_to_stdout(scan_file, capsys, fmt, marker):
    assert run(["report", "--scan", str(scan_file), "--format", fmt]) == 0
    assert marker in capsys.readouterr().out


def test_json_of_a_scan_is_the_scan(scan_file, capsys):
    run(["report", "--scan", str(scan_file), "--format", "json"])
    assert json.loads(capsys.readouterr().out) == {"scan": json.loads(scan_file.read_text()), "trace": None,
                                                   "matches": []}


def test_html_default_path_and_out(scan_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["report", "--scan", str(scan_file), "--format", "html"]) == 0
    default = tmp_path / "reports" / "dynacheck-report.html"
    assert default.is_file() and "get_cuda_version" in default.read_text()
    assert "wrote reports/dynacheck-report.html" in capsys.readouterr().err
    out = tmp_path / "deep" / "r.html"
    assert run(["report", "--scan", str(scan_file), "--format", "html", "--out", str(out)]) == 0
    # a scan file does not choose where excerpts come from: its recorded roots lie outside the
    # current folder and the cache, so only the stored code lines appear ...
    assert "class MergedColumnParallelLinear(LinearBase):" not in out.read_text()
    assert "output = self.quant_method.apply(self, x, bias)" in out.read_text()
    # ... until the user names the folder: then sources are read at render time from it
    assert run(["report", "--scan", str(scan_file), "--format", "html", "--out", str(out),
                "--source-root", str(samples.TREE)]) == 0
    assert "class MergedColumnParallelLinear(LinearBase):" in out.read_text()


def test_saved_review_and_diff_load(tmp_path, capsys):
    review = tmp_path / "review.json"
    review.write_text(render(samples.flagship_review(), "json"))
    assert run(["report", "--scan", str(review), "--format", "markdown"]) == 0
    assert "1 confirmed" in capsys.readouterr().out
    diff = tmp_path / "diff.json"
    diff.write_text(render(samples.sample_diff(), "json"))
    assert run(["report", "--diff", str(diff), "--format", "github"]) == 0
    assert capsys.readouterr().out.startswith("::warning file=sglang/srt/layers/quantization")
    assert run(["report", "--scan", str(review), "--diff", str(diff), "--format", "html",
                "--out", str(tmp_path / "both.html")]) == 0
    both = (tmp_path / "both.html").read_text()
    assert 'id="diff"' in both and 'id="findings"' in both


def test_trace_goes_through_the_dynamic_room(scan_file, tmp_path, monkeypatch, capsys):
    calls = {}

    def load_trace(path):
        calls["dir"] = path
        return samples.two_process_trace()

    def correlate(scan, trace):
        calls["scan"] = scan
        return Review(scan=scan, trace=trace, matches=samples.flagship_review().matches)

    merge = types.ModuleType("dynacheck.dynamic.merge")
    merge.load_trace = load_trace
    corr = types.ModuleType("dynacheck.dynamic.correlate")
    corr.correlate = correlate
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic", types.ModuleType("dynacheck.dynamic"))
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic.merge", merge)
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic.correlate", corr)
    advice = types.ModuleType("dynacheck.dynamic.advice")  # the report also asks it; stubbed, the test stands alone
    advice.advise = lambda trace: trace
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic.advice", advice)
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    assert run(["report", "--scan", str(scan_file), "--trace", str(trace_dir), "--format", "terminal"]) == 0
    out = capsys.readouterr().out
    assert calls["dir"] == trace_dir and calls["scan"].findings
    assert "1 confirmed, 2 predicted only, 1 seen only" in out


def test_trace_without_the_dynamic_room_is_a_user_error(scan_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "dynacheck.dynamic.merge", None)  # import fails
    (tmp_path / "t").mkdir()
    assert run(["report", "--scan", str(scan_file), "--trace", str(tmp_path / "t")]) == 2
    assert "dynamic recorder" in capsys.readouterr().err


@pytest.mark.parametrize("content,needle", [
    (None, "does not exist"),
    ("{not json", "is not valid JSON (line 1, column 2)"),
    ("[1, 2]", "is not a dynacheck scan"),
    ('{"hello": 1}', "is not a dynacheck scan or review"),
    ('{"targets": [], "entries": [], "findings": [], "schema_version": "9.0"}', "has schema_version 9.0"),
    ("BROKEN_FINDING", "does not match the dynacheck scan schema at findings/0/chain/0/line"),
])
def test_bad_scan_files_exit_2_with_one_sentence(tmp_path, capsys, content, needle):
    path = tmp_path / "scan.json"
    if content == "BROKEN_FINDING":
        data = json.loads(render(samples.flagship_scan(), "json"))
        data["findings"][0]["chain"][0]["line"] = "twelve"
        content = json.dumps(data)
    if content is not None:
        path.write_text(content)
    assert run(["report", "--scan", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and err.count("\n") == 1


def test_usage_errors(scan_file, tmp_path, capsys):
    assert run(["report"]) == 2
    assert "Nothing to report" in capsys.readouterr().err
    diff = tmp_path / "diff.json"
    diff.write_text(render(samples.sample_diff(), "json"))
    assert run(["report", "--scan", str(scan_file), "--diff", str(diff), "--format", "sarif"]) == 2
    assert "either a review or a diff" in capsys.readouterr().err
    assert run(["report", "--diff", str(scan_file)]) == 2
    assert "is not a dynacheck diff" in capsys.readouterr().err
    assert run(["report", "--scan", str(scan_file), "--format", "pdf"]) == 2
    blocked = tmp_path / "file"
    blocked.write_text("x")
    assert run(["report", "--scan", str(scan_file), "--format", "json", "--out", str(blocked / "r.json")]) == 2
    assert "Cannot write the report" in capsys.readouterr().err

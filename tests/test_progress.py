"""Progress says what it counts: files unpacked of total, files read by the walk, the trace's processes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from dynacheck.cli import main
from dynacheck.progress import StatusLine

_BUILDERS = Path(__file__).parent / "fixtures" / "sources" / "builders.py"
_spec = importlib.util.spec_from_file_location("progress_builders", _BUILDERS)
builders = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builders)  # type: ignore[union-attr]

PKG = {
    "tinyprog/__init__.py": "",
    "tinyprog/model.py": "import subprocess\n\n\nclass Model:\n    def forward(self, x):\n"
                         "        subprocess.run(['nvcc'])\n        return x\n",
}


class Recorder(StatusLine):
    """A status line that keeps its messages instead of drawing them."""

    def __init__(self) -> None:
        super().__init__(enabled=False)
        self.messages: list[str] = []

    def __call__(self, message: str) -> None:
        self.messages.append(f"{self.phase}: {message}" if self.phase else message)


def test_scan_reports_unpacked_files_of_total_and_files_read(tmp_path):
    from dynacheck.static.scan import scan

    wheel = builders.make_wheel(tmp_path / "dl", "tinyprog", "1.0", PKG)
    status = Recorder()
    result = scan([str(wheel)], ["tinyprog.model:Model.forward"], cache_dir=tmp_path / "cache", progress=status)
    assert result.findings
    assert any(m.startswith("resolving ") for m in status.messages)
    assert any(m.endswith("3/3 files") for m in status.messages), status.messages  # two modules and METADATA
    assert any(m.startswith("walking from 1 entry") for m in status.messages)


def test_walk_counts_files_parsed_and_from_cache(tmp_path):
    from dynacheck.static.scan import scan

    files = {f"many/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(10)}
    calls = "\n".join(f"        m{i}.f{i}()" for i in range(10))
    files["many/__init__.py"] = ""
    files["many/model.py"] = ("from many import " + ", ".join(f"m{i}" for i in range(10)) +
                              "\nimport time\n\n\nclass Model:\n    def forward(self, x):\n" + calls +
                              "\n        time.time()\n        return x\n")
    root = builders.write_tree(tmp_path / "src", files)
    status = Recorder()
    scan([str(root)], ["many.model:Model.forward"], cache_dir=tmp_path / "cache", progress=status)
    walking = [m for m in status.messages if m.startswith("walking:")]
    assert walking and "parsed" in walking[-1] and "from cache" in walking[-1]
    again = Recorder()
    scan([str(root)], ["many.model:Model.forward"], cache_dir=tmp_path / "cache", progress=again)
    assert again.messages[-1] == "no input changed since an earlier scan: its answer is reused"
    (root / "many" / "unrelated.py").write_text("y = 2\n")  # a new file: the walk runs again
    third = Recorder()
    scan([str(root)], ["many.model:Model.forward"], cache_dir=tmp_path / "cache", progress=third)
    last = [m for m in third.messages if m.startswith("walking:")][-1]
    assert "(0 parsed" in last  # every file the walk needs comes from the summary cache


def test_status_line_is_silent_off_a_terminal(capsys):
    with StatusLine(enabled=False) as status:
        status("anything")
        status.counts("unpacking x", 1, 2)
    assert capsys.readouterr().err == ""


def test_trace_says_what_it_records_and_what_it_saw(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    program = tmp_path / "noop.py"
    program.write_text("print('hello')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["trace", "--out", str(tmp_path / "t"), "--", sys.executable, str(program)])
    err = capsys.readouterr().err
    assert info.value.code == 0
    assert "dynacheck trace: recording every Python process of" in err
    assert "dynacheck trace: done in" in err and "0 event(s), exit 0" in err

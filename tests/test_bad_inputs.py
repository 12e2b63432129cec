"""The bad-input corpus (issue 10): every family run through the real CLI in a fresh interpreter.

For each case: no traceback, an exit code the README documents (0 clean, 1 findings, 2 bad input),
the bad file named in one sentence, and every finding from the good files kept.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES

sys.path.insert(0, str(FIXTURES / "corpus"))
import bad_inputs as corpus  # noqa: E402

BOM = b"\xef\xbb\xbf"
GOOD_BAD_PY = b"import subprocess\n\n\ndef f(x):\n    subprocess.run(['ls'])\n    return x\n"


def _clean(done) -> None:
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr[-2000:]
    assert done.returncode in (0, 1, 2), done.stderr


def _one_sentence_naming(done, name: str) -> None:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and name in lines[-1], done.stderr
    assert len([line for line in lines if line.startswith(("dynacheck: error", "Error:"))]) == 1  # ours or click's


def _scan(tmp_path: Path, target: Path, entry: str = corpus.ENTRY):
    out = tmp_path / "scan.json"
    done = corpus.run_cli("scan", "-t", str(target), "-e", entry, "--format", "json", "--out", str(out),
                          "--cache-dir", str(tmp_path / "cache"))
    _clean(done)
    return done, (json.loads(out.read_text()) if out.is_file() and done.returncode != 2 else None)


# ----- source files: the scan continues, the bad file is a problem record ---------------------------------

SOURCE_CASES = {
    "syntax error": (b"def f(x:\n", "syntax_error"),
    "NUL byte": (b"def f(x):\n    return x\x00\n", "syntax_error"),
    "attribute chain 8,000 deep": (corpus.deep("attr", 8000), "too_deep"),
    "call chain 8,000 deep": (corpus.deep("call", 8000), "too_deep"),
    "plus chain 20,000 long": (corpus.deep("plus", 20000), "too_deep"),
    "brackets 1,000 deep": (corpus.deep("list", 1000), "syntax_error"),
    "a 1.4 MB line": (b"def f(x):\n    return x\ny = [" + b"1," * 700_000 + b"]\n", "too_large"),
    "not UTF-8": (b"# \xe9\xff\ndef f(x):\n    return x\n", None),
    "empty file": (b"", None),
}


@pytest.mark.parametrize("case", list(SOURCE_CASES))
def test_a_bad_source_file_is_one_problem_and_the_good_findings_stay(tmp_path, case):
    source, kind = SOURCE_CASES[case]
    root = corpus.write_package(tmp_path / "src", source)
    done, data = _scan(tmp_path, root)
    assert done.returncode == 1  # the good modules' subprocess calls are errors
    assert len(corpus.good_sites(data["findings"])) == corpus.GOOD_MODULES
    problems = [p for p in data["problems"] if p["file"].endswith("goodpkg/bad.py")]
    if kind is None:
        assert problems == []
    else:
        assert [p["kind"] for p in problems] == [kind]
        assert "\n" not in problems[0]["message"] and problems[0]["message"]


@pytest.mark.parametrize("kind, depth", [("call", 600), pytest.param("attr", 2400, marks=pytest.mark.slow)])
def test_deep_but_valid_python_is_summarized(tmp_path, kind, depth):
    source = corpus.deep(kind, depth) + GOOD_BAD_PY.replace(b"def f(", b"def g(")
    root = corpus.write_package(tmp_path / "src", source)
    _, data = _scan(tmp_path, root)
    assert len(corpus.good_sites(data["findings"])) == corpus.GOOD_MODULES
    assert [p for p in data["problems"] if p["file"].endswith("bad.py")] == []


def test_where_the_parser_guard_is_not_measured_the_depth_is_walked(monkeypatch):
    from dynacheck.static import summary

    monkeypatch.setattr(summary, "_AST_GUARD_MEASURED", False)
    monkeypatch.setattr(summary, "MAX_NESTING", 300)
    deep = summary.summarize(corpus.deep("attr", 400).decode(), "m", "m.py", False)
    assert deep.error.startswith("NestingError") and "300" in deep.error
    assert summary.summarize(corpus.deep("attr", 200).decode(), "m", "m.py", False).error == ""


def test_a_byte_order_mark_is_not_a_syntax_error(tmp_path):
    root = corpus.write_package(tmp_path / "src", BOM + GOOD_BAD_PY)
    _, data = _scan(tmp_path, root)
    assert data["problems"] == []
    assert any(f["site"]["function"] == "goodpkg.bad.f" for f in data["findings"])


STAR_CASES = {
    "single": {"bad.py": "from goodpkg.lib import *\n"},
    "relative": {"bad.py": "from .lib import *\n"},
    "chained": {"bad.py": "from goodpkg.mid import *\n", "mid.py": "from goodpkg.lib import *\n"},
    "cyclic": {"bad.py": "from goodpkg.mid import *\n", "mid.py": "from goodpkg.bad import *\nfrom .lib import *\n"},
    "re-exported by __all__": {"bad.py": "from goodpkg.sub import *\n",
                               "sub/__init__.py": "from .inner import *\n__all__ = ['f']\n",
                               "sub/inner.py": "import subprocess\n\n\ndef f(x):\n    subprocess.run(['ls'])\n"},
}


@pytest.mark.parametrize("case", list(STAR_CASES))
def test_star_imports_keep_the_findings_behind_them(tmp_path, case):
    root = corpus.write_package(tmp_path / "src")
    (root / "goodpkg" / "lib.py").write_bytes(GOOD_BAD_PY)
    for relative, text in STAR_CASES[case].items():
        (root / "goodpkg" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "goodpkg" / relative).write_text(text)
    _, data = _scan(tmp_path, root)
    functions = {f["site"]["function"] for f in data["findings"]}
    assert functions & {"goodpkg.lib.f", "goodpkg.sub.inner.f"}, functions
    assert len(corpus.good_sites(data["findings"])) == corpus.GOOD_MODULES


def test_all_limits_what_a_star_import_takes(tmp_path):
    root = corpus.write_package(tmp_path / "src", b"from goodpkg.lib import *\n")
    (root / "goodpkg" / "lib.py").write_bytes(b"__all__ = ['other']\n" + GOOD_BAD_PY)
    _, data = _scan(tmp_path, root)
    assert "goodpkg.lib.f" not in {f["site"]["function"] for f in data["findings"]}


# ----- wheels: every damage is one sentence and exit 2 ----------------------------------------------------


def _wheel(folder: Path, extra: dict[str, bytes] | None = None, method=zipfile.ZIP_DEFLATED) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "goodpkg-1.0-py3-none-any.whl"
    src = corpus.write_package(folder / "tree", GOOD_BAD_PY * 40)
    with zipfile.ZipFile(wheel, "w", method) as archive:
        for path in sorted((src / "goodpkg").rglob("*.py")):
            archive.write(path, path.relative_to(src).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
        archive.writestr("goodpkg-1.0.dist-info/METADATA", "Name: goodpkg\nVersion: 1.0\n")
    return wheel


def _patch_headers(wheel: Path, member: str, local_offset: int, central_offset: int, value: int) -> None:
    """Overwrite a 2-byte field of one member in both its local and its central directory header."""
    data = bytearray(wheel.read_bytes())
    name = member.encode()
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at:name_at + len(name)] == name:
                struct.pack_into("<H", data, start + offset, value)
            start += 4
    wheel.write_bytes(bytes(data))


def _corrupt_deflate(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("goodpkg/bad.py")
    data = bytearray(wheel.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + 5, start + min(info.compress_size, 60)):
        data[i] ^= 0x5A
    wheel.write_bytes(bytes(data))


WHEEL_CASES = {
    "truncated": lambda w: w.write_bytes(w.read_bytes()[: w.stat().st_size // 2]),
    "not a zip": lambda w: w.write_bytes(os.urandom(4000)),
    "empty": lambda w: w.write_bytes(b""),
    "corrupt deflate data": _corrupt_deflate,
    "unknown compression method": lambda w: _patch_headers(w, "goodpkg/bad.py", 8, 10, 99),
    "encrypted flag": lambda w: _patch_headers(w, "goodpkg/bad.py", 6, 8, 1),
}


@pytest.mark.parametrize("case", list(WHEEL_CASES))
def test_a_damaged_wheel_is_one_sentence_and_exit_2(tmp_path, case):
    wheel = _wheel(tmp_path / "dl")
    WHEEL_CASES[case](wheel)
    done, _ = _scan(tmp_path, wheel)
    assert done.returncode == 2
    _one_sentence_naming(done, wheel.name)


@pytest.mark.parametrize("extra", [
    {"goodpkg/dual.py": b"X = 1\n", "goodpkg/dual.py/inner.py": b"Y = 2\n"},
    {"goodpkg/" + "a" * 300 + ".py": b"X = 1\n"},
], ids=["member both file and folder", "300-character name"])
def test_a_wheel_with_impossible_members_is_one_sentence_and_exit_2(tmp_path, extra):
    wheel = _wheel(tmp_path / "dl", extra)
    done, _ = _scan(tmp_path, wheel)
    assert done.returncode == 2
    _one_sentence_naming(done, wheel.name)
    assert not any((tmp_path / "cache" / "trees").glob(".tmp-*"))


def test_a_good_wheel_scans(tmp_path):
    done, data = _scan(tmp_path, _wheel(tmp_path / "dl"))
    assert done.returncode == 1 and len(corpus.good_sites(data["findings"])) == corpus.GOOD_MODULES


# ----- files read back: scan and diff JSON, traces, baselines, config -------------------------------------


def _special(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero link":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()


DEEP_JSON = "[" * 100_000 + "]" * 100_000
JSON_CASES = {
    "not JSON": "{nope",
    "100k-deep": DEEP_JSON,
    "100k-deep inside": '{"findings": ' + DEEP_JSON + ', "targets": []}',
    "wrong-typed findings": '{"schema_version": "1.1", "findings": 5, "targets": [], "entries": []}',
    "wrong-typed line": None,  # filled from a real scan below
    "a list": "[1, 2]",
    "empty": "",
}


@pytest.mark.parametrize("option", ["--scan", "--diff"])
@pytest.mark.parametrize("case", [*JSON_CASES, "fifo", "dev-zero link", "folder"])
def test_report_on_a_bad_json_file_is_one_sentence(tmp_path, option, case):
    path = tmp_path / "in.json"
    if case in JSON_CASES:
        text = JSON_CASES[case]
        if text is None:
            sys.path.insert(0, str(FIXTURES / "report"))
            import report_samples

            from dynacheck.report import render

            data = json.loads(render(report_samples.flagship_scan(), "json"))
            data["findings"][0]["site"]["line"] = "twelve"
            text = json.dumps(data)
        path.write_text(text)
    else:
        _special(case, path)
    done = corpus.run_cli("report", option, str(path), "--format", "json", timeout=60)
    _clean(done)
    assert done.returncode == 2
    _one_sentence_naming(done, str(path))


def _events(folder: Path, lines: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "events-1.jsonl").write_text("\n".join(lines) + "\n")


GOOD_EVENT = {"kind": "graph_break", "pid": 1, "gb_id": "GB0007", "gb_type": "skipped", "reason": "r",
              "site": {"file": "a.py", "line": 3, "function": "f"}}


@pytest.mark.parametrize("bad", [
    {**GOOD_EVENT, "gb_id": 7},
    {**GOOD_EVENT, "kind": 5},
    {**GOOD_EVENT, "site": {"file": 1, "line": "x", "function": None}},
    {**GOOD_EVENT, "user_stack": "nope"},
    {**GOOD_EVENT, "count": "many"},
    "DEEP",
], ids=["int gb_id", "int kind", "bad site", "bad stack", "str count", "100k-deep line"])
def test_one_bad_trace_record_is_skipped_and_the_rest_kept(tmp_path, bad):
    other = {**GOOD_EVENT, "gb_id": "GB0156", "pid": 2, "site": {"file": "b.py", "line": 9, "function": "g"}}
    bad_line = DEEP_JSON if bad == "DEEP" else json.dumps(bad)
    _events(tmp_path / "trace", [json.dumps({"record": "process", "pid": 1}), json.dumps(GOOD_EVENT), bad_line,
                                 json.dumps(other)])
    done = corpus.run_cli("report", "--trace", str(tmp_path / "trace"), "--format", "json", timeout=60)
    _clean(done)
    assert done.returncode == 0
    events = json.loads(done.stdout)["trace"]["events"]
    assert sorted(e["gb_id"] for e in events) == ["GB0007", "GB0156"]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero link", "folder"])
def test_special_files_in_a_trace_folder_are_refused_not_read(tmp_path, kind):
    _events(tmp_path / "trace", [json.dumps(GOOD_EVENT)])
    _special(kind, tmp_path / "trace" / "events-2.jsonl")
    _special(kind, tmp_path / "trace" / "trace.json")
    done = corpus.run_cli("report", "--trace", str(tmp_path / "trace"), "--format", "json", timeout=60)
    _clean(done)
    assert done.returncode == 0
    assert [e["gb_id"] for e in json.loads(done.stdout)["trace"]["events"]] == ["GB0007"]
    assert "events-2.jsonl" in done.stderr


@pytest.mark.parametrize("table", [
    'tool = "x"\n', "tool = 5\n", "[tool]\ndynacheck = 5\n", "[tool.dynacheck]\ntargets = 5\n",
    "[tool.dynacheck]\nfail_on = [1]\n", "x = " + "[" * 50_000 + "]" * 50_000 + "\n", "[tool.dynacheck\n",
], ids=["tool string", "tool int", "dynacheck int", "targets int", "fail_on list", "50k-deep", "bad TOML"])
def test_a_bad_pyproject_is_one_sentence_and_exit_2(tmp_path, table):
    (tmp_path / "pyproject.toml").write_text(table)
    done = corpus.run_cli("gate", "--config", str(tmp_path / "pyproject.toml"), cwd=tmp_path, timeout=60)
    _clean(done)
    assert done.returncode == 2
    _one_sentence_naming(done, "pyproject.toml")


@pytest.mark.parametrize("content", [
    '{"schema_version": "1", "findings": [], "targets": "x"}', '{"schema_version": 1}', DEEP_JSON,
    '{"schema_version": "1", "findings": ' + DEEP_JSON + "}",
], ids=["targets string", "int version", "100k-deep", "100k-deep findings"])
def test_a_bad_baseline_is_one_sentence_and_exit_2(tmp_path, content):
    (tmp_path / "base.json").write_text(content)
    (tmp_path / "pyproject.toml").write_text('[tool.dynacheck]\ntargets = ["src"]\nentries = ["m:f"]\n')
    done = corpus.run_cli("gate", "--baseline", str(tmp_path / "base.json"), cwd=tmp_path, timeout=60)
    _clean(done)
    assert done.returncode == 2
    _one_sentence_naming(done, "base.json")


# ----- smaller items: namespace depth, skipped entry modules ---------------------------------------------


def test_a_namespace_package_two_levels_deep_is_a_target(tmp_path):
    pkg = tmp_path / "src" / "ns1" / "ns2"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("import subprocess\n\n\nclass M:\n    def forward(self, x):\n"
                                "        subprocess.run(['a'])\n")
    done, data = _scan(tmp_path, tmp_path / "src", "ns1.ns2.mod:M.forward")
    assert done.returncode == 1 and [f["site"]["function"] for f in data["findings"]] == ["ns1.ns2.mod.M.forward"]


def test_a_too_large_entry_module_says_why_it_was_skipped(tmp_path):
    root = corpus.write_package(tmp_path / "src")
    (root / "goodpkg" / "big.py").write_text("# filler\n" * 600_000)
    done, _ = _scan(tmp_path, root, "goodpkg.big:f")
    assert done.returncode == 2
    _one_sentence_naming(done, "goodpkg/big.py")
    assert "limit" in done.stderr and "not in the scanned targets" not in done.stderr


def test_a_malformed_trace_record_is_named_on_stderr(tmp_path):
    _events(tmp_path / "trace", [json.dumps(GOOD_EVENT), json.dumps({**GOOD_EVENT, "gb_id": 7})])
    done = corpus.run_cli("report", "--trace", str(tmp_path / "trace"), "--format", "json", timeout=60)
    _clean(done)
    assert "events-1.jsonl: left out 1 malformed event record" in done.stderr


def test_a_trace_whose_recorder_was_stopped_does_not_read_as_exit_0(tmp_path):
    _events(tmp_path / "trace", [json.dumps(GOOD_EVENT)])
    (tmp_path / "trace" / "trace.json").write_text(json.dumps({"command": ["python", "serve.py"], "exit_code": None}))
    done = corpus.run_cli("report", "--trace", str(tmp_path / "trace"), timeout=60)
    _clean(done)
    text = " ".join(done.stdout.split())  # the console wraps long lines
    assert "no exit code: dynacheck trace was stopped" in text and "exit 0" not in text


@pytest.mark.slow
def test_stopping_dynacheck_trace_stops_the_traced_command(tmp_path):
    import signal
    import subprocess
    import time

    child_pid = tmp_path / "child.pid"
    # the pid file appears whole (written aside, then renamed): seen before its write, it read as ''
    script = (f"import os, time; open({str(child_pid) + '.tmp'!r}, 'w').write(str(os.getpid())); "
              f"os.replace({str(child_pid) + '.tmp'!r}, {str(child_pid)!r}); time.sleep(120)")
    environ = {**os.environ, "PYTHONPATH": str(corpus.REPO)}
    trace = subprocess.Popen([sys.executable, "-m", "dynacheck", "trace", "--out", str(tmp_path / "t"), "--",
                              sys.executable, "-c", script], env=environ, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not child_pid.is_file() and time.time() < deadline:
        time.sleep(0.2)
    assert child_pid.is_file()
    trace.send_signal(signal.SIGTERM)
    _, err = trace.communicate(timeout=60)
    assert "Traceback" not in err
    pid = int(child_pid.read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    run = json.loads((tmp_path / "t" / "trace.json").read_text())
    assert run["exit_code"] == 128 + signal.SIGTERM

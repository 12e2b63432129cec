"""Fast checks of the dynamic room's pieces, including the version-dependent fallbacks."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from dynacheck.dynamic import registry, stacks
from dynacheck.dynamic.correlate import correlate, same_file
from dynacheck.dynamic.dynamo_hooks import compile_frame_info
from dynacheck.dynamic.fullgraph import patch_compile, wanted_fullgraph
from dynacheck.dynamic.merge import load_trace, merge_events
from dynacheck.model import (
    Event,
    Finding,
    Frame,
    Hop,
    Outcome,
    ScanResult,
    Site,
    Target,
    TraceResult,
)


def test_gb_id_falls_back_to_the_help_url_when_the_registry_lacks_the_type():
    message = "Some new break\n  Explanation: x\n\n For more details about this graph break, please visit: " \
              "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0421.html"
    assert registry.gb_id_for("a break type no torch has", message) == "GB0421"
    assert registry.gb_id_for("a break type no torch has", "no url") == ""


def test_unsupported_text_splits_into_explanation_and_hints():
    text = ("Attempted to call function marked as skipped\n  Explanation: Dynamo does not know.\n"
            "  Hint: first\n  Hint: second\n\n  Developer debug context: module: _thread, qualname: allocate_lock\n")
    headline, explanation, hints = registry.split_message(text)
    assert headline == "Attempted to call function marked as skipped"
    assert explanation == "Dynamo does not know."
    assert hints == ("first", "second")
    assert "allocate_lock" in registry.developer_context(text)


def test_compile_frame_info_is_none_without_dynamos_compile_frame():
    # the fallback path (a torch whose convert_frame._compile lacks these locals): nothing is guessed
    assert compile_frame_info(sys._getframe()) == (None, None)

    def _compile(code, one_graph):  # shaped like torch._dynamo.convert_frame._compile
        return compile_frame_info(sys._getframe())

    _compile.__code__ = _compile.__code__.replace(co_filename="/x/torch/_dynamo/convert_frame.py")
    found_code, one_graph = _compile(test_compile_frame_info_is_none_without_dynamos_compile_frame.__code__, True)
    assert one_graph is True and found_code.co_name.startswith("test_compile_frame_info")


def test_collect_all_compiles_without_fullgraph_and_remembers_the_users_wish():
    calls = []
    fake = types.SimpleNamespace(compile=lambda model=None, **kw: calls.append(kw) or (lambda *a: wanted_fullgraph()))
    assert patch_compile(fake, collect_all=True)
    assert not patch_compile(fake, collect_all=True), "wrapping twice is refused"
    compiled = fake.compile(lambda x: x, backend="eager", fullgraph=True)
    assert calls[-1]["fullgraph"] is False
    assert compiled(1) is True and wanted_fullgraph() is False
    plain = fake.compile(lambda x: x, backend="eager")
    assert plain(1) is False
    decorated = fake.compile(fullgraph=True)(lambda x: x)
    assert decorated(1) is True


def test_default_mode_keeps_fullgraph():
    calls = []
    fake = types.SimpleNamespace(compile=lambda model=None, **kw: calls.append(kw) or (lambda: None))
    patch_compile(fake, collect_all=False)
    fake.compile(lambda: None, fullgraph=True)
    assert calls[-1]["fullgraph"] is True


def test_resume_function_names_map_back():
    assert stacks.original_name("torch_dynamo_resume_in_forward_at_23") == "forward"
    assert stacks.original_name("torch_dynamo_resume_in_torch_dynamo_resume_in_f_at_3_at_9") == "f"
    assert stacks.original_name("forward") == "forward"


def test_frames_get_class_qualified_names(tmp_path):
    src = tmp_path / "pkgq" / "mod.py"
    src.parent.mkdir()
    src.write_text("class Model:\n    def forward(self, x):\n        return x\n\ndef f():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        stacks.module_name.cache_clear()
        assert stacks.to_frame(str(src), 3, "forward").function == "pkgq.mod.Model.forward"
        assert stacks.to_frame(str(src), 6, "f").function == "pkgq.mod.f"
    finally:
        sys.path.remove(str(tmp_path))
        stacks.module_name.cache_clear()
    assert stacks.frame_kind(stacks.__file__) == "dynacheck"
    import subprocess

    assert stacks.frame_kind(subprocess.__file__) == "stdlib"


def _event(pid, rank, line=3, gb="GB0007", t=1.0, kind="graph_break", fatal=False):
    return Event(kind=kind, pid=pid, rank=rank, gb_id=gb, gb_type="t" + gb, time=t, fatal_under_fullgraph=fatal,
                 site=Frame(file="/abs/pkg/m.py", line=line, function="pkg.m.f"))


def test_same_break_on_several_ranks_is_one_event_with_a_count():
    merged = merge_events([_event(10, 0), _event(11, 1, fatal=True), _event(11, 1), _event(10, 0, line=4)])
    assert len(merged) == 2
    first = next(e for e in merged if e.site.line == 3)
    assert first.count == 3 and first.fatal_under_fullgraph and first.ranks == (0, 1) and first.pids == (10, 11)


def test_repeat_and_end_records_are_applied(tmp_path):
    import json

    event = _event(5, -1, kind="side_effect", gb="").to_dict()
    lines = [{"record": "process", "pid": 5, "rank": -1, "argv": ["a"]}, event,
             {"record": "repeat", **event, "count": 4}, {"record": "end", "pid": 5, "ended": "exit 0"}]
    (tmp_path / "events-5.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    result = load_trace(tmp_path)
    assert result.events[0].count == 4 and result.processes[0].ended == "exit 0"


def _finding(function="pkg.m.f", file="pkg/m.py", line=3):
    return Finding(rule="DC001", title="t", severity="error", fingerprint="fp1",
                   site=Site(file=file, line=line, function=function, callee="subprocess.check_output"),
                   chain=(Hop("pkg.entry.forward", "pkg/entry.py", 9, "entry"),
                          Hop(function, file, line, "import")),
                   outcome=Outcome(kind="graph_break", gb_id="GB0007"))


def test_relative_scan_paths_meet_absolute_trace_paths():
    assert same_file("/abs/pkg/m.py", "pkg/m.py")
    assert not same_file("/abs/xpkg/m.py", "pkg/m.py")
    scan = ScanResult(targets=(Target("x", "x", "", "/abs", "folder"),), entries=("pkg.entry:forward",),
                      findings=(_finding(), _finding("pkg.m.g", line=30)))
    trace = TraceResult(command=("python",), processes=(), events=(_event(1, 0),))
    review = correlate(scan, trace)
    statuses = sorted((m.status, m.fingerprint) for m in review.matches)
    assert statuses == [("confirmed", "fp1"), ("predicted_only", "fp1")]


def test_seen_only_names_the_hop_the_scan_could_not_resolve():
    scan = ScanResult(targets=(Target("x", "x", "", "/abs", "folder"),), entries=(), findings=(_finding(),))
    stack = (Frame("/abs/pkg/entry.py", 9, "pkg.entry.forward"), Frame("/abs/pkg/other.py", 5, "pkg.other.h"),
             Frame("/usr/lib/python3.11/subprocess.py", 828, "__init__"))
    event = Event(kind="graph_break", pid=1, gb_id="GB0007", user_stack=stack, site=stack[1])
    review = correlate(scan, TraceResult(command=(), processes=(), events=(event,)))
    seen = [m for m in review.matches if m.status == "seen_only"]
    assert len(seen) == 1 and "pkg.other.h" in seen[0].note and "did not reach" in seen[0].note
    assert correlate(None, TraceResult(command=(), processes=(), events=(event,))).matches[0].status == "seen_only"


def test_inject_dir_holds_the_sitecustomize():
    from dynacheck.dynamic.launch import INJECT_DIR, trace_env

    assert (INJECT_DIR / "sitecustomize.py").is_file()
    env = trace_env(Path("/tmp/o"), True, {"PYTHONPATH": "/a"})
    assert env["PYTHONPATH"].split(":")[:2] == [str(INJECT_DIR), "/a"]
    assert env["DYNACHECK_COLLECT_ALL"] == "1" and env["DYNACHECK_TRACE_DIR"] == "/tmp/o"

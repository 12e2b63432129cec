"""FIELD_NOTES rows under a real `torch.compile(backend="eager")`, recorded by `dynacheck trace`.

One traced process (tests/fixtures/dynamic/rows.py) compiles each case on its own; every test
reads the same trace and pins the site, the GB id and the attribution of one row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "dynamic"))
from tracerun import HERE, events, load, trace

pytestmark = pytest.mark.torch
ROWS = str(HERE / "rows.py")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("rows")
    proc = trace(out, [ROWS])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load(out)


def line_of(text: str, file: str = ROWS) -> int:
    for number, line in enumerate(Path(file).read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(text)


def only(found):
    assert len(found) == 1, found
    return found[0]


def test_subprocess_break_is_attributed_to_the_user_function_not_subprocess_py(rows):
    event = only(events(rows, "graph_break", "GB0007", "rows.case_subprocess"))
    assert event.site.line == line_of("out = subprocess.check_output")
    assert event.site.file.endswith("rows.py")
    stack_files = [f.file for f in event.user_stack]
    assert any(f.endswith("subprocess.py") for f in stack_files), "the stdlib frames stay in the stack"
    assert event.user_stack[-1].function == "__init__"  # Popen.__init__ at threading.Lock()
    assert "allocate_lock" in event.detail
    assert event.explanation and event.hints
    assert event.compiled_frame == "rows.case_subprocess"
    effect = only(events(rows, "side_effect", None, "rows.case_subprocess"))
    assert effect.gb_type == "subprocess.Popen" and effect.phase == "compiled_runtime"


def test_prewarmed_functools_cache_still_breaks_inside_the_probe(rows):
    event = only(events(rows, "graph_break", "GB0007", "rows.version_probe"))
    assert event.site.line == line_of("return subprocess.check_output([sys.executable, \"--version\"])")
    functions = [f.function for f in event.user_stack]
    assert "rows.case_cached_prewarmed" in functions


def test_with_lock_skips_the_whole_frame(rows):
    skip = only(events(rows, "frame_skip", "GB0142", "rows.case_lock"))
    assert skip.gb_type == "Unsupported context manager"
    assert skip.site.line == line_of("with threading.Lock():")


def test_print_and_logging_break_with_their_own_ids(rows):
    assert only(events(rows, "graph_break", "GB0059", "rows.case_print")).site.line == line_of('print("tracing"')
    logging_break = only(events(rows, "graph_break", "GB0291", "rows.case_logging"))
    assert logging_break.site.line == line_of('log.warning("compiled forward ran")')


def test_time_time_breaks_and_recompiles(rows):
    only(events(rows, "graph_break", "GB0007", "rows.case_time"))
    recompiles = [e for e in events(rows, "recompile") if "case_time" in e.compiled_frame]
    assert recompiles, [e.compiled_frame for e in events(rows, "recompile")]
    assert "time.time()" in recompiles[0].detail  # the guard failure names the source line


def test_assume_constant_result_runs_its_side_effect_while_tracing(rows):
    effects = events(rows, "side_effect", None, "rows.constant_probe")
    assert [e.phase for e in effects] == ["tracing"], [(e.phase, e.site) for e in effects]
    assert not events(rows, "graph_break", None, "rows.constant_probe"), "no break: the value is frozen"


def test_recompile_storm_hits_the_recompile_limit(rows):
    storm = [e for e in events(rows, "recompile") if e.compiled_frame == "rows.case_storm"]
    assert len(storm) == 1 and storm[0].count >= 7, "one event per site, counted"
    assert "MODE" in storm[0].detail
    (limit,) = events(rows, "recompile_limit")
    assert limit.compiled_frame == "rows.case_storm" and limit.gb_id == "GB0039"
    assert limit.site.function == "rows.case_storm"
    assert limit.reason.startswith("hit config.")


def test_item_and_float_tolist(rows):
    item = only(events(rows, "graph_break", "GB0124", "rows.case_item"))
    assert item.site.line == line_of("x.sum().item()")
    only(events(rows, "graph_break", "GB0109", "rows.case_tolist"))


def test_compiler_disable_is_still_a_break(rows):
    event = only(events(rows, "graph_break", "GB0098", "rows.case_disable"))
    assert event.site.line == line_of("return disabled_helper(x) * 2")


def test_break_two_frames_deep_names_the_inner_function_and_the_chain(rows):
    rowlib = str(HERE / "rowlib.py")
    event = only(events(rows, "graph_break", "GB0059", "rowlib.inner"))
    assert event.site.line == line_of('print("inner"', rowlib)
    functions = [f.function for f in event.user_stack]
    chain = ["rows.case_two_deep", "rowlib.outer", "rowlib.inner"]
    assert [f for f in functions if f in chain] == chain


def torch_before_2_13() -> bool:
    import torch

    return tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)


def test_ctypes_hits_unsupported_method_call_and_the_load_is_seen(rows):
    if torch_before_2_13():  # 2.11 reports a different break type here; the break is still at the user's line
        found = [e for e in rows.events if e.kind in ("graph_break", "frame_skip") and e.site
                 and e.site.function == "rows.case_ctypes" and e.gb_id]
        assert found
    else:
        skip = only(events(rows, "frame_skip", "GB0156", "rows.case_ctypes"))
        assert skip.site.file.endswith("rows.py")
    load = only(events(rows, "side_effect", None, "rows.case_ctypes"))
    assert load.gb_type == "ctypes.dlopen"


def test_datetime_now_hits_unsupported_method_call(rows):
    if torch_before_2_13():
        # torch 2.11 raises "Guard failed on the same frame it was created" (a Dynamo bug) instead
        assert events(rows, "compile_error") or events(rows, None, "GB0156", "rows.case_datetime")
        return
    only(events(rows, "graph_break", "GB0156", "rows.case_datetime"))


def test_open_read_breaks_and_the_open_is_seen_at_run_time(rows):
    only(events(rows, "graph_break", "GB0059", "rows.case_open"))
    effect = only(events(rows, "side_effect", None, "rows.case_open"))
    assert effect.gb_type == "open" and effect.phase == "compiled_runtime"
    assert effect.detail.endswith("rows.py")


def test_break_inside_loop_over_layers_falls_back_for_the_whole_frame(rows):
    event = only(events(rows, "frame_skip", "GB7000", "rows.Stack.forward"))
    assert event.site.line == line_of('print("layer done"')


def test_environ_get_is_not_a_break(rows):
    assert not [e for e in rows.events if e.site and e.site.function == "rows.case_environ"]


def test_no_event_is_attributed_to_stdlib_or_torch(rows):
    for event in rows.events:
        if event.site is not None:
            assert "site-packages/torch" not in event.site.file
            assert not event.site.file.endswith(("subprocess.py", "threading.py", "logging/__init__.py"))
    assert len(rows.processes) == 1 and rows.processes[0].ended == "exit 0"

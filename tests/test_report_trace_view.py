"""The trace-only report agrees with itself: counts, severities, user chains, fixes, side effects apart."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.dynamic.advice import advise, observed_callee  # noqa: E402
from dynacheck.dynamic.correlate import correlate  # noqa: E402
from dynacheck.model import Event, Frame, ProcessInfo, TraceResult  # noqa: E402
from dynacheck.report import view  # noqa: E402
from dynacheck.report.console import render_console  # noqa: E402
from dynacheck.report.html import render_html  # noqa: E402
from dynacheck.report.markdown import render_markdown  # noqa: E402

PROG = "/work/app/prog.py"
SUBPROCESS = "/usr/lib/python3.11/subprocess.py"
DYNAMO = "/usr/lib/python3.11/site-packages/torch/_dynamo/variables/user_defined.py"
INTERNALS = "builtin print [<class 'torch._dynamo.variables.constant.ConstantVariable'>] False"


def stack(*frames: tuple[str, int, str]) -> tuple[Frame, ...]:
    return tuple(Frame(file, line, function) for file, line, function in frames)


def print_break() -> Event:
    site = Frame(PROG, 9, "prog.f", 'print("value", x.sum())')
    return Event("graph_break", pid=10, gb_id="GB0059", gb_type="Failed to trace builtin operator",
                 reason="Failed to trace builtin operator", detail=INTERNALS, site=site, compiled_frame="prog.f",
                 user_stack=stack((PROG, 16, "prog.<module>"), (PROG, 9, "prog.f")), fatal_under_fullgraph=True)


def subprocess_break() -> Event:
    site = Frame(PROG, 5, "prog.probe", "return subprocess.check_output(cmd)")
    frames = stack((PROG, 16, "prog.<module>"), (PROG, 9, "prog.f"), (PROG, 10, "prog.f"), (PROG, 5, "prog.probe"),
                   (SUBPROCESS, 466, "check_output"), (SUBPROCESS, 548, "run"),
                   (DYNAMO, 513, "instantiate_user_defined_class_object"), (SUBPROCESS, 828, "__init__"))
    return Event("graph_break", pid=10, gb_id="GB0007", gb_type="Attempted to call function marked as skipped",
                 detail="module: _thread, qualname: allocate_lock, skip reason: C extension", site=site,
                 compiled_frame="prog.f", user_stack=frames, fatal_under_fullgraph=True)


def jit_build_outside() -> Event:
    return Event("side_effect", pid=11, gb_type="subprocess.Popen", reason="subprocess.Popen: ninja",
                 site=Frame(PROG, 30, "prog.build"), phase="outside")


def trace_review():
    processes = (ProcessInfo(10, argv=("prog.py",), events=2),
                 *(ProcessInfo(100 + i, argv=("compile_worker",)) for i in range(17)),
                 ProcessInfo(11, argv=("prog.py",), events=1))
    trace = TraceResult(("python", "prog.py"), processes, (print_break(), subprocess_break(), jit_build_outside()))
    return correlate(None, advise(trace))


def _console(review, **kw) -> str:
    console = Console(record=True, width=200, force_terminal=False, color_system=None)
    render_console(review, console, **kw)
    return console.export_text()


def test_chain_is_cut_to_user_frames_and_resume_copies_merged():
    chain = view.event_chain(subprocess_break())
    assert [(f.function, f.line) for f in chain] == [("prog.f", 10), ("prog.probe", 5)]
    assert [f.function for f in view.event_chain(print_break())] == ["prog.f"]


def test_each_observed_break_gets_the_fix_the_scan_would_place():
    assert observed_callee(print_break()) == "builtins.print"
    assert observed_callee(subprocess_break()) == "subprocess.check_output"
    review = trace_review()
    fixes = {e.gb_id: e.fixes for e in review.trace.events if e.fixes}
    assert fixes["GB0059"][0].sound and fixes["GB0059"][0].at == "prog.f"
    # the boundary is the innermost user frame; from a stack alone its signature is not known, so the
    # custom op is offered with the reason it cannot be proven sound (issue 12: soundness from the function)
    first = fixes["GB0007"][0]
    assert (first.kind, first.at) == ("custom_op", "prog.probe") and "schema" in first.summary
    assert any(f.kind == "disable" and not f.sound for f in fixes["GB0007"])


def test_trace_only_headline_agrees_with_its_rows():
    review = trace_review()
    text = _console(review)
    head = text.splitlines()[1]
    assert head.startswith("2 events seen in compiled code: 2 graph break; 2 fatal under fullgraph")
    assert "0 findings" not in text
    rows = [line for line in text.splitlines() if line.startswith("seen only")]
    assert len(rows) == 2 and all("[error]" in row for row in rows)
    assert "fix: " in text


def test_dynamo_internals_wait_for_verbose_and_outside_side_effects_are_apart():
    review = trace_review()
    text = _console(review)
    assert "torch._dynamo.variables" not in text and "instantiate_user_defined_class_object" not in text
    assert "prog.build" not in text and "1 side effect(s) outside compiled regions hidden" in text
    verbose = _console(review, verbose=True)
    assert "dynamo: builtin print [<class 'torch._dynamo.variables" in verbose
    assert "prog.build" in verbose


def test_idle_processes_are_counted_not_listed():
    review = trace_review()
    assert "(2 processes with events, 17 more without (compile workers, helpers)" in _console(review)
    html = render_html(review)
    assert html.count('<details class="process"') == 2
    assert "17 more without events" in html


def test_html_trace_rows_are_consistent_and_internals_behind_a_toggle():
    html = render_html(trace_review())
    assert 'class="finding sev-error st-seen_only"' in html and "sev-warning st-seen_only" not in html
    internals = html.index('<details class="internals">')
    assert html.index("torch._dynamo.variables.constant") > internals
    outside = html.index('<details id="outside">')
    assert html.index("prog.build") > outside and "<details id=\"outside\" open" not in html
    assert "0 findings" not in html


def test_markdown_names_are_code_and_every_row_has_its_chain():
    base = samples.flagship_finding()
    site = replace(base.site, function="flashinfer.fp4_quantization.get_module.<locals>.quantize")
    findings = tuple(replace(base, site=replace(site, line=100 + i), fingerprint=f"fp{i}") for i in range(7))
    text = render_markdown(replace(samples.flagship_scan(), findings=findings))
    assert "&lt;locals&gt;" not in text.split("<details>")[0]
    assert "`flashinfer.fp4_quantization.get_module.<locals>.quantize`" in text
    assert text.count("<details><summary>") == 7
    trace_text = render_markdown(trace_review())
    assert "`prog.f` → `prog.probe`" in trace_text and "fix: " in trace_text


def test_trace_table_at_80_columns_keeps_names_whole_and_outside_effects_apart():
    from dynacheck.dynamic.summary import print_summary

    long_site = Frame("/work/app/flashinfer/fp4_quantization.py", 282,
                      "flashinfer.fp4_quantization.get_fp4_quantization_module.<locals>.block_scale_interleave_sm100")
    trace = TraceResult(("python", "prog.py"), (ProcessInfo(10, events=3),),
                        (replace(subprocess_break(), site=long_site), print_break(), jit_build_outside()))
    console = Console(record=True, width=80, force_terminal=False, color_system=None)
    print_summary(trace, console)
    text = console.export_text()
    assert "get_fp4_quantization_module.block_scale_interleave_sm100" in text  # whole, on one line
    assert "flashinfer/fp4_quantization.py:282" in text
    assert "Attempted to call function marked as skipped" in text
    assert "prog.build" not in text and "1 side effect(s) outside compiled regions" in text


def test_trace_only_overview_counts_the_events():
    summary = view.summarize(trace_review())
    assert summary.fatal == 2 and summary.by_outcome["graph_break"] == 2
    assert summary.by_status["seen_only"] == 2  # the outside side effect is apart

"""The terminal view: grouped by site, shortest chain first, weak hops marked, fixes sound-first."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.model import Hop, Review  # noqa: E402
from dynacheck.report.console import render_console, render_diff_console  # noqa: E402


def _text(obj, **kw) -> str:
    console = Console(record=True, width=400, force_terminal=False, color_system=None)
    render_console(obj, console, **kw)
    return console.export_text()


def test_header_summary_and_stats():
    text = _text(samples.flagship_review())
    assert "targets sglang 0.5.9, flashinfer-python 0.6.3" in text
    assert "entry   sglang.srt.models.deepseek_v2:DeepseekV2Model.forward" in text
    assert "--enable-piecewise-cuda-graph --tp 2  (2 processes with events, 3 events, exit 1)" in text
    assert ("3 findings at 3 sites: 3 graph break; 3 fatal under fullgraph; "
            "1 confirmed, 2 predicted only, 1 seen only; 1 suppressed") in text
    assert "parsed 412 of 8190 files in the trees (0 from cache), 2961 functions visited, 3.42 s" in text
    assert "syntax_error in sglang/srt/old_py2.py: invalid syntax at line 3" in text


def test_flagship_site_chain_and_fixes():
    text = _text(samples.flagship_scan())
    lines = text.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("flashinfer/jit/cpp_ext.py:8")))
    assert "calls subprocess.check_output" in lines[head]
    assert "DC001" in lines[head + 1] and "[error] GB0007 graph break, fatal under fullgraph" in lines[head + 1]
    block = "\n".join(lines[head:head + 20])
    assert "sglang/srt/layers/linear.py:12 sglang.srt.layers.linear.MergedColumnParallelLinear.forward" in block
    weak = next(line for line in lines[head:] if "ModelOptFp4LinearMethod.apply" in line)
    assert "via class hierarchy fallback — low confidence" in weak and weak.rstrip().endswith("?")
    cached = next(line for line in lines[head + 2:]
                  if line.strip().startswith("flashinfer/jit/cpp_ext.py:8 flashinfer"))
    assert "functools.cache: traced through" in cached
    fix = next(i for i, line in enumerate(lines)
               if line.strip().startswith("fix: custom_op at flashinfer.fp4_quantization"))
    assert "why not prewarm: --verbose" in lines[fix + 1]  # one fix per site; the rest behind -v
    assert not any(line.strip().startswith("not: prewarm at") for line in lines)
    lines = _text(samples.flagship_scan(), verbose=True).splitlines()
    fix = next(i for i, line in enumerate(lines)
               if line.strip().startswith("fix: custom_op at flashinfer.fp4_quantization"))
    not_fix = next(i for i, line in enumerate(lines) if line.strip().startswith("not: prewarm at"))
    assert fix < not_fix and "because pre-warming the functools.cache" in lines[not_fix]


def test_sites_are_ordered_worst_first_and_suppressed_hidden_unless_verbose():
    text = _text(samples.flagship_scan())
    assert text.index("calls subprocess.check_output") < text.index("calls logging.Logger.info")
    assert "time.time" not in text
    verbose = _text(samples.flagship_scan(), verbose=True)
    assert "calls time.time" in verbose and "note: baseline: accepted until FlashInfer 0.7" in verbose


def test_shortest_chain_first_and_more_chains_counted():
    base = samples.flagship_finding()
    short = replace(base, chain=base.chain[5:], entry="flashinfer.fp4_quantization:fp4_quantize",
                    fingerprint="fp-short", also_reached_by=0)
    long = replace(base, also_reached_by=0)
    scan = replace(samples.flagship_scan(), findings=(long, short))
    text = _text(scan)
    assert "chain from flashinfer.fp4_quantization:fp4_quantize (6 hops)" in text
    assert "DeepseekV2Model.forward  (via entry" not in text  # the longer chain waits for --verbose
    assert "reached by 1 more chain(s); --verbose shows them" in text
    verbose = _text(scan, verbose=True)
    assert verbose.index("(6 hops)") < verbose.index("(11 hops)")


def test_seen_only_events_are_listed():
    text = _text(samples.flagship_review())
    assert "seen only  sglang/srt/layers/moe/topk.py:8 select_experts  [error] GB0124 graph break" in text
    assert "the scan did not reach sglang.srt.layers.moe.topk.select_experts" in text


def test_markup_in_scanned_text_is_printed_literally():
    base = samples.script_finding()
    hop = Hop("pkg.mod.[bold]f[/bold]", "pkg/[red]x.py", 3, "import", code="print('[link]')")
    text = _text(Review(scan=replace(samples.flagship_scan(), findings=(replace(base, chain=(hop,)),))))
    assert "pkg.mod.[bold]f[/bold]" in text and "pkg/[red]x.py:3" in text


def test_empty_scan_says_no_findings():
    text = _text(replace(samples.flagship_scan(), findings=(), problems=()))
    assert "no findings" in text


def test_diff_console():
    console = Console(record=True, width=300, color_system=None)
    render_diff_console(samples.sample_diff(), console)
    text = console.export_text()
    assert "1 added, 1 removed, 1 changed, 0 unchanged, 1 suppressed" in text
    assert "added    DC020 sglang/srt/layers/quantization/modelopt_quant.py:11" in text
    assert "removed  DC021" in text


def test_a_deployment_note_comes_first_in_every_view_and_a_read_problem_names_its_file():
    """A scan of a model the release does not compile on its launch (piecewise_off) says so before the findings,
    in the terminal, markdown and HTML; problems met while reading the trees stay in their list, and one
    without a file is not printed with an empty `file:`."""
    from dynacheck.model import Problem
    from dynacheck.report import render

    note = Problem("piecewise_off", "", "SGLang turns piecewise CUDA graphs off on this launch: X")
    scan = replace(samples.flagship_scan(), problems=(Problem("syntax_error", "pkg/old.py", "invalid syntax"), note))
    text = _text(scan)
    assert text.index("SGLang turns piecewise CUDA graphs off on this launch: X") < text.index("1 problem(s)")
    assert "  syntax_error in pkg/old.py: invalid syntax" in text and "piecewise_off:" not in text
    markdown = render(scan, "markdown")
    assert "> **Not compiled** SGLang turns piecewise CUDA graphs off on this launch: X" in markdown
    html = render(scan, "html")
    assert "<strong>Not compiled</strong> SGLang turns piecewise CUDA graphs off on this launch: X" in html
    assert "1 problem while reading the trees" in html and "</span> : " not in html

"""Markdown for a PR comment and GitHub workflow annotations: short, escaped, one entry per finding."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.report import render  # noqa: E402


def _decode(value: str) -> str:
    """What the Actions runner does to a workflow-command value."""
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def _parse(line: str) -> tuple[str, dict[str, str], str]:
    assert line.startswith("::")
    head, message = line[2:].split("::", 1)
    command, _, props = head.partition(" ")
    return command, {k: _decode(v) for k, v in (p.split("=", 1) for p in props.split(","))}, _decode(message)


def test_github_one_command_per_active_finding_by_severity():
    lines = render(samples.flagship_review(), "github").splitlines()
    parsed = [_parse(line) for line in lines]
    assert [(c, p["file"], p["line"]) for c, p, _ in parsed] == [
        ("error", "flashinfer/jit/cpp_ext.py", "8"),
        ("warning", "flashinfer/jit/banner.py", "6"),
        ("warning", "sglang/srt/layers/quantization/modelopt_quant.py", "11"),
    ]  # the suppressed finding is not annotated
    command, props, message = parsed[0]
    assert props["title"] == "DC001 GB0007 graph break, fatal under fullgraph"
    assert props["col"] == "11"
    assert "Chain from the entry: DeepseekV2Model.forward -> DeepseekV2DecoderLayer.forward" in message
    assert "cpp_ext.get_cuda_version" in message
    assert "Fix: custom_op at flashinfer.fp4_quantization.fp4_quantize" in message


def test_github_values_cannot_break_out_of_the_command():
    base = samples.script_finding()
    evil = replace(base, title="x\n::error file=evil.py::injected", severity="info",
                   site=replace(base.site, file="a,b:c%d.py", function="f\r\nx"))
    out = render(replace(samples.flagship_scan(), findings=(evil,)), "github")
    assert out.count("\n") == 1 and out.startswith("::notice file=a%2Cb%3Ac%25d.py,line=6,")
    command, props, message = _parse(out.rstrip("\n"))
    assert command == "notice" and props["file"] == "a,b:c%d.py"
    assert message.startswith("x\n::error file=evil.py::injected")


def test_github_diff_annotates_new_and_changed_only():
    lines = render(samples.sample_diff(), "github").splitlines()
    titles = [_parse(line)[1]["title"] for line in lines]
    assert titles == ["added: DC020 GB0291 graph break, fatal under fullgraph",
                      "changed: DC001 GB0007 graph break, fatal under fullgraph"]


def test_markdown_is_a_short_table_with_folded_chains():
    text = render(samples.flagship_review(), "markdown")
    assert text.startswith("## dynacheck: Dynamo hazards")
    assert "1 confirmed, 2 predicted only, 1 seen only" in text
    rows = [line for line in text.splitlines() if line.startswith("| 🔴") or line.startswith("| 🟠")]
    assert len(rows) == 3 and "confirmed" in rows[0]
    assert "custom_op at `flashinfer.fp4_quantization.fp4_quantize`" in rows[0]
    assert "<details><summary>DC001 chain to <code>subprocess.check_output</code> (11 hops)</summary>" in text
    assert "(via class hierarchy fallback — low confidence; 1 of 23 classes defining apply)  ⚠" in text
    assert "**Not:** prewarm at `flashinfer.jit.cpp_ext.get_cuda_version` because" in text
    assert "`sglang/srt/layers/moe/topk.py:8` `select_experts`: GB0124 graph break (error)" in text
    assert "time.time" not in text  # suppressed


def test_markdown_escapes_scanned_text():
    text = render(samples.flagship_review(), "markdown")
    assert "<script>" not in text and "</script>" not in text
    assert "nn.Module call -&gt; forward" in text
    base = samples.script_finding()
    piped = replace(base, site=replace(base.site, function="a|b", callee="c`d"))
    table = render(replace(samples.flagship_scan(), findings=(piped,)), "markdown")
    row = next(line for line in table.splitlines() if line.startswith("| 🟠"))
    assert "a\\|b" in row and "`c'd`" in row and row.count(" | ") == 6


def test_markdown_diff():
    text = render(samples.sample_diff(), "markdown")
    assert "**1 added, 1 removed, 1 changed**" in text
    assert "| 🆕 added | DC020" in text and "| ✅ removed | DC021" in text

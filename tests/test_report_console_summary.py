"""The terminal report is a summary: deployment, counts, fix plan, one block per site, conditional apart."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.gate.policy import counted, exit_verdict  # noqa: E402
from dynacheck.model import Condition, PlanEntry, Site  # noqa: E402
from dynacheck.report.console import SITES_SHOWN, render_console  # noqa: E402

DEPLOYMENT = {"name": "glm5-nvfp4", "gpu": "sm120"}  # a deployment was given: open conditions are decided
SYMM = Condition("get_global_server_args().enable_symm_mem", "sglang/srt/layers/linear.py", 40, "flag")


def _text(scan, width: int = 400, **kw) -> str:
    console = Console(record=True, width=width, force_terminal=False, color_system=None)
    render_console(scan, console, **kw)
    return console.export_text()


def many_sites(n: int = SITES_SHOWN + 4):
    """n distinct fatal sites under the flagship chain, plus one conditional site."""
    base = samples.flagship_finding()
    findings = [replace(base, site=replace(base.site, line=100 + i, callee=f"probe{i}"), fingerprint=f"fp{i}")
                for i in range(n)]
    conditional = replace(base, site=Site("sglang/srt/layers/linear.py", 41, "sglang.srt.layers.linear.f",
                                          "torch.distributed.barrier"), fingerprint="cond", conditions=(SYMM,))
    return replace(samples.flagship_scan(), findings=(*findings, conditional), deployment=DEPLOYMENT)


def test_sites_beyond_the_first_screen_wait_for_verbose():
    text = _text(many_sites())
    blocks = [line for line in text.splitlines() if "calls probe" in line]
    assert len(blocks) == SITES_SHOWN
    assert "… 4 more site(s)" in text
    assert sum("calls probe" in line for line in _text(many_sites(), verbose=True).splitlines()) == SITES_SHOWN + 4


def test_fix_plan_comes_before_the_sites_and_counts_only_what_holds():
    text = _text(many_sites())
    assert text.index("fix plan") < text.index("calls probe0")
    plan = next(line for line in text.splitlines() if "custom_op at flashinfer.fp4_quantization" in line)
    assert f"{SITES_SHOWN + 4} fatal of {SITES_SHOWN + 4} site(s)" in plan  # the conditional site is not counted


def test_scan_fix_plan_and_deployment_are_used_when_present():
    scan = replace(many_sites(), fix_plan=(PlanEntry("custom_op", "flashinfer.x.y", 3, 2),),
                   deployment={"gpu": "sm120", "server_args": "--enable-piecewise-cuda-graph"})
    text = _text(scan)
    assert "deploy gpu sm120" in text and "--enable-piecewise-cuda-graph" in text
    assert "custom_op at flashinfer.x.y  2 fatal of 3 site(s)" in text


def test_conditional_findings_are_counted_and_listed_on_request():
    text = _text(many_sites())
    assert "torch.distributed.barrier" not in text
    assert "1 conditional finding(s) at 1 site(s)" in text and "--show-conditional lists them" in text
    assert "; 1 conditional" in text.splitlines()[-1] or "; 1 conditional" in text
    shown = _text(many_sites(), show_conditional=True)
    assert "calls torch.distributed.barrier" in shown
    assert "only if: get_global_server_args().enable_symm_mem (sglang/srt/layers/linear.py:40)" in shown


def test_summary_counts_only_unconditional_findings():
    text = _text(many_sites())
    n = SITES_SHOWN + 4
    assert f"{n} findings at {n} sites" in text.splitlines()[-1] or f"{n} findings at {n} sites" in text


def test_without_a_deployment_conditional_findings_hold():
    scan = replace(many_sites(1), deployment={})
    assert exit_verdict(replace(scan, findings=tuple(f for f in scan.findings if f.conditions)), "error")[0] == 1
    assert "conditional finding(s)" not in _text(scan)


def test_exit_code_counts_unconditional_unless_asked():
    scan = many_sites(1)
    conditional_only = replace(scan, findings=tuple(f for f in scan.findings if f.conditions))
    assert counted(conditional_only.findings, "error") == []
    assert exit_verdict(conditional_only, "error")[0] == 0
    assert "1 conditional (include_conditional = true counts them)" in exit_verdict(conditional_only, "error")[1]
    assert exit_verdict(conditional_only, "error", include_conditional=True)[0] == 1


def test_report_ends_with_the_summary_and_the_exit_reason():
    scan = many_sites(2)
    code, reason = exit_verdict(scan, "error")
    lines = _text(scan, exit_reason=reason).rstrip().splitlines()
    assert code == 1 and lines[-1] == reason
    assert lines[-2].startswith("2 findings at 2 sites")


def test_wrapped_chains_keep_their_indentation_at_80_columns():
    text = _text(samples.flagship_scan(), width=80)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "chain from" in line or "(via entry" in line)
    end = next(i for i, line in enumerate(lines[start:], start) if line.lstrip().startswith(("fix:", "…")))
    chain = [line for line in lines[start:end] if line.strip()]
    assert len(chain) > 8 and all(line.startswith("    ") for line in chain[1:]), chain


def test_first_sites_shown_cover_different_fixes_of_the_plan():
    base = samples.flagship_finding()
    other_fix = replace(next(f for f in base.fixes if f.sound), at="flashinfer.other.entry")
    same = [replace(base, site=replace(base.site, line=100 + i, callee=f"probe{i}"), fingerprint=f"s{i}")
            for i in range(SITES_SHOWN + 2)]
    lone = replace(base, site=replace(base.site, line=900, callee="lonely"), fingerprint="lone",
                   fixes=(other_fix,))
    text = _text(replace(samples.flagship_scan(), findings=(*same, lone)))
    assert "calls lonely" in text  # the one site of the second fix is shown, not a sixth site of the first


def test_conditional_findings_are_notes_in_sarif_and_notices_on_github():
    import json

    from dynacheck.report import render

    scan = many_sites(1)
    sarif = json.loads(render(scan, "sarif"))
    levels = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("linear.py"): r["level"]
              for r in sarif["runs"][0]["results"]}
    assert levels[True] == "note" and levels[False] == "error"
    github = render(scan, "github").splitlines()
    conditional = next(line for line in github if "barrier" in line)
    assert conditional.startswith("::notice ") and "Only if: get_global_server_args().enable_symm_mem" in conditional


def test_markdown_lists_conditional_sites_apart():
    from dynacheck.report.markdown import render_markdown

    text = render_markdown(many_sites(2))
    table = [line for line in text.splitlines() if line.startswith("| 🔴")]
    assert len(table) == 2 and not any("barrier" in line for line in table)
    assert "**1 more site(s) only under other flags or env**" in text
    assert "only if `get_global_server_args().enable_symm_mem (sglang/srt/layers/linear.py:40)`" in text

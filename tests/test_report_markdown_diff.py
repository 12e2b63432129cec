"""A dependency diff in Markdown: one row per site and change, with the number of chains to it."""

from __future__ import annotations

from dynacheck.model import Diff, Finding, Hop, Outcome, Site
from dynacheck.report import render


def _finding(line: int, via: str) -> Finding:
    site = Site("flashinfer/jit/cpp_ext.py", line, "flashinfer.jit.cpp_ext.get_cuda_version",
                "subprocess.check_output", "subprocess.check_output([nvcc, '--version'])")
    chain = (Hop("m.Model.forward", "m.py", 3, "entry"), Hop(f"m.{via}", "m.py", 9, "import"),
             Hop(site.function, site.file, line, "import"))
    return Finding("DC001", "subprocess", "error", site, chain, Outcome("graph_break", "GB0007",
                                                                           fatal_under_fullgraph=True),
                   fingerprint=f"{via}{line}")


def test_chains_to_one_site_make_one_row():
    diff = Diff(before=("a==1",), after=("a==2",),
                added=(_finding(69, "linear"), _finding(69, "moe"), _finding(69, "dispatch")),
                removed=(_finding(80, "linear"),))
    text = render(diff, "markdown")
    rows = [line for line in text.splitlines() if line.startswith("| 🆕") or line.startswith("| ✅")]
    assert len(rows) == 2
    added = next(r for r in rows if r.startswith("| 🆕"))
    assert "cpp_ext.py:69" in added and added.rstrip().endswith("3 |")
    assert "**3 added, 1 removed, 0 changed**" in text


def test_a_conditional_finding_says_what_it_needs_in_the_diff():
    """A site that becomes conditional between releases is `changed`, and its row says what it needs."""
    import dataclasses

    from dynacheck.gate.diff import compare_findings
    from dynacheck.model import Condition

    before = _finding(69, "linear")
    first_call = Condition("first call only: key not in result_map", "sglang/jit_kernel/utils.py", 27, "first_call")
    after = dataclasses.replace(before, conditions=(first_call,))
    diff = compare_findings([before], [after]).diff
    assert [f.fingerprint for f in diff.changed] == [before.fingerprint] and not diff.unchanged
    assert "was error, GB0007, on the deployment" in diff.changed[0].note
    (row,) = [line for line in render(diff, "markdown").splitlines() if line.startswith("| ✏️")]
    assert "only if first call only: key not in result_map (sglang/jit_kernel/utils.py:27)" in row
    assert "only if" not in render(compare_findings([], [before]).diff, "markdown")

"""Breaks whichever way an open test goes (static/every_way.py): the scan's claim, and Dynamo's."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dynacheck.model import Condition, Finding, Hop, Outcome, Site
from dynacheck.static.every_way import fatal_every_way
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "every_way"


def _scan(cls: str, cache: Path):
    return scan_roots([ROOT], [f"ewfx.ways:{cls}.forward"], cache_dir=cache).findings


@pytest.mark.parametrize("cls, covered", [("BothWays", 2), ("NegatedBothWays", 2), ("OneWay", 0)])
def test_findings_on_both_ways_of_a_test_are_fatal_together(scan_cache, cls, covered):
    """Each break waits on the environment variable (no deployment given), so each is conditional; when
    the other way breaks too, the two are fatal together, and the test is named once, without the way
    it goes (`if not t:` gives `not t` and `not not t`)."""
    findings = _scan(cls, scan_cache)
    assert findings and all(f.conditions for f in findings)
    together, tests = fatal_every_way(findings)
    assert len(together) == covered
    if covered:
        assert [t.text for t in tests] == [{"BothWays": "os.environ.get() == 'build'",
                                            "NegatedBothWays": "os.environ.get()"}[cls]]
        assert tests[0].file.endswith("ways.py")


def _finding(site_line: int, call_line: int, text: str) -> Finding:
    chain = (Hop("m.forward", "m.py", call_line, "entry"), Hop("m.pick", "m.py", site_line, "call"))
    return Finding("DC001", "t", "error", Site("m.py", site_line, "m.pick", "subprocess.run"), chain,
                   Outcome("graph_break", "GB0007", fatal_under_fullgraph=True),
                   conditions=(Condition(text, "m.py", 40, "env"),))


def test_a_test_reached_through_two_call_sites_is_two_tests():
    """`pick` holds the test (line 40); one way breaks when called from line 10, the other when called from
    line 11. A test of pick's arguments could go one way in each call, so no claim; the same two ways
    through one call site are a claim."""
    apart = [_finding(41, 10, "flag"), _finding(43, 11, "not flag")]
    assert fatal_every_way(apart) == ((), ())
    together = [_finding(41, 10, "flag"), _finding(43, 10, "not flag")]
    assert len(fatal_every_way(together)[0]) == 2


def test_a_test_seen_one_way_only_is_no_claim_and_two_tests_must_all_be_covered():
    first_call = Finding("DC001", "t", "error", Site("m.py", 41, "m.pick", "x"),
                         (Hop("m.forward", "m.py", 10, "entry"), Hop("m.pick", "m.py", 41, "call")),
                         Outcome("graph_break", "GB0007", fatal_under_fullgraph=True),
                         conditions=(Condition("first call only: k not in cache", "m.py", 40, "first_call"),))
    assert fatal_every_way([first_call]) == ((), ())
    a, b = _finding(41, 10, "flag"), _finding(43, 10, "not flag")
    # a second test on b's way leaves (not flag, not other) unbroken
    b_other = replace(b, conditions=b.conditions + (Condition("other", "m.py", 42, "env"),))
    assert fatal_every_way([a, b_other]) == ((), ())
    b_not_other = replace(b, conditions=b.conditions + (Condition("not other", "m.py", 42, "env"),),
                          site=Site("m.py", 44, "m.pick", "y"))
    assert len(fatal_every_way([a, b_other, b_not_other])[0]) == 3


@pytest.mark.torch
@pytest.mark.parametrize("cls, fatal_when_set, fatal_when_unset", [
    ("BothWays", True, True), ("NegatedBothWays", True, True), ("OneWay", True, False)])
def test_dynamo_fails_fullgraph_whichever_way_the_variable_goes(monkeypatch, cls, fatal_when_set, fatal_when_unset):
    """The claim against the real Dynamo: fullgraph fails for both values of EW_MODE exactly where the scan
    says the forward breaks every way."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT))
    try:
        import ewfx.ways as ways
    finally:
        sys.path.remove(str(ROOT))

    def fails(value: str | None) -> bool:
        if value is None:
            monkeypatch.delenv("EW_MODE", raising=False)
        else:
            monkeypatch.setenv("EW_MODE", value)
        torch._dynamo.reset()
        try:
            torch.compile(getattr(ways, cls)().forward, backend="eager", fullgraph=True)(torch.ones(2))
        except Exception:  # noqa: BLE001 - Dynamo's refusal is the measurement
            return True
        return False

    assert fails("build") is fatal_when_set
    assert fails(None) is fatal_when_unset


def test_a_census_cell_that_breaks_every_way_is_a_breaking_cell(scan_cache):
    """The model census keeps `fatal_sites` as the unconditional count and names the tests; its grid,
    its list of breaking cells and its release diff count the cell as breaking."""
    from dynacheck.census.compare import compare
    from dynacheck.census.render import cell_text, markdown
    from dynacheck.census.run import breaks, cell_record
    from dynacheck.static.scan import scan_targets
    from dynacheck.sources.resolve import resolve_target

    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    both = cell_record(scan_targets(targets, ["ewfx.ways:BothWays.forward"], cache_dir=scan_cache))
    one = cell_record(scan_targets(targets, ["ewfx.ways:OneWay.forward"], cache_dir=scan_cache))
    assert both["fatal_sites"] == 0 and both["every_way"] == [
        {"test": "os.environ.get() == 'build'", "file": "ewfx/ways.py", "line": 13}]
    assert both["first_break"]["line"] == 14 and both["fix"]["at"] == "ewfx.ways.BothWays.forward"
    assert one["every_way"] is None and one["first_break"] is None and not breaks(one)
    assert breaks(both) and cell_text(both | {"kind": "cells"}) == "every way GB0007"

    base = {"model": "M", "module": "m", "entry": "ewfx.ways:BothWays.forward", "entry_how": "test"}
    census = {"targets": ["ewfx"], "deployments": [{"name": "d"}], "not_applicable": [], "errors": [],
              "stats": {"models": 1, "forwards": 1}, "cells": [base | {"deployment": "d"} | both]}
    text = markdown(census)
    assert "0 with at least one unconditional fatal site" in text and "and 1 more that break whichever way" in text
    assert "it breaks whichever way `os.environ.get() == 'build'` (ewfx/ways.py:13) goes" in text
    after = census | {"cells": [base | {"deployment": "d"} | one]}
    diff = compare(census, after)
    assert [c["model"] for c in diff["fixed"]] == ["M"] and not diff["changed"]

"""A tensor formatted into an f-string breaks where Dynamo turns the string into text, not where it
is passed on: giving it to a function of the scanned code or to an exception's constructor keeps it
lazy. Real Dynamo (torch on CPU, fullgraph) is the oracle for each class of the fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dynacheck.dynamic.oracle import judge, load_callable
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "lazy_format"
MODEL = ROOT / "lfpkg" / "model.py"
BREAKS = {"Measured": "len(msg)", "Method": "msg.startswith", "Inline": "len(f\"{s}\")"}
LAZY = ("ToFunction", "ToChecker", "ToException")


def _dynamo_break_line(name: str) -> int | None:
    """The line of the break `fullgraph=True` raises, None when the forward compiles whole."""
    verdict = judge(load_callable(MODEL, name), lambda: torch.randn(4), near=str(MODEL))
    return None if verdict.fullgraph_error is None else verdict.fullgraph_error.line


def _formatted_lines(scan_cache, name: str) -> list[int]:
    result = scan_roots([ROOT], [f"lfpkg.model:{name}.forward"], cache_dir=scan_cache)
    return [f.site.line for f in result.findings if f.rule == "DC115"]


@pytest.mark.parametrize("name", LAZY)
def test_a_string_passed_on_stays_lazy(scan_cache, name):
    assert _dynamo_break_line(name) is None
    assert _formatted_lines(scan_cache, name) == []


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_the_break_is_where_the_string_becomes_text(scan_cache, name):
    source = MODEL.read_text().splitlines()
    line = _dynamo_break_line(name)
    assert line is not None and BREAKS[name] in source[line - 1]
    assert _formatted_lines(scan_cache, name) == [line]

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


def _dynamo_break(name: str) -> tuple[int, str] | None:
    """The line and GB id of the break `fullgraph=True` raises, None when the forward compiles whole."""
    verdict = judge(load_callable(MODEL, name), lambda: torch.randn(4), near=str(MODEL))
    error = verdict.fullgraph_error
    return None if error is None else (error.line, error.gb_id)


def _formatted(scan_cache, name: str) -> list[tuple[int, str]]:
    """DC115 (the string becomes text) and DC133 (a str method of it) sites, with their GB ids."""
    result = scan_roots([ROOT], [f"lfpkg.model:{name}.forward"], cache_dir=scan_cache)
    return [(f.site.line, f.outcome.gb_id) for f in result.findings if f.rule in ("DC115", "DC133")]


@pytest.mark.parametrize("name", LAZY)
def test_a_string_passed_on_stays_lazy(scan_cache, name):
    assert _dynamo_break(name) is None
    assert _formatted(scan_cache, name) == []


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_the_break_is_where_the_string_becomes_text(scan_cache, name):
    """Same line and GB id as Dynamo (torch 2.13: GB0088 for `len`, GB0156 for a str method)."""
    source = MODEL.read_text().splitlines()
    found = _dynamo_break(name)
    assert found is not None and BREAKS[name] in source[found[0] - 1]
    assert _formatted(scan_cache, name) == [found]

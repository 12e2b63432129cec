"""Fullgraph awareness: a compile known to use fullgraph=True gets one outcome per finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.static.scan import scan_roots

FIXTURES = Path(__file__).parent / "fixtures" / "rules"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fullgraph-cache")


def by_rule(result):
    return {f.rule: f for f in result.findings}


def test_without_knowing_both_outcomes_are_reported(cache_dir):
    result = scan_roots([FIXTURES], ["rulefx.fullgraph_entry:plain"], cache_dir=cache_dir)
    found = by_rule(result)
    assert found["DC050"].outcome.gb_id == "GB0124" and not found["DC050"].outcome.fatal_under_fullgraph
    assert found["DC110"].outcome.fatal_under_fullgraph
    assert "fullgraph" not in result.deployment
    assert "this compile" not in found["DC110"].outcome.detail


def test_decorated_entry_is_known_fullgraph(cache_dir):
    result = scan_roots([FIXTURES], ["rulefx.fullgraph_entry:step"], cache_dir=cache_dir)
    found = by_rule(result)
    assert "torch.compile(fullgraph=True)" in result.deployment["fullgraph"]
    assert found["DC110"].outcome.detail.startswith("fatal for this compile")
    assert found["DC050"].severity == "info"
    assert found["DC050"].outcome.detail.startswith("no break under this compile")


def test_the_option_says_fullgraph_for_any_entry(cache_dir):
    result = scan_roots([FIXTURES], ["rulefx.fullgraph_entry:plain"], cache_dir=cache_dir, fullgraph=True)
    found = by_rule(result)
    assert result.deployment["fullgraph"] == "the --fullgraph option"
    assert found["DC110"].outcome.detail.startswith("fatal for this compile")
    assert found["DC050"].severity == "info"

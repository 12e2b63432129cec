"""Every rule fires on its firing fixture and stays silent on its quiet one, through the static engine.

The fixtures live in ``tests/fixtures/rules/rulefx`` and are only read as text here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.catalog import load_catalog

scan_module = pytest.importorskip("dynacheck.static.scan", reason="the static engine is not in this checkout")

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
RULES = load_catalog().rules


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("rules-scan-cache")


def findings_for(entry: str, cache_dir: Path):
    result = scan_module.scan_roots([FIXTURES], [entry], cache_dir=cache_dir)
    return result.findings


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_fires_on_its_fixture(rule, cache_dir):
    findings = findings_for(rule.fixture_fire, cache_dir)
    hits = [f for f in findings if f.rule == rule.id]
    assert hits, f"{rule.id} did not fire on {rule.fixture_fire}; got {[f.rule for f in findings]}"
    assert all(f.outcome.gb_id == rule.outcome.gb_id for f in hits)
    assert all(f.severity == rule.severity for f in hits)


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_is_quiet_on_its_neighbour(rule, cache_dir):
    findings = findings_for(rule.fixture_quiet, cache_dir)
    assert not [f for f in findings if f.rule == rule.id], f"{rule.id} fired on {rule.fixture_quiet}"


def test_flagship_shape_chain_goes_through_the_cached_probe(cache_dir):
    """DC001 through a pre-warmed functools.cache hop: the chain names every hop to the site."""
    findings = [f for f in findings_for("rulefx.process:SubprocessFire.forward", cache_dir) if f.rule == "DC001"]
    assert findings
    finding = findings[0]
    assert finding.site.callee == "subprocess.check_output"
    assert finding.site.function.endswith("get_tool_version")
    hops = [hop.function for hop in finding.chain]
    assert hops[0].endswith("SubprocessFire.forward")
    assert any(h.endswith("is_tool_version_at_least") for h in hops)
    assert finding.outcome.fatal_under_fullgraph


def test_no_break_row_fixture_is_quiet_for_every_rule(cache_dir):
    """FIELD_NOTES row "os.environ.get, generators, global dict write": no finding at all."""
    assert not list(findings_for("rulefx.nobreak:NoBreak.forward", cache_dir))

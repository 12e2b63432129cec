"""GB ids per torch version: `[rule.outcome.by_torch]` overrides the id where another torch reports another."""

from __future__ import annotations

import pytest

from dynacheck.catalog import CatalogError, enrich, load_catalog, parse_rule

BASE = {
    "id": "DC999", "name": "x", "family": "value", "title": "t", "severity": "warning", "boundary": "tensor_repr",
    "why": "w", "example": "e", "fixes": [{"kind": "remove", "text": "t", "sound": True}],
}


def rule_with(by_torch):
    outcome = {"kind": "graph_break", "gb_id": "GB0569", "fatal_under_fullgraph": True, "by_torch": by_torch}
    return parse_rule({**BASE, "outcome": outcome}, "value.toml")


def test_the_installed_torch_minor_picks_its_own_id():
    rule = rule_with({"2.11": "GB0059"})
    assert enrich(rule, {}, "2.11.0+cu130").outcome.gb_id == "GB0059"
    assert enrich(rule, {}, "2.13.0+cpu").outcome.gb_id == "GB0569"


def test_a_bad_id_is_an_error_naming_the_rule():
    with pytest.raises(CatalogError, match="DC999"):
        rule_with({"2.11": "7"})


def test_catalogue_records_the_torch_211_differences_measured_on_the_gpu():
    catalog = load_catalog()
    assert dict(catalog.get("DC121").gb_by_torch) == {"2.11": "GB0007"}
    assert dict(catalog.get("DC122").gb_by_torch) == {"2.11": "GB0179"}

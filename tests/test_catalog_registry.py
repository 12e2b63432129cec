"""torch's graph-break registry, read without importing torch, and the catalogue's use of it."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dynacheck import catalog as catalog_module
from dynacheck.static import dynamo_registry
from dynacheck.static.dynamo_registry import load_registry, parse_registry

REPO = Path(__file__).resolve().parents[1]

SAMPLE = {
    "GB0007": [
        {
            "Gb_type": "Attempted to call function marked as skipped",
            "Context": "module: {module_name}, qualname: {qualname}, skip reason: {reason}",
            "Explanation": "explanation",
            "Hints": [],
        }
    ],
    "GB0291": [
        {"Gb_type": "logging.Logger method", "Context": "", "Explanation": "Not for non-export.", "Hints": ["a", "b"]},
        {"Gb_type": "logging.Logger method", "Context": "", "Explanation": "other", "Hints": ["b", "c"]},
    ],
    "GB9999": "not a list of records",
}


def test_parse_keeps_first_type_and_merges_hints_in_order():
    entries = parse_registry(SAMPLE)
    assert entries["GB0291"].gb_type == "logging.Logger method"
    assert entries["GB0291"].explanation == "Not for non-export."
    assert entries["GB0291"].hints == ("a", "b", "c")
    assert "GB9999" not in entries


def test_placeholder_explanation_is_dropped():
    assert parse_registry(SAMPLE)["GB0007"].explanation == ""


def test_unreadable_registry_gives_nothing(tmp_path):
    bad = tmp_path / "graph_break_registry.json"
    bad.write_text("{not json", encoding="utf-8")
    assert load_registry(bad) == {}
    good = tmp_path / "good.json"
    good.write_text(json.dumps(SAMPLE), encoding="utf-8")
    assert set(load_registry(good)) == {"GB0007", "GB0291"}


@pytest.fixture
def without_torch(monkeypatch):
    """The catalogue as it loads on a machine without torch."""
    monkeypatch.setattr(dynamo_registry, "load_registry", lambda path=None: {})
    catalog_module.load_catalog.cache_clear()
    yield catalog_module.load_catalog()
    catalog_module.load_catalog.cache_clear()


def test_without_torch_outcomes_come_from_the_toml(without_torch):
    assert without_torch.gb_source == "catalogue"
    assert without_torch.torch_version == ""
    rule = without_torch.get("DC001")
    assert rule.outcome.gb_type == "Attempted to call function marked as skipped"
    assert rule.explained_by == "catalogue"
    assert without_torch.get("DC011").outcome.hints == ()


@pytest.mark.torch
def test_registry_found_and_version_read_without_importing_torch():
    pytest.importorskip("torch")
    code = (
        "import sys; from dynacheck.static import dynamo_registry as r; "
        "n = len(r.load_registry()); v = r.torch_version(); "
        "print(n, v, 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    count, version, imported = int(out[0]), out[1], out[2]
    assert count > 400  # 517 ids in torch 2.13
    assert version.split("+")[0] == importlib.metadata.version("torch").split("+")[0]
    assert imported == "False"


@pytest.mark.torch
def test_every_catalogue_gb_id_exists_in_torch_with_the_same_type():
    pytest.importorskip("torch")
    registry = load_registry()
    assert registry, "torch is installed but its graph_break_registry.json was not found"
    raw = [r for path in sorted((REPO / "rules").glob("*.toml")) for r in catalog_module.read_rule_file(path)]
    for rule in raw:
        if not rule.outcome.gb_id:
            continue
        assert rule.outcome.gb_id in registry, f"{rule.id}: {rule.outcome.gb_id} is not in torch's registry"
        # the TOML's fallback text must say what torch says, so torch-less output is the same
        assert rule.outcome.gb_type == registry[rule.outcome.gb_id].gb_type, rule.id


@pytest.mark.torch
def test_gb_id_for_type_and_explain_use_the_installed_registry():
    pytest.importorskip("torch")
    assert dynamo_registry.gb_id_for_type("Unsupported context manager") == "GB0142"
    gb_type, explanation, hints = dynamo_registry.explain("GB0098")
    assert "torch.compiler.disable" in gb_type
    assert hints
    assert dynamo_registry.explain("GB0000000") is None


@pytest.mark.torch
def test_shipped_catalogue_takes_texts_from_torch():
    pytest.importorskip("torch")
    catalog = catalog_module.load_catalog()
    assert catalog.gb_source.startswith("torch ")
    rule = catalog.get("DC011")
    assert rule.outcome.hints, "GB0142 has hints in torch's registry"
    assert rule.explained_by.startswith("torch ")

"""The rule oracle: every rule's fixtures compiled by the real Dynamo, compared with the catalogue and the scan.

For each rule, its firing fixture is scanned statically (where does the rule fire?) and then
compiled on the installed torch with `backend="eager"`, once as the default compile and once
with `fullgraph=True` (dynacheck.dynamic.oracle):
- default compile: Dynamo breaks on the line the scan reports, with the rule's GB id (a rule
  without a GB id must not break there);
- fullgraph: it fails exactly when the rule says `fatal_under_fullgraph`;
- the quiet fixture compiles into one graph either way.
A rule that drifts from Dynamo (a new torch changes an id, a line, or fatality) fails here.
Differences on torch 2.11 (the GPU machine) are recorded in docs/rules-oracle.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dynacheck.catalog import load_catalog  # noqa: E402
from dynacheck.dynamic.oracle import judge  # noqa: E402
from dynacheck.static.scan import scan_roots  # noqa: E402

pytestmark = pytest.mark.torch

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
RULES = load_catalog().rules
# Rules the CPU oracle cannot check, and why (the fullgraph-only check in test_rules_dynamo.py
# still covers the ones it can).
NOT_ON_CPU = {
    "DC071": "needs a built tvm-ffi kernel library",
    "DC080": "fails at CUDA graph capture, not in Dynamo; needs a GPU",
    "DC135": "needs a CUDA build (on a CPU build Dynamo fails making the fake call instead: TorchRuntimeError)",
    "DC062": "needs tvm_ffi",
}
# Rules whose fixture imports a package that is not a dev dependency: checked where it is installed.
NEEDS_MODULE = {"DC072": "cutlass.cute", "DC063": "cudnn"}  # nvidia-cutlass-dsl, nvidia-cudnn-frontend (bench/RESULTS.md "CuTe DSL under Dynamo")
# Where the line Dynamo reports is not the scan's site, by design.
OTHER_LINE = {
    "DC096": "GB7000 is reported for the loop's frame; the scan places it at the call inside the loop",
}


def _entry(entry: str):
    module_name, qual = entry.split(":")
    class_name, method = qual.split(".")
    if str(FIXTURES) not in sys.path:
        sys.path.insert(0, str(FIXTURES))
    module = __import__(module_name, fromlist=["_"])
    return getattr(getattr(module, class_name)(), method)


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _skip_unreachable(rule) -> None:
    if rule.id in NOT_ON_CPU:
        pytest.skip(NOT_ON_CPU[rule.id])
    if rule.id in NEEDS_MODULE and not _installed(NEEDS_MODULE[rule.id]):
        pytest.skip(f"needs {NEEDS_MODULE[rule.id]}")


def _sites(rule, cache_dir: Path) -> list[tuple[str, int]]:
    findings = scan_roots([FIXTURES], [rule.fixture_fire], cache_dir=cache_dir).findings
    out = []
    for finding in findings:
        if finding.rule == rule.id:
            path = FIXTURES / finding.site.file
            out.append((str(path if path.exists() else finding.site.file), finding.site.line))
    return out


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("oracle-cache")


@pytest.fixture(autouse=True)
def _quiet_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_firing_fixture_matches_dynamo(rule, cache_dir):
    _skip_unreachable(rule)
    sites = _sites(rule, cache_dir)
    assert sites, f"{rule.id}: the scan does not fire on {rule.fixture_fire}"
    near = sites[0][0]
    verdict = judge(_entry(rule.fixture_fire), lambda: torch.ones(4), near=near)
    assert verdict.fatal == rule.outcome.fatal_under_fullgraph, (
        f"{rule.id}: catalogue says fatal_under_fullgraph={rule.outcome.fatal_under_fullgraph}, Dynamo: "
        f"{verdict.fullgraph_error}")
    found = {(os.path.realpath(b.file), b.line, b.gb_id) for b in verdict.breaks}
    lines = {line for _, line in sites}
    if not rule.outcome.gb_id:
        assert not {b for b in found if b[1] in lines and os.path.realpath(near) == b[0]}, (
            f"{rule.id} has no GB id, but Dynamo broke at the scan's site: {verdict.breaks}")
        return
    if rule.id in OTHER_LINE:
        assert any(gb == rule.outcome.gb_id for _, _, gb in found), f"{rule.id}: {verdict.breaks}"
        return
    expected = {(os.path.realpath(path), line, rule.outcome.gb_id) for path, line in sites}
    assert expected & found, f"{rule.id}: scan says {sorted(expected)}, Dynamo broke at {sorted(found)}"


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_quiet_fixture_is_one_graph(rule):
    _skip_unreachable(rule)
    verdict = judge(_entry(rule.fixture_quiet), lambda: torch.ones(4))
    assert not verdict.breaks and not verdict.fatal, f"{rule.fixture_quiet}: {verdict.breaks} {verdict.fullgraph_error}"


def test_recorded_messages_are_current():
    """rules/messages.json (shown by `rules --explain`) was recorded on this torch and agrees with the catalogue."""
    import json

    from dynacheck.catalog import rules_folder

    recorded = json.loads((rules_folder() / "messages.json").read_text())
    if recorded["torch"].split("+")[0] != torch.__version__.split("+")[0]:
        pytest.skip(f"messages recorded on torch {recorded['torch']}; regenerate with bench/rule_messages.py")
    for rule in RULES:
        if rule.id in NOT_ON_CPU:
            continue
        entry = recorded["rules"].get(rule.id)
        if entry is None and rule.id in NEEDS_MODULE and not _installed(NEEDS_MODULE[rule.id]):
            continue  # recorded where its package is installed, or not at all
        assert entry, f"{rule.id} has no recorded Dynamo message: run bench/rule_messages.py"
        assert entry["fixture"] == rule.fixture_fire, f"{rule.id}: recorded for another fixture"
        if rule.outcome.gb_id:
            assert rule.outcome.gb_id in {b["gb_id"] for b in entry["default"]}, rule.id
        assert (entry["fullgraph"] is not None) == rule.outcome.fatal_under_fullgraph, rule.id


def test_explain_shows_the_firing_fixture_and_dynamos_words():
    from dynacheck.catalog_command import explain_text

    catalog = load_catalog()
    text = explain_text(catalog, catalog.get("DC110"))
    assert "## Checked against Dynamo" in text
    assert "class BranchFire" in text and "Data-dependent branching" in text

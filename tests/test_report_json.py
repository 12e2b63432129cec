"""JSON output is the model's own dict, and every output validates against the committed schemas."""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck import model  # noqa: E402
from dynacheck.report import render  # noqa: E402
from dynacheck.report import schemas  # noqa: E402
from dynacheck.report.json_out import schema_for, to_data  # noqa: E402


def _validator(name: str):
    schema = schemas.load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("obj", [samples.flagship_scan(), samples.flagship_review(), samples.sample_diff(),
                                 samples.flagship_review(with_trace=False), model.Review()],
                         ids=["scan", "review", "diff", "review-no-trace", "empty-review"])
def test_outputs_validate_against_their_schema(obj):
    data = json.loads(render(obj, "json"))
    errors = list(jsonschema.Draft202012Validator(schema_for(obj)).iter_errors(data))
    assert errors == []


def test_scan_json_is_exactly_the_model_dict_and_round_trips():
    scan = samples.flagship_scan()
    data = json.loads(render(scan, "json"))
    assert data == to_data(scan)
    assert model.ScanResult.from_dict(data) == scan
    finding = next(f for f in data["findings"] if f["rule"] == "DC001")
    assert finding["site"]["callee"] == "subprocess.check_output"
    assert finding["outcome"]["gb_id"] == "GB0007" and finding["outcome"]["fatal_under_fullgraph"] is True
    assert [h["function"].rsplit(".", 1)[-1] for h in finding["chain"]][-2:] == [
        "is_cuda_version_at_least", "get_cuda_version"]
    assert finding["fixes"][1]["kind"] == "custom_op" and finding["fingerprint"] == "fp-flagship-0007"


def test_schema_rejects_what_the_model_would_not_write():
    validator = _validator("scan")
    data = to_data(samples.flagship_scan())
    bad_outcome = json.loads(json.dumps(data))
    bad_outcome["findings"][0]["outcome"]["gb_id"] = "7"
    bad_line = json.loads(json.dumps(data))
    bad_line["findings"][0]["chain"][0]["line"] = "12"
    extra = json.loads(json.dumps(data))
    extra["findings"][0]["surprise"] = 1
    future = dict(data, schema_version="2.0")
    for broken in (bad_outcome, bad_line, extra, future):
        assert not validator.is_valid(broken)


def test_committed_schema_files_are_current():
    for name in schemas.NAMES:
        committed = (schemas.SCHEMA_DIR / f"{name}.schema.json").read_text("utf-8")
        assert committed == schemas.dumps(schemas.build(name)), f"run python -m dynacheck.report.schemas ({name})"


def test_schema_describes_every_model_field():
    """A field added to the model without a schema entry would make real outputs invalid: name it here."""
    for cls_name, definition in schemas.DEFS.items():
        cls = getattr(model, cls_name)
        model_fields = {f.name for f in fields(cls) if not f.name.startswith("_")}
        assert set(definition["properties"]) == model_fields, cls_name


def test_schema_version_tracks_the_model():
    for name in schemas.NAMES:
        schema = schemas.load_schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(model.SCHEMA_VERSION.split(".")[0])

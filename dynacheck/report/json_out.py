"""JSON output: the model's own dict shape, nothing added, validated by `schema/*.schema.json`.

`dynacheck scan --format json` prints `ScanResult.to_dict()`; a review prints `Review.to_dict()`;
a gate diff `Diff.to_dict()`. Readers key on `schema_version` (see docs/json-schema.md).
"""

from __future__ import annotations

import json
from typing import Any

from dynacheck.model import Diff, Review, ScanResult, TraceResult
from dynacheck.report.schemas import load_schema


def to_data(obj: Review | ScanResult | TraceResult | Diff) -> dict[str, Any]:
    """The plain dict for any model root (tuples become lists via json)."""
    return json.loads(json.dumps(obj.to_dict()))


def render_json(obj: Review | ScanResult | TraceResult | Diff, *, indent: int | None = 2) -> str:
    return json.dumps(obj.to_dict(), indent=indent, ensure_ascii=False) + "\n"


def schema_name(obj: Review | ScanResult | Diff) -> str:
    """Which schema file describes this object's JSON."""
    if isinstance(obj, ScanResult):
        return "scan"
    if isinstance(obj, Diff):
        return "diff"
    if isinstance(obj, Review):
        return "review"
    raise TypeError(f"no JSON schema for {type(obj).__name__}")


def schema_for(obj: Review | ScanResult | Diff) -> dict[str, Any]:
    return load_schema(schema_name(obj))

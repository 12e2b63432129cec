"""The labelled FlashInfer API functions (bench/labels/api-safe-flashinfer.json) against the committed API
censuses: every line a label cites exists in its pinned wheel, and the census's verdicts stay where the
labels put them (no function the sources call safe is called unsafe; none is wrongly safe since stop 42,
when the two whose break is their caller's argument's came to say so: docs/census.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
LABELS = json.loads((REPO / "bench" / "labels" / "api-safe-flashinfer.json").read_text(encoding="utf-8"))["labels"]


def _score(version: str) -> dict[str, list[str]]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from api_labels import score
    finally:
        sys.path.remove(str(REPO / "bench"))
    census = json.loads((REPO / "reports" / f"census-flashinfer-{version}.json").read_text(encoding="utf-8"))
    return score(census, LABELS)


def test_the_census_calls_no_labelled_safe_function_unsafe_and_misses_only_the_known_ones():
    old, new = _score("0.6.3"), _score("0.7.4")
    assert old["says not safe, sources safe"] == new["says not safe, sources safe"] == []
    # the two cuDNN linear-attention functions are found since rule DC063 (stop 41); the two whose break is
    # their caller's argument's are "depends" since stop 42 (static/argument_calls.py)
    assert old["says safe, sources break"] == new["says safe, sources break"] == []
    depends = "says it depends on an argument the caller passes, sources break with the one its callers pass"
    assert old[depends] == ["fast_decode_plan"]
    assert sorted(new[depends]) == ["fast_decode_plan", "fi_trace"]
    assert len(new["says not safe, sources break"]) == 21
    assert {"fused_kda_decode", "chunk_gated_delta_product", "chunk_gated_delta_rule2"} <= \
        set(new["says not safe, sources break"])


@pytest.mark.wheels
@pytest.mark.parametrize("version", ["0.6.3", "0.7.4"])
def test_every_cited_line_exists_in_the_pinned_wheel(version):
    from dynacheck.sources.resolve import resolve_target

    try:
        root = Path(resolve_target(f"flashinfer-python=={version}", offline=True).root)
    except Exception as exc:  # noqa: BLE001 - no cached wheel: the lines cannot be read here
        pytest.skip(f"flashinfer-python {version} not in the wheel cache: {exc}")
    labels = [label for label in LABELS if label["version"] == version]
    assert labels and all(label["verdict"] in ("safe", "breaks", "raises", "unclear") for label in labels)
    for label in labels:
        for cited in label["lines"]:
            path, _, line = cited.rpartition(":")
            lines = (root / path).read_text(encoding="utf-8").splitlines()
            assert 1 <= int(line) <= len(lines), (label["function"], cited)

"""Every format renders every shape of input: scan only, trace only, both, empty, diff."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.model import Match, Review  # noqa: E402
from dynacheck.report import TEXT_FORMATS, render  # noqa: E402

SHAPES = {
    "scan": lambda: samples.flagship_scan(),
    "review": lambda: samples.flagship_review(),
    "trace-only": lambda: Review(trace=samples.two_process_trace(),
                                 matches=(Match("seen_only", "", (0, 1)), Match("seen_only", "", (2,)))),
    "empty": lambda: Review(),
    "diff": lambda: samples.sample_diff(),
}


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_format_renders_every_shape(shape, fmt):
    text = render(SHAPES[shape](), fmt)
    assert isinstance(text, str)
    if fmt in ("json", "sarif"):
        json.loads(text)
    if shape == "trace-only" and fmt in ("terminal", "html", "markdown"):
        assert "select_experts" in text  # the seen-only event is reported without any scan
    if shape == "empty" and fmt == "github":
        assert text == ""


def test_unknown_format_is_a_value_error():
    with pytest.raises(ValueError, match="unknown report format 'pdf'"):
        render(Review(), "pdf")

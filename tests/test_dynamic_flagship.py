"""The flagship pattern on CPU: compiled forward -> quantize -> cached version probe -> subprocess.

The trace's break must be the static scan's finding, one to one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "dynamic"))
from tracerun import REPO, load, trace

pytestmark = pytest.mark.torch
ROOT = REPO / "tests" / "fixtures" / "flagship_cpu"


@pytest.fixture(scope="module")
def flagship_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("flagship")
    proc = trace(out, [str(ROOT / "run_flagship.py")], collect_all=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load(out)


def test_the_break_is_in_the_probe_with_the_whole_chain(flagship_trace):
    (event,) = [e for e in flagship_trace.events if e.kind == "graph_break"]
    assert event.gb_id == "GB0007"
    assert event.site.function == "flagfx.probe.get_runtime_version"
    assert event.fatal_under_fullgraph, "the model is compiled with fullgraph=True"
    functions = [f.function for f in event.user_stack]
    chain = ["flagfx.model.Model.forward", "flagfx.kernels.quantize", "flagfx.probe.get_runtime_version"]
    assert [f for f in functions if f in chain] == chain
    assert event.compiled_frame == "flagfx.model.Model.forward"


def test_trace_matches_the_static_finding_one_to_one(flagship_trace):
    scan_mod = pytest.importorskip("dynacheck.static.scan")
    from dynacheck.dynamic.correlate import BREAK_KINDS, correlate

    scan = scan_mod.scan_roots([ROOT], ["flagfx.model:Model.forward"])
    probe_findings = [f for f in scan.findings if f.site.function == "flagfx.probe.get_runtime_version"]
    assert len(probe_findings) == 1
    review = correlate(scan, flagship_trace)
    confirmed = [m for m in review.matches if m.status == "confirmed"]
    assert len(confirmed) == 1 and confirmed[0].fingerprint == probe_findings[0].fingerprint
    matched_breaks = [i for i in confirmed[0].events if flagship_trace.events[i].kind in BREAK_KINDS]
    assert len(matched_breaks) == 1
    assert flagship_trace.events[matched_breaks[0]].gb_id == probe_findings[0].outcome.gb_id
    assert not [m for m in review.matches if m.status == "seen_only"
                and flagship_trace.events[m.events[0]].kind in BREAK_KINDS]

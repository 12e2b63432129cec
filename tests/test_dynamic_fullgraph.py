"""fullgraph=True with three distinct breaks: one fatal error normally, all three under --collect-all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "dynamic"))
from tracerun import HERE, load, trace

pytestmark = pytest.mark.torch
PROGRAM = str(HERE / "three_breaks.py")
BREAKS = {"GB0059": 'print("step"', "GB0007": "subprocess.run(", "GB0291": 'log.warning("forward")'}


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(Path(PROGRAM).read_text().splitlines(), 1) if text in line)


def test_without_collect_all_the_first_break_is_the_one_fatal_error(tmp_path):
    proc = trace(tmp_path, [PROGRAM])
    assert proc.returncode == 1, "the user's fullgraph=True run fails"
    result = load(tmp_path)
    fatal = [e for e in result.events if e.kind == "fullgraph_error"]
    assert len(fatal) == 1
    assert fatal[0].gb_id == "GB0059" and fatal[0].fatal_under_fullgraph
    assert fatal[0].site.function == "three_breaks.Model.forward"
    assert fatal[0].site.line == line_of(BREAKS["GB0059"])
    assert not [e for e in result.events if e.kind == "graph_break"]
    assert result.processes[0].ended == "exit 1"


def test_collect_all_yields_every_break_each_fatal_under_the_users_fullgraph(tmp_path):
    proc = trace(tmp_path, [PROGRAM], collect_all=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = load(tmp_path)
    breaks = {e.gb_id: e for e in result.events if e.kind == "graph_break"}
    assert set(breaks) == set(BREAKS)
    for gb_id, text in BREAKS.items():
        assert breaks[gb_id].site.line == line_of(text)
        assert breaks[gb_id].fatal_under_fullgraph
    assert not [e for e in result.events if e.kind == "fullgraph_error"]

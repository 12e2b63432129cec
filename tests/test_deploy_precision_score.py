"""The flagship precision/recall measure (`bench/deploy_precision.py`): what counts as a site."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "deploy_precision.py"


def _score():
    spec = importlib.util.spec_from_file_location("deploy_precision", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.score


def _finding(file: str, line: int, conditions=()):
    return {"site": {"file": file, "line": line}, "conditions": list(conditions)}


def test_missed_sites_count_in_recall_and_routes_do_not():
    labels = {"sites": [{"file": "a.py", "line": 1, "verdict": "real"},
                        {"file": "a.py", "line": 2, "verdict": "impossible"}],
              "missed": [{"site": "b.py:3", "verdict": "real"},
                         {"site": "c.py:4", "verdict": "real", "kind": "route"}]}
    scan = {"findings": [_finding("a.py", 1), _finding("a.py", 2), _finding("a.py", 1, ["open"])]}
    result = _score()(scan, labels)
    assert (result["true_positives"], result["false_positives"]) == (1, ["a.py:2 (impossible)"])
    assert (result["real_labelled"], result["recall"], result["missed_real"]) == (2, 0.5, ["b.py:3"])
    assert result["routes_not_counted"] == ["c.py:4"]
    found = _score()({"findings": scan["findings"] + [_finding("b.py", 3)]}, labels)
    assert found["recall"] == 1.0 and not found["missed_real"]

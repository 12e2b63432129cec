"""Dynamo's trace rules asked about stdlib callables; scanned code is never imported."""

from __future__ import annotations

import sys

import pytest

from dynacheck.static import trace_rules_probe
from dynacheck.static.trace_rules_probe import classify, is_probe_allowed


def test_only_stdlib_names_may_be_probed():
    assert is_probe_allowed("subprocess.Popen")
    assert is_probe_allowed("builtins.print")
    assert not is_probe_allowed("flashinfer.jit.cpp_ext.get_cuda_version")
    assert not is_probe_allowed("sglang.srt.models.deepseek_v2")
    assert not is_probe_allowed("this")


def test_scanned_packages_are_never_imported(tmp_path, monkeypatch):
    package = tmp_path / "sidefx"
    package.mkdir()
    marker = tmp_path / "imported"
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\ndef boom(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert classify("sidefx.boom") == "unknown"
    assert not marker.exists()
    assert "sidefx" not in sys.modules


def test_without_torch_everything_is_unknown(monkeypatch):
    monkeypatch.setattr(trace_rules_probe, "_torch_installed", lambda: False)
    classify.cache_clear()
    try:
        assert classify("threading.Lock") == "unknown"
    finally:
        classify.cache_clear()


@pytest.mark.torch
@pytest.mark.parametrize(
    ("qualname", "verdict"),
    [
        ("threading.Lock", "skipped"),  # _thread.allocate_lock: where FlashInfer's probe stops
        ("_thread.allocate_lock", "skipped"),
        ("subprocess.Popen", "inlined"),  # plain Python: Dynamo walks into __init__
        ("subprocess.check_output", "inlined"),
        ("time.time", "skipped"),
        ("time.perf_counter", "skipped"),
        ("os.system", "skipped"),
        ("importlib.import_module", "skipped"),
        ("os.environ.get", "inlined"),
        ("math.sqrt", "torch_op"),
        ("os.no_such_function", "unknown"),
    ],
)
def test_classify_on_installed_torch(qualname, verdict):
    pytest.importorskip("torch")
    assert classify(qualname) == verdict


def _resolve_for_test(name: str):
    """Resolve a dotted name by importing it (tests only: these are stdlib or test dependencies)."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _exact_call_names():
    from dynacheck.catalog import load_catalog

    return [(r.id, p) for r in load_catalog().rules for p in r.calls if not any(c in p for c in "*?[")]


@pytest.mark.parametrize(("rule_id", "name"), _exact_call_names(), ids=lambda v: str(v))
def test_exact_call_names_exist(rule_id, name):
    """No typos: every exact name resolves, or names a method of a class/factory that does."""
    import importlib.util

    top = name.split(".")[0]
    if top != "builtins" and importlib.util.find_spec(top) is None:
        pytest.skip(f"{top} is not installed")
    if _resolve_for_test(name) is not None:
        return
    owner, _, method = name.rpartition(".")
    assert callable(_resolve_for_test(owner)), f"{rule_id}: {name} does not exist"
    assert method.isidentifier()


@pytest.mark.torch
def test_no_exact_stdlib_call_is_something_dynamo_puts_in_the_graph():
    pytest.importorskip("torch")
    wrong = [
        (rule_id, name)
        for rule_id, name in _exact_call_names()
        if is_probe_allowed(name) and classify(name) == "torch_op"
    ]
    assert not wrong

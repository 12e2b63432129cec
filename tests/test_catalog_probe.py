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

"""Dynamo's exception as an Event: GB id, the traced user stack, and the innermost user frame."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from dynacheck.capture.breaks import (  # noqa: E402
    break_event,
    gb_id_for,
    is_user_frame,
    qualified_name,
)


@functools.cache
def _probe() -> str:
    return subprocess.check_output([sys.executable, "--version"], text=True)


def _forward(x):
    _probe()
    return x + 1


def test_subprocess_under_fullgraph_gives_gb0007_with_the_user_site():
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(_forward, backend="eager", fullgraph=True)(torch.ones(2))
    ev = break_event(info.value, rank=3)
    assert (ev.kind, ev.gb_id, ev.rank) == ("fullgraph_error", "GB0007", 3)
    assert ev.fatal_under_fullgraph and ev.phase == "tracing"
    assert ev.site.function.endswith("test_capture_breaks._probe")
    assert [f.function for f in ev.user_stack if is_user_frame(f.file)] == ["_forward", "_probe"]
    assert ev.user_stack[-1].code == "self._waitpid_lock = threading.Lock()"
    assert "allocate_lock" in ev.explanation


def test_gb_id_from_registry_when_the_message_has_no_link():
    assert gb_id_for("Attempted to call function marked as skipped") == "GB0007"
    assert gb_id_for("anything", "see https://x/gb/gb0124.html") == "GB0124"


def test_user_frames_exclude_stdlib_and_torch_but_not_site_packages():
    assert not is_user_frame(subprocess.__file__)
    assert not is_user_frame(torch.__file__)
    assert is_user_frame("/tmp/site/flashinfer/jit/cpp_ext.py")
    assert is_user_frame("/usr/lib/python3/dist-packages/x.py")


def test_qualified_name_uses_sys_path(tmp_path, monkeypatch):
    pkg = tmp_path / "flashinfer" / "jit"
    pkg.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert qualified_name(str(pkg / "cpp_ext.py"), "get_cuda_version") == "flashinfer.jit.cpp_ext.get_cuda_version"

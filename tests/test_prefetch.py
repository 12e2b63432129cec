"""The prefetch worker (static/prefetch.py) moves summarizing to a second core and never changes
an answer: what it makes equals what the walk would make, a result from other bytes or another
span is not used, and a scan whose worker dies answers the same."""

from __future__ import annotations

import dataclasses
import os
import textwrap
import time
from pathlib import Path

import pytest

from dynacheck.sources.locate import ModuleLocator
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import prefetch as prefetch_module
from dynacheck.static.prefetch import Prefetch
from dynacheck.static.scan import ScanSession, scan_roots
from dynacheck.static.summary import summarize

pytestmark = pytest.mark.skipif(Prefetch.for_scan(None) is None and os.environ.get("DYNACHECK_PREFETCH") != "0",
                                reason="the prefetch worker needs Linux and two usable cores")

MODULE_A = textwrap.dedent('''\
    from pkg.b import helper


    class Engine:
        def run(self, x):
            y = helper(x)
            z = y + 1
            return z
''')
MODULE_B = textwrap.dedent('''\
    import subprocess


    def helper(x):
        out = subprocess.check_output(["nvcc", "--version"])
        x = x + 1
        x = x * 2
        return out
''')


def _tree(tmp_path: Path) -> Path:
    package = tmp_path / "tree" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(MODULE_A)
    (package / "b.py").write_text(MODULE_B)
    return tmp_path / "tree"


def _prefetch(tmp_path: Path) -> Prefetch:
    locator = ModuleLocator([resolve_target(str(_tree(tmp_path)), cache_dir=tmp_path / "cache")])
    prefetch = Prefetch(locator)
    prefetch._start()
    return prefetch


def _wait_for(prefetch: Prefetch, item: tuple) -> None:
    deadline = time.monotonic() + 30
    while item not in prefetch._done:
        assert time.monotonic() < deadline, f"the worker never made {item}"
        prefetch._drain(block=False)
        time.sleep(0.01)


def _plain(summary) -> dict:
    return {"functions": {k: dataclasses.asdict(v) for k, v in sorted(summary.functions.items())},
            "classes": {k: dataclasses.asdict(v) for k, v in sorted(summary.classes.items())},
            "bindings": summary.bindings, "pending": dict(summary.pending)}


def test_the_worker_s_module_summary_is_the_one_made_here(tmp_path):
    prefetch = _prefetch(tmp_path)
    try:
        prefetch._hint_imports(["pkg.b.helper"], urgent=False)  # the module pkg.b, and pkg above it
        _wait_for(prefetch, ("m", "pkg.b"))
        data = MODULE_B.encode()
        made = prefetch.take_module("pkg.b", data)
        assert made is not None and prefetch.taken == 1
        made.attach_source(MODULE_B)
        here = summarize(MODULE_B, "pkg.b", made.path, False)
        assert made.pending == here.pending == {"helper": (4, 8)}  # deferred in both
        assert _plain(made) == _plain(here)
    finally:
        prefetch.close()


def test_a_body_made_by_the_worker_fills_like_one_made_here(tmp_path):
    prefetch = _prefetch(tmp_path)
    try:
        summary = summarize(MODULE_A, "pkg.a", "a.py", False)
        prefetch.after_module(summary)  # the worker gets the text it summarizes bodies from
        prefetch.queued("pkg.a", "Engine.run")
        _wait_for(prefetch, ("b", "pkg.a", "Engine"))
        assert summary.functions.get("Engine.run") is not None  # the fill takes the worker's part
        assert prefetch.taken == 1 and summary.pending == {}
        assert _plain(summary) == _plain(summarize(MODULE_A, "pkg.a", "a.py", False, defer=False))
    finally:
        prefetch.close()


def test_a_result_made_from_other_bytes_or_another_span_is_not_used(tmp_path):
    prefetch = _prefetch(tmp_path)
    try:
        prefetch._hint_imports(["pkg.b.helper"], urgent=False)
        _wait_for(prefetch, ("m", "pkg.b"))
        assert prefetch.take_module("pkg.b", MODULE_B.encode() + b"# edited since\n") is None
        summary = summarize(MODULE_A, "pkg.a", "a.py", False)
        prefetch.after_module(summary)
        prefetch.queued("pkg.a", "Engine.run")
        _wait_for(prefetch, ("b", "pkg.a", "Engine"))
        assert prefetch.take_body(summary, "Engine", (1, 2)) is None
        assert prefetch.taken == 0
    finally:
        prefetch.close()


def test_close_ends_the_worker_and_removes_its_files(tmp_path):
    prefetch = _prefetch(tmp_path)
    worker, folder = prefetch._worker, Path(prefetch._folder)
    prefetch._hint_imports(["pkg.b.helper"], urgent=False)
    _wait_for(prefetch, ("m", "pkg.b"))
    assert any(folder.iterdir())
    prefetch.close()
    assert not worker.is_alive() and not folder.exists()


def _answer(result) -> dict:
    out = result.to_dict()
    out.pop("stats")
    return out


ROOT = Path(__file__).parent / "fixtures" / "resolve"
ENTRY = "resfx.model:Model.forward"


def test_a_scan_with_the_worker_answers_as_one_without(tmp_path, monkeypatch):
    started = []
    real_start = Prefetch._start

    def start(self):
        real_start(self)
        if self._worker is not None and self._worker not in started:
            started.append(self._worker)

    monkeypatch.setattr(Prefetch, "_start", start)
    with_worker = scan_roots([ROOT], [ENTRY], cache_dir=tmp_path / "one")
    assert len(started) == 1 and not started[0].is_alive()  # one worker, closed with the scan
    monkeypatch.setenv("DYNACHECK_PREFETCH", "0")
    without = scan_roots([ROOT], [ENTRY], cache_dir=tmp_path / "two")
    assert len(started) == 1 and with_worker.findings
    assert _answer(with_worker) == _answer(without)


def test_a_scan_whose_worker_dies_answers_the_same(tmp_path, monkeypatch):
    real_start = Prefetch._start

    def start_and_kill(self):
        real_start(self)
        if self._worker is not None and self._worker.is_alive():
            self._worker.kill()
            self._worker.join()

    monkeypatch.setattr(Prefetch, "_start", start_and_kill)
    dead = scan_roots([ROOT], [ENTRY], cache_dir=tmp_path / "one")
    monkeypatch.setenv("DYNACHECK_PREFETCH", "0")
    assert _answer(dead) == _answer(scan_roots([ROOT], [ENTRY], cache_dir=tmp_path / "two"))


def test_a_census_session_starts_no_worker_and_the_switch_turns_it_off(tmp_path, monkeypatch):
    targets = [resolve_target(str(ROOT), cache_dir=tmp_path)]
    assert ScanSession.open(targets, tmp_path).index.prefetch is None  # a census's processes use the cores
    assert isinstance(ScanSession.open(targets, tmp_path, prefetch=True).index.prefetch, Prefetch)
    monkeypatch.setenv("DYNACHECK_PREFETCH", "0")
    assert ScanSession.open(targets, tmp_path, prefetch=True).index.prefetch is None
    monkeypatch.setattr(prefetch_module, "usable_cores", lambda: 1)
    monkeypatch.delenv("DYNACHECK_PREFETCH")
    assert ScanSession.open(targets, tmp_path, prefetch=True).index.prefetch is None


def test_a_worker_whose_scan_was_killed_exits_and_cleans_up(tmp_path):
    """The worker is a daemon of the scan's process; if that process is killed (no close), the
    worker notices within a second or two and removes its folder instead of waiting forever."""
    import subprocess
    import sys

    code = textwrap.dedent(f'''
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_prefetch import _prefetch
        prefetch = _prefetch(Path({str(tmp_path)!r}))
        print(prefetch._worker.pid, prefetch._folder, flush=True)
        time.sleep(60)
    ''')
    scan = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid, folder = scan.stdout.readline().split()
    scan.kill()
    scan.wait()
    deadline = time.monotonic() + 20
    while _alive(int(pid)) or Path(folder).exists():
        assert time.monotonic() < deadline, "the orphaned worker is still there"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


@pytest.mark.wheels
@pytest.mark.slow
def test_the_flagship_scan_answers_the_same_with_the_worker_s_help(pinned_targets, tmp_path, monkeypatch):
    from dynacheck.static.scan import scan_targets

    observer: dict = {}
    helped = scan_targets(pinned_targets, [], "glm5", cache_dir=tmp_path / "one", observer=observer)
    assert observer["prefetched"] > 20  # ~150 of the ~400 modules and bodies it reads, on 2 cores
    monkeypatch.setenv("DYNACHECK_PREFETCH", "0")
    alone: dict = {}
    assert _answer(helped) == _answer(scan_targets(pinned_targets, [], "glm5", cache_dir=tmp_path / "two",
                                                   observer=alone))
    assert alone["prefetched"] == 0 and alone["parsed_files"] == observer["parsed_files"]

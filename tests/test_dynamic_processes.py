"""Processes under `dynacheck trace`: spawn workers, a killed process, exit codes, non-torch programs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "dynamic"))
from tracerun import HERE, REPO, events, load, trace


@pytest.mark.torch
@pytest.mark.parametrize("start", [pytest.param("spawn", marks=pytest.mark.slow), "fork"])
def test_two_worker_processes_are_merged_with_their_ranks(tmp_path, start):
    pytest.importorskip("torch")
    proc = trace(tmp_path, [str(HERE / "spawn_two.py"), start])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = load(tmp_path)
    workers = [p for p in result.processes if p.rank in (0, 1)]
    assert sorted(p.rank for p in workers) == [0, 1]
    assert all(p.ended == "exit 0" and p.events >= 1 for p in workers)
    event = [e for e in events(result, "graph_break", "GB0059", "spawn_two.work")]
    assert len(event) == 1, "the same break on two ranks is one event"
    assert event[0].count == 2 and event[0].ranks == (0, 1) and len(event[0].pids) == 2


@pytest.mark.torch
def test_a_killed_process_keeps_the_events_recorded_before_the_kill(tmp_path):
    pytest.importorskip("torch")
    proc = trace(tmp_path, [str(HERE / "dies.py")])
    assert proc.returncode == 128 + 9  # SIGKILL, as a shell reports it
    result = load(tmp_path)
    assert result.exit_code == 137
    (process,) = result.processes
    assert process.ended == "", "no end record: the process died"
    event = events(result, "graph_break", "GB0007", "dies.forward")[0]
    assert event.site.file.endswith("dies.py")


def test_a_truncated_last_line_is_tolerated(tmp_path):
    from dynacheck.dynamic.merge import load_trace

    good = '{"record": "process", "pid": 7, "rank": 2, "argv": ["x.py"]}\n' \
           '{"kind": "graph_break", "pid": 7, "rank": 2, "gb_id": "GB0007", "gb_type": "t", ' \
           '"site": {"file": "/a/m.py", "line": 3, "function": "m.f"}, "time": 1}\n'
    (tmp_path / "events-7.jsonl").write_text(good + '{"kind": "graph_br')
    result = load_trace(tmp_path)
    assert [e.gb_id for e in result.events] == ["GB0007"]
    assert result.processes[0].rank == 2 and result.processes[0].ended == ""


def _run_plain(tmp_path: Path, code: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "dynacheck", "trace", "--quiet", "--out", str(tmp_path / "t"),
                           "--", sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, check=False,
                          timeout=60)


def test_a_program_without_torch_runs_untouched_and_keeps_its_exit_code(tmp_path):
    proc = _run_plain(tmp_path, """
        import sys
        print("torch" in sys.modules, any(type(f).__name__ == "_TorchWatcher" for f in sys.meta_path))
        sys.exit(3)
    """)
    assert proc.returncode == 3
    assert proc.stdout.strip() == "False True", "armed, but torch was never imported"
    assert not list((tmp_path / "t").glob("events-*.jsonl")), "no torch, no event file"


def test_an_existing_sitecustomize_still_runs(tmp_path):
    user_site = tmp_path / "usersite"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    proc = _run_plain(tmp_path, """
        import builtins
        print(getattr(builtins, "USER_SITE_RAN", False))
    """, {"PYTHONPATH": f"{REPO}{__import__('os').pathsep}{user_site}"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_trace_without_a_command_is_a_user_error():
    from dynacheck.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["trace", "--out", "/tmp/unused"])
    assert exit_info.value.code == 2


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed job at a time under pytest -n
def test_torchrun_ranks_get_the_recorder_and_their_rank(tmp_path):
    pytest.importorskip("torch.distributed.run")
    argv = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(HERE / "ranks.py")]
    proc = trace(tmp_path, argv)
    if proc.returncode != 0 and "ChildFailedError" in proc.stderr:
        # gloo's rendezvous can abort a rank on a starved 2-core machine (seen under pytest -n): one retry,
        # in a fresh folder, so a real failure still fails twice
        tmp_path = tmp_path / "retry"
        tmp_path.mkdir()
        proc = trace(tmp_path, argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = load(tmp_path)
    assert sorted(p.rank for p in result.processes if p.rank >= 0) == [0, 1]
    (event,) = [e for e in result.events if e.kind == "graph_break" and e.site and e.site.function == "ranks.forward"]
    assert event.count == 2 and event.ranks == (0, 1)

"""bench/tree_memory.py: the census benchmark's peak memory of a process tree (sum of PSS, sampled)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import tree_memory  # noqa: E402


def _fake_proc(tmp_path: Path, processes: dict[int, tuple[int, str, int]]) -> Path:
    """pid -> (parent pid, command name, PSS kB) as /proc files."""
    for pid, (parent, comm, pss) in processes.items():
        folder = tmp_path / str(pid)
        folder.mkdir()
        (folder / "stat").write_text(f"{pid} ({comm}) S {parent} {pid} 0 0 -1\n")
        (folder / "smaps_rollup").write_text(f"00-ff ---p 0 00:00 0 [rollup]\nRss: {pss * 3} kB\nPss: {pss} kB\n")
    (tmp_path / "self").mkdir()
    return tmp_path


def test_the_tree_is_the_process_and_everything_below_it_only(tmp_path):
    proc = _fake_proc(tmp_path, {
        1: (0, "init", 10), 100: (1, "python", 1000), 101: (100, "worker (a) b)", 400),
        102: (100, "worker", 500), 103: (101, "grandchild", 7), 200: (1, "other", 9999)})
    assert sorted(tree_memory.tree(100, proc)) == [100, 101, 102, 103]  # a `)` in a name does not shift fields
    sampler = tree_memory.TreeSampler(100, proc=proc)
    assert sampler.sample() == 1000 + 400 + 500 + 7  # PSS, not RSS, and not the unrelated process
    (proc / "102" / "smaps_rollup").unlink()  # a worker that ended between the listing and the read
    assert sampler.sample() == 1407
    assert sampler.peak_kb == 1907 and sampler.samples == 2
    assert sampler.rss_peak_kb == 3 * 1907  # the RSS sum of the same readings, kept beside


@pytest.mark.skipif(not tree_memory.available(), reason="needs Linux /proc smaps_rollup")
def test_a_child_s_allocation_is_seen_while_it_runs():
    code = "import time; block = bytearray(80 * 1024 * 1024); block[::4096] = b'x' * len(block[::4096]); time.sleep(1.0)"
    child = subprocess.Popen([sys.executable, "-c", code])
    with tree_memory.TreeSampler(child.pid, interval=0.05) as sampler:
        child.wait()
    assert sampler.samples >= 3
    assert 70 <= sampler.peak_mb < 400  # the 80 MB it touched, plus an interpreter
    assert sampler.peak_mb <= sampler.rss_peak_mb < 400  # one process: its PSS is at most its RSS

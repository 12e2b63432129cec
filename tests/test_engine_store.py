"""A stored engine (static/engine_store.py): a new process that loads it finds what a fresh scan finds,
and a store that no longer fits its inputs, or that was tampered with, is not used."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dynacheck.static import engine_store

FIXTURES = Path(__file__).parent / "fixtures"
GPU_FACTS = FIXTURES / "fork" / "gpufx.toml"

# one scan in a new process (a stored engine is taken only by a process that has numbered nothing yet):
# whether it loaded a store, whether it wrote one, and its JSON without the timings
CHILD = r"""
import json, sys
from pathlib import Path
from dynacheck.deploy.build import DeploymentSpec
from dynacheck.report.json_out import to_data
from dynacheck.static import engine_store
from dynacheck.sources.resolve import resolve_target
from dynacheck.static.scan import scan_targets
seen = {"loaded": False, "saved": False}
load, save = engine_store.load, engine_store.save
def loading(*args):
    engine = load(*args)
    seen["loaded"] = engine is not None
    return engine
def saving(*args):
    seen["saved"] = save(*args)
    return seen["saved"]
engine_store.load, engine_store.save = loading, saving
import os
from dynacheck.static import reach
reach.MAX_NODES = int(os.environ.get("NODE_LIMIT", reach.MAX_NODES))
roots, entries, spec, cache = json.loads(sys.argv[1])
spec = DeploymentSpec(**{k: (Path(v) if k == "framework" else v) for k, v in spec.items()})
targets = [resolve_target(r, cache_dir=Path(cache)) for r in roots]
result = scan_targets(targets, entries, None, cache_dir=Path(cache), deployment=spec, reuse=False)  # no result cache
data = to_data(result)
data["stats"] = {k: v for k, v in data["stats"].items() if k != "seconds"}
print(json.dumps(seen | {"result": data}))
"""

CASES = {
    "gpu": ([FIXTURES / "fork"], ["gpufx.model:Model.forward"], {"framework": GPU_FACTS, "gpu": "sm100"}),
    "quantization": ([FIXTURES / "fork"], ["quantfx.model:Model.forward"],
                     {"framework": FIXTURES / "fork" / "quantfx.toml", "gpu": "sm100", "platform": "cuda",
                      "server_args": "--quantization fp8 --tp-size 2"}),
    "does not start": ([FIXTURES / "startup"], ["startfx.model:Model.forward"],
                       {"framework": FIXTURES / "startup" / "startfx.toml", "gpu": "sm100", "platform": "cuda",
                        "server_args": "--quantization moeonly", "architecture": "Model"}),
    "attributes": ([FIXTURES / "attr"], ["attrfx.model:Model.forward", "attrfx.traceorder:Model.forward",
                                         "attrfx.marlin:Model.forward"],
                   {"framework": GPU_FACTS, "gpu": "sm90", "platform": "cuda"}),
    "tensor arguments": ([FIXTURES / "tensor_args"], ["tapkg.model:Model.forward", "tapkg.shapes:Layer.forward"],
                         {"framework": GPU_FACTS, "gpu": "sm90"}),
}


def _scan(roots, entries, spec, cache: Path, **env) -> dict:
    arguments = json.dumps([[str(r) for r in roots], entries, {k: str(v) for k, v in spec.items()}, str(cache)])
    done = subprocess.run([sys.executable, "-c", CHILD, arguments], capture_output=True, text=True, check=True,
                          env=os.environ | env)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_loaded_engine_finds_what_a_fresh_scan_finds(tmp_path, case):
    roots, entries, spec = CASES[case]
    cold = _scan(roots, entries, spec, tmp_path)
    assert not cold["saved"] and not cold["loaded"]  # a cold scan parses; the next one stores the engine
    first = _scan(roots, entries, spec, tmp_path)
    assert first["saved"] and not first["loaded"]
    second = _scan(roots, entries, spec, tmp_path)
    assert second["loaded"] and not second["saved"]  # it learned nothing new: not written again
    warm = _scan(roots, entries, spec, tmp_path, DYNACHECK_ENGINE_STORE="0")  # summaries cached, no store
    assert not warm["loaded"]
    assert second["result"] == warm["result"]  # the stats too: every summary counts as read from the cache
    assert {k: v for k, v in second["result"].items() if k != "stats"} == \
        {k: v for k, v in first["result"].items() if k != "stats"}
    assert first["result"]["findings"] or case == "does not start"


def test_a_loaded_engine_walking_other_entries_finds_what_a_fresh_scan_finds(tmp_path):
    """New entries on a loaded engine: restored memo entries and new ones side by side, allocations
    numbered after the restored ones; the grown engine is stored again."""
    roots, entries, spec = CASES["attributes"]
    _scan(roots, entries, spec, tmp_path, DYNACHECK_ENGINE_STORE="0")  # the summaries, cached
    assert _scan(roots, entries[:1], spec, tmp_path)["saved"]
    both = _scan(roots, entries, spec, tmp_path)
    assert both["loaded"] and both["saved"]
    fresh = _scan(roots, entries, spec, tmp_path / "elsewhere")
    assert {k: v for k, v in both["result"].items() if k != "stats"} == \
        {k: v for k, v in fresh["result"].items() if k != "stats"}
    assert len({f["site"]["file"] for f in both["result"]["findings"]}) == 2  # both entries found something


def test_a_problem_of_the_stored_scan_is_said_once(tmp_path):
    """The loaded engine brings the problems its scans met; the scan does not say them again."""
    roots, entries, spec = CASES["attributes"]
    runs = [_scan(roots, entries, spec, tmp_path, NODE_LIMIT="2") for _ in range(3)]  # cold, storing, loading
    assert runs[2]["loaded"]
    kinds = [[p["kind"] for p in run["result"]["problems"]] for run in runs]
    assert kinds[2] == kinds[1] and kinds[2].count("truncated") == 1


def test_another_deployment_or_the_switch_off_does_not_take_it(tmp_path):
    roots, entries, spec = CASES["gpu"]
    for gpu in ("sm90", "sm100"):  # the summaries both read, cached
        _scan(roots, entries, spec | {"gpu": gpu}, tmp_path, DYNACHECK_ENGINE_STORE="0")
    assert _scan(roots, entries, spec, tmp_path)["saved"]
    other = _scan(roots, entries, spec | {"gpu": "sm90"}, tmp_path)
    assert not other["loaded"] and other["saved"]
    off = _scan(roots, entries, spec, tmp_path, DYNACHECK_ENGINE_STORE="0")
    assert not off["loaded"] and not off["saved"]


def test_a_changed_file_is_read_again_even_with_its_old_size_and_time(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "attr", tree)
    spec = {"framework": GPU_FACTS, "gpu": "sm90", "platform": "cuda"}
    entry = ["attrfx.model:Model.forward"]
    _scan([tree], entry, spec, tmp_path / "cache")  # cold
    before = _scan([tree], entry, spec, tmp_path / "cache")
    assert before["saved"]
    source = tree / "attrfx" / "model.py"
    text, stat = source.read_text(), source.stat()
    assert [f["site"]["callee"] for f in before["result"]["findings"]] == ["subprocess.run"]
    assert text.count("subprocess.run(") == 1
    source.write_text(text.replace("subprocess.run(", "subprocess.rux("))  # same length: same size
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same modification time
    after = _scan([tree], entry, spec, tmp_path / "cache")
    assert not after["loaded"]  # the stored module's hash no longer matches
    assert after["result"]["findings"] == []


def test_a_tampered_or_foreign_store_is_not_used(tmp_path):
    roots, entries, spec = CASES["gpu"]
    _scan(roots, entries, spec, tmp_path)  # cold
    first = _scan(roots, entries, spec, tmp_path)
    (stored,) = (tmp_path / "engines").glob("*.pickle")
    data = bytearray(stored.read_bytes())
    data[-10] ^= 0xFF
    stored.write_bytes(bytes(data))
    again = _scan(roots, entries, spec, tmp_path)
    assert not again["loaded"] and again["result"]["findings"] == first["result"]["findings"] != []


def test_the_unpickler_refuses_what_an_engine_is_not_made_of():
    class Sneaky:
        def __reduce__(self):
            return (os.system, ("echo owned",))

    with pytest.raises(pickle.UnpicklingError):
        engine_store.EngineUnpickler(io.BytesIO(pickle.dumps(Sneaky()))).load()
    engine_store.EngineUnpickler(io.BytesIO(pickle.dumps((type(None), {1, 2}, frozenset())))).load()


def test_an_id_that_names_nothing_in_the_pickle_drops_its_key():
    kept = ("guard", 3)
    memo = {id(kept): (0, kept)}
    assert engine_store._translated(("x", id(kept), 7), memo)[1].obj is kept
    assert engine_store._translated(("x", id(object()) + (1 << 40), 7), memo) is None  # no such object
    assert engine_store._translated(("line", 12, ("n", 5)), memo) == ("line", 12, ("n", 5))  # small ints stay
    assert engine_store._restored(engine_store._translated(("x", id(kept)), memo)) == ("x", id(kept))


def test_only_the_newest_stores_are_kept(tmp_path):
    for n in range(engine_store.KEEP + 3):
        path = tmp_path / f"{n:02d}.pickle"
        path.write_bytes(b"x")
        os.utime(path, ns=(n * 10**9, n * 10**9))
    engine_store._prune(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.pickle")) == [f"{n:02d}.pickle" for n in range(3, engine_store.KEEP + 3)]


@pytest.mark.wheels
@pytest.mark.slow
def test_the_flagship_loaded_from_its_store_is_the_flagship(tmp_path, pinned_targets):
    code = r"""
import json, sys
from pathlib import Path
from dynacheck.report.json_out import to_data
from dynacheck.sources.resolve import resolve_target
from dynacheck.static import engine_store
from dynacheck.static.scan import scan_targets
loaded, load = [], engine_store.load
def loading(*args):
    engine = load(*args)
    loaded.append(engine is not None)
    return engine
engine_store.load = loading
targets = [resolve_target(s, offline=True) for s in ("sglang==0.5.9", "flashinfer-python==0.6.3")]
data = to_data(scan_targets(targets, [], "glm5", cache_dir=Path(sys.argv[1]), reuse=False))
data["stats"].pop("seconds")
print(json.dumps({"loaded": loaded == [True], "result": data}))
"""
    runs = [json.loads(subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                                      check=True).stdout.strip().splitlines()[-1]) for _ in range(3)]
    assert not runs[0]["loaded"] and not runs[1]["loaded"] and runs[2]["loaded"]  # cold, storing, loading
    runs = runs[1:]
    assert {k: v for k, v in runs[1]["result"].items() if k != "stats"} == \
        {k: v for k, v in runs[0]["result"].items() if k != "stats"}
    assert any("get_cuda_version" in json.dumps(f) for f in runs[1]["result"]["findings"])


def test_a_store_too_large_to_be_read_back_is_not_written(tmp_path, monkeypatch):
    from dynacheck.deploy.build import DeploymentSpec
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession, scan_targets

    roots, entries, spec = CASES["gpu"]
    targets = [resolve_target(str(roots[0]), cache_dir=tmp_path)]
    session = ScanSession.open(targets, tmp_path)
    scan_targets(targets, entries, None, cache_dir=tmp_path, deployment=DeploymentSpec(**spec), session=session)
    engine = next(iter(session._engines.values()))
    assert engine_store.save(session.cache, "a" * 40, engine, session.index, [])
    monkeypatch.setattr(engine_store, "MAX_ENTRY_BYTES", 1000)
    assert not engine_store.save(session.cache, "b" * 40, engine, session.index, [])
    assert sorted(p.name for p in (tmp_path / "engines").iterdir()) == ["a" * 40 + ".pickle"]

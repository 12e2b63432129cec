"""Hostile inputs run nothing and read nothing outside the targets: planted cache entries, wheels,
and tampered scan files (issue 10, security items 1-5)."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES
from dynacheck.errors import UserError
from dynacheck.sources import resolve_target
from dynacheck.sources.trust import sign, signing_key
from dynacheck.static.cache import CACHE_FORMAT

sys.path.insert(0, str(FIXTURES / "corpus"))
import bad_inputs as corpus  # noqa: E402

_spec = importlib.util.spec_from_file_location("sources_builders", FIXTURES / "sources" / "builders.py")
builders = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("sources_builders", builders)
_spec.loader.exec_module(builders)  # type: ignore[union-attr]


class _Plant:
    """A pickle that, when loaded, creates the marker file (what an attacker would do with os.system)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _scan_json(root: Path, cache: Path, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    done = corpus.run_cli("scan", "-t", str(root), "-e", corpus.ENTRY, "--format", "json", "--out", str(out),
                          "--cache-dir", str(cache))
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(out.read_text())


def _sites(data: dict) -> list[tuple[str, str, int]]:
    return sorted((f["rule"], f["site"]["function"], f["site"]["line"]) for f in data["findings"])


def test_planted_summary_pickles_never_run_and_the_scan_is_unchanged(tmp_path):
    root = corpus.write_package(tmp_path / "src", corpus.deep("attr", 3))
    cache = tmp_path / "cache"
    _, clean = _scan_json(root, cache, tmp_path / "a.json")
    entries = sorted((cache / "summaries").glob("*.pickle"))
    assert len(entries) >= corpus.GOOD_MODULES
    marker = tmp_path / "PWNED"
    payload = pickle.dumps(_Plant(marker))
    key = signing_key()
    assert key is not None
    for number, entry in enumerate(entries):
        name = entry.stem.encode()
        if number % 3 == 0:  # a plain pickle, as the cache used to hold
            entry.write_bytes(payload)
        elif number % 3 == 1:  # the current header with a forged signature
            entry.write_bytes(CACHE_FORMAT + b"\0" * 32 + payload)
        else:  # even signed with the user's own key, the allow-list refuses os.system
            entry.write_bytes(CACHE_FORMAT + sign(key, name + payload) + payload)
    done, again = _scan_json(root, cache, tmp_path / "b.json")
    assert not marker.exists()
    assert _sites(again) == _sites(clean) and len(corpus.good_sites(again["findings"])) == corpus.GOOD_MODULES
    assert done.returncode == 1  # the same verdict as the clean scan: error findings


def test_corrupt_cache_entries_are_rebuilt_and_a_folder_in_place_leaks_nothing(tmp_path):
    root = corpus.write_package(tmp_path / "src", corpus.deep("attr", 3))
    cache = tmp_path / "cache"
    _, clean = _scan_json(root, cache, tmp_path / "a.json")
    entries = sorted((cache / "summaries").glob("*.pickle"))
    entries[0].write_bytes(os.urandom(300))
    entries[1].write_bytes(CACHE_FORMAT)  # truncated after the header
    entries[2].unlink()
    entries[2].mkdir()  # a folder where the entry should be
    _, again = _scan_json(root, cache, tmp_path / "b.json")
    assert _sites(again) == _sites(clean)
    assert not list((cache / "summaries").glob("*.tmp"))


def test_a_key_others_can_read_is_not_used(tmp_path, monkeypatch):
    from dynacheck.sources import trust

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / trust.KEY_NAME).write_bytes(b"k" * trust.KEY_BYTES)
    (state / trust.KEY_NAME).chmod(0o644)
    monkeypatch.setenv(trust.STATE_ENV, str(state))
    assert trust._read_or_create(state) is None
    (state / trust.KEY_NAME).chmod(0o600)
    assert trust._read_or_create(state) == b"k" * trust.KEY_BYTES
    state.chmod(0o770)
    assert trust._read_or_create(state) is None


def test_a_malicious_wheel_runs_nothing_and_writes_nothing_outside_the_cache(tmp_path):
    marker = tmp_path / "PWNED"
    hostile = f"open({str(marker)!r}, 'w').write('ran')\n"
    files = {
        "evilpkg/__init__.py": hostile,
        "evilpkg/model.py": "import subprocess\n" + hostile + "\n\nclass M:\n    def forward(self, x):\n"
                            "        subprocess.run(['id'])\n        return x\n",
        "evil.pth": f"import os; os.system('touch {marker}')\n",
        "evilpkg-1.0.data/scripts/evil": "#!/bin/sh\ntouch " + str(marker) + "\n",
    }
    wheel = builders.make_wheel(tmp_path / "dl", "evilpkg", "1.0", files)
    cache = tmp_path / "cache"
    done = corpus.run_cli("scan", "-t", str(wheel), "-e", "evilpkg.model:M.forward", "--format", "json",
                          "--out", str(tmp_path / "s.json"), "--cache-dir", str(cache))
    assert "Traceback" not in done.stderr and done.returncode == 1
    assert not marker.exists()
    assert [f["rule"] for f in json.loads((tmp_path / "s.json").read_text())["findings"]]
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert written == {"dl", "cache", "s.json"}


@pytest.mark.parametrize("member", ["../evil.py", "/abs/evil.py", "evilpkg/../../evil.py", "..\\evil.py"])
def test_zip_slip_in_a_planted_wheel_is_refused_in_one_sentence(tmp_path, member):
    wheel = builders.make_wheel(tmp_path / "dl", "evilpkg", "1.0", {"evilpkg/__init__.py": ""},
                                extra_members={member: "x = 1\n"})
    done = corpus.run_cli("scan", "-t", str(wheel), "-e", "evilpkg:f", "--cache-dir", str(tmp_path / "c"))
    assert done.returncode == 2 and "unsafe member path" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "evil.py").exists()


def test_a_zip_bomb_stops_at_the_limit_with_one_sentence(tmp_path, monkeypatch):
    from dynacheck.sources import wheel as wheel_module

    monkeypatch.setattr(wheel_module, "MAX_MEMBER_BYTES", 2 * 1024 * 1024)
    bomb = tmp_path / "dl" / "bombpkg-1.0-py3-none-any.whl"
    bomb.parent.mkdir()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bombpkg/__init__.py", "")
        with archive.open("bombpkg/big.py", "w", force_zip64=True) as member:
            for _ in range(8):
                member.write(b"#" * (1 << 20))
        archive.writestr("bombpkg-1.0.dist-info/METADATA", "Name: bombpkg\nVersion: 1.0\n")
    assert bomb.stat().st_size < 200_000
    with pytest.raises(UserError, match="zip bomb"):
        resolve_target(str(bomb), cache_dir=tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache" / "trees").iterdir()]


def test_a_downloaded_wheel_replaced_in_the_cache_is_refused(tmp_path):
    pip = builders.FakePip({"tinypkg==1.0": ("1.0", {"tinypkg/__init__.py": "def run():\n    return 1\n"})})
    cache = tmp_path / "cache"
    first = resolve_target("tinypkg==1.0", cache_dir=cache, pip=pip)
    (wheel,) = (cache / "wheels").glob("*.whl")
    builders.make_wheel(tmp_path / "evil", "tinypkg", "1.0", {"tinypkg/__init__.py": "def run():\n    return 2\n"})
    os.replace(next((tmp_path / "evil").glob("*.whl")), wheel)
    import shutil

    shutil.rmtree(first.root)  # the tree is rebuilt from the wheel, which must be checked first
    with pytest.raises(UserError, match="sha256 recorded"):
        resolve_target("tinypkg==1.0", cache_dir=cache, pip=pip, offline=True)


def test_a_tampered_scan_file_reads_no_host_file_into_the_report(tmp_path, monkeypatch):
    secret = tmp_path / "outside" / "etc"
    secret.mkdir(parents=True)
    (secret / "passwd").write_text("root:x:0:0:SECRET-LINE:/root:/bin/bash\n")
    (secret / "shadow.py").write_text("SECRET_PY = 'SECRET-PY-LINE'\n")
    scan = _sample_scan()
    for target in scan["targets"]:
        target["root"] = "/"
    scan["targets"].append({"spec": "/", "name": "host", "version": "", "root": str(tmp_path / "outside"),
                            "kind": "folder"})
    hop = scan["findings"][0]["chain"][0]
    scan["findings"][0]["chain"] = [dict(hop, file=f, line=1) for f in (
        "etc/passwd", str(secret / "passwd"), "../../../../../../etc/passwd", "etc/shadow.py")]
    path = tmp_path / "work" / "scan.json"
    path.parent.mkdir()
    path.write_text(json.dumps(scan))
    monkeypatch.chdir(path.parent)  # the folder the user works in does not hold the secrets
    out = tmp_path / "r.html"
    done = corpus.run_cli("report", "--scan", str(path), "--format", "html", "--out", str(out), cwd=path.parent)
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "SECRET-LINE" not in page and "SECRET-PY-LINE" not in page and "root:x:0" not in page


def _sample_scan() -> dict:
    sys.path.insert(0, str(FIXTURES / "report"))
    import report_samples

    from dynacheck.report import render

    return json.loads(render(report_samples.flagship_scan(), "json"))


HOSTILE_PLACES = [
    'flashinfer.x"); import os; os.system("touch {m}"); ("',
    "flashinfer.x\nimport os; os.system('touch {m}')\n#",
    "flashinfer.x')\nimport os\nos.system('touch {m}')\n('",
    'a.b\\"""\nimport os; os.system("touch {m}")\n"""',
]


def test_fix_emit_from_a_tampered_scan_builds_inert_code(tmp_path):
    marker = tmp_path / "PWNED"
    scan = _sample_scan()
    finding = scan["findings"][0]
    fixes = [dict(finding["fixes"][0], kind=kind, at=place.format(m=marker), sound=True,
                  summary=place.format(m=marker))
             for place in HOSTILE_PLACES for kind in ("custom_op", "hoist", "assume_constant_result", "guard")]
    scan["findings"] = [dict(finding, fixes=[fix], rule=f'DC001"\n{fix["at"]}') for fix in fixes]
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(scan))
    module = tmp_path / "dynacheck_patch.py"
    done = corpus.run_cli("fix", "--emit", str(module), "--scan", str(path))
    assert "Traceback" not in done.stderr
    if done.returncode == 0:
        source = module.read_text()
        assert "os.system" not in source.split('"""', 2)[2]  # nothing after the docstring mentions it
        run = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({str(module)!r})"],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
    else:
        assert done.returncode == 2
    assert not marker.exists()


@pytest.mark.slow
def test_two_scans_of_one_wheel_at_once_on_a_fresh_cache_agree(tmp_path):
    files = {"manypkg/__init__.py": ""}
    imports = "".join(f"from manypkg import m{i}\n" for i in range(150))
    calls = "".join(f"        m{i}.f(x)\n" for i in range(150))
    files["manypkg/model.py"] = f"{imports}\n\nclass M:\n    def forward(self, x):\n{calls}        return x\n"
    for i in range(150):
        files[f"manypkg/m{i}.py"] = "import subprocess\n\n\ndef f(x):\n    subprocess.run(['nvcc'])\n" + "# pad\n" * 400
    wheel = builders.make_wheel(tmp_path / "dl", "manypkg", "1.0", files)
    cache = tmp_path / "shared-cache"
    results: dict[int, subprocess.CompletedProcess] = {}

    def scan(number: int) -> None:
        results[number] = corpus.run_cli("scan", "-t", str(wheel), "-e", "manypkg.model:M.forward", "--format",
                                         "json", "--out", str(tmp_path / f"{number}.json"), "--cache-dir", str(cache),
                                         timeout=300)

    threads = [threading.Thread(target=scan, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all("Traceback" not in r.stderr and r.returncode == 1 for r in results.values()), results
    first, second = (json.loads((tmp_path / f"{n}.json").read_text()) for n in range(2))
    assert len(first["findings"]) == 150
    assert _sites(first) == _sites(second)


def test_a_tree_another_scan_built_meanwhile_is_kept_not_replaced(tmp_path):
    """The race of two scans, made deterministic: a second scan finishes unpacking while the first
    is still at it; the first must keep the tree the second is already reading."""
    wheel = builders.make_wheel(tmp_path / "dl", "racepkg", "1.0",
                                {"racepkg/__init__.py": "", "racepkg/a.py": "X = 1\n", "racepkg/b.py": "Y = 2\n"})
    cache = tmp_path / "cache"
    seen: dict[str, object] = {}

    def progress(label: str, done: int, total: int) -> None:
        if done == 1 and "inode" not in seen:
            seen["inode"] = 0
            root = Path(resolve_target(str(wheel), cache_dir=cache).root)  # the other scan
            seen["root"], seen["inode"] = root, (root / "racepkg" / "a.py").stat().st_ino

    root = Path(resolve_target(str(wheel), cache_dir=cache, progress=progress).root)
    assert root == seen["root"]
    assert (root / "racepkg" / "a.py").stat().st_ino == seen["inode"]  # same files: never swapped under a reader
    assert [p.name for p in root.parent.iterdir()] == [root.name]  # our copy was dropped, nothing left over


def test_a_cache_entry_is_written_whole_and_a_planted_temporary_name_is_not_followed(tmp_path):
    """static/cache.write_replacing names its temporary file by the process id: a file or a link
    planted at that name is neither opened nor overwritten (O_EXCL | O_NOFOLLOW); the entry is still
    written, under a random name instead."""
    from dynacheck.static.cache import write_replacing

    folder = tmp_path / "summaries"
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    planted = folder / f".entry.pickle.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    assert write_replacing(str(folder), "entry.pickle", b"payload")
    assert (folder / "entry.pickle").read_bytes() == b"payload"
    assert victim.read_text() == "keep me" and planted.is_symlink()
    assert write_replacing(str(folder), "entry.pickle", b"second")  # replaced whole
    assert (folder / "entry.pickle").read_bytes() == b"second"
    assert sorted(p.name for p in folder.iterdir()) == sorted(["entry.pickle", planted.name])
    assert not write_replacing(str(tmp_path / "missing"), "entry.pickle", b"x")  # no folder: False, no raise

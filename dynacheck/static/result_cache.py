"""A re-scan of unchanged inputs, answered from the cache.

CI runs the same gate on every pull request while the dependencies stay pinned, and a reviewer
re-renders one scan as terminal, JSON and HTML: the walk would find the same thing each time. The
key covers everything the answer depends on: the scanned trees (every file's path, size and
modification time, and the bytes of the files the last walk read), the entries, the deployment,
the rules and presets shipped with dynacheck, dynacheck's own code and torch's version. A change
to any of them is a new key. Entries live in the signed summary cache, so a tampered entry is
rebuilt, never trusted.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

from dynacheck import __version__
from dynacheck.catalog import rules_folder
from dynacheck.model import ScanResult, ScanStats

_PACKAGE = Path(__file__).resolve().parent.parent  # dynacheck/: code, rules, presets


def inputs_key(targets: Sequence[Any], entries: Sequence[str], preset: str | None, spec: Any,
               fullgraph: bool, files: Sequence[Path], torch_version: str, entry_defaults: bool = False) -> str:
    """The inputs a scan's answer depends on, hashed (the loaded files' bytes are checked apart)."""
    digest = hashlib.sha256()
    for part in (__version__, torch_version, repr(tuple(entries)), repr(preset), repr(spec), repr(fullgraph),
                 repr(entry_defaults),
                 repr([(t.spec, t.root, t.version) for t in targets])):
        digest.update(part.encode() + b"\0")
    for path in sorted(map(str, files)):  # strings: sorting and stating 1,800 Paths took twice as long
        _stat_into(digest, path)
    for path in _own_files():
        _stat_into(digest, path)
    return digest.hexdigest()[:40]


@functools.lru_cache(maxsize=1)
def _own_files() -> tuple[str, ...]:
    """dynacheck's code, presets and rules (a checkout's rules/ lies beside the package), listed once
    per process; their sizes and times are read at every key."""
    package = [str(p) for p in _PACKAGE.rglob("*")
               if p.suffix in (".py", ".toml", ".json") and "__pycache__" not in p.parts]
    return tuple(sorted(package)) + tuple(sorted(map(str, rules_folder().glob("*.toml"))))


def spec_files(spec: Any) -> list[Path]:
    """Files a deployment reads from outside the trees: the model config (a file or a checkpoint
    folder's JSON files) and a framework-facts file."""
    out: list[Path] = []
    for value in (getattr(spec, "model_config", None), getattr(spec, "framework", None)):
        if value:
            path = Path(value)
            out.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return out


def _stat_into(digest, path: str) -> None:
    try:
        info = os.stat(path)
    except OSError:
        digest.update(f"{path}\0missing\0".encode())
        return
    digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())


def _contents(paths: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        try:
            digest.update(Path(path).read_bytes())
        except OSError:
            digest.update(b"\0missing\0")
        digest.update(path.encode() + b"\0")
    return digest.hexdigest()


def load(cache, key: str, seconds: float) -> ScanResult | None:
    """The stored answer for `key`, when the files it read still hold the same bytes."""
    if cache is None or getattr(cache, "folder", None) is None:
        return None
    stored = cache.load_blob(f"scan-result\0{key}")
    if not isinstance(stored, dict) or not isinstance(stored.get("result"), dict):
        return None
    read = stored.get("read", [])
    if not isinstance(read, list) or stored.get("contents") != _contents(read):
        return None
    try:
        result = ScanResult.from_dict(stored["result"])
    except (TypeError, ValueError, KeyError):
        return None
    stats = result.stats or ScanStats()
    result.stats = ScanStats(files_in_trees=stats.files_in_trees, files_parsed=0, cache_hits=0,
                             functions_visited=stats.functions_visited, seconds=round(seconds, 3),
                             reused=True)
    return result


def store(cache, key: str, result: ScanResult, read: Sequence[str]) -> None:
    if cache is None or getattr(cache, "folder", None) is None:
        return
    read = sorted(read)
    cache.store_blob(f"scan-result\0{key}", {"result": result.to_dict(), "read": read, "contents": _contents(read)})

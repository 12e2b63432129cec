"""Benchmark: how much of each file the flagship scan needs, and how much the skeleton parses at once.

Runs the GLM-5 preset scan cold, records which top-level definitions the walk looks up (through the
deferred-body dictionaries of lazy_bodies.py), and compares byte counts over the files it loaded:
the skeleton libcst parses at once, and the top-level definitions (plus module-level code) the scan
asked for. These are the figures the lazy_bodies.py docstring quotes.

    python bench/skeleton_share.py [--write bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
from pathlib import Path

from dynacheck.sources.resolve import resolve_target
from dynacheck.static import lazy_bodies
from dynacheck.static.scan import scan_targets
from scan_bench import _replace_section  # bench/ is this script's folder

SPECS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
COMMAND = "python bench/skeleton_share.py --write bench/RESULTS.md"
SECTION = "## Lazy bodies: what the flagship scan parses at once and what it needs"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    asked: dict[str, set[str]] = {}
    original = lazy_bodies.Defs.get

    def recording_get(self, key, default=None):
        if isinstance(key, str):
            asked.setdefault(self._owner.path, set()).add(lazy_bodies.top_name(key))
        return original(self, key, default)

    lazy_bodies.Defs.get = recording_get
    try:
        targets = [resolve_target(spec, offline=True) for spec in SPECS]
        observer: dict = {}
        with tempfile.TemporaryDirectory() as cache:
            scan_targets(targets, [], "glm5", cache_dir=Path(cache), observer=observer)
    finally:
        lazy_bodies.Defs.get = original
    total = skeleton = needed = 0
    server_args = (0, 0)
    for path in observer["parsed_files"]:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(source)
        text, _ = lazy_bodies.skeleton(source, tree)
        lines = source.splitlines(keepends=True)
        definitions = 0
        used = 0
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                size = sum(len(line) for line in lines[lazy_bodies._first_line(stmt) - 1:stmt.end_lineno])
                definitions += size
                used += size if stmt.name in asked.get(path, ()) else 0
        total += len(source)
        skeleton += len(text)
        needed += len(source) - definitions + used
        if path.endswith("sglang/srt/server_args.py"):
            server_args = (len(source) - definitions + used, len(source))
    rows = [
        SECTION, "",
        f"Command: `{COMMAND}` (one cold GLM-5 preset scan, sglang 0.5.9 + flashinfer-python 0.6.3)", "",
        "| measure | value |", "| --- | --- |",
        f"| files the scan loaded | {len(observer['parsed_files'])} ({total / 1e6:.2f} MB) |",
        f"| parsed at once (the skeleton) | **{100 * skeleton / total:.0f} %** of the bytes |",
        f"| needed: module-level code and the top-level definitions the walk looked up | {100 * needed / total:.0f} % |",
        f"| of server_args.py | {server_args[0] / 1e3:.0f} KB of {server_args[1] / 1e3:.0f} KB |", "",
    ]
    text = "\n".join(rows)
    print(text)
    if args.write:
        _replace_section(args.write, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

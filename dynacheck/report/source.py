"""A few lines of source around a hop, read at render time from the scanned trees.

Only files inside a target's root are read (a scan file naming `/etc/passwd` or `../../x` gets the
stored code line, nothing more), each file once per render, and never more than a small window, so
the report stays small and never leaks more than the chain needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dynacheck.model import ScanResult

CONTEXT = 3  # lines either side: at most 7 lines per hop
MAX_LINE = 240  # characters kept of one source line
MAX_FILE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class SourceLine:
    number: int
    text: str
    marked: bool


class SourceReader:
    """Reads windows of source from the scan's target roots, caching each file for one render."""

    def __init__(self, scan: ScanResult | None) -> None:
        targets = scan.targets if scan else ()
        self._roots_by_package = {t.name: Path(t.root) for t in targets if t.root}
        self._roots = [Path(t.root) for t in targets if t.root]
        self._lines: dict[Path, list[str] | None] = {}

    def window(self, file: str, line: int, package: str = "", code: str = "") -> list[SourceLine]:
        """Lines around `line`, the line itself marked; just the stored `code` when the file is not there."""
        lines = self._read(file, package)
        if lines is None or not 1 <= line <= len(lines):
            return [SourceLine(line, _clip(code), True)] if code else []
        first = max(1, line - CONTEXT)
        last = min(len(lines), line + CONTEXT)
        return [SourceLine(n, _clip(lines[n - 1]), n == line) for n in range(first, last + 1)]

    def _read(self, file: str, package: str) -> list[str] | None:
        path = self._locate(file, package)
        if path is None:
            return None
        if path not in self._lines:
            self._lines[path] = _read_lines(path)
        return self._lines[path]

    def _locate(self, file: str, package: str) -> Path | None:
        if not file:
            return None
        roots = [self._roots_by_package[package]] if package in self._roots_by_package else []
        roots += [r for r in self._roots if r not in roots]
        for root in roots:
            candidate = _inside(root, file)
            if candidate is not None and candidate.is_file():
                return candidate
        return None


def _inside(root: Path, file: str) -> Path | None:
    """root/file, only when it stays under root (no absolute paths, no `..` escapes)."""
    try:
        base = root.resolve()
        candidate = (base / file).resolve()
    except (OSError, RuntimeError):
        return None
    if candidate == base or base not in candidate.parents:
        return None
    return candidate


def _read_lines(path: Path) -> list[str] | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def _clip(text: str) -> str:
    text = text.rstrip("\n").expandtabs(4)
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"

"""A few lines of source around a hop, read at render time from the scanned trees.

Only `.py` files inside a target's root are read (a scan file naming `/etc/passwd` or `../../x` gets
the stored code line, nothing more), each file once per render, and never more than a small window,
so the report stays small and never leaks more than the chain needs. A scan read back from a file
does not choose those roots: `local_roots` re-resolves each target on this machine (the unpacked
tree in this user's cache for a wheel; for a folder, the recorded root only when it lies under the
current folder, this interpreter's site-packages, or a `--source-root` the user passed).
"""

from __future__ import annotations

import site
import stat
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from dynacheck.model import ScanResult
from dynacheck.sources.text import read_source

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

    def __init__(self, scan: ScanResult | None, roots: dict[str, Path] | None = None) -> None:
        """`roots` (package -> folder) replaces the scan's own roots when the scan came from a file."""
        if roots is None:
            targets = scan.targets if scan else ()
            roots = {t.name: Path(t.root) for t in targets if t.root}
        self._roots_by_package = dict(roots)
        self._roots = list(dict.fromkeys(roots.values()))
        self._lines: dict[Path, list[str] | None] = {}

    def window(self, file: str, line: int, package: str = "", code: str = "") -> list[SourceLine]:
        """Lines around `line`, the line itself marked; just the stored `code` when the file is not there."""
        lines = self._read(file, package)
        if lines is None or not 1 <= line <= len(lines):
            return [SourceLine(line, _clip(code), True)] if code else []
        first = max(1, line - CONTEXT)
        last = min(len(lines), line + CONTEXT)
        return [SourceLine(n, _clip(lines[n - 1]), n == line) for n in range(first, last + 1)]

    def package_of(self, file: str) -> str:
        """The target distribution whose root holds this file ('' when none does)."""
        for name, root in self._roots_by_package.items():
            candidate = _inside(root, file)
            if candidate is not None and candidate.is_file():
                return name
        return ""

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


def local_roots(scan: ScanResult | None, extra: tuple[Path, ...] = ()) -> dict[str, Path]:
    """The roots a saved scan's targets have on this machine; a root the file names is never taken as is."""
    from dynacheck.sources.cache import default_cache_dir, trees_dir

    if scan is None:
        return {}
    trees = _resolved(trees_dir(default_cache_dir()))
    chosen = [p for p in (_resolved(e) for e in extra) if p]  # the user's explicit word: any kind
    allowed = [p for p in (_resolved(Path.cwd()), *_site_dirs()) if p]
    roots: dict[str, Path] = {}
    for target in scan.targets:
        recorded = _resolved(Path(target.root)) if target.root else None
        if recorded is None or not recorded.is_dir():
            continue
        if target.kind in ("pip", "wheel"):
            ok = trees is not None and trees in recorded.parents
        else:
            ok = _under(recorded, allowed)
        if ok or _under(recorded, chosen):
            roots[target.name] = recorded
    return roots


def _under(path: Path, bases: list[Path]) -> bool:
    return any(path == base or base in path.parents for base in bases)


def _site_dirs() -> list[Path]:
    found = [sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")]
    try:
        found += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:
        pass
    return [p for p in (_resolved(Path(f)) for f in found if f) if p]


def _resolved(path: Path) -> Path | None:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return None


def _inside(root: Path, file: str) -> Path | None:
    """root/file, only a `.py` file that stays under root (no absolute paths, no `..` escapes)."""
    try:
        base = root.resolve()
        candidate = (base / file).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if candidate == base or base not in candidate.parents or candidate.suffix not in (".py", ".pyi"):
        return None
    return candidate


def _read_lines(path: Path) -> list[str] | None:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        return read_source(path).splitlines()
    except (OSError, ValueError):
        return None


def _clip(text: str) -> str:
    text = text.rstrip("\n").expandtabs(4)
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


class SourcePool:
    """Each distinct source window once per report, referred to by id from every hop that shows it.

    Chains share most of their hops (every chain starts at the same forward), so a flagship scan's
    ~5,000 hops need only ~300 windows; the page clones a window into a hop when it is opened.
    """

    def __init__(self, reader: SourceReader) -> None:
        self._reader = reader
        self._ids: dict[tuple[str, int, str, str], str] = {}
        self.windows: list[tuple[str, list[SourceLine]]] = []

    def package_of(self, file: str) -> str:
        return self._reader.package_of(file)

    def ref(self, file: str, line: int, package: str = "", code: str = "") -> str:
        """The id of the window around file:line ('' when there is nothing to show)."""
        key = (file, line, package, code)
        if key not in self._ids:
            lines = self._reader.window(file, line, package, code)
            window_id = f"src{len(self.windows) + 1}" if lines else ""
            if lines:
                self.windows.append((window_id, lines))
            self._ids[key] = window_id
        return self._ids[key]

"""Map dotted module names to files in the resolved targets and back, without parsing anything.

Python's own precedence is kept within a root: a package (``a/__init__.py``) before a module
(``a.py``) before a namespace portion (a folder without ``__init__.py``). Across targets the
first target that provides a module wins. Directory listings are read once and cached.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dynacheck.model import Target
from dynacheck.sources.folder import folder_packages
from dynacheck.sources.installed import installed_packages

_SKIPPED_DIRS = frozenset({"__pycache__"})


def target_packages(target: Target) -> tuple[str, ...]:
    """Top-level names a target is limited to; empty means everything importable under its root.

    Installed distributions share site-packages with others, and a folder that is a package is
    scanned from its parent, so both are limited to their own top-level names.
    """
    declared = getattr(target, "packages", ())
    if declared:
        return tuple(declared)
    if target.kind == "installed":
        return installed_packages(target)
    if target.kind == "folder":
        return folder_packages(target)
    return ()


@dataclass(frozen=True)
class _Listing:
    modules: frozenset[str]  # stems of the .py files in a folder
    folders: frozenset[str]  # importable subfolder names
    has_init: bool
    error: str = ""  # why the folder could not be listed ("" when it could, or does not exist)


@dataclass(frozen=True)
class _Root:
    target: Target
    path: Path
    text: str  # the root as an absolute string, with a trailing separator
    packages: frozenset[str]  # empty: not limited

    def allows(self, top: str) -> bool:
        return not self.packages or top in self.packages


class ModuleLocator:
    """Where each module of the targets lives; cheap to build, caches what it has listed."""

    def __init__(self, targets: Sequence[Target]) -> None:
        self.targets = tuple(targets)
        self._roots = tuple(_make_root(t) for t in self.targets)
        self._listings: dict[str, _Listing] = {}
        self._found: dict[str, tuple[Path, _Root] | None] = {}
        self.unreadable: dict[str, str] = {}  # folder -> why it could not be listed (said as a problem)

    def find(self, module: str) -> Path | None:
        """The file of ``module`` (``a/b.py`` or ``a/b/__init__.py``), its folder for a namespace
        package, or None when no target provides it."""
        hit = self._lookup(module)
        return hit[0] if hit is not None else None

    def is_package(self, module: str) -> bool:
        path = self.find(module)
        return path is not None and (path.name == "__init__.py" or path.is_dir())

    def module_name_of(self, path: Path | str) -> str | None:
        """The dotted name of a file or package folder; None when no target holds it."""
        located = self._locate(path)
        if located is None:
            return None
        parts = list(located[1])
        if parts and parts[-1] == "__init__.py":
            parts.pop()
        elif parts and parts[-1].endswith(".py"):
            parts[-1] = parts[-1][: -len(".py")]
        return ".".join(parts)

    def target_of(self, path: Path | str) -> Target | None:
        located = self._locate(path)
        return located[0].target if located is not None else None

    def display_path(self, path: Path | str) -> str:
        """The path relative to its target root (``flashinfer/jit/cpp_ext.py``), else as given."""
        located = self._locate(path)
        return "/".join(located[1]) if located is not None else str(path)

    def top_level_names(self) -> list[str]:
        """Top-level module names the targets provide, first target first."""
        names: dict[str, None] = {}
        for root in self._roots:
            for name in self._top_levels(root):
                names.setdefault(name, None)
        return list(names)

    def iter_files(self) -> Iterator[Path]:
        """Every importable ``.py`` file under the targets' top-level packages, each module once."""
        seen: set[str] = set()
        for root in self._roots:
            for top in self._top_levels(root):
                for relative in _walk_modules(root.path, top):
                    key = "/".join(relative)
                    if key not in seen:
                        seen.add(key)
                        yield root.path.joinpath(*relative)

    def _lookup(self, module: str) -> tuple[Path, _Root] | None:
        if module in self._found:
            return self._found[module]
        parts = module.split(".")
        hit = None
        if all(part.isidentifier() for part in parts):
            hit = self._find_file(parts) or self._find_namespace(parts)
        self._found[module] = hit
        return hit

    def _find_file(self, parts: list[str]) -> tuple[Path, _Root] | None:
        for root in self._roots:
            if not root.allows(parts[0]):
                continue
            folder = self._walk_folders(root.path, parts[:-1])
            if folder is None:
                continue
            listing = self._listing(folder)
            last = parts[-1]
            if last in listing.folders and self._listing(folder / last).has_init:
                return folder / last / "__init__.py", root
            if last in listing.modules:
                return folder / f"{last}.py", root
        return None

    def _find_namespace(self, parts: list[str]) -> tuple[Path, _Root] | None:
        for root in self._roots:
            if root.allows(parts[0]):
                folder = self._walk_folders(root.path, parts)
                if folder is not None:
                    return folder, root
        return None

    def _walk_folders(self, base: Path, parts: list[str]) -> Path | None:
        folder = base
        for part in parts:
            if part not in self._listing(folder).folders:
                return None
            folder = folder / part
        return folder

    def _listing(self, folder: Path) -> _Listing:
        key = str(folder)
        listing = self._listings.get(key)
        if listing is None:
            listing = self._listings[key] = _list_folder(key)
            if listing.error:
                self.unreadable[key] = listing.error
        return listing

    def _top_levels(self, root: _Root) -> list[str]:
        listing = self._listing(root.path)
        if root.packages:
            return [p for p in root.packages if p in listing.folders or p in listing.modules]
        names = [f for f in sorted(listing.folders) if self._holds_python(root.path / f)]
        names += sorted(m for m in listing.modules if m not in listing.folders)
        return names

    def _holds_python(self, folder: Path, depth: int = 4) -> bool:
        """A package, or a namespace package with a ``.py`` file within ``depth`` folders."""
        listing = self._listing(folder)
        if listing.has_init or listing.modules:
            return True
        return depth > 1 and any(self._holds_python(folder / sub, depth - 1) for sub in listing.folders)

    def _locate(self, path: Path | str) -> tuple[_Root, tuple[str, ...]] | None:
        """(root, parts relative to it) for the longest target root holding ``path``."""
        for text in _path_texts(path):
            best: tuple[_Root, tuple[str, ...]] | None = None
            for root in self._roots:
                if not text.startswith(root.text):
                    continue
                parts = tuple(p for p in text[len(root.text) :].split(os.sep) if p)
                if parts and root.allows(parts[0].removesuffix(".py")):
                    if best is None or len(root.text) > len(best[0].text):
                        best = (root, parts)
            if best is not None:
                return best
        return None


def _make_root(target: Target) -> _Root:
    path = Path(target.root).expanduser().resolve()
    return _Root(target, path, os.path.join(str(path), ""), frozenset(target_packages(target)))


def _path_texts(path: Path | str) -> Iterator[str]:
    """The path as given (made absolute), then with symlinks resolved if that differs."""
    given = os.path.abspath(os.fspath(path))
    yield given
    resolved = os.path.realpath(given)
    if resolved != given:
        yield resolved


def _list_folder(folder: str) -> _Listing:
    modules: set[str] = set()
    folders: set[str] = set()
    has_init = False
    error = ""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        entries = []
    except OSError as exc:
        entries, error = [], exc.strerror or str(exc)
    for entry in entries:
        name = entry.name
        try:
            if name.endswith(".py") and entry.is_file():
                stem = name[: -len(".py")]
                if stem == "__init__":
                    has_init = True
                elif stem.isidentifier():
                    modules.add(stem)
            elif entry.is_dir() and name.isidentifier() and name not in _SKIPPED_DIRS:
                folders.add(name)
        except OSError:
            continue
    return _Listing(frozenset(modules), frozenset(folders), has_init, error)


def _walk_modules(base: Path, top: str) -> Iterator[tuple[str, ...]]:
    """Relative parts of each importable .py file under ``base/top`` (or ``base/top.py``)."""
    top_dir = base / top
    if not top_dir.is_dir():
        if (base / f"{top}.py").is_file():
            yield (f"{top}.py",)
        return
    for folder, dirs, files in os.walk(top_dir):
        dirs[:] = sorted(d for d in dirs if d.isidentifier() and d not in _SKIPPED_DIRS)
        relative = Path(folder).relative_to(base).parts
        for name in sorted(files):
            if name.endswith(".py") and (name == "__init__.py" or name[:-3].isidentifier()):
                yield (*relative, name)

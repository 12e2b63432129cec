"""Modules loaded on demand, module-level names, classes and their hierarchy.

Nothing is parsed until the walk asks for it; the subclass search reads class headers with a
regular expression first and parses only the files that name the base.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Protocol

from dynacheck.model import Problem
from dynacheck.static.cache import SummaryCache
from dynacheck.static.summary import Binding, ClassSummary, FunctionSummary, ModuleSummary
from dynacheck.static.value_types import BUILTINS

MAX_FILE_BYTES = 4_000_000  # larger files are generated tables, not code Dynamo traces


class Locator(Protocol):
    def find(self, module: str) -> Path | None: ...
    def is_package(self, module: str) -> bool: ...
    def iter_files(self) -> Iterable[Path]: ...
    def module_name_of(self, path: Path) -> str | None: ...


_CLASS_HEADER = re.compile(r"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.MULTILINE)


class Index:
    def __init__(self, locator: Locator, cache: SummaryCache, problems: list[Problem]) -> None:
        self.locator = locator
        self.cache = cache
        self.problems = problems
        self._modules: dict[str, ModuleSummary | None] = {}
        self._headers: dict[str, set[str]] | None = None
        self._subclasses: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self.prefetch = None  # prefetch.Prefetch of a single scan: a second core summarizes ahead

    # ----- modules -----------------------------------------------------------------------------

    def module(self, name: str) -> ModuleSummary | None:
        if name in self._modules:
            return self._modules[name]
        self._modules[name] = None  # guards re-entry while loading
        path = self.locator.find(name)
        if path is not None and path.is_dir():  # a namespace package: a module with no code of its own
            summary: ModuleSummary | None = ModuleSummary(module=name, path=str(path), is_package=True)
        else:
            summary = self._load(name, path) if path is not None else None
        self._modules[name] = summary
        return summary

    def has_module(self, name: str) -> bool:
        return name in self._modules and self._modules[name] is not None or self.locator.find(name) is not None

    def loaded(self) -> list[ModuleSummary]:
        return [m for m in self._modules.values() if m is not None]

    def looked_up(self) -> dict[str, ModuleSummary | None]:
        """Every module asked for, None for those not found or not read (engine_store.py keeps them)."""
        return dict(self._modules)

    def install(self, modules: dict[str, ModuleSummary | None], keys: dict[str, str]) -> None:
        """Modules summarized in another process from files whose bytes still give these content keys
        (SummaryCache.keys)."""
        self._modules.update(modules)
        self.cache.keys.update(keys)

    def _load(self, name: str, path: Path) -> ModuleSummary | None:
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                self.problems.append(Problem("too_large", str(path), f"{size // 1_000_000} MB, over the {MAX_FILE_BYTES // 1_000_000} MB limit: skipped"))
                return None
            data = path.read_bytes()
        except OSError as exc:
            self.problems.append(Problem("unreadable", str(path), exc.strerror or str(exc)))
            return None
        if self.prefetch is None:
            summary = self.cache.summary(path, name, self.locator.is_package(name), data)
        else:
            summary = self.cache.summary(path, name, self.locator.is_package(name), data, self.prefetch)
            self.prefetch.after_module(summary)
        if summary.error:
            kind = ("too_deep" if summary.error.startswith("NestingError")
                    else "too_large" if summary.error.startswith("LineTooLong") else "syntax_error")
            self.problems.append(Problem(kind, str(path), summary.error))
        return summary

    # ----- names -------------------------------------------------------------------------------

    def split_module(self, dotted: str) -> tuple[str, list[str]] | None:
        """The longest prefix of `dotted` that is a module in the trees, and the attribute path after it."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if self.has_module(name):
                return name, parts[cut:]
        return None

    def global_bindings(self, module: str, name: str, _seen: frozenset[str] = frozenset()) -> list[Binding]:
        summary = self.module(module)
        if summary is None:
            return []
        found = summary.bindings.get(name)
        if found:
            return found
        return self._star_bindings(summary, name, _seen | {module})

    def _star_bindings(self, summary: ModuleSummary, name: str, seen: frozenset[str]) -> list[Binding]:
        """`from m import *`: the name as an import of `m.name` when m exports it (its `__all__`, else its
        public names), so it resolves in m's own namespace; chained, re-exported and cyclic stars too.

        A star from a module outside the trees (stdlib, torch) supplies any otherwise unbound name
        that is not a builtin, when it is the only such star: the best reading without importing it.
        """
        external = []
        for star in summary.star_imports:
            if star in seen:
                continue
            source = self.module(star)
            if source is None:
                external.append(star)
                continue
            exported = name in source.exports if source.exports is not None else not name.startswith("_")
            if exported and (self.global_bindings(star, name, seen) or self.has_module(f"{star}.{name}")):
                return [Binding("import", f"{star}.{name}", 0, True)]
        if len(external) == 1 and name not in BUILTINS and not name.startswith("_"):
            return [Binding("import", f"{external[0]}.{name}", 0, True)]
        return []

    def defining_module(self, module: str, name: str, _seen: frozenset[str] = frozenset()) -> str:
        """The module whose own bindings hold `name` (following `from m import *`), else `module`."""
        summary = self.module(module)
        if summary is None or name in summary.bindings:
            return module
        for star in summary.star_imports:
            if star not in _seen and self.global_bindings(star, name, _seen | {module}):
                return self.defining_module(star, name, _seen | {module})
        return module

    def function(self, module: str, qualname: str) -> FunctionSummary | None:
        summary = self.module(module)
        return summary.functions.get(qualname) if summary is not None else None

    def klass(self, module: str, qualname: str) -> ClassSummary | None:
        summary = self.module(module)
        return summary.classes.get(qualname) if summary is not None else None

    # ----- hierarchy ---------------------------------------------------------------------------

    def modules_naming_base(self, base_name: str) -> set[str]:
        """Modules whose source has a class header listing `base_name` among its bases."""
        if self._headers is None:
            key = self.header_key()
            self._headers = self.cache.load_blob(key) if key else None
            if self._headers is None:
                self._headers = self._scan_headers()
                if key:
                    self.cache.store_blob(key, self._headers)
        return self._headers.get(base_name, set())

    def header_key(self) -> str:
        """A cache key for the class-header map when every tree is an unpacked release (immutable)."""
        targets = getattr(self.locator, "targets", ())
        if not targets or any(t.kind not in ("pip", "wheel") for t in targets):
            return ""
        return "headers-" + "|".join(f"{t.name}=={t.version}@{t.root}" for t in targets)

    def _scan_headers(self) -> dict[str, set[str]]:
        headers: dict[str, set[str]] = defaultdict(set)  # base name -> modules
        for path in self.locator.iter_files():
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    continue
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "class " not in text:
                continue
            module = None
            for match in _CLASS_HEADER.finditer(text):
                for base in match.group(2).split(","):
                    base_name = base.strip().rpartition(".")[2].split("[")[0].strip()
                    if base_name and "=" not in base:
                        if module is None:
                            module = self.locator.module_name_of(path)
                            if module is None:
                                break
                        headers[base_name].add(module)
        return dict(headers)

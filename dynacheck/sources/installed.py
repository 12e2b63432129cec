"""Installed distributions as targets, found from their metadata without importing them.

The files a distribution recorded (``dist.files``) name its top-level packages and the folder
holding them. Editable installs record no sources; there the top-level name is looked up with
``importlib.util.find_spec``, which for a top-level name only asks the path finders and runs
none of the package's code.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata as metadata
import importlib.util
from pathlib import Path

from packaging.utils import canonicalize_name

from dynacheck.model import Target

_EDITABLE_PREFIXES = ("__editable__", "_virtualenv", "__pycache__")


def resolve_installed(spec: str) -> Target | None:
    """The target for the installed distribution (or top-level import name) ``spec``, or None."""
    dist = _distribution(spec)
    if dist is None:
        return None
    name = dist.metadata["Name"] or spec
    located = locate_distribution(name)
    if located is None:
        return None
    root, _packages = located
    return Target(spec=spec, name=name, version=dist.version or "", root=str(root), kind="installed")


def installed_packages(target: Target) -> tuple[str, ...]:
    """The top-level names an installed target provides (its root is shared with other dists)."""
    located = locate_distribution(target.name)
    return located[1] if located is not None else ()


def close_installed_names(spec: str, limit: int = 3) -> list[str]:
    """Installed distribution names that look like ``spec``, best first."""
    names = sorted({d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]})
    by_canon = {canonicalize_name(n): n for n in names}
    close = difflib.get_close_matches(canonicalize_name(spec), list(by_canon), n=limit, cutoff=0.6)
    return [by_canon[c] for c in close]


@functools.lru_cache(maxsize=256)
def locate_distribution(name: str) -> tuple[Path, tuple[str, ...]] | None:
    """(root, top-level names) of an installed distribution, or None when no sources are found."""
    dist = _distribution(name)
    if dist is None:
        return None
    recorded = _recorded_top_levels(dist)
    if recorded:
        root = Path(str(dist.locate_file(""))).resolve()
        return root, recorded
    return _locate_by_finder(_declared_top_levels(dist, name))


def _distribution(spec: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(spec)
    except (metadata.PackageNotFoundError, ValueError):
        pass
    if not spec.isidentifier():
        return None
    owners = metadata.packages_distributions().get(spec, [])
    for owner in owners:  # spec is an import name, e.g. flashinfer -> flashinfer-python
        try:
            return metadata.distribution(owner)
        except metadata.PackageNotFoundError:
            continue
    return None


def _recorded_top_levels(dist: metadata.Distribution) -> tuple[str, ...]:
    """Top-level modules whose ``.py`` files sit next to the dist-info folder."""
    names: dict[str, None] = {}
    for file in dist.files or ():
        parts = file.parts
        if not parts or parts[0] in ("..", "") or not file.name.endswith(".py"):
            continue
        top = parts[0].removesuffix(".py") if len(parts) == 1 else parts[0]
        if top.isidentifier() and not top.startswith(_EDITABLE_PREFIXES):
            names[top] = None
    root = Path(str(dist.locate_file("")))
    return tuple(n for n in names if (root / n).is_dir() or (root / f"{n}.py").is_file())


def _declared_top_levels(dist: metadata.Distribution, name: str) -> list[str]:
    declared = (dist.read_text("top_level.txt") or "").split()
    guess = canonicalize_name(name).replace("-", "_")
    return list(dict.fromkeys([*declared, guess]))


def _locate_by_finder(top_levels: list[str]) -> tuple[Path, tuple[str, ...]] | None:
    """Ask the path finders (not the package) where each top-level name lives."""
    found: dict[Path, list[str]] = {}
    for top in top_levels:
        if not top.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            where = Path(list(spec.submodule_search_locations)[0]).resolve().parent
        elif spec.origin and spec.origin not in ("built-in", "frozen"):
            where = Path(spec.origin).resolve().parent
        else:
            continue
        found.setdefault(where, []).append(top)
    if not found:
        return None
    root = max(found, key=lambda r: len(found[r]))
    return root, tuple(found[root])

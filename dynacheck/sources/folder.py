"""Folders as targets: a site-packages-like folder, a repository with a ``src/`` layout, or a package.

The root is the folder that holds the top-level packages. A folder that *is* a package
(has ``__init__.py``) is scanned from its parent, limited to that one package.
"""

from __future__ import annotations

import os
from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.model import Target
from dynacheck.sources.wheel import read_metadata

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def resolve_folder(spec: str, folder: Path) -> Target:
    """Find the root of ``folder`` and name it from its metadata, if it has any."""
    folder = folder.resolve()
    if (folder / "__init__.py").is_file():
        root = folder.parent
    elif _holds_python(folder / "src"):
        root = folder / "src"
    elif _holds_python(folder):
        root = folder
    else:
        raise UserError(
            f"The folder {folder} holds no Python packages or modules.",
            "Pass the folder that holds the top-level package (site-packages, a repository, or its src/).",
        )
    name, version = _name_and_version(folder, root)
    return Target(spec=spec, name=name, version=version, root=str(root), kind="folder")


def folder_packages(target: Target) -> tuple[str, ...]:
    """Top-level names a folder target is limited to: its own name when it is a package, else all."""
    spec_dir = Path(target.spec).expanduser().resolve()
    if spec_dir.parent == Path(target.root).resolve() and (spec_dir / "__init__.py").is_file():
        return (spec_dir.name,)
    return ()


def _holds_python(folder: Path, depth: int = 4) -> bool:
    """A ``.py`` module in ``folder``, or in importable subfolders up to ``depth`` levels down
    (namespace packages nest: ``ns1/ns2/pkg/``); bounded so a huge tree is not walked here."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    try:
        if any(e.name.endswith(".py") and e.is_file() for e in entries):
            return True
        subfolders = [e.path for e in entries if e.name.isidentifier() and e.is_dir()]
    except OSError:
        return False
    return depth > 0 and any(_holds_python(Path(sub), depth - 1) for sub in subfolders[:200])


def _name_and_version(folder: Path, root: Path) -> tuple[str, str]:
    for place in dict.fromkeys((folder, root, root.parent if root.name == "src" else root)):
        found = read_metadata(place) or _pyproject(place / "pyproject.toml")
        if found is not None:
            return found
    return (folder.name, "")


def _pyproject(path: Path) -> tuple[str, str] | None:
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return None
    name = project.get("name")
    if not isinstance(name, str) or not name:
        return None
    version = project.get("version")
    return (name, version if isinstance(version, str) else "")

"""Turn a ``--target SPEC`` into a :class:`~dynacheck.model.Target`: a folder of Python sources.

Kinds, tried in order: an existing folder, an existing ``.whl`` file, a pip requirement with a
version specifier or URL (``sglang==0.5.9``), a bare name (an installed distribution if there is
one, else a pip requirement), and otherwise a UserError with close installed names. Nothing
found is imported or installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.model import Target
from dynacheck.sources.cache import default_cache_dir, wheels_dir
from dynacheck.sources.folder import resolve_folder
from dynacheck.sources.installed import close_installed_names, resolve_installed
from dynacheck.sources.pipspec import (
    NoSuchDistribution,
    PipRunner,
    cached_wheel,
    fetch_wheel,
    parse_requirement,
)
from dynacheck.sources.wheel import Progress, read_metadata, unpack_wheel, wheel_name

_ANY_KIND = "Pass a folder, a wheel file, a pip requirement such as name==1.0, or an installed distribution."


def resolve_target(
    spec: str,
    *,
    cache_dir: Path | None = None,
    offline: bool = False,
    progress: Progress | None = None,
    pip: PipRunner | None = None,
) -> Target:
    """Resolve one target spec; raises UserError with one clear sentence when it names nothing."""
    spec = spec.strip()
    if not spec:
        raise UserError("An empty target was given.", _ANY_KIND)
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    path = Path(spec).expanduser()
    if path.exists() or (spec.endswith(".whl") and not _is_url_requirement(spec)):
        return _resolve_path(spec, path, cache, progress)
    return _resolve_name(spec, cache, offline=offline, progress=progress, pip=pip)


def resolve_targets(specs: Iterable[str], **options) -> list[Target]:
    """Resolve several specs in order (the order decides which target wins a shared module)."""
    return [resolve_target(spec, **options) for spec in specs]


def _resolve_path(spec: str, path: Path, cache: Path, progress: Progress | None) -> Target:
    """A folder or a wheel file the user named by its path."""
    if path.is_dir():
        return resolve_folder(spec, path)
    if spec.endswith(".whl"):
        if not path.is_file():
            raise UserError(
                f"No wheel file {spec}.", "Check the path, or pass a pip requirement such as name==1.0."
            )
        return _from_wheel(spec, path, "wheel", cache, progress)
    raise UserError(
        f"{spec} is a file, not a folder or a wheel.",
        "Pass the folder that holds its top-level package instead.",
    )


def _resolve_name(
    spec: str, cache: Path, *, offline: bool, progress: Progress | None, pip: PipRunner | None
) -> Target:
    """An installed distribution (for a bare name) or a pip requirement, fetched into the cache."""
    requirement = None if _looks_like_path(spec) else parse_requirement(spec)
    bare = spec.isidentifier() or (
        requirement is not None and not (requirement.specifier or requirement.url)
    )
    if bare:
        installed = resolve_installed(spec)
        if installed is not None:
            return installed
    if requirement is None:
        raise _nothing_named(spec)
    if bare and offline and cached_wheel(requirement, wheels_dir(cache)) is None:
        raise _nothing_named(spec, offline=True)
    try:
        wheel = fetch_wheel(
            spec, requirement, wheels_dir(cache), offline=offline, pip=pip, progress=progress
        )
    except NoSuchDistribution as exc:
        if exc.name_unknown and close_installed_names(requirement.name):
            raise UserError(exc.message, _suggestion(requirement.name)) from None
        raise
    return _from_wheel(spec, wheel, "pip", cache, progress)


def _from_wheel(spec: str, wheel: Path, kind: str, cache: Path, progress: Progress | None) -> Target:
    tree = unpack_wheel(wheel.resolve(), cache, progress)
    parsed = wheel_name(wheel)
    name, version = read_metadata(tree) or (parsed.name, str(parsed.version))
    return Target(spec=spec, name=name, version=version, root=str(tree), kind=kind)


def _is_url_requirement(spec: str) -> bool:
    requirement = parse_requirement(spec)
    return requirement is not None and bool(requirement.url)


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or "/" in spec.split("@")[0] or "\\" in spec


def _nothing_named(spec: str, *, offline: bool = False) -> UserError:
    where = " (offline, so the package index was not asked)" if offline else ""
    return UserError(
        f"There is no folder, wheel, installed distribution or pip requirement named {spec}{where}.",
        _suggestion(spec),
    )


def _suggestion(spec: str) -> str:
    close = close_installed_names(spec)
    if close:
        return "Did you mean " + " or ".join(close) + "?"
    return _ANY_KIND

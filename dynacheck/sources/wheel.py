"""Unpack the Python sources of a wheel into the cache, once, refusing unsafe member paths.

Only ``.py`` files and ``*.dist-info/METADATA`` are kept: static analysis reads nothing else, and
skipping headers, kernels and JSON keeps the 40 MB FlashInfer wheel a few MB on disk. Files under
``<name>.data/purelib`` or ``platlib`` land at the root, as an installer would put them.
"""

from __future__ import annotations

import json
import shutil
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from dynacheck.errors import UserError
from dynacheck.sources.cache import build_atomically, trees_dir

# progress(label, done, total): called only when the caller passes one; total 0 = no known end
# (a pip download), else files unpacked so far out of total.
Progress = Callable[[str, int, int], None]

MARKER = ".dynacheck-tree.json"
_LIB_DATA = ("purelib", "platlib")


@dataclass(frozen=True)
class WheelName:
    """What a wheel's file name says: the distribution (canonical) and its version."""

    name: str
    version: Version

    @property
    def tree_name(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}"


def wheel_name(path: Path) -> WheelName:
    """Parse ``name-version-...-tag.whl``; a malformed name is the user's input, so a UserError."""
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise UserError(
            f"{path.name} is not a valid wheel file name ({exc}).",
            "Wheel files are named like name-1.0-py3-none-any.whl.",
        ) from None
    return WheelName(canonicalize_name(name), version)


def unpack_wheel(wheel: Path, cache_dir: Path, progress: Progress | None = None) -> Path:
    """Return ``<cache>/trees/<name>-<version>/`` holding the wheel's sources, unpacking if needed.

    A tree is reused when its marker names the same wheel file (name, size, mtime); otherwise
    it is rebuilt atomically.
    """
    parsed = wheel_name(wheel)
    final = trees_dir(cache_dir) / parsed.tree_name
    stamp = _stamp(wheel)
    if _read_marker(final) == stamp:
        return final

    def build(tmp: Path) -> None:
        _extract_sources(wheel, tmp, progress)
        (tmp / MARKER).write_text(json.dumps(stamp, sort_keys=True), encoding="utf-8")

    return build_atomically(final, build)


def read_metadata(tree: Path) -> tuple[str, str] | None:
    """(Name, Version) from the single ``*.dist-info/METADATA`` in ``tree``; None if absent."""
    found = sorted(tree.glob("*.dist-info/METADATA"))
    if len(found) != 1:
        return None
    try:
        headers = HeaderParser().parsestr(found[0].read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    name, version = headers.get("Name", "").strip(), headers.get("Version", "").strip()
    return (name, version) if name else None


def safe_member_path(member: str) -> PurePosixPath:
    """The relative path a zip member may be written to; raises ValueError for zip-slip names."""
    if not member or member.startswith(("/", "\\")) or "\\" in member:
        raise ValueError(member)
    path = PurePosixPath(member)
    if path.is_absolute() or ".." in path.parts or ":" in path.parts[0]:
        raise ValueError(member)
    return path


def _stamp(wheel: Path) -> dict[str, object]:
    info = wheel.stat()
    return {"wheel": wheel.name, "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _read_marker(tree: Path) -> dict[str, object] | None:
    try:
        return json.loads((tree / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _extract_sources(wheel: Path, dest: Path, progress: Progress | None) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive:
            chosen = _choose_members(wheel, archive.infolist())
            label = f"unpacking {wheel.name}"
            for done, (info, relative) in enumerate(chosen, 1):
                target = dest.joinpath(*relative.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                if progress is not None:
                    progress(label, done, len(chosen))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise UserError(
            f"{wheel} is not a readable wheel ({exc}).",
            "Download it again, e.g. with pip download --no-deps.",
        ) from None


def _choose_members(
    wheel: Path, infos: list[zipfile.ZipInfo]
) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """Every member is checked before anything is written; unsafe names reject the whole wheel."""
    chosen: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
    seen: set[PurePosixPath] = set()
    for info in infos:
        try:
            path = safe_member_path(info.filename)
        except ValueError:
            raise UserError(
                f"{wheel} holds an unsafe member path {info.filename!r}; refusing to unpack it.",
                "The file is damaged or not a genuine wheel; fetch it from the package index again.",
            ) from None
        relative = _install_path(path)
        if relative is None or info.is_dir() or _is_symlink(info) or relative in seen:
            continue
        seen.add(relative)
        chosen.append((info, relative))
    return chosen


def _install_path(path: PurePosixPath) -> PurePosixPath | None:
    """Where a kept member goes in the tree, or None for members static analysis never reads."""
    parts = path.parts
    top = parts[0]
    if top.endswith(".dist-info"):
        return path if len(parts) == 2 and parts[1] == "METADATA" else None
    if top.endswith(".data"):
        if len(parts) < 3 or parts[1] not in _LIB_DATA:
            return None
        path = PurePosixPath(*parts[2:])
    return path if path.suffix == ".py" else None


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


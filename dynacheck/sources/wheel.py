"""Unpack the Python sources of a wheel into the cache, once, refusing unsafe member paths.

Only ``.py`` files and ``*.dist-info/METADATA`` are kept: static analysis reads nothing else, and
skipping headers, kernels and JSON keeps the 40 MB FlashInfer wheel a few MB on disk. Files under
``<name>.data/purelib`` or ``platlib`` land at the root, as an installer would put them.
"""

from __future__ import annotations

import json
import stat
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from dynacheck.errors import UserError
from dynacheck.sources import manifest
from dynacheck.sources.cache import build_atomically, trees_dir

# progress(label, done, total): called only when the caller passes one; total 0 = no known end
# (a pip download), else files unpacked so far out of total.
Progress = Callable[[str, int, int], None]

MARKER = ".dynacheck-tree.json"
_LIB_DATA = ("purelib", "platlib")

# Limits that a genuine wheel never reaches (the largest known trees hold ~5k files and a few MB of
# Python each); a zip bomb or a damaged archive stops at them with one sentence.
MAX_MEMBERS = 200_000
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
MAX_NAME_PART = 255  # bytes in one path component: the common file-system limit
_CHUNK = 1 << 20
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, NotImplementedError,
               RuntimeError, ValueError, OverflowError)


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

    manifest.check(wheel)

    def build(tmp: Path) -> None:
        _extract_sources(wheel, tmp, progress)
        (tmp / MARKER).write_text(json.dumps(stamp, sort_keys=True), encoding="utf-8")

    return build_atomically(final, build, current=lambda tree: _read_marker(tree) == stamp)


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
        value = json.loads((tree / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _extract_sources(wheel: Path, dest: Path, progress: Progress | None) -> None:
    """Write the chosen members, counting real bytes (a header may lie about sizes)."""
    member = ""
    try:
        with zipfile.ZipFile(wheel) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                raise _too_big(wheel, f"holds {len(infos)} members (the limit is {MAX_MEMBERS})")
            chosen = _choose_members(wheel, infos)
            label = f"unpacking {wheel.name}"
            written = 0
            for done, (info, relative) in enumerate(chosen, 1):
                member = info.filename
                target = dest.joinpath(*relative.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "xb") as sink:
                    written += _copy_bounded(source, sink, wheel, member, MAX_TOTAL_BYTES - written)
                if progress is not None:
                    progress(label, done, len(chosen))
    except _ZIP_ERRORS as exc:
        where = f" at member {member!r}" if member else ""
        raise UserError(
            f"{wheel} is not a readable wheel{where} ({_one_line(exc)}).",
            "Download it again, e.g. with pip download --no-deps.",
        ) from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not wheel.is_file():
            raise UserError(f"The wheel {wheel} disappeared while it was unpacked.", "Run the scan again.") from None
        raise UserError(
            f"Cannot unpack member {member!r} of {wheel}: {exc.strerror or exc}.",
            "The wheel is damaged or not a genuine wheel (a member that is both file and folder, or a name "
            "this file system cannot hold); fetch it from the package index again.",
        ) from None


def _copy_bounded(source, sink, wheel: Path, member: str, budget: int) -> int:
    copied = 0
    while chunk := source.read(_CHUNK):
        copied += len(chunk)
        if copied > MAX_MEMBER_BYTES:
            raise _too_big(wheel, f"member {member!r} unpacks to more than {MAX_MEMBER_BYTES >> 20} MiB")
        if copied > budget:
            raise _too_big(wheel, f"unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB of sources")
        sink.write(chunk)
    return copied


def _too_big(wheel: Path, what: str) -> UserError:
    return UserError(f"{wheel} {what}; refusing to unpack it (a zip bomb or a damaged wheel).",
                     "Fetch the wheel from the package index again, or scan an unpacked folder instead.")


def _one_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if "encrypted" in text:
        return "the member is encrypted"
    return text if len(text) <= 200 else text[:197] + "..."


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
        if any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_PART for part in relative.parts):
            raise UserError(
                f"{wheel} holds a member name longer than {MAX_NAME_PART} bytes ({info.filename[:60]!r}...); "
                "refusing to unpack it.",
                "The file is damaged or not a genuine wheel; fetch it from the package index again.",
            )
        if info.file_size > MAX_MEMBER_BYTES:
            raise _too_big(wheel, f"member {info.filename!r} declares {info.file_size} bytes "
                                  f"(the limit is {MAX_MEMBER_BYTES >> 20} MiB)")
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


"""Pip requirements as targets: find a satisfying wheel in the cache, else ``pip download`` it once.

The scanned project is never installed: pip only downloads the wheel (``--no-deps
--only-binary=:all:``). How pip is run is injectable (a ``pip`` callable, or the command in
``$DYNACHECK_PIP``) so tests never touch the network.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from dynacheck.errors import UserError
from dynacheck.sources import manifest
from dynacheck.sources.wheel import Progress, wheel_name

PIP_ENV = "DYNACHECK_PIP"
PIP_TIMEOUT_S = 900

# Words pip (urllib3, requests) prints when the index cannot be reached at all; the readable
# ones first, since the first one found is shown to the user.
_NETWORK_MARKERS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname provided",
    "Network is unreachable",
    "Connection refused",
    "Connection timed out",
    "Failed to establish a new connection",
    "NewConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ProxyError",
    "SSLError",
    "connection broken by",
    "Could not fetch URL",
)


@dataclass(frozen=True)
class PipResult:
    """What a pip run left behind: its exit status and its output."""

    returncode: int
    stdout: str = ""
    stderr: str = ""


class NoSuchDistribution(UserError):
    """pip reached the index and found nothing matching; ``name_unknown`` when no version exists at all."""

    def __init__(self, message: str, hint: str, *, name_unknown: bool) -> None:
        super().__init__(message, hint)
        self.name_unknown = name_unknown


# pip(args) runs ``pip <args>`` and reports the result; args start with "download".
PipRunner = Callable[[Sequence[str]], PipResult]


def pip_command() -> list[str]:
    """``$DYNACHECK_PIP`` split like a shell would, else this interpreter's ``python -m pip``."""
    configured = os.environ.get(PIP_ENV, "").strip()
    return shlex.split(configured) if configured else [sys.executable, "-m", "pip"]


def run_pip(args: Sequence[str]) -> PipResult:
    """The default pip runner: a subprocess with captured output."""
    command = [*pip_command(), *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return PipResult(127, "", f"No module named pip: cannot run {shlex.join(command)}")
    except subprocess.TimeoutExpired:
        return PipResult(124, "", f"ReadTimeoutError: pip ran longer than {PIP_TIMEOUT_S} s")
    return PipResult(done.returncode, done.stdout or "", done.stderr or "")


def parse_requirement(spec: str) -> Requirement | None:
    """The requirement ``spec`` names, or None when it is not one pip would accept."""
    try:
        return Requirement(spec)
    except InvalidRequirement:
        return None


def cached_wheel(requirement: Requirement, wheels: Path) -> Path | None:
    """The newest wheel in ``wheels`` whose name and version satisfy ``requirement``."""
    if requirement.url:
        return None
    wanted = canonicalize_name(requirement.name)
    candidates: dict[Version, Path] = {}
    for path in _wheel_files(wheels):
        try:
            parsed = wheel_name(path)
        except UserError:
            continue
        if parsed.name == wanted:
            candidates.setdefault(parsed.version, path)
    allowed = list(requirement.specifier.filter(candidates))
    return candidates[max(allowed)] if allowed else None


def fetch_wheel(
    spec: str,
    requirement: Requirement,
    cache_wheels: Path,
    *,
    offline: bool,
    pip: PipRunner | None = None,
    progress: Progress | None = None,
) -> Path:
    """A wheel satisfying ``requirement``: from the cache, else downloaded there by pip."""
    hit = cached_wheel(requirement, cache_wheels)
    if hit is not None:
        return hit
    if offline:
        raise UserError(
            f"Cannot fetch {spec}: running offline and {cache_wheels} holds no wheel that matches it.",
            _how_to_fix(spec, cache_wheels),
        )
    cache_wheels.mkdir(parents=True, exist_ok=True)
    runner = pip if pip is not None else run_pip
    if progress is not None:
        progress(f"downloading {spec} with pip", 0, 0)
    result = runner(_download_args(spec, cache_wheels))
    if result.returncode != 0:
        raise _pip_failure(spec, requirement, result, cache_wheels)
    hit = cached_wheel(requirement, cache_wheels)
    if hit is None and requirement.url:  # a URL names no version: take the wheel pip just saved
        hit = _newest_named(requirement.name, cache_wheels)
    if hit is None:
        raise UserError(
            f"pip download finished but left no wheel matching {spec} in {cache_wheels}.",
            _how_to_fix(spec, cache_wheels),
        )
    manifest.record(hit)  # pip checked it against the index's hash: remember what it was
    return hit


def _download_args(spec: str, dest: Path) -> list[str]:
    return [
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
        spec,
    ]


def _newest_named(name: str, wheels: Path) -> Path | None:
    wanted = canonicalize_name(name)
    named = []
    for path in _wheel_files(wheels):
        try:
            if wheel_name(path).name == wanted:
                named.append(path)
        except UserError:
            continue
    return max(named, key=lambda p: p.stat().st_mtime_ns) if named else None


def _wheel_files(wheels: Path) -> list[Path]:
    try:
        return sorted(p for p in wheels.iterdir() if p.suffix == ".whl" and p.is_file())
    except OSError:
        return []


def _how_to_fix(spec: str, wheels: Path) -> str:
    return (
        f"Put the wheel in {wheels} (e.g. `pip download --no-deps --only-binary=:all: "
        f"-d {wheels} {shlex.quote(spec)}` where there is network), or pass a folder or wheel file instead."
    )


def _pip_failure(
    spec: str, requirement: Requirement, result: PipResult, wheels: Path
) -> UserError:
    text = f"{result.stderr}\n{result.stdout}"
    network = next((marker for marker in _NETWORK_MARKERS if marker in text), None)
    if network is not None:
        return UserError(
            f"Cannot fetch {spec}: pip could not reach the package index ({network}).",
            _how_to_fix(spec, wheels),
        )
    if "No module named pip" in text:
        return UserError(
            f"Cannot fetch {spec}: pip is not available ({_last_error(text)}).",
            f"Install pip, set {PIP_ENV} to a pip command, or put the wheel in {wheels}.",
        )
    versions = re.search(r"from versions: ([^)]*)\)", text)
    if versions is not None or "No matching distribution" in text:
        seen = versions.group(1).strip() if versions else "none"
        if seen == "none":
            return NoSuchDistribution(
                f"pip found no such distribution: the package index has no wheel named {requirement.name}.",
                "Check the spelling of the name, or pass a folder, wheel file or installed distribution.",
                name_unknown=True,
            )
        return NoSuchDistribution(
            f"pip found no such distribution: no wheel of {requirement.name} matches {spec} "
            f"(versions on the index: {_shorten_versions(seen)}).",
            "Pick one of those versions, or pass a folder or wheel file instead.",
            name_unknown=False,
        )
    return UserError(
        f"pip download of {spec} failed (exit {result.returncode}): {_last_error(text)}.",
        _how_to_fix(spec, wheels),
    )


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    chosen = (errors or lines or ["no output"])[-1]
    chosen = chosen.removeprefix("ERROR:").strip().rstrip(".")
    return chosen if len(chosen) <= 200 else chosen[:197] + "..."


def _shorten_versions(seen: str, keep: int = 8) -> str:
    versions = [v.strip() for v in seen.split(",") if v.strip()]
    if len(versions) <= keep:
        return ", ".join(versions)
    return "..., " + ", ".join(versions[-keep:])

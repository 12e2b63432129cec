"""What dynacheck downloaded into its wheel folder, and the sha256 each file had then.

pip checks a download against the hash the index publishes; the manifest keeps that check
meaningful afterwards: a wheel that dynacheck fetched is unpacked only while its bytes still hash
to what was recorded. The manifest lives beside the wheels (``.dynacheck-manifest.json``) and is
signed with this user's key (``trust.py``), so a shared or restored cache cannot vouch for a
replaced wheel by editing it; an unsigned or damaged manifest is ignored and rewritten.
A wheel the user put in the folder by hand has no entry and is taken as given (documented in
docs/cache.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.sources.trust import sign, signing_key, verify

MANIFEST = ".dynacheck-manifest.json"
_FORMAT = 1
_MAX_BYTES = 4 * 1024 * 1024


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def recorded(wheels: Path) -> dict[str, str]:
    """file name -> sha256 for the wheels dynacheck downloaded; {} when there is no trusted manifest."""
    key = signing_key()
    path = wheels / MANIFEST
    try:
        if key is None or not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return {}
    entries, signature = data.get("wheels"), data.get("signature")
    if not isinstance(entries, dict) or not isinstance(signature, str):
        return {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
        return {}
    try:
        if not verify(key, _canonical(entries), bytes.fromhex(signature)):
            return {}
    except ValueError:
        return {}
    return entries


def record(wheel: Path) -> None:
    """Add the wheel's current hash to the manifest (best effort: an unwritable cache just skips it)."""
    key = signing_key()
    if key is None:
        return
    entries = recorded(wheel.parent)
    try:
        entries[wheel.name] = file_sha256(wheel)
        payload = {"format": _FORMAT, "wheels": entries, "signature": sign(key, _canonical(entries)).hex()}
        fd, tmp = tempfile.mkstemp(dir=wheel.parent, prefix=".manifest-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=1, sort_keys=True)
        os.replace(tmp, wheel.parent / MANIFEST)
    except OSError:
        return


def check(wheel: Path) -> None:
    """Refuse a wheel dynacheck downloaded whose bytes changed since (replaced or planted in the cache)."""
    expected = recorded(wheel.parent).get(wheel.name)
    if expected is None:
        return
    try:
        actual = file_sha256(wheel)
    except OSError as exc:
        raise UserError(f"Cannot read the wheel {wheel}: {exc.strerror or exc}.", "Check its permissions.") from None
    if actual != expected:
        raise UserError(
            f"The cached wheel {wheel} no longer has the sha256 recorded when dynacheck downloaded it; "
            "refusing to use it.",
            "Delete it (someone or something replaced it) and run again to download a fresh copy.",
        )


def _canonical(entries: dict[str, str]) -> bytes:
    return json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()

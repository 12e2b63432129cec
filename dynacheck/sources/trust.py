"""The one secret dynacheck owns: a key that signs what it later loads back from its cache.

The cache folder may be shared, restored by CI or written by someone else; anything read from it is
therefore untrusted unless it carries a signature made with this key. The key lives outside the cache
(``$DYNACHECK_STATE``, else ``$XDG_STATE_HOME/dynacheck``, else ``~/.local/state/dynacheck``), in a folder
created 0700 and a file created 0600, and is used only when both belong to this user and nobody else
can read or write them. Restoring a cache therefore never restores trust: summaries from elsewhere
fail the check and are parsed again.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

STATE_ENV = "DYNACHECK_STATE"
KEY_NAME = "cache-key"
KEY_BYTES = 32
SIGNATURE_BYTES = hashlib.sha256().digest_size

_loaded: dict[Path, bytes | None] = {}  # cache of the key per state folder, for one process


def state_dir() -> Path:
    """Where the key lives: never inside the cache folder."""
    environ = os.environ
    return _state_dir(environ.get(STATE_ENV, ""), environ.get("XDG_STATE_HOME", ""), environ.get("HOME", ""))


@functools.lru_cache(maxsize=8)
def _state_dir(configured: str, xdg: str, home: str) -> Path:
    """Per environment (a census signs thousands of fix snippets, each asking for the key's folder)."""
    if configured.strip():
        return Path(configured.strip()).expanduser()
    xdg = xdg.strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "dynacheck"


def signing_key() -> bytes | None:
    """This user's key, created on first use; None when it cannot be kept private (then nothing is trusted)."""
    folder = state_dir()
    if folder not in _loaded:
        _loaded[folder] = _read_or_create(folder)
    return _loaded[folder]


def sign(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()


def verify(key: bytes, payload: bytes, signature: bytes) -> bool:
    return hmac.compare_digest(sign(key, payload), signature)


def _read_or_create(folder: Path) -> bytes | None:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(os.stat(folder, follow_symlinks=False), want_dir=True):
            return None
        path = folder / KEY_NAME
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return _read_key(path)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
        return _read_key(path)
    except OSError:
        return None


def _read_key(path: Path) -> bytes | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        if not _private(os.fstat(handle.fileno()), want_dir=False):
            return None
        key = handle.read(KEY_BYTES + 1)
    return key if len(key) == KEY_BYTES else None


def _private(info: os.stat_result, *, want_dir: bool) -> bool:
    """Owned by this user, of the expected type, and closed to group and others."""
    right_type = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
    return right_type and info.st_uid == os.geteuid() and not info.st_mode & 0o077

"""Where fetched wheels and unpacked trees live, and how a tree appears there all at once.

Layout: ``<cache>/wheels/*.whl`` (what ``pip download`` fetched or the user dropped in) and
``<cache>/trees/<name>-<version>/`` (the ``.py`` files of one wheel). A tree is built in a private
temporary folder and renamed into place, so an interrupted run never leaves half a tree behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CACHE_ENV = "DYNACHECK_CACHE"
_TMP_PREFIX = ".tmp-"
_OLD_PREFIX = ".old-"
_STALE_AFTER_S = 3600.0


def default_cache_dir() -> Path:
    """``$DYNACHECK_CACHE`` if set, else ``~/.cache/dynacheck``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "dynacheck"


def wheels_dir(cache_dir: Path) -> Path:
    return cache_dir / "wheels"


def trees_dir(cache_dir: Path) -> Path:
    return cache_dir / "trees"


def build_atomically(final: Path, build: Callable[[Path], None],
                     current: Callable[[Path], bool] = lambda _path: False) -> Path:
    """Run ``build(tmp)`` in a fresh folder next to ``final``, then rename it to ``final``.

    A ``final`` that is ``current`` (another process built the same thing while we did, and may be
    reading it now) is kept and ours dropped; only a stale one is replaced. If another process
    renamed its own copy into place first, theirs is kept and ours is dropped.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{final.name}-", dir=final.parent))
    try:
        build(tmp)
        if current(final):
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{_OLD_PREFIX}{final.name}-", dir=final.parent))
            os.replace(final, old / "tree")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # lost a race: the other copy is complete too
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _sweep_leftovers(folder: Path) -> None:
    """Remove temporary folders that a killed run left behind (older than an hour)."""
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith((_TMP_PREFIX, _OLD_PREFIX)):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_AFTER_S:
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue

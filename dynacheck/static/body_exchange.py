"""Deferred bodies shared between the processes of one census, so each is parsed once.

A census's two workers walk different forwards over the same layers, at the same time: each would
parse most deferred bodies (lazy_bodies.py) itself (measured on a cold 0.5.9 census: about half the
bodies each worker parsed, the other had parsed too), and the summary cache, stored at the end of
each scan, comes too late to help. Here each body a worker summarizes is put in a folder of the
census's own as a small file, named by its module's cache key (the hash of its bytes) and its name,
and a worker looks there before it parses one. What is read is what the other worker made with the
same code from the same bytes, so no answer depends on which worker made it.

The folder is made by the census (`mkdtemp`, mode 0700) and removed when it ends; its files are
read with the summary cache's allow-list unpickler.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from dynacheck.static.cache import SummaryUnpickler, write_replacing
from dynacheck.static.summary import ModuleSummary


class BodyExchange:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.taken = 0  # bodies read from another process instead of parsed here

    def take(self, key: str, name: str) -> ModuleSummary | str | None:
        """The body another process put here, or None."""
        try:
            with open(self._path(key, name), "rb") as handle:
                part = SummaryUnpickler(handle).load()
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            return None
        if not isinstance(part, (ModuleSummary, str)):
            return None
        self.taken += 1
        return part

    def give(self, key: str, name: str, part: ModuleSummary | str) -> None:
        path = self._path(key, name)
        if os.path.exists(path):
            return
        try:
            data = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, RecursionError):
            return
        write_replacing(str(self.folder), os.path.basename(path), data)

    def _path(self, key: str, name: str) -> str:
        return os.path.join(self.folder, f"{key}-{hashlib.sha1(name.encode()).hexdigest()[:16]}.pickle")

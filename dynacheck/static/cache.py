"""Module summaries cached on disk by content hash, so a second scan of the same trees is fast."""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from dynacheck.static.summary import SUMMARY_VERSION, ModuleSummary, summarize


class SummaryCache:
    """Parse-once store: key = hash(summary version, module name, package flag, file bytes)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder / "summaries" if folder is not None else None
        if self.folder is not None:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError:
                self.folder = None  # read-only home: scan without a cache
        self.hits = 0
        self.parsed = 0

    def summary(self, path: Path, module: str, is_package: bool, data: bytes) -> ModuleSummary:
        key = self._key(module, is_package, data)
        cached = self._load(key)
        if cached is not None:
            self.hits += 1
            cached.path = str(path)
            return cached
        self.parsed += 1
        source = data.decode("utf-8", errors="replace")
        summary = summarize(source, module, str(path), is_package)
        self._store(key, summary)
        return summary

    def load_blob(self, name: str):
        """Any picklable value stored under a name (e.g. the class-header map of a release tree)."""
        return self._load_any(self._blob_key(name))

    def store_blob(self, name: str, value) -> None:
        self._store(self._blob_key(name), value)

    @staticmethod
    def _blob_key(name: str) -> str:
        return "blob-" + hashlib.sha256(f"{SUMMARY_VERSION}\0{name}".encode()).hexdigest()[:40]

    @staticmethod
    def _key(module: str, is_package: bool, data: bytes) -> str:
        digest = hashlib.sha256()
        digest.update(f"{SUMMARY_VERSION}\0{module}\0{int(is_package)}\0".encode())
        digest.update(data)
        return digest.hexdigest()[:40]

    def _load(self, key: str) -> ModuleSummary | None:
        value = self._load_any(key)
        return value if isinstance(value, ModuleSummary) else None

    def _load_any(self, key: str):
        if self.folder is None:
            return None
        try:
            with open(self.folder / f"{key}.pickle", "rb") as handle:
                return pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
            return None

    def _store(self, key: str, summary) -> None:
        if self.folder is None:
            return
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(summary, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.folder / f"{key}.pickle")
        except OSError:
            pass

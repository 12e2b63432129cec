"""Module summaries cached on disk by content hash, so a second scan of the same trees is fast.

The cache folder is not trusted (it may be shared, or restored by CI from somewhere else), so an
entry is loaded only when it carries a signature made with this user's key (``sources/trust.py``),
its header names this format, and it is a plain file of sane size; unpickling then admits only the
summary classes and a few builtins. Anything else (foreign, corrupt, truncated, a folder, a link) is
dropped and rebuilt: a cache entry can make a scan slower, never run code or stop it.
"""

from __future__ import annotations

import builtins
import gc
import hashlib
import io
import os
import pickle
import stat
import tempfile
from pathlib import Path

from dynacheck.sources.text import decode_source
from dynacheck.sources.trust import SIGNATURE_BYTES, sign, signing_key, verify
from dynacheck.static import summary as summary_module
from dynacheck.static.summary import SUMMARY_VERSION, ModuleSummary, summarize

CACHE_FORMAT = b"DCSUM2\n"  # bump with any change to the file layout below


def _summarizer_digest() -> str:
    """The bytes of the code that makes a summary: a change to it is a new key even where
    SUMMARY_VERSION was not bumped, or was bumped to a number an experiment had already used
    (entries of the same number but another shape were read back as current)."""
    digest = hashlib.sha256()
    folder = Path(summary_module.__file__).parent
    for name in ("summary.py", "cst_nodes.py", "lazy_bodies.py", "ir.py", "value_uses.py"):
        try:
            digest.update((folder / name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()[:16]


_SUMMARIZER = _summarizer_digest()
MAX_ENTRY_BYTES = 64 * 1024 * 1024
_SUMMARY_CLASSES = {"ModuleSummary", "FunctionSummary", "ClassSummary", "CallSite", "Binding"}
_BUILTINS = {"set", "frozenset"}


class SummaryCache:
    """Parse-once store: key = hash(summary version, module name, package flag, file bytes)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder / "summaries" if folder is not None else None
        self.key = signing_key() if self.folder is not None else None
        if self.folder is not None:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError:
                self.folder = None  # read-only home: scan without a cache
        self.hits = 0
        self.parsed = 0
        self.rejected = 0  # entries present but not trusted or not readable: rebuilt
        self.exchange = None  # body_exchange.BodyExchange: a census's workers share deferred bodies
        self.keys: dict[str, str] = {}  # module -> the key of the bytes its summary was made from
        self._deferring: dict[str, ModuleSummary] = {}  # key -> a summary with bodies still deferred

    def summary(self, path: Path, module: str, is_package: bool, data: bytes, prefetch=None) -> ModuleSummary:
        """`prefetch` (prefetch.Prefetch): a second core that may have summarized it already."""
        key = self.keys[module] = self.content_key(module, is_package, data)
        cached = self._load(key)
        if cached is not None:
            self.hits += 1
            cached.path = str(path)
            if cached.pending:
                cached.attach_source(decode_source(data))
                self._deferring[key] = cached
                if self.exchange is not None:
                    cached._exchange = (self.exchange, key)
            return cached
        self.parsed += 1
        source = decode_source(data)
        summary = prefetch.take_module(module, data) if prefetch is not None else None
        if summary is not None and summary.is_package == is_package:
            summary.path = str(path)
            summary.attach_source(source)
        else:
            summary = summarize(source, module, str(path), is_package)
        self._store(key, summary)
        if summary.pending:
            self._deferring[key] = summary
            if self.exchange is not None:
                summary._exchange = (self.exchange, key)
        return summary

    def flush(self) -> None:
        """Store again the summaries whose deferred bodies were summarized since they were stored, so
        the next scan finds those bodies done (lazy_bodies.py)."""
        for key, summary in list(self._deferring.items()):
            if getattr(summary, "_dirty", False):
                summary._dirty = False
                self._store(key, summary)
            if not summary.pending:
                del self._deferring[key]

    def load_blob(self, name: str):
        """A value stored under a name (e.g. the class-header map of a release tree), or None."""
        return self._load_any(self._blob_key(name))

    def store_blob(self, name: str, value) -> None:
        self._store(self._blob_key(name), value)

    @staticmethod
    def _blob_key(name: str) -> str:
        return "blob-" + hashlib.sha256(f"{SUMMARY_VERSION}\0{_SUMMARIZER}\0{name}".encode()).hexdigest()[:40]

    @staticmethod
    def content_key(module: str, is_package: bool, data: bytes) -> str:
        """A summary's key: its module, package flag and file bytes, with the summarizer's version."""
        digest = hashlib.sha256()
        digest.update(f"{SUMMARY_VERSION}\0{_SUMMARIZER}\0{module}\0{int(is_package)}\0".encode())
        digest.update(data)
        return digest.hexdigest()[:40]

    def _load(self, key: str) -> ModuleSummary | None:
        value = self._load_any(key)
        return value if isinstance(value, ModuleSummary) else None

    def _load_any(self, key: str):
        if self.folder is None or self.key is None:
            return None
        blob = _read_entry(self.folder / f"{key}.pickle")
        if blob is None:
            return None
        head, signature = blob[: len(CACHE_FORMAT)], blob[len(CACHE_FORMAT): len(CACHE_FORMAT) + SIGNATURE_BYTES]
        payload = blob[len(CACHE_FORMAT) + SIGNATURE_BYTES:]
        if head != CACHE_FORMAT or not verify(self.key, key.encode() + payload, signature):
            self.rejected += 1
            return None
        collecting = gc.isenabled()
        gc.disable()  # a summary is tens of thousands of small tuples: the cycle collector would rescan them
        try:
            return SummaryUnpickler(io.BytesIO(payload)).load()
        except Exception:  # noqa: BLE001 - a signed entry from an older build: rebuild it
            self.rejected += 1
            return None
        finally:
            if collecting:
                gc.enable()

    def _store(self, key: str, value) -> None:
        if self.folder is None or self.key is None:
            return
        try:
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, RecursionError):
            return
        write_replacing(str(self.folder), f"{key}.pickle", CACHE_FORMAT + sign(self.key, key.encode() + payload) + payload)


def write_replacing(folder: str, name: str, data: bytes) -> bool:
    """Put `data` in `folder/name` at once (a temporary file, then `os.replace`), so a reader sees the
    old file or the new one, never a part; False when it could not be written (the caller loses only
    a cache entry). The temporary file is named by this process's id, made with `O_EXCL | O_NOFOLLOW`
    (a file or link already there is not opened); a name taken falls back to mkstemp's random one.
    One helper for the summary cache and a census's body exchange, which each wrote their own."""
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # left by a process of the same id that died: a random name instead
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, os.path.join(folder, name))
        return True
    except OSError:
        _unlink(tmp)
        return False


class SummaryUnpickler(pickle.Unpickler):
    """Admits the summary dataclasses and sets, nothing else (second line of defence after the signature)."""

    def find_class(self, module: str, name: str):
        if module == summary_module.__name__ and name in _SUMMARY_CLASSES:
            return getattr(summary_module, name)
        if module == "builtins" and name in _BUILTINS:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a summary cache entry")


def _read_entry(path: Path) -> bytes | None:
    """The bytes of a plain, not-too-large file; None for anything else (missing, a folder, a link, a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

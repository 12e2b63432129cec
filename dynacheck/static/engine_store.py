"""A deployment's evaluator kept on disk, so the next scan of the same trees replays what it worked out.

A warm scan (summaries cached) is mostly the walk's partial evaluation, done again in each new process;
in one process a second scan of the same deployment takes about 10 ms, every answer being memoized. So
after a warm single scan (scan.py decides: not a census, not a cold scan, whose time is parsing) its
engine (deployment facts, evaluator, boundaries) is stored with the module summaries it read, and the
next scan with the same inputs loads it instead of starting empty.

Why it is one pickle with the summaries: the evaluator's memo tables are keyed partly by `id()` of a
summary's expressions and of scopes (valid in one process only), and its values hold those same objects.
Pickled together, the summaries and the evaluator keep their shared objects; each key's ids are written
as references to the objects (`_Ref`), resolved through the pickle's memo, and turned back into the ids
of the loaded objects. A key whose id names no object of the pickle is dropped (a memo miss, never a
wrong hit). The process-wide numbering that labels read (`value_types._ALLOCATIONS`,
`partial_values._OBJECT_NUMBERS`) is stored too, and a store is loaded only by a process that has
numbered nothing yet.

It is used when nothing it depends on changed: the key holds the tool's version and code, the deployment,
the targets, the rules and the size and mtime of every file of the trees and of the deployment's own
files (as the result cache's, `result_cache.inputs_key`), and each stored module's bytes are checked
against the content key of the bytes it was summarized from (`SummaryCache.keys`) before use. The file is
signed with the summary cache's key and read through an allow-list unpickler.
`DYNACHECK_ENGINE_STORE=0` turns it off.
"""

from __future__ import annotations

import builtins
import dataclasses
import gc
import hashlib
import io
import os
import pickle
import sys
from pathlib import Path

from dynacheck.static import partial_values, value_types
from dynacheck.static import summary as summaries
from dynacheck.static.cache import MAX_ENTRY_BYTES, SummaryCache, _read_entry, write_replacing
from dynacheck.sources.text import decode_source
from dynacheck.sources.trust import SIGNATURE_BYTES, sign, verify

STORE_FORMAT = b"DCENG1\n"
ID_FLOOR = 1 << 32  # ids are addresses; line numbers, counts and fact bits in keys are far below
MAX_KEY_DEPTH = 50  # memo keys are a few levels deep; a deeper one is dropped
KEEP = 8  # stores kept in the folder


class _Ref:
    """An `id()` in a memo key, written as the object it names."""

    __slots__ = ("obj",)

    def __init__(self, obj) -> None:
        self.obj = obj

    def __reduce__(self):
        return (_Ref, (self.obj,))


_NESTED = frozenset({_Ref, tuple, frozenset})


class _Stale(Exception):
    """A key names an object the pickle does not hold."""


def enabled() -> bool:
    """On unless `DYNACHECK_ENGINE_STORE=0`, where ids are addresses above ID_FLOOR (64-bit builds):
    an id below it would not be told from a line number, and so not translated."""
    return os.environ.get("DYNACHECK_ENGINE_STORE", "1") != "0" and sys.maxsize > 2**32 and id(None) > ID_FLOOR


def store_key(inputs_key: str) -> str:
    return hashlib.sha256(f"engine\0{inputs_key}".encode()).hexdigest()[:40]


def save(cache: SummaryCache, key: str, engine: tuple, index, problems: list) -> bool:
    """Store `engine` (facts, evaluator, boundaries) with the summaries `index` loaded; False when it
    could not be (no cache folder, an object that does not pickle)."""
    folder = _folder(cache)
    if folder is None:
        return False
    facts, evaluator, boundaries = engine
    hazards = evaluator.sites.pop(_TENSOR_HAZARDS, None)  # holds the scan's callbacks: made again
    moved = _id_keyed_tables(evaluator, boundaries)
    own_index, evaluator.index = evaluator.index, None
    for _, owner, attr, _ in moved:  # pickled apart (below); the tables themselves are put back after
        setattr(owner, attr, type(getattr(owner, attr))())
    buffer = io.BytesIO()
    limit = sys.getrecursionlimit()
    collecting = gc.isenabled()
    gc.disable()
    try:
        sys.setrecursionlimit(max(limit, 50_000))  # nested values and scopes
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        modules = index.looked_up()
        keys = {name: cache.keys.get(name) for name, m in modules.items() if m is not None
                and not os.path.isdir(m.path)}
        if None in keys.values():  # a module read some other way could not be checked when loaded
            return False
        pickler.dump({
            "modules": modules,
            "hashes": keys,
            "engine": (facts, evaluator, boundaries),
            "tables": [(name, attr, list(table.values())) for name, _, attr, table in moved],
            "allocations": list(value_types._ALLOCATIONS.values()),
            "objects": list(partial_values._OBJECT_NUMBERS.items()),
            "problems": list(problems),
        })
        memo = pickler.memo.copy()  # id -> (index, object): every object the pickle holds
        pickler.dump([[_translated(key, memo) for key in table] for _, _, _, table in moved])
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError, _Stale):
        return False
    finally:
        sys.setrecursionlimit(limit)
        if collecting:
            gc.enable()
        evaluator.index = own_index
        for _, owner, attr, table in moved:
            setattr(owner, attr, table)
        if hazards is not None:
            evaluator.sites[_TENSOR_HAZARDS] = hazards
    payload = buffer.getvalue()
    if len(payload) + len(STORE_FORMAT) + SIGNATURE_BYTES > MAX_ENTRY_BYTES:
        return False  # it would never be read back (cache._read_entry's limit)
    written = write_replacing(str(folder), f"{key}.pickle",
                              STORE_FORMAT + sign(cache.key, key.encode() + payload) + payload)
    _prune(folder)
    return written


def fresh_process() -> bool:
    """Whether this process has numbered no allocation and no deployment object yet: only such a
    process can take a stored engine's numbering, and only its first scan stores one (a process that
    scans again and again, a test run or a census, would pay the store's writing for nothing)."""
    return not value_types._ALLOCATIONS and not partial_values._OBJECT_NUMBERS


def _prune(folder: Path) -> None:
    """Keep the KEEP most recently written stores (a store is a few MB; every change of the inputs
    makes a new one)."""
    try:
        stores = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    except OSError:
        return
    for old in stores[KEEP:]:
        try:
            old.unlink()
        except OSError:
            pass


def load(cache: SummaryCache, key: str, index, problems: list) -> tuple | None:
    """The stored engine for `key`, its summaries installed in `index` and its process-wide numbering
    restored; None (and nothing changed) when there is none, it is not trusted, a stored module's
    bytes changed, or this process has numbered allocations already."""
    folder = _folder(cache)
    if folder is None or not fresh_process():
        return None
    blob = _read_entry(folder / f"{key}.pickle")
    if blob is None or blob[: len(STORE_FORMAT)] != STORE_FORMAT:
        return None
    signature = blob[len(STORE_FORMAT): len(STORE_FORMAT) + SIGNATURE_BYTES]
    payload = blob[len(STORE_FORMAT) + SIGNATURE_BYTES:]
    if not verify(cache.key, key.encode() + payload, signature):
        return None
    collecting = gc.isenabled()
    gc.disable()
    try:
        unpickler = EngineUnpickler(io.BytesIO(payload))
        stored = unpickler.load()
        keys = unpickler.load()
    except Exception:  # noqa: BLE001 - a store from another build or a damaged one: start empty
        return None
    finally:
        if collecting:
            gc.enable()
    sources = _current_sources(index, stored["hashes"])
    if sources is None:
        return None
    for name, summary in stored["modules"].items():
        if summary is not None and name in sources:
            summary.path = str(sources[name][0])
            summary.attach_source(decode_source(sources[name][1]))
    index.install(stored["modules"], stored["hashes"])
    facts, evaluator, boundaries = stored["engine"]
    evaluator.index = index
    owners = _owners(evaluator, boundaries)
    for (name, attr, values), table_keys in zip(stored["tables"], keys):
        table = getattr(owners[name], attr)
        for table_key, value in zip(table_keys, values):
            if table_key is not None:
                table[_restored(table_key)] = value
    for number, expr, scope in stored["allocations"]:
        value_types._ALLOCATIONS[(id(expr), id(scope))] = (number, expr, scope)
    partial_values._OBJECT_NUMBERS.update(stored["objects"])
    problems.extend(p for p in stored["problems"] if p not in problems)
    return facts, evaluator, boundaries


# ----- keys ---------------------------------------------------------------------------------------

def _translated(key, memo: dict, depth: int = 0):
    """The key with each id of an object in the pickle as a `_Ref` to it; None when an id names none."""
    try:
        return _translate(key, memo, depth)
    except _Stale:
        return None


def _translate(key, memo: dict, depth: int):
    if type(key) is int and key > ID_FLOOR:
        found = memo.get(key)
        if found is None:
            raise _Stale
        return _Ref(found[1])
    if type(key) in (tuple, frozenset):
        if depth > MAX_KEY_DEPTH:
            raise _Stale
        return type(key)(_translate(part, memo, depth + 1) for part in key)
    return key


def _restored(key):
    kind = type(key)
    if kind is _Ref:
        return id(key.obj)
    if kind is tuple or kind is frozenset:  # strings and numbers, most of a key, are kept without a call
        return kind([_restored(part) if type(part) in _NESTED else part for part in key])
    return key


def _has_id(key, depth: int = 0) -> bool:
    """Whether a key holds an id, at any depth of its tuples and frozensets (a key too deep to read
    counts as holding one: it is translated or dropped, never kept as it is)."""
    if type(key) is int:
        return key > ID_FLOOR
    if type(key) in (tuple, frozenset):
        return depth > MAX_KEY_DEPTH or any(_has_id(part, depth + 1) for part in key)
    return False


def _owners(evaluator, boundaries) -> dict[str, object]:
    return {"evaluator": evaluator, "partial": evaluator.partial, "boundaries": boundaries}


def _id_keyed_tables(evaluator, boundaries) -> list[tuple]:
    """(owner's name, owner, attribute, the table) of every memo table with a key that holds an id."""
    return [(name, owner, attr, table)
            for name, owner in _owners(evaluator, boundaries).items()
            for attr, table in vars(owner).items()
            if isinstance(table, dict) and any(_has_id(key) for key in table)]


# ----- the trees ---------------------------------------------------------------------------------

def _current_sources(index, keys: dict[str, str]) -> dict[str, tuple[Path, bytes]] | None:
    """Each stored module's file and bytes now, or None when one moved or changed."""
    out = {}
    for name, key in keys.items():
        path = index.locator.find(name)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if SummaryCache.content_key(name, index.locator.is_package(name), data) != key:
            return None
        out[name] = (path, data)
    return out


def _folder(cache: SummaryCache) -> Path | None:
    if cache.folder is None or cache.key is None:
        return None
    folder = cache.folder.parent / "engines"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder


_TENSOR_HAZARDS = ("tensor-hazards",)  # scan.TENSOR_HAZARDS (not imported: scan imports this module)


class EngineUnpickler(pickle.Unpickler):
    """Admits the classes an engine is made of, nothing else (after the signature)."""

    def find_class(self, module: str, name: str):
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        if module == "builtins" and name in _BUILTINS:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a stored engine")


def _is_data(cls: type) -> bool:
    """A dataclass or a plain class of slots and fields: what evaluation values and summaries are."""
    return dataclasses.is_dataclass(cls) or "__slots__" in vars(cls)


# (module, class) of what an engine is made of; a class missing here makes a store unreadable (a fresh
# scan, never a wrong one): tests/test_engine_store.py and bench/engine_store_check.py load stores of
# fixtures and of census cells. Every class of the modules of values and summaries is data.
ALLOWED = frozenset({
    ("dynacheck.deploy.facts", "Deployment"), ("dynacheck.model", "Condition"), ("dynacheck.model", "Problem"),
    ("dynacheck.static.dynamo", "Boundaries"), ("dynacheck.static.dynamo", "Effect"),
    ("dynacheck.static.engine_store", "_Ref"), ("dynacheck.static.memo", "Memo"),
    ("dynacheck.static.partial", "PartialEvaluator"), ("dynacheck.static.values", "Evaluator"),
    ("dynacheck.static.reach", "NodeKey"), ("dynacheck.static.startup", "Unbuildable"),
    *((module.__name__, name) for module in (partial_values, value_types, summaries)
      for name, value in vars(module).items()
      if isinstance(value, type) and value.__module__ == module.__name__ and _is_data(value)),
})
_BUILTINS = frozenset({"bool", "int", "float", "complex", "str", "bytes", "tuple", "set", "frozenset", "slice",
                       "type"})  # `type`: NoneType is pickled as type(None)

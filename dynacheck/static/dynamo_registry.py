"""Dynamo's own graph-break ids, read from the installed torch without importing it.

torch ships ``torch/_dynamo/graph_break_registry.json``: ``{"GB0007": [{"Gb_type": ...,
"Context": ..., "Explanation": ..., "Hints": [...]}, ...], ...}``. One id may hold several
entries (the same break raised from several places); they share the type and differ in hints.
Importing torch costs seconds, so we only locate its folder with ``find_spec`` of the
top-level name and read the files ourselves.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

REGISTRY_RELPATH = Path("_dynamo") / "graph_break_registry.json"
_PLACEHOLDER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")  # e.g. "explanation": a variable name, not text


@dataclass(frozen=True)
class RegistryEntry:
    """One GB id as Dynamo documents it."""

    gb_id: str
    gb_type: str
    explanation: str  # "" when the registry only holds a placeholder
    hints: tuple[str, ...]
    context: str = ""


@functools.lru_cache(maxsize=1)
def torch_dir() -> Path | None:
    """The folder of the installed ``torch`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or ())
    if locations:
        return Path(locations[0])
    if spec.origin:
        return Path(spec.origin).parent
    return None


def registry_path() -> Path | None:
    """Where torch's graph-break registry lives, or None when torch (or the file) is absent."""
    folder = torch_dir()
    if folder is None:
        return None
    path = folder / REGISTRY_RELPATH
    return path if path.is_file() else None


@functools.lru_cache(maxsize=1)
def torch_version() -> str:
    """The installed torch's version ('' when absent), from ``version.py`` or dist metadata."""
    folder = torch_dir()
    if folder is not None:
        try:
            text = (folder / "version.py").read_text(encoding="utf-8")
        except OSError:
            text = ""
        match = re.search(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", text, re.M)
        if match:
            return match.group(1)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return ""


def parse_registry(data: object) -> dict[str, RegistryEntry]:
    """Turn the registry's JSON into entries; unknown shapes are skipped, not fatal."""
    entries: dict[str, RegistryEntry] = {}
    if not isinstance(data, dict):
        return entries
    for gb_id, raw in data.items():
        records = raw if isinstance(raw, list) else [raw]
        records = [r for r in records if isinstance(r, dict)]
        if not records:
            continue
        first = records[0]
        hints: list[str] = []
        for record in records:
            for hint in record.get("Hints") or ():
                if isinstance(hint, str) and hint.strip() and hint.strip() not in hints:
                    hints.append(hint.strip())
        explanation = str(first.get("Explanation") or "").strip()
        if _PLACEHOLDER.match(explanation):
            explanation = ""
        entries[str(gb_id)] = RegistryEntry(
            gb_id=str(gb_id),
            gb_type=str(first.get("Gb_type") or "").strip(),
            explanation=explanation,
            hints=tuple(hints),
            context=str(first.get("Context") or "").strip(),
        )
    return entries


@functools.lru_cache(maxsize=4)
def load_registry(path: Path | None = None) -> dict[str, RegistryEntry]:
    """All GB ids of the installed torch ({} without torch or with an unreadable file)."""
    path = path or registry_path()
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return parse_registry(data)


def explain(gb_id: str) -> tuple[str, str, tuple[str, ...]] | None:
    """``(gb_type, explanation, hints)`` for a GB id, or None when unknown or torch is absent."""
    entry = load_registry().get(gb_id)
    if entry is None:
        return None
    return entry.gb_type, entry.explanation, entry.hints


def gb_id_for_type(gb_type: str) -> str | None:
    """The GB id whose type text is ``gb_type`` (``Unsupported.gb_type`` holds the text, not the id)."""
    wanted = gb_type.strip()
    for entry in load_registry().values():
        if entry.gb_type == wanted:
            return entry.gb_id
    return None

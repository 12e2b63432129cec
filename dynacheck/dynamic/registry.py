"""Dynamo's own break ids: `graph_break_registry.json` by break type, and the text of an Unsupported.

The registry ships inside torch (`torch/_dynamo/graph_break_registry.json`, checked in 2.11 and
2.13); it is read as a file so looking an id up never imports Dynamo.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from functools import lru_cache

_URL_ID = re.compile(r"/gb/(gb\d{4})\.html", re.IGNORECASE)


@lru_cache(maxsize=1)
def _registry() -> dict[str, str]:
    """gb_type -> GB id, from the installed torch ({} when torch or the file is absent)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(next(iter(spec.submodule_search_locations)), "_dynamo", "graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    ids: dict[str, str] = {}
    for gb_id, entries in data.items():
        for entry in entries:
            ids.setdefault(entry.get("Gb_type", ""), gb_id)
    return ids


def gb_id_for(gb_type: str, message: str = "") -> str:
    """The GB id of a break type; falls back to the id in the message's help URL."""
    gb_id = _registry().get(gb_type or "", "")
    if gb_id:
        return gb_id
    found = _URL_ID.search(message or "")
    return found.group(1).upper() if found else ""


def split_message(message: str) -> tuple[str, str, tuple[str, ...]]:
    """Unsupported text -> (headline, explanation, hints) as Dynamo formats it (`exc.format_graph_break_message`)."""
    headline, explanation, hints = "", [], []
    current: list[str] | None = None
    for raw in (message or "").splitlines():
        line = raw.strip()
        if not headline and line:
            headline = line
            continue
        if line.startswith("Explanation:"):
            explanation.append(line[len("Explanation:"):].strip())
            current = explanation
        elif line.startswith("Hint:"):
            hints.append(line[len("Hint:"):].strip())
            current = None
        elif line.startswith(("Developer debug context:", "For more details", "from user code:")):
            current = None
            if line.startswith("from user code:"):
                break
        elif line and current is explanation:
            explanation.append(line)
    return headline, " ".join(explanation), tuple(hints)


def developer_context(message: str) -> str:
    """The 'Developer debug context' line (e.g. which builtin was skipped)."""
    for raw in (message or "").splitlines():
        line = raw.strip()
        if line.startswith("Developer debug context:"):
            return line[len("Developer debug context:"):].strip()
    return ""

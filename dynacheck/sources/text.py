"""Python source text as Python itself reads it.

Python drops a leading UTF-8 byte-order mark from a source file; `ast.parse` of the text with the mark
kept is a SyntaxError (`invalid non-printable character U+FEFF`). SGLang 0.5.9 and 0.5.10 ship one
such file, `models/qwen2_classification.py`, so a reader that kept the mark lost the model class it
registers. Every reader of scanned Python source decodes through here.
"""

from __future__ import annotations

from pathlib import Path


# what reading a Python file's bytes and `ast.parse`-ing them can raise on a bad, huge or hostile file
PARSE_FAILURES = (OSError, SyntaxError, ValueError, RecursionError, MemoryError)


def decode_source(data: bytes) -> str:
    """Source text as Python reads it: UTF-8, a leading byte-order mark dropped."""
    return data.decode("utf-8-sig", errors="replace")


def read_source(path: str | Path) -> str:
    """The text of a Python source file (OSError as `Path.read_bytes` raises it)."""
    return decode_source(Path(path).read_bytes())

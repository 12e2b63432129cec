"""Reading back files the tool takes as input (scan and diff JSON, baselines, traces, config).

Those files may be damaged, hostile or not files at all, so every read here refuses special files
(a FIFO would hang, `/dev/zero` never ends), caps the size, and turns every way JSON can fail
(bad syntax, nesting deep enough to exhaust the parser, bad encoding) into one UserError sentence.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from dynacheck.errors import UserError

MAX_INPUT_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 200  # no dynacheck document nests deeper than ~12


def read_input_bytes(path: Path, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a plain file; a FIFO, device, folder or over-large file is a UserError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UserError(f"The {what} file {path} does not exist.", "Check the path.") from None
    except OSError as exc:
        raise UserError(f"Cannot read the {what} file {path}: {exc.strerror or exc}.",
                        "Check the path and its permissions.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"The {what} file {path} is not a regular file (a folder, FIFO, socket or device).",
                            f"Pass the {what} file itself.")
        if info.st_size > limit:
            raise UserError(f"The {what} file {path} is {info.st_size} bytes, over the limit of {limit}.",
                            f"Pass a {what} file that dynacheck wrote.")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise UserError(f"Cannot read the {what} file {path}: {exc.strerror or exc}.",
                        "Check the path and its permissions.") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UserError(f"The {what} file {path} is over the limit of {limit} bytes.",
                        f"Pass a {what} file that dynacheck wrote.")
    return data


def read_input_text(path: Path, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    data = read_input_bytes(path, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"The {what} file {path} is not UTF-8 text (byte {exc.start}).",
                        f"Pass a {what} file that dynacheck wrote.") from None


def parse_json(text: str, source: str, hint: str) -> Any:
    """json.loads with every failure as one sentence naming `source` (a file, or file:line)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}).", hint) from None
    except (RecursionError, MemoryError):
        raise UserError(f"{source} nests JSON too deeply to be a dynacheck file.", hint) from None
    except ValueError as exc:
        raise UserError(f"{source} is not valid JSON ({exc}).", hint) from None
    if depth(value) > MAX_DEPTH:
        raise UserError(f"{source} nests JSON more than {MAX_DEPTH} levels deep.", hint)
    return value


def load_json_file(path: Path, what: str, hint: str) -> Any:
    return parse_json(read_input_text(path, what), f"The {what} file {path}", hint)


def depth(value: Any) -> int:
    """Nesting depth of plain JSON values, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest

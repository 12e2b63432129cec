"""Top-level function and class bodies summarized when a lookup first names them.

A scan reads a small part of most modules it loads: on the flagship, module-level code and the top-level
definitions it looks up are 46 % of the bytes of the 113 files it loads, and 6 KB of server_args.py's 250 KB
(`python bench/skeleton_share.py`). So `summarize` hands libcst a
*skeleton*: the module with the body of each plain top-level `def`/`class` replaced by `...` (17 % of
the flagship's bytes; line numbers come from `ast` over the whole file), so module-level names, imports,
decorators, bases and signatures are all summarized at once. A body is parsed and summarized the first
time `functions` or `classes` is asked for a name under it (`Foo`, `Foo.method`, `f.<locals>.g`).

A body stays in the skeleton (summarized at once) when leaving it out could change what the module
says about itself: a `global` statement (it binds a module name), a `register_fake` (the module's
fakes), a name defined more than once at module level (the second becomes `name@line`), a one-line
body, or a definition under `if`/`try` at module level.
"""

from __future__ import annotations

import ast
import functools
import re

MIN_BODY_LINES = 4  # shorter bodies cost less to parse than to defer
_GLOBAL_STATEMENT = re.compile(r"^[ \t]*global[ \t]+\w", re.MULTILINE)  # not "the global rank" in a comment


def skeleton(source: str, tree: ast.Module) -> tuple[str, dict[str, tuple[int, int]]]:
    """The source with deferrable bodies left out, and top-level name -> (first line, last line) of
    each deferred definition (decorators included). Line numbers come from `ast` over the whole file
    (summary.py), so the skeleton drops the blanked lines: libcst would make a node of each."""
    defined = _module_level_definitions(tree.body)
    lines = source.splitlines(keepends=True)
    pending: dict[str, tuple[int, int]] = {}
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or defined[stmt.name] > 1:
            continue
        start, last = _first_line(stmt), stmt.end_lineno or 0
        if last - _first_line(stmt.body[0]) + 1 < MIN_BODY_LINES:
            continue
        text = "".join(lines[start - 1:last])
        if "register_fake" in text or ("global" in text and _GLOBAL_STATEMENT.search(text)):
            continue
        if _blank_body(lines, stmt):
            pending[stmt.name] = (start, last)
    return ("".join(lines) if pending else source), pending


@functools.lru_cache(maxsize=8)  # the signature readers ask for the same file's headers in turn
def headers_only(source: str, keep: str = "") -> str:
    """The source with the body of every module-level function and every method of a module-level
    class left out (the top-level function `keep` keeps its body): what readers of signatures need,
    for a fraction of the parse. Line numbers are not kept."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source  # the caller's own parse reports it
    lines = source.splitlines(keepends=True)
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name != keep:
            _blank_body(lines, stmt)
        elif isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _blank_body(lines, inner)
    return "".join(lines)


def bodies_naming(source: str, words: tuple[str, ...]) -> str:
    """The source with the body of every module-level def/class blanked unless its text (decorators
    included) holds one of `words`, line numbers kept (its reader asks libcst for positions): a reader
    of registrations parses only those."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source
    lines = source.splitlines(keepends=True)
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = "".join(lines[_first_line(stmt) - 1:stmt.end_lineno])
            if not any(word in text for word in words):
                _blank_body(lines, stmt, keep_lines=True)
    return "".join(lines)


def _blank_body(lines: list[str], stmt: ast.stmt, keep_lines: bool = False) -> bool:
    """Replace the body of a def/class by `...` on its first line (in place), and its other lines by
    nothing, or by empty lines with `keep_lines` (a reader of libcst positions); False, and nothing
    changed, when the body does not start a line of its own."""
    first, last = _first_line(stmt.body[0]), stmt.end_lineno or 0
    if first <= stmt.lineno or last > len(lines):
        return False
    indent = _indent(lines[first - 1])
    if not indent or not _starts_statement(lines[first - 1], indent, stmt.body[0]):
        return False  # `def f(a,\n      b): return a`: the body is the header's tail
    lines[first - 1] = indent + "..." + _ending(lines[first - 1])
    for i in range(first, last):
        lines[i] = (_ending(lines[i]) or "\n") if keep_lines else ""
    return True


def chunk(source_lines: list[str], start: int, last: int) -> tuple[str, str]:
    """One deferred definition: its text, and the text at its own line numbers (empty lines above it)
    for `ast`, which gives the summary its line numbers."""
    text = "".join(source_lines[start - 1:last])
    return text, "\n" * (start - 1) + text


def top_name(qualname: str) -> str:
    return qualname.partition(".")[0]


def _first_line(stmt: ast.stmt) -> int:
    """A statement's first line: its first decorator's for a decorated definition."""
    return min([d.lineno for d in getattr(stmt, "decorator_list", ())] + [stmt.lineno])


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _starts_statement(line: str, indent: str, stmt: ast.stmt) -> bool:
    """Whether `stmt` begins this line (not the tail of a header: `def f(a,\n      b): return a`)."""
    if getattr(stmt, "decorator_list", None):
        return line.lstrip().startswith("@")
    return len(indent) == stmt.col_offset


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def _module_level_definitions(body: list[ast.stmt]) -> dict[str, int]:
    """How often each name is defined by `def`/`class` at module level (inside if/try/with/loops too)."""
    counts: dict[str, int] = {}
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[stmt.name] = counts.get(stmt.name, 0) + 1
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(stmt, field, ()) or ():
                if isinstance(child, (ast.excepthandler, ast.match_case)):
                    stack.extend(child.body)
                elif isinstance(child, ast.stmt):
                    stack.append(child)
    return counts


class Defs(dict):
    """`functions` or `classes` of a module with deferred bodies: a lookup under a deferred name
    summarizes that body first; iterating summarizes them all."""

    __slots__ = ("_owner", "_pending")

    def __init__(self, items: dict, owner) -> None:
        super().__init__(items)
        self._owner = owner
        self._pending = owner.pending  # the owner's own dict: a fill removes its name

    def _need(self, key) -> None:
        if self._pending and isinstance(key, str):
            name = key.partition(".")[0]
            if name in self._pending:
                self._owner.fill(name)

    def _need_all(self) -> None:
        for name in list(self._owner.pending):
            self._owner.fill(name)

    def get(self, key, default=None):  # the hot path: millions of lookups in a census
        if self._pending:
            name = key.partition(".")[0]
            if name in self._pending:
                self._owner.fill(name)
        return dict.get(self, key, default)

    def __getitem__(self, key):
        self._need(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key) -> bool:
        self._need(key)
        return dict.__contains__(self, key)

    def __iter__(self):
        self._need_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._need_all()
        return dict.__len__(self)

    def keys(self):
        self._need_all()
        return dict.keys(self)

    def values(self):
        self._need_all()
        return dict.values(self)

    def items(self):
        self._need_all()
        return dict.items(self)

    def __eq__(self, other) -> bool:
        self._need_all()
        return dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._need_all()
        return dict.__repr__(self)

    def raw(self) -> dict:
        """What is summarized so far (for pickling), without summarizing the rest."""
        return dict(dict.items(self))

"""Top-level function and class bodies summarized when a lookup first names them.

A scan reads a small part of most modules it loads: on the flagship, 47 % of the bytes of the modules
whose functions it looks up, and 6 KB of server_args.py's 250 KB. So `summarize` hands libcst a
*skeleton*: the module with the body of each plain top-level `def`/`class` replaced by `...`, line
numbers kept, so module-level names, imports, decorators, bases and signatures are all summarized at
once. A body is parsed and summarized the first time `functions` or `classes` is asked for a name
under it (`Foo`, `Foo.method`, `f.<locals>.g`).

A body stays in the skeleton (summarized at once) when leaving it out could change what the module
says about itself: a `global` statement (it binds a module name), a `register_fake` (the module's
fakes), a name defined more than once at module level (the second becomes `name@line`), a one-line
body, or a definition under `if`/`try` at module level.
"""

from __future__ import annotations

import ast

MIN_BODY_LINES = 4  # shorter bodies cost less to parse than to defer
_MODULE_EFFECTS = ("global ", "register_fake")


def skeleton(source: str, tree: ast.Module) -> tuple[str, dict[str, tuple[int, int]]]:
    """The source with deferrable bodies blanked, and top-level name -> (first line, last line) of
    each deferred definition (decorators included)."""
    defined = _module_level_definitions(tree.body)
    lines: list[str] | None = None
    pending: dict[str, tuple[int, int]] = {}
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or defined[stmt.name] > 1:
            continue
        first, last = _first_line(stmt.body[0]), stmt.end_lineno or 0
        if first <= stmt.lineno or last - first + 1 < MIN_BODY_LINES:
            continue
        if lines is None:
            lines = source.splitlines(keepends=True)
        indent = _indent(lines[first - 1]) if last <= len(lines) else ""
        if not indent or not _starts_statement(lines[first - 1], indent, stmt.body[0]):
            continue  # the body does not start its own line: keep it
        start = _first_line(stmt)
        if any(effect in line for line in lines[start - 1:last] for effect in _MODULE_EFFECTS):
            continue
        lines[first - 1] = indent + "..." + _ending(lines[first - 1])
        for i in range(first, last):
            lines[i] = _ending(lines[i]) or "\n"
        pending[stmt.name] = (start, last)
    return ("".join(lines) if lines is not None else source), pending


def chunk(source_lines: list[str], start: int, last: int) -> str:
    """One deferred definition, at its own line numbers (blank lines above it)."""
    return "\n" * (start - 1) + "".join(source_lines[start - 1:last])


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

    __slots__ = ("_owner",)

    def __init__(self, items: dict, owner) -> None:
        super().__init__(items)
        self._owner = owner

    def _need(self, key) -> None:
        pending = self._owner.pending
        if pending and isinstance(key, str):
            name = top_name(key)
            if name in pending:
                self._owner.fill(name)

    def _need_all(self) -> None:
        for name in list(self._owner.pending):
            self._owner.fill(name)

    def get(self, key, default=None):
        self._need(key)
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

"""A tiny picklable expression form, enough to resolve calls later without the syntax tree.

Summaries keep expressions as nested tuples so a cached summary is small, fast to load and
independent of libcst's classes. Shapes:

    ("n", name)                      a bare name
    ("a", base, attr)                attribute access
    ("c", func, args, kwargs)        call; args a tuple of exprs, kwargs a tuple of (name, expr)
    ("s", base[, index])             subscript (the index when it is a single expression)
    ("l", params, body)              lambda
    ("d", values[, keys])            dict literal (dispatch tables); keys when no `**` entry
    ("fs", parts)                    f-string: ("k", text) and expression parts, joined when known
    ("q", elems)                     list / tuple / set / comprehension element
    ("if", a, b, test)               conditional expression: a if test else b
    ("not", e) ("and", es) ("or", es) boolean tests (guards)
    ("cmp", left, ((op, right), ...)) comparison; op is libcst's operator class name (Equal, In, Is...)
    ("op", left, right, op)          binary operation; op is libcst's operator class name (Add, ...)
    ("sl", base, lower, upper)       a slice base[lower:upper] (bounds are exprs, ("k", None) when absent)
    ("k", value)                     a number or string literal with its value
    ("k",)                           a constant whose value is not kept
    ("exc", line)                    guard only: the body of an `except` handler (an error path)
    ("imp", module)                  guard only: after `import module` in a try body (the import succeeded)
    ("?",)                           anything else
"""

from __future__ import annotations

from typing import Any

Expr = tuple[Any, ...]

UNKNOWN: Expr = ("?",)
CONST: Expr = ("k",)


def dotted(expr: Expr) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None."""
    parts: list[str] = []
    while expr and expr[0] == "a":
        parts.append(expr[2])
        expr = expr[1]
    if expr and expr[0] == "n":
        parts.append(expr[1])
        return ".".join(reversed(parts))
    return None


def annotation_expr(text: str) -> Expr | None:
    """A dotted annotation's text (`Path`, `pathlib.Path`, quotes dropped) as a name expression; None
    for anything else (`Optional[Path]`, `list[str]`)."""
    parts = text.strip().strip("'\"").split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    expr: Expr = ("n", parts[0])
    for part in parts[1:]:
        expr = ("a", expr, part)
    return expr


def render(expr: Expr) -> str:
    """Short human text for an expression, for notes and messages."""
    kind = expr[0] if expr else "?"
    if kind == "n":
        return expr[1]
    if kind == "a":
        return f"{render(expr[1])}.{expr[2]}"
    if kind == "c":
        return f"{render(expr[1])}(...)"
    if kind == "s":
        return f"{render(expr[1])}[...]"
    if kind == "l":
        return "lambda"
    if kind == "not":
        return f"not {render(expr[1])}"
    return "..."


def names_in(exprs) -> set[str]:
    """The bare names (`("n", name)`) anywhere in these expressions."""
    names: set[str] = set()
    stack = list(exprs)
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            if len(node) == 2 and node[0] == "n" and isinstance(node[1], str):
                names.add(node[1])
            else:
                stack.extend(x for x in node if isinstance(x, tuple))
    return names

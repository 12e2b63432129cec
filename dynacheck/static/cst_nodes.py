"""Pure functions over libcst nodes (and the matching `ast` nodes) used by the summary walker.

Kept apart from the walker so the walker reads as "what we record" and this module as "how a
node becomes our small expression form".
"""

from __future__ import annotations

import re

import ast
from collections import defaultdict

import libcst as cst

from dynacheck.static.ir import CONST, UNKNOWN, Expr, dotted, render


def dotted_ir(expr: Expr) -> str:
    return dotted(expr) or ""


def annotation_text(node) -> str:
    try:
        return cst.Module(body=()).code_for_node(node)[:120]
    except Exception:  # noqa: BLE001 - code generation of an odd node: the text is only a hint
        return ""


def annotation(node) -> Expr:
    """A type annotation as the classes it names: Optional[X], Union[X, Y], X | None, "X"."""
    if isinstance(node, cst.Subscript):
        head = dotted_cst(node.value).rpartition(".")[2]
        if head in ("Optional", "Union"):
            inner = [getattr(e.slice, "value", None) for e in node.slice]
            return ("q", tuple(annotation(i) for i in inner if i is not None))
        return expr(node.value)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return ("q", (annotation(node.left), annotation(node.right)))
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value if isinstance(node.evaluated_value, str) else ""
        try:
            return annotation(cst.parse_expression(text)) if text else UNKNOWN
        except cst.ParserSyntaxError:
            return UNKNOWN
    return expr(node)


STARRED = "*"  # the keyword a call's `*args` / `**kwargs` leave in its expression


def expr(node, depth: int = 0) -> Expr:
    if node is None or depth > 30:
        return UNKNOWN
    if isinstance(node, cst.Name):
        return ("n", node.value)
    if isinstance(node, cst.Attribute):
        return ("a", expr(node.value, depth + 1), node.attr.value)
    if isinstance(node, cst.Call):
        args = tuple(expr(a.value, depth + 1) for a in node.args if a.keyword is None and not a.star)
        kwargs = tuple((a.keyword.value, expr(a.value, depth + 1)) for a in node.args if a.keyword is not None)
        stars = [a for a in node.args if a.star]
        if stars:  # `f(*xs)` / `f(**kw)`: which parameters it fills is not known; a lone `**kw` is kept (a
            # constructor handed `**decoder_kwargs`, a dict literal of its caller: startup.py)
            lone = stars[0].star == "**" and len(stars) == 1
            kwargs += ((STARRED, expr(stars[0].value, depth + 1) if lone else UNKNOWN),)
        return ("c", expr(node.func, depth + 1), args, kwargs)
    if isinstance(node, cst.Subscript):
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            return ("s", expr(node.value, depth + 1), expr(node.slice[0].slice.value, depth + 1))
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice) and node.slice[0].slice.step is None:
            part = node.slice[0].slice
            return ("sl", expr(node.value, depth + 1), expr(part.lower, depth + 1) if part.lower else ("k", None),
                    expr(part.upper, depth + 1) if part.upper else ("k", None))
        return ("s", expr(node.value, depth + 1))
    if isinstance(node, cst.Lambda):
        params = tuple(p.name.value for p in all_params(node.params))
        return ("l", params, expr(node.body, depth + 1))
    if isinstance(node, cst.Dict):
        values = tuple(expr(e.value, depth + 1) for e in node.elements if isinstance(e, cst.DictElement))
        if len(values) != len(node.elements):  # `{**base, ...}`: which keys it holds is not known
            return ("d", values)
        return ("d", values, tuple(expr(e.key, depth + 1) for e in node.elements))
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return ("q", tuple(expr(e.value, depth + 1) for e in node.elements))
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return ("q", (expr(node.elt, depth + 1),))
    if isinstance(node, cst.IfExp):
        return ("if", expr(node.body, depth + 1), expr(node.orelse, depth + 1), expr(node.test, depth + 1))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return ("not", expr(node.expression, depth + 1))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = expr(node.expression, depth + 1)
        if inner[0] == "k" and len(inner) > 1 and isinstance(inner[1], (int, float)):
            return ("k", -inner[1])
        return UNKNOWN
    if isinstance(node, cst.BooleanOperation):
        kind = "and" if isinstance(node.operator, cst.And) else "or"
        return (kind, (expr(node.left, depth + 1), expr(node.right, depth + 1)))
    if isinstance(node, cst.Await):
        return expr(node.expression, depth + 1)
    if isinstance(node, cst.NamedExpr):
        return expr(node.value, depth + 1)
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return literal(node)
    if isinstance(node, cst.FormattedString):
        return formatted(node, depth)
    if isinstance(node, cst.Imaginary):
        return CONST
    if isinstance(node, cst.BinaryOperation):
        return ("op", expr(node.left, depth + 1), expr(node.right, depth + 1), type(node.operator).__name__)
    if isinstance(node, cst.Comparison):
        return ("cmp", expr(node.left, depth + 1),
                tuple((type(c.operator).__name__, expr(c.comparator, depth + 1)) for c in node.comparisons))
    return UNKNOWN


_LEADING_ZERO = re.compile(r"0[0_]+").fullmatch  # `00`, `0_0`: int(text, 0) refuses these


def _plain_string(text: str) -> str | None:
    """The value of a quoted string with no prefix and no backslash ('abc', "abc", '''abc'''), else None:
    most literals, read without `ast.literal_eval` (a compile per literal)."""
    if "\\" in text or not text or text[0] not in "'\"":
        return None
    quote = text[:3] if text[:3] in ("\'\'\'", '\"\"\"') else text[0]
    if len(text) < 2 * len(quote) or not text.endswith(quote):
        return None
    return text[len(quote):-len(quote)]


def literal(node) -> Expr:
    """A number or string literal with its value (what the partial evaluator compares); CONST if odd."""
    try:
        if isinstance(node, cst.Integer):
            return ("k", int(node.value, 0) if not _LEADING_ZERO(node.value) else int(node.value.replace("_", "")))
        if isinstance(node, cst.Float):
            return ("k", float(node.value.replace("_", "")))
        if isinstance(node, cst.SimpleString):
            plain = _plain_string(node.value)
            if plain is not None:
                return ("k", plain) if len(plain) <= 200 else CONST
        value = node.evaluated_value  # prefixes, escapes, f-strings: Python's own reading (slower)
        if isinstance(value, (str, bytes)) and len(value) <= 200:
            return ("k", value)
    except Exception:  # noqa: BLE001 - an odd literal (bad escape): its value is simply not known
        pass
    return CONST


MAX_FORMATTED_PARTS = 8


def formatted(node: cst.FormattedString, depth: int = 0) -> Expr:
    """`f"{major}{minor}"` as ("fs", parts): the partial evaluator joins the parts when each is known
    (FlashInfer picks its FP4 module by `get_fp4_quantization_module(f"{major}{minor}")`). A
    conversion (`!r`), a format spec, `=` or an escape leaves it a constant of unknown value."""
    if len(node.parts) > MAX_FORMATTED_PARTS:
        return CONST
    parts: list[Expr] = []
    for part in node.parts:
        if isinstance(part, cst.FormattedStringText):
            if "\\" in part.value:
                return CONST
            parts.append(("k", part.value.replace("{{", "{").replace("}}", "}")))
        elif part.conversion is None and part.format_spec is None and part.equal is None:
            parts.append(expr(part.expression, depth + 1))
        else:
            return CONST
    return ("fs", tuple(parts))


def arg_expr(node) -> Expr:
    """A call argument kept only when cheap and useful to partial evaluation: a name, a dotted
    attribute or a literal (constant arguments decide branches in the callee); else unknown."""
    if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return expr(node)
    if isinstance(node, cst.Attribute) and dotted_cst(node):
        return expr(node)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return expr(node)
    return UNKNOWN


def exits(block) -> bool:
    """Whether a block always leaves the enclosing flow: its last statement returns, raises or jumps."""
    stmts = flatten(body(block))
    return bool(stmts) and isinstance(stmts[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))


def collect_calls(root) -> list[cst.Call]:
    """Calls in source order (outer before inner), not descending into nested defs or lambdas."""
    found: list[cst.Call] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if type(node) is cst.Call:
            found.append(node)
        children = expr_children(node)
        if children:
            stack.extend(reversed(children))
    return found


def expr_children(node) -> list:
    """Children worth descending into for calls: a table for common nodes, libcst's list otherwise."""
    get = _CHILDREN.get(type(node))
    if get is not None:
        return get(node)
    return [c for c in node.children if not isinstance(c, _WHITESPACE)]


def elements(node) -> list:
    return [e.value for e in node.elements]


def comp(node) -> list:
    out = [node.elt] if hasattr(node, "elt") else [node.key, node.value]
    f = node.for_in
    while f is not None:
        out.append(f.iter)
        out.extend(i.test for i in f.ifs)
        f = f.inner_for_in
    return out


_WHITESPACE = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.Comment,
               cst.EmptyLine, cst.TrailingWhitespace)
_NONE: list = []
_CHILDREN = {
    cst.Call: lambda n: [n.func, *(a.value for a in n.args)],
    cst.Attribute: lambda n: [n.value],
    cst.Name: lambda n: _NONE,
    cst.Integer: lambda n: _NONE,
    cst.Float: lambda n: _NONE,
    cst.SimpleString: lambda n: _NONE,
    cst.ConcatenatedString: lambda n: _NONE,
    cst.Ellipsis: lambda n: _NONE,
    cst.Expr: lambda n: [n.value],
    cst.Assign: lambda n: [n.value],
    cst.AugAssign: lambda n: [n.value],
    cst.AnnAssign: lambda n: [n.value] if n.value is not None else _NONE,
    cst.Return: lambda n: [n.value] if n.value is not None else _NONE,
    cst.Raise: lambda n: [n.exc] if n.exc is not None else _NONE,
    cst.Assert: lambda n: [n.test],
    cst.Pass: lambda n: _NONE,
    cst.Break: lambda n: _NONE,
    cst.Continue: lambda n: _NONE,
    cst.Global: lambda n: _NONE,
    cst.Nonlocal: lambda n: _NONE,
    cst.Del: lambda n: _NONE,
    cst.BinaryOperation: lambda n: [n.left, n.right],
    cst.BooleanOperation: lambda n: [n.left, n.right],
    cst.UnaryOperation: lambda n: [n.expression],
    cst.Comparison: lambda n: [n.left, *(c.comparator for c in n.comparisons)],
    cst.IfExp: lambda n: [n.test, n.body, n.orelse],
    cst.Subscript: lambda n: [n.value, *(getattr(e.slice, "value", e.slice) for e in n.slice)],
    cst.Index: lambda n: [n.value],
    cst.Tuple: elements,
    cst.List: elements,
    cst.Set: elements,
    cst.Dict: lambda n: [x for e in n.elements for x in ((e.key, e.value) if isinstance(e, cst.DictElement) else (e.value,))],
    cst.ListComp: comp,
    cst.SetComp: comp,
    cst.GeneratorExp: comp,
    cst.DictComp: comp,
    cst.Await: lambda n: [n.expression],
    cst.NamedExpr: lambda n: [n.value],
    cst.StarredElement: lambda n: [n.value],
    cst.Lambda: lambda n: _NONE,
}


def call_lines(node: ast.AST, calls: list[cst.Call]) -> list[tuple[int, int]]:
    """(first line, last line) of each libcst call, matched to ast calls of the same statement by callee
    text and order. The last line orders calls as Python makes them: a call in the arguments of a call
    that spans lines 244-271 is made at line 260, before the outer one."""
    by_name: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            by_name[ast_callee(sub.func)].append((sub.lineno, sub.col_offset, sub.end_lineno or sub.lineno))
    for spots in by_name.values():
        spots.sort()
    seen: dict[str, int] = defaultdict(int)
    lines = []
    fallback = getattr(node, "lineno", 0)
    for call in calls:
        key = cst_callee(call.func)
        spots = by_name.get(key, ())
        index = seen[key]
        seen[key] += 1
        lines.append((spots[index][0], spots[index][2]) if index < len(spots) else (fallback, fallback))
    return lines


def ast_callee(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{ast_callee(func.value)}.{func.attr}"
    if isinstance(func, ast.Call):
        return f"{ast_callee(func.func)}()"
    if isinstance(func, ast.Subscript):
        return f"{ast_callee(func.value)}[]"
    return "?"


def cst_callee(func) -> str:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return f"{cst_callee(func.value)}.{func.attr.value}"
    if isinstance(func, cst.Call):
        return f"{cst_callee(func.func)}()"
    if isinstance(func, cst.Subscript):
        return f"{cst_callee(func.value)}[]"
    return "?"


def flatten(stmts) -> list:
    out = []
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend(stmt.body)
        else:
            out.append(stmt)
    return out


def body(block) -> list:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    return []


def ast_list(node, name: str) -> list:
    return list(getattr(node, name, None) or []) if node is not None else []


def all_params(params: cst.Parameters) -> list[cst.Param]:
    out = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out


def dotted_cst(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_cst(node.value)}.{node.attr.value}"
    return ""


def name_of(node) -> str:
    return dotted_cst(node) if not isinstance(node, str) else node


def loop_text(iterable: Expr) -> str:
    return render(iterable) or "..."


def string_elements(node) -> tuple[str, ...] | None:
    """The strings of a list/tuple literal of plain string constants, else None."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    out: list[str] = []
    for element in node.elements:
        value = element.value
        if not isinstance(value, cst.SimpleString):
            return None
        text = value.evaluated_value
        if not isinstance(text, str):
            return None
        out.append(text)
    return tuple(out)

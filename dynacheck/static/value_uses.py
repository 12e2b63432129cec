"""Where a function uses a value as a Python value: branch tests, conversions, indexes, f-strings.

Recorded once per module by the summary pass (pure functions over libcst nodes); whether the
value is a tensor is decided later by `tensors.py`, which knows the call graph. A use is a
small tuple `(kind, line, expr, extra, in_loop)` (in_loop: inside a `for` body or a `while` test,
where a graph break also makes Dynamo give up on the loop's frame, GB7000):

    test     `if`/`while`/conditional-expression test         expr: the test
    convert  `bool(v)` `int(v)` `float(v)` `complex(v)`         extra: the builtin's name
    builtin  `range(v)` `sorted(v)` `str(v)` `repr(v)` ...      extra: the builtin's name
    math     `math.f(v)` (any dotted callee; resolved later)   extra: the callee expr
    index    `base[v]` with one non-slice index                extra: the base expr
    format   `f"{v}"`                 extra: the name it is assigned to, or ("arg", callee) when it is
                                      a call's argument, else None
    address  `v.data_ptr() % 16`      arithmetic on a tensor's address   extra: the operator
    class    a class statement in the function body            expr: the class name
"""

from __future__ import annotations

import re

import libcst as cst

from dynacheck.static import cst_nodes as cn
from dynacheck.static.ir import CONST, Expr

CONVERTERS = frozenset({"bool", "int", "float", "complex"})
BUILTINS = frozenset({"range", "sorted", "str", "repr", "format", "hex", "oct", "chr", "ord", "hash"})
_NAME_TESTS = (cst.Is, cst.IsNot, cst.In, cst.NotIn)

Use = tuple  # (kind, line, expr, extra, in_loop[, guards]): guards as a CallSite's, where the statement has any


_TENSOR_ANNOTATION = re.compile(r"^\s*(Optional\[)?\s*[\"']?(torch\.)?Tensor[\"']?\s*(\]|\|\s*None)?\s*$")
TENSOR, OTHER = "Tensor", "other"  # what the summary keeps of a parameter's annotation


def is_tensor_annotation(text: str) -> bool:
    """`Tensor`, `torch.Tensor`, `Optional[torch.Tensor]`, `torch.Tensor | None` (not containers of tensors)."""
    return bool(text) and bool(_TENSOR_ANNOTATION.match(text))


def annotation_kind(node) -> str:
    """TENSOR or OTHER: all the tensor dataflow needs of a parameter's annotation (kept small in the cache)."""
    return TENSOR if is_tensor_annotation(annotation_name(node)) else OTHER


def annotation_name(node) -> str:
    """A parameter's annotation as short text, cheaply: `torch.Tensor`, `Optional[torch.Tensor]`,
    `torch.Tensor | None`; "?" for anything more complex (only tensor-ness is read from it)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return cn.dotted_cst(node) or "?"
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value
        return text if isinstance(text, str) and len(text) < 80 else "?"
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        head = cn.dotted_cst(node.value).rpartition(".")[2]
        return f"{head}[{annotation_name(node.slice[0].slice.value)}]"
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return f"{annotation_name(node.left)} | {annotation_name(node.right)}"
    return "?"


def test_expr(node) -> Expr:
    """A branch test as our expression form; `is`/`in` tests are Python bools whatever the operands."""
    if isinstance(node, cst.Comparison):
        if any(isinstance(c.operator, _NAME_TESTS) for c in node.comparisons):
            return CONST
        return ("cmp", cn.expr(node.left))
    if isinstance(node, cst.BooleanOperation):
        kind = "and" if isinstance(node.operator, cst.And) else "or"
        return (kind, (test_expr(node.left), test_expr(node.right)))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return ("not", test_expr(node.expression))
    return cn.expr(node)


def collect(root, line: int, in_loop: bool = False) -> list[Use]:
    """Value uses inside one expression or small statement (not descending into nested defs)."""
    return calls_and_uses(root, line, in_loop)[1]


def calls_and_uses(root, line: int, in_loop: bool = False,
                   self_reads: list | None = None) -> tuple[list[cst.Call], list[Use], list[tuple]]:
    """One walk for both: the calls in source order (as `cst_nodes.collect_calls` lists them) and the
    value uses (the summary pass runs this on every statement, so it walks each tree once).
    `self_reads`, when given, receives the names of `self.x` read but not called (a property's
    getter runs there)."""
    calls: list[cst.Call] = []
    uses: list[tuple] = []
    named = _assigned_name(root)
    stack: list = [(root, ())]
    inside: list[tuple] = []  # per call: the conditional-expression branches it sits in (test node, taken)
    called: set[int] = set()  # the `self.m` of `self.m(...)`: a method call, not a read
    passed: dict[int, Expr] = {}  # an f-string given straight to a call -> that call's function
    while stack:
        node, where = stack.pop()
        kind = type(node)
        if kind is cst.Call:
            calls.append(node)
            inside.append(where)
            _call(node, line, uses)
            called.add(id(node.func))
            for arg in node.args:
                if type(arg.value) is cst.FormattedString and not arg.star:
                    passed[id(arg.value)] = cn.expr(node.func)
        elif kind is cst.Attribute and self_reads is not None and id(node) not in called:
            base = node.value
            if type(base) is cst.Name and base.value == "self":
                self_reads.append(node.attr.value)
        elif kind is cst.IfExp:
            uses.append(("test", line, test_expr(node.test), None))
            stack.append((node.orelse, where + ((node.test, False),)))
            stack.append((node.body, where + ((node.test, True),)))
            stack.append((node.test, where))
            continue
        elif kind is cst.Subscript:
            _subscript(node, line, uses)
        elif kind is cst.BinaryOperation:
            _address(node, line, uses)
        elif kind is cst.FormattedString:
            # Dynamo formats lazily: where the string goes decides where (and whether) it becomes text
            goes = named if node is _value(root) else (("arg", passed[id(node)]) if id(node) in passed else None)
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    uses.append(("format", line, cn.expr(part.expression), goes))
        children = cn.expr_children(node)
        if children:
            stack.extend((child, where) for child in reversed(children))
    return calls, [(*use, in_loop) for use in uses], inside


def _value(root):
    return root.value if isinstance(root, cst.Assign) else None


def _assigned_name(root) -> str | None:
    """`msg = f"..."`: Dynamo formats lazily, so the hazard is where `msg` is first used."""
    if isinstance(root, cst.Assign) and len(root.targets) == 1 and isinstance(root.targets[0].target, cst.Name):
        return root.targets[0].target.value
    return None


def _address(node: cst.BinaryOperation, line: int, uses: list[Use]) -> None:
    """`x.data_ptr() % 16`, `x.data_ptr() + offset`: Dynamo refuses arithmetic on the address (a
    comparison of two addresses traces). `extra` holds the `data_ptr()` call until `at_call_lines`
    places the use on that call's line."""
    for side in (node.left, node.right):
        if type(side) is cst.Call and type(side.func) is cst.Attribute and side.func.attr.value == "data_ptr" \
                and not side.args:
            uses.append(("address", line, cn.expr(side.func.value), side))
            return


def at_call_lines(uses: list[Use], calls: list[cst.Call], lines: list[tuple[int, int]] | None) -> list[Use]:
    """Each `address` use on the line of its `data_ptr()` call (a test spanning lines 200-205 breaks at
    204), its call node dropped (summaries hold no libcst nodes)."""
    if not any(use[0] == "address" for use in uses):
        return uses
    index = {id(call): i for i, call in enumerate(calls)}
    out = []
    for use in uses:
        if use[0] == "address":
            at = index.get(id(use[3]))
            line = lines[at][0] if lines and at is not None else use[1]
            use = ("address", line, use[2], None, *use[4:])
        out.append(use)
    return out


def _call(node: cst.Call, line: int, uses: list[Use]) -> None:
    func = node.func
    if isinstance(func, cst.Name):
        if func.value in CONVERTERS:
            kind = "convert"
        elif func.value in BUILTINS:
            kind = "builtin"
        else:
            return
        extra = func.value
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "math":
        kind, extra = "math", cn.expr(func)
    else:
        return
    args = [a for a in node.args if a.keyword is None and not a.star]
    if args:
        uses.append((kind, line, cn.expr(args[0].value), extra))


def _subscript(node: cst.Subscript, line: int, uses: list[Use]) -> None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return
    index = node.slice[0].slice.value
    if isinstance(index, (cst.Integer, cst.SimpleString, cst.UnaryOperation, cst.Ellipsis)):
        return
    if isinstance(index, cst.Name) and index.value == "None":
        return
    mask = isinstance(index, cst.Comparison) and not any(isinstance(c.operator, _NAME_TESTS)
                                                          for c in index.comparisons)
    uses.append(("mask" if mask else "index", line, cn.expr(index), cn.expr(node.value)))

"""What deploy/post_init.py interprets to decide one rule of `ServerArgs`, read once per file version: the
`__post_init__` call order, the methods before the rule that assign a field it reads (closed over the tests
around those assignments), the strings those methods compare an architecture with, and SGLang's GPU helpers."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Sequence

from dynacheck.deploy.post_init import assigned_targets, fields_assigned, fields_read, self_field


@dataclass(frozen=True)
class Plan:
    """What to interpret for one statement: the `__post_init__` methods before it that assign a field its
    test reads (closed over the tests around those assignments), then its own method up to it."""

    before: tuple[str, ...]
    method: str
    statement: ast.stmt
    fields: frozenset  # the fields that decide it
    words: frozenset  # the strings of those methods: the architecture is only compared with them
    at_end: bool = False  # the statement is read after its method has run to the end (a method's outcome)

    def architecture_key(self, architecture: str) -> frozenset:
        """Architectures with the same key are decided alike: the interpreter sees one only through `==`,
        `in` a list of strings, and a string `in` it."""
        return frozenset((word, word == architecture) for word in self.words if word and word in architecture)


def plan(klass: ast.ClassDef, order: Sequence[str], method: str, stmt: ast.stmt, at_end: bool = False) -> Plan:
    methods = {n.name: n for n in klass.body if isinstance(n, ast.FunctionDef)}
    upto = list(order[: order.index(method) + 1])
    wanted = _relevant_fields(methods, stmt, upto)
    before = tuple(name for name in upto[:-1] if name in methods and fields_assigned(methods[name]) & wanted)
    words = frozenset(node.value for name in before + (method,) for node in ast.walk(methods[name])
                      if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return Plan(before, method, stmt, frozenset(wanted), words, at_end)


def _relevant_fields(methods: dict[str, ast.FunctionDef], stmt: ast.stmt, order: Sequence[str]) -> set[str]:
    wanted = fields_read(stmt.test) if isinstance(stmt, ast.If) else set()
    while True:
        grown = set(wanted)
        for name in order:
            method = methods.get(name)
            if method is None:
                continue
            for test in _tests_around_assignments(method, wanted):
                grown |= fields_read(test)
        if grown == wanted:
            return wanted
        wanted = grown


def _tests_around_assignments(method: ast.FunctionDef, wanted: set[str]) -> list[ast.expr]:
    """The tests that decide whether a wanted field is assigned, or whether the method returns
    before what follows: `if self.enforce_piecewise_cuda_graph: return` decides everything after it."""
    tests: list[ast.expr] = []

    def visit(body: Sequence[ast.stmt], around: list[ast.expr]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                visit(stmt.body, around + [stmt.test])
                visit(stmt.orelse, around + [stmt.test])
            elif isinstance(stmt, ast.Return) or any(self_field(t) in wanted for t in assigned_targets(stmt)):
                tests.extend(around)
            else:
                for child in ("body", "orelse", "finalbody"):
                    visit(getattr(stmt, child, []) or [], around)
    visit(method.body, [])
    return tests


def post_init_order(klass: ast.ClassDef) -> list[str]:
    """The `self._name()` calls at the top level of `__post_init__`, in order."""
    init = next((n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__"), None)
    out = []
    for stmt in init.body if init is not None else ():
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and self_field(stmt.value.func):
            out.append(self_field(stmt.value.func))
    return out


def gpu_helpers(tree: ast.Module) -> dict[str, tuple[frozenset, tuple[int, int]]]:
    """`is_sm100_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version,
    device_capability_majors=[10], cuda_version=(12, 8)))` and the like (sglang `utils/common.py`)."""
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        partial = next((c for c in ast.walk(node.value) if isinstance(c, ast.Call) and ast.unparse(c.func) == "partial"
                        and c.args and ast.unparse(c.args[0]) == "_check_cuda_device_version"), None)
        if partial is None:
            continue
        keywords = {k.arg: k.value for k in partial.keywords}
        try:
            majors = frozenset(ast.literal_eval(keywords["device_capability_majors"]))
            least = tuple(ast.literal_eval(keywords["cuda_version"]))
        except (KeyError, ValueError, TypeError, SyntaxError):
            continue
        for target in node.targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    out[name.id] = (majors, least)
    return out

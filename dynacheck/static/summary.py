"""One libcst pass per module into a small, picklable summary of what the call graph needs.

Line numbers come from Python's `ast`, walked in step with the libcst statements: libcst's
PositionProvider costs about twice the parse itself, while `ast.parse` costs a seventh of it,
and statement lists correspond one to one in both trees.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field

import libcst as cst

from dynacheck.errors import one_line
from dynacheck.static import cst_nodes as cn
from dynacheck.static import lazy_bodies, value_uses
from dynacheck.static.ir import UNKNOWN, Expr, dotted

ARG_DEPTH = 28  # cst_nodes.expr stops at depth 30: call arguments keep three levels
SUMMARY_VERSION = 33  # bump when the shape below changes: invalidates the cache


@dataclass
class CallSite:
    line: int
    func: Expr
    positional: int = 0  # how many positional arguments (only the count matters: arity checks)
    keywords: tuple[str, ...] = ()  # keyword argument names
    guards: tuple[tuple[Expr, bool, int], ...] = ()  # enclosing if-tests, the branch taken, the test's line
    loop: str = ""  # the iterable of the innermost enclosing `for` ("" outside loops)
    kind: str = "call"  # call | with (an object used as a context manager)
    args: tuple[Expr, ...] = ()  # positional argument values, three levels deep (tensor-ness, constant arguments)
    kwargs: tuple[tuple[str, Expr], ...] = ()  # keyword argument values, three levels deep
    end: int = 0  # the call's last line (0: its first): calls in a call's arguments are made before it


@dataclass
class FunctionSummary:
    qualname: str  # Class.method, func, outer.<locals>.inner
    name: str
    line: int
    cls: str = ""  # qualname of the class that owns the method
    parent: str = ""  # qualname of the enclosing function
    params: tuple[str, ...] = ()
    decorators: tuple[Expr, ...] = ()
    calls: list[CallSite] = field(default_factory=list)
    assigns: dict[str, list[Expr]] = field(default_factory=dict)  # local name -> values
    assign_lines: dict[str, list[int]] = field(default_factory=dict)  # in step with assigns (0: unknown)
    assign_guards: dict[str, list[tuple]] = field(default_factory=dict)  # in step: (guards, in a loop)
    self_assigns: dict[str, list[Expr]] = field(default_factory=dict)  # self.x = value
    self_assign_guards: dict[str, list[tuple]] = field(default_factory=dict)  # in step: the guards of each
    annotations: dict[str, Expr] = field(default_factory=dict)  # self.x: T / local: T
    local_imports: dict[str, str] = field(default_factory=dict)  # name -> dotted target
    returns: list[Expr] = field(default_factory=list)
    return_guards: list[tuple] = field(default_factory=list)  # the guards of each return, in step with returns
    nested: list[str] = field(default_factory=list)
    globals_declared: set[str] = field(default_factory=set)  # `global x`: assignments rebind the module
    nonlocals_declared: set[str] = field(default_factory=set)  # `nonlocal x`: assignments rebind the parent's x
    returns_annotation: str = ""  # the `-> T` text, to tell which functions return tensors
    arity: tuple[int, int, bool, bool] = (0, 0, True, True)  # positional, required, *args, **kwargs
    defaults: dict[str, Expr] = field(default_factory=dict)  # parameter -> its default (names and literals only)
    param_types: dict[str, Expr] = field(default_factory=dict)  # parameter -> its annotation (partial evaluation)
    param_annotations: dict[str, str] = field(default_factory=dict)  # parameter -> "Tensor" | "other" (annotated)
    value_uses: list[tuple] = field(default_factory=list)  # see value_uses.py: values used as Python values
    self_reads: list[tuple] = field(default_factory=list)  # (attr, line, guards, loop): `self.x` read, first of each
    asserts: list[tuple] = field(default_factory=list)  # (test, line, guards): a constructor's checks (startup.py)
    raises: list[tuple] = field(default_factory=list)  # (line, guards) of each `raise` outside any `try` body


@dataclass
class ClassSummary:
    qualname: str
    name: str
    line: int
    bases: tuple[Expr, ...] = ()
    methods: dict[str, str] = field(default_factory=dict)  # name -> function qualname
    attrs: dict[str, list[Expr]] = field(default_factory=dict)  # class-level assignments
    decorators: tuple[Expr, ...] = ()


@dataclass
class Binding:
    """A module-level name and one of the values it may hold, in source order."""

    kind: str  # import | def | class | assign | global (value = (function qualname, expr))
    value: object  # dotted target (import), qualname (def/class), Expr (assign)
    line: int = 0
    conditional: bool = False  # under if/try at module level
    guards: tuple = ()  # the module-level if-tests (and except handlers) the binding sits under


@dataclass
class ModuleSummary:
    module: str
    path: str
    is_package: bool
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    exports: tuple[str, ...] | None = None  # `__all__` when it is a literal list of strings
    fakes: set[str] = field(default_factory=set)  # names N with `@N.register_fake` / `N.register_fake(f)`
    string_fakes: bool = False  # torch.library.register_fake("ns::op") seen: fakes by op name
    error: str = ""  # set when the file could not be parsed
    lines: int = 0
    pending: dict[str, tuple[int, int]] = field(default_factory=dict)  # deferred bodies: lazy_bodies.py
    body_errors: list[str] = field(default_factory=list)  # deferred bodies that could not be summarized

    def defer(self, pending: dict[str, tuple[int, int]], source: str) -> None:
        """Keep `source` to summarize the deferred bodies from when a lookup names one."""
        self.pending = pending
        self.attach_source(source)

    def attach_source(self, source: str) -> None:
        if not self.pending:
            return
        self._source = source
        self._dirty = False
        if not isinstance(self.functions, lazy_bodies.Defs):
            self.functions = lazy_bodies.Defs(self.functions, self)
            self.classes = lazy_bodies.Defs(self.classes, self)

    def fill(self, name: str) -> None:
        """Summarize the deferred body of top-level `name` into `functions`/`classes`."""
        span = self.pending.pop(name, None)
        if span is None:
            return
        self._dirty = True
        source = getattr(self, "_source", None)
        if source is None:  # no text to read it from: the skeleton's empty summary stands
            self.body_errors.append(f"{name}: the source text was not kept")
            return
        lines = self.__dict__.get("_lines")
        if lines is None:
            lines = self._lines = source.splitlines(keepends=True)
        prefetch = self.__dict__.get("_prefetch")  # a second core may have summarized it: prefetch.py
        part = prefetch.take_body(self, name, span) if prefetch is not None else None
        exchange = self.__dict__.get("_exchange")  # another census worker may have: body_exchange.py
        if part is None and exchange is not None:
            part = exchange[0].take(exchange[1], name)
        if part is None:
            part = summarize_body(self.module, self.path, self.is_package, *lazy_bodies.chunk(lines, *span))
            if exchange is not None:
                exchange[0].give(exchange[1], name, part)
        merge_body(self, name, part)
        if prefetch is not None:
            prefetch.after_body(self, name)
        if not self.pending:
            self._source = self._lines = None

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        state["functions"] = lazy_bodies.Defs.raw(self.functions) if isinstance(self.functions, lazy_bodies.Defs) \
            else self.functions
        state["classes"] = lazy_bodies.Defs.raw(self.classes) if isinstance(self.classes, lazy_bodies.Defs) \
            else self.classes
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


MAX_LINE_CHARS = 100_000  # libcst takes minutes on a megabyte-long line; such lines are data tables
MAX_NESTING = 2000  # syntax-tree levels; libcst's native parser overflows its stack from ~6000
# On CPython 3.11, ast.parse under a recursion limit of 1000 refuses trees deeper than ~3000 levels, and
# libcst parses everything it accepts (measured: 2,950-deep attribute and `+` chains); elsewhere the
# depth is measured with a walk (about 5 ms a file) before libcst sees the source.
_PARSE_RECURSION = 1000
_AST_GUARD_MEASURED = sys.version_info[:2] == (3, 11)
_WALK_RECURSION = 10_000  # the walker recurses per level: room for MAX_NESTING, far below the C stack


def _overload_stub(function: FunctionSummary) -> bool:
    """A def decorated `@overload` (`typing` or `typing_extensions`): a signature, never what is called."""
    return any((dotted(d) or "").rpartition(".")[2] == "overload" for d in function.decorators)


def summarize(source: str, module: str, path: str, is_package: bool, defer: bool = True) -> ModuleSummary:
    """Parse one module and keep what call resolution needs; a file that cannot be read yields an
    empty summary whose `error` says why in one line.

    Python's own parser goes first: it rejects what Python itself cannot import (syntax errors,
    nesting past its recursion guard) at once, and its tree's depth is checked before libcst's
    native parser, which would crash the process on deeper input instead of raising.

    With `defer`, top-level bodies are summarized when first looked up (lazy_bodies.py).
    """
    summary = ModuleSummary(module=module, path=path, is_package=is_package)
    summary.lines = source.count("\n") + 1
    longest = max(map(len, source.splitlines()), default=0)
    if longest > MAX_LINE_CHARS:
        summary.error = f"LineTooLong: a line of {longest} characters (generated data, not traced code): skipped"
        return summary
    previous = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(min(previous, _PARSE_RECURSION))
        guarded = _AST_GUARD_MEASURED
    except RecursionError:  # already deeper than that: keep the limit, measure the depth instead
        guarded = False
    try:
        positions = ast.parse(source)
    except RecursionError:
        summary.error = "NestingError: code nested too deeply for Python's own parser"
        return summary
    except (SyntaxError, ValueError, MemoryError) as exc:
        summary.error = one_line(exc)
        return summary
    finally:
        sys.setrecursionlimit(previous)
    if not guarded and nesting(positions, MAX_NESTING) > MAX_NESTING:
        summary.error = f"NestingError: code nested more than {MAX_NESTING} levels deep"
        return summary
    text, pending = lazy_bodies.skeleton(source, positions) if defer else (source, {})
    try:
        tree = parse_unvalidated(text)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError) as exc:
        summary.error = one_line(exc)
        return summary
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, _WALK_RECURSION))
    try:
        _ModuleWalker(summary).walk_module(tree, positions)
    except RecursionError:
        summary.error = "NestingError: code nested too deeply to summarize the rest of the file"
    finally:
        sys.setrecursionlimit(previous)
    if pending and not summary.error:
        summary.defer(pending, source)
    return summary


def summarize_body(module: str, path: str, is_package: bool, text: str, placed: str) -> ModuleSummary | str:
    """What one deferred definition defines (a module summary holding just it), or why it could not
    be read: the part a fill merges, made here or by the prefetch worker (prefetch.py)."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, _WALK_RECURSION))
    try:
        node = ast.parse(placed).body[0]
        stmt = parse_unvalidated(text).body[0]
        part = ModuleSummary(module=module, path=path, is_package=is_package)
        _ModuleWalker(part).walk_stmt(stmt, node, node.lineno, _Scope(), (), "", False, "")
        return part
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, IndexError) as exc:
        return one_line(exc)
    finally:
        sys.setrecursionlimit(previous)


def merge_body(summary: ModuleSummary, name: str, part: ModuleSummary | str) -> None:
    if isinstance(part, str):
        summary.body_errors.append(f"{name}: {part}")
        return
    for qualname, function in part.functions.items():
        dict.__setitem__(summary.functions, qualname, function)
    for qualname, klass in part.classes.items():
        dict.__setitem__(summary.classes, qualname, klass)
    summary.fakes |= part.fakes
    summary.string_fakes = summary.string_fakes or part.string_fakes


def parse_unvalidated(text: str) -> cst.Module:
    """`cst.parse_module` without libcst's per-node validation (about 15 % of a parse, measured on the
    flagship's files): each node's `__post_init__` re-checks what a parser already guarantees, and the
    text has passed Python's own parser first. libcst's own note on `CSTNode.__post_init__` says as
    much ("avoid validating the tree when parsing a file"). The static scan is single-threaded, so
    no node built elsewhere meanwhile goes unchecked."""
    base = cst.CSTNode
    saved = base.__dict__["__post_init__"]
    base.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        base.__post_init__ = saved  # type: ignore[method-assign]


def _unchecked(self) -> None:
    return None


def nesting(tree: ast.AST, limit: int) -> int:
    """Depth of the syntax tree, walked without recursion; stops counting once past `limit`."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _absolute_imports(stmt) -> list[str]:
    """The modules an `import a.b` or `from a.b import c` statement names (relative imports: none)."""
    if isinstance(stmt, cst.Import):
        return [cn.dotted_cst(alias.name) for alias in stmt.names]
    if isinstance(stmt, cst.ImportFrom) and not stmt.relative and stmt.module is not None:
        return [cn.dotted_cst(stmt.module)]
    return []


class _Scope:
    """Where statements land while walking: the module, a class body or a function body."""

    def __init__(self, function: FunctionSummary | None = None, cls: ClassSummary | None = None):
        self.function = function
        self.cls = cls


class _ModuleWalker:
    def __init__(self, summary: ModuleSummary) -> None:
        self.s = summary
        self._guards: tuple = ()
        self._loop = ""
        self._tries = 0  # `try` bodies the statement is in: a `raise` there may be caught
        self.package = summary.module if summary.is_package else summary.module.rpartition(".")[0]

    # ----- statements -------------------------------------------------------------------------

    def walk_module(self, tree: cst.Module, positions: ast.Module) -> None:
        self.walk_block(tree.body, positions.body, _Scope(), guards=(), loop="", conditional=False, prefix="")

    def walk_block(self, stmts, nodes, scope, guards, loop, conditional, prefix, try_body: bool = False) -> None:
        small = cn.flatten(stmts)
        lines = [n.lineno for n in nodes] if len(nodes) == len(small) else None
        for index, stmt in enumerate(small):
            node = nodes[index] if lines else None
            line = node.lineno if node is not None else (nodes[0].lineno if nodes else 0)
            self.walk_stmt(stmt, node, line, scope, guards, loop, conditional, prefix)
            if isinstance(stmt, cst.If) and stmt.orelse is None and cn.exits(stmt.body):
                # `if test: return ...` — what follows runs only when the test was false
                guards = guards + ((self.expr(stmt.test), False, line),)
            elif try_body:
                # `try: import xielu.ops` — what follows in the try body runs only when the import succeeded
                guards = guards + tuple((("imp", name), True, line) for name in _absolute_imports(stmt))

    def walk_stmt(self, stmt, node, line, scope, guards, loop, conditional, prefix) -> None:
        walk = self.walk_block
        self._guards = guards  # bindings (module-level and local) remember the tests they sit under
        self._loop = loop
        if isinstance(stmt, cst.FunctionDef):
            self.define_function(stmt, node, line, scope, conditional, prefix)
        elif isinstance(stmt, cst.ClassDef):
            self.define_class(stmt, node, line, scope, conditional, prefix)
        elif isinstance(stmt, cst.If):
            test = self.expr(stmt.test)
            self.note_test(stmt.test, line, scope, bool(loop), guards)
            self.exprs_calls(stmt.test, getattr(node, "test", None), line, scope, guards, loop)
            walk(cn.body(stmt.body), cn.ast_list(node, "body"), scope, guards + ((test, True, line),), loop, True,
                 prefix)
            if stmt.orelse is not None:
                orelse = stmt.orelse
                other_guards = guards + ((test, False, line),)
                if isinstance(orelse, cst.If):
                    sub = cn.ast_list(node, "orelse")
                    self.walk_stmt(orelse, sub[0] if sub else None, sub[0].lineno if sub else line,
                                   scope, other_guards, loop, True, prefix)
                else:
                    walk(cn.body(orelse.body), cn.ast_list(node, "orelse"), scope, other_guards, loop, True, prefix)
        elif isinstance(stmt, (cst.For, cst.While)):
            inner_loop = loop
            if isinstance(stmt, cst.For):
                self.exprs_calls(stmt.iter, getattr(node, "iter", None), line, scope, guards, loop)
                iterable = self.expr(stmt.iter)
                inner_loop = cn.loop_text(iterable)
                self.bind_target(stmt.target, ("it", iterable), scope)
            else:
                self.exprs_calls(stmt.test, getattr(node, "test", None), line, scope, guards, loop)
                self.note_test(stmt.test, line, scope, True, guards)
            walk(cn.body(stmt.body), cn.ast_list(node, "body"), scope, guards, inner_loop, True, prefix)
            if stmt.orelse is not None:
                walk(cn.body(stmt.orelse.body), cn.ast_list(node, "orelse"), scope, guards, loop, True, prefix)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            self._tries += 1
            try:
                walk(cn.body(stmt.body), cn.ast_list(node, "body"), scope, guards, loop, True, prefix, try_body=True)
            finally:
                self._tries -= 1
            handlers = cn.ast_list(node, "handlers")
            for i, handler in enumerate(stmt.handlers):
                hnode = handlers[i] if i < len(handlers) else None
                hline = hnode.lineno if hnode is not None else line
                walk(cn.body(handler.body), cn.ast_list(hnode, "body"), scope, guards + ((("exc", hline), True, hline),),
                     loop, True, prefix)
            if stmt.orelse is not None:
                walk(cn.body(stmt.orelse.body), cn.ast_list(node, "orelse"), scope, guards, loop, True, prefix)
            if stmt.finalbody is not None:
                walk(cn.body(stmt.finalbody.body), cn.ast_list(node, "finalbody"), scope, guards, loop, True, prefix)
        elif isinstance(stmt, cst.With):
            items = cn.ast_list(node, "items")
            for i, item in enumerate(stmt.items):
                item_node = items[i].context_expr if i < len(items) else None
                self.exprs_calls(item.item, item_node, line, scope, guards, loop)
                value = self.expr(item.item)
                self.add_call(scope, CallSite(line, value, guards=guards, loop=loop, kind="with"))
                if item.asname is not None:
                    self.bind_target(item.asname.name, ("c", ("a", value, "__enter__"), (), ()), scope)
            walk(cn.body(stmt.body), cn.ast_list(node, "body"), scope, guards, loop, conditional, prefix)
        elif isinstance(stmt, cst.Match):
            self.exprs_calls(stmt.subject, getattr(node, "subject", None), line, scope, guards, loop)
            cases = cn.ast_list(node, "cases")
            subject = self.expr(stmt.subject)
            for i, case in enumerate(stmt.cases):
                cnode = cases[i] if i < len(cases) else None
                cline = cnode.pattern.lineno if cnode is not None else line
                # a case body runs only when its pattern matches: ("case", subject, i) is never decided, so
                # what it guards is not read as surely run (startup.py), and leaves nothing conditional
                walk(cn.body(case.body), cn.ast_list(cnode, "body"), scope, guards + ((("case", subject, i), True, cline),),
                     loop, True, prefix)
        else:
            self.small_stmt(stmt, node, line, scope, guards, loop, conditional)

    def small_stmt(self, stmt, node, line, scope, guards, loop, conditional) -> None:
        if isinstance(stmt, cst.Import):
            for alias in stmt.names:
                full = cn.dotted_cst(alias.name)
                if alias.asname is not None:
                    self.bind_import(scope, cn.name_of(alias.asname.name), full, line, conditional)
                else:
                    top = full.split(".")[0]
                    self.bind_import(scope, top, top, line, conditional)
            return
        if isinstance(stmt, cst.Global) and scope.function is not None:
            scope.function.globals_declared.update(n.name.value for n in stmt.names)
            return
        if isinstance(stmt, cst.Nonlocal) and scope.function is not None:
            scope.function.nonlocals_declared.update(n.name.value for n in stmt.names)
            return
        if isinstance(stmt, cst.ImportFrom):
            base = self.resolve_from(stmt)
            if base is None:
                return
            if isinstance(stmt.names, cst.ImportStar):
                if scope.function is None:
                    self.s.star_imports.append(base)
                return
            for alias in stmt.names:
                name = cn.name_of(alias.name)
                local = cn.name_of(alias.asname.name) if alias.asname is not None else name
                self.bind_import(scope, local, f"{base}.{name}" if base else name, line, conditional)
            return
        # expressions inside any other small statement: record their calls
        self.exprs_calls(stmt, node, line, scope, guards, loop)
        if isinstance(stmt, cst.Assign):
            value = self.expr(stmt.value)
            for target in stmt.targets:
                if isinstance(target.target, cst.Subscript):  # `globals()[k] = v`: calls inside the target
                    self.exprs_calls(target.target, node, line, scope, guards, loop, uses=False)
                self.bind_target(target.target, value, scope, line, conditional)
                if scope.function is None and scope.cls is None:
                    self.note_exports(target.target, stmt.value, extend=False)
        elif isinstance(stmt, cst.AugAssign) and scope.function is None and scope.cls is None:
            self.note_exports(stmt.target, stmt.value, extend=True)
        elif isinstance(stmt, cst.AnnAssign):
            value = self.expr(stmt.value) if stmt.value is not None else None
            annotation = cn.annotation(stmt.annotation.annotation)
            self.annotate(stmt.target, annotation, scope)
            if value is not None:
                self.bind_target(stmt.target, value, scope, line, conditional)
        elif isinstance(stmt, cst.Return) and scope.function is not None and stmt.value is not None:
            scope.function.returns.append(self.expr(stmt.value))
            scope.function.return_guards.append(guards)
        elif isinstance(stmt, cst.Assert) and scope.function is not None:
            scope.function.asserts.append((self.expr(stmt.test), line, guards))
        elif isinstance(stmt, cst.Raise) and scope.function is not None and not self._tries:
            scope.function.raises.append((line, guards))

    def note_exports(self, target, value, extend: bool) -> None:
        """`__all__ = [...]` / `__all__ += [...]` of string literals: what `from m import *` takes."""
        if not (isinstance(target, cst.Name) and target.value == "__all__"):
            return
        names = cn.string_elements(value)
        if names is None:  # computed: fall back to the public names
            self.s.exports = None
            return
        self.s.exports = (*(self.s.exports or ()), *names) if extend else names

    # ----- definitions ------------------------------------------------------------------------

    def define_function(self, stmt: cst.FunctionDef, node, line, scope, conditional, prefix) -> None:
        name = stmt.name.value
        qualname = f"{prefix}{name}"
        cls = scope.cls.qualname if scope.cls is not None else ""
        parent = scope.function.qualname if scope.function is not None else ""
        decorators = tuple(self.expr(d.decorator) for d in stmt.decorators)
        for decorator in decorators:
            self.note_fake(decorator)
        params = tuple(p.name.value for p in cn.all_params(stmt.params))
        def_line = node.lineno if node is not None else line
        summary = FunctionSummary(qualname, name, def_line, cls, parent, params, decorators)
        positional = [*stmt.params.posonly_params, *stmt.params.params]
        summary.defaults = {p.name.value: cn.arg_expr(p.default) for p in cn.all_params(stmt.params)
                            if p.default is not None}
        summary.param_types = {p.name.value: cn.annotation(p.annotation.annotation) for p in cn.all_params(stmt.params)
                               if p.annotation is not None and p.name.value not in ("self", "cls")}
        summary.arity = (len(positional), sum(1 for p in positional if p.default is None),
                         isinstance(stmt.params.star_arg, cst.Param), stmt.params.star_kwarg is not None)
        summary.param_annotations = {p.name.value: value_uses.annotation_kind(p.annotation.annotation)
                                     for p in cn.all_params(stmt.params) if p.annotation is not None}
        if stmt.returns is not None:
            summary.returns_annotation = cn.annotation_text(stmt.returns.annotation)
        if qualname in self.s.functions:  # redefinition (if/else variants): keep both
            if _overload_stub(self.s.functions[qualname]) and not _overload_stub(summary):
                self._move_stub(qualname, name, scope)  # the implementation is what the name holds
            else:
                qualname = f"{qualname}@{def_line}"
                summary.qualname = qualname
        self.s.functions[qualname] = summary
        decorator_nodes = cn.ast_list(node, "decorator_list")
        for i, d in enumerate(stmt.decorators):
            d_node = decorator_nodes[i] if i < len(decorator_nodes) else None
            self.exprs_calls(d.decorator, d_node, def_line, scope, (), "")
        if scope.function is not None:
            scope.function.nested.append(qualname)
            scope.function.assigns.setdefault(name, []).append(("fn", qualname))
            scope.function.assign_lines.setdefault(name, []).append(def_line)
            scope.function.assign_guards.setdefault(name, []).append((self._guards, bool(self._loop)))
        elif scope.cls is not None:
            scope.cls.methods.setdefault(name, qualname)
        else:
            self.s.bindings.setdefault(name, []).append(Binding("def", qualname, def_line, conditional, self._guards))
        self.walk_block(cn.body(stmt.body), cn.ast_list(node, "body"), _Scope(function=summary),
                        (), "", False, f"{qualname}.<locals>.")

    def _move_stub(self, qualname: str, name: str, scope) -> None:
        """`@typing.overload` stubs come before the implementation, and at run time the name (module
        global or class attribute) holds the implementation: it takes the plain qualname, and the stub
        it follows moves to `name@line` with what named it (a method's first definition was kept, so a
        call of an overloaded `Wrapper.run` resolved to a `...` stub and its body was never walked)."""
        stub = self.s.functions.pop(qualname)
        stub.qualname = moved = f"{qualname}@{stub.line}"
        self.s.functions[moved] = stub
        if scope.function is not None:
            named = scope.function.assigns.get(name, [])
            scope.function.assigns[name] = [("fn", moved) if v == ("fn", qualname) else v for v in named]
            scope.function.nested = [moved if q == qualname else q for q in scope.function.nested]
        elif scope.cls is None:
            for binding in self.s.bindings.get(name, ()):
                if binding.kind == "def" and binding.value == qualname:
                    binding.value = moved

    def define_class(self, stmt: cst.ClassDef, node, line, scope, conditional, prefix) -> None:
        name = stmt.name.value
        qualname = f"{prefix}{name}"
        bases = tuple(self.expr(a.value) for a in stmt.bases if a.keyword is None)
        decorators = tuple(self.expr(d.decorator) for d in stmt.decorators)
        def_line = node.lineno if node is not None else line
        summary = ClassSummary(qualname, name, def_line, bases, decorators=decorators)
        self.s.classes.setdefault(qualname, summary)
        if scope.function is not None:
            scope.function.assigns.setdefault(name, []).append(("cls", qualname))
            scope.function.assign_lines.setdefault(name, []).append(def_line)
            scope.function.assign_guards.setdefault(name, []).append((self._guards, bool(self._loop)))
            scope.function.value_uses.append(("class", def_line, ("n", name), None, False))
        elif scope.cls is None:
            self.s.bindings.setdefault(name, []).append(
                Binding("class", qualname, def_line, conditional, self._guards))
        self.walk_block(cn.body(stmt.body), cn.ast_list(node, "body"), _Scope(cls=summary), (), "", False, f"{qualname}.")

    # ----- bindings ---------------------------------------------------------------------------

    def bind_import(self, scope: _Scope, local: str, target: str, line: int, conditional: bool) -> None:
        if scope.function is not None:
            scope.function.local_imports[local] = target
        elif scope.cls is None:
            self.s.bindings.setdefault(local, []).append(Binding("import", target, line, conditional, self._guards))

    def bind_target(self, target, value: Expr, scope: _Scope, line: int = 0, conditional: bool = False) -> None:
        if isinstance(target, cst.Name):
            name = target.value
            if scope.function is not None and name in scope.function.globals_declared:
                # `global x; x = value` inside a function (bind-at-startup): another value of the module name
                self.s.bindings.setdefault(name, []).append(
                    Binding("global", (scope.function.qualname, value), line, True))
            elif scope.function is not None and name in scope.function.nonlocals_declared \
                    and self.s.functions.get(scope.function.parent) is not None:
                # `nonlocal x; x = value` (a warn-once flag): another value of the enclosing function's x,
                # set on some call of this one, so it never surely replaces the others (read as in a loop)
                parent = self.s.functions[scope.function.parent]
                parent.assigns.setdefault(name, []).append(value)
                parent.assign_lines.setdefault(name, []).append(line)
                parent.assign_guards.setdefault(name, []).append(((), True))
            elif scope.function is not None:
                scope.function.assigns.setdefault(name, []).append(value)
                scope.function.assign_lines.setdefault(name, []).append(line)
                scope.function.assign_guards.setdefault(name, []).append((self._guards, bool(self._loop)))
            elif scope.cls is not None:
                scope.cls.attrs.setdefault(name, []).append(value)
            else:
                self.s.bindings.setdefault(name, []).append(Binding("assign", value, line, conditional, self._guards))
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            if target.value.value == "self" and scope.function is not None:
                scope.function.self_assigns.setdefault(target.attr.value, []).append(value)
                scope.function.self_assign_guards.setdefault(target.attr.value, []).append(self._guards)
        elif isinstance(target, (cst.Tuple, cst.List)):
            paired = _paired_iteration(value)
            for i, element in enumerate(target.elements):
                item = ("s", value) if value[0] not in ("q",) else (
                    value[1][i] if i < len(value[1]) else UNKNOWN)
                if value[0] == "c":  # a, b = make(...): the first item is the usual payload
                    item = ("idx", value, i)
                if paired is not None:  # `for i, layer in enumerate(self.layers)`: layer is an item of the list
                    item = paired[i] if i < len(paired) else UNKNOWN
                self.bind_target(element.value, item, scope, line, conditional)

    def annotate(self, target, annotation: Expr, scope: _Scope) -> None:
        if scope.function is None:
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            scope.function.annotations[f"self.{target.attr.value}"] = annotation
        elif isinstance(target, cst.Name):
            scope.function.annotations[target.value] = annotation

    def resolve_from(self, stmt: cst.ImportFrom) -> str | None:
        module = cn.dotted_cst(stmt.module) if stmt.module is not None else ""
        dots = len(stmt.relative)
        if not dots:
            return module
        parts = self.package.split(".") if self.package else []
        if dots - 1 > len(parts):
            return None
        base = ".".join(parts[: len(parts) - (dots - 1)])
        return f"{base}.{module}".strip(".") if module else base

    def add_call(self, scope: _Scope, call: CallSite) -> None:
        if scope.function is not None:
            scope.function.calls.append(call)

    # ----- expressions ------------------------------------------------------------------------

    def note_fake(self, expr: Expr) -> None:
        """Remember fake-implementation registrations (a custom op without one is a hard error)."""
        head = expr[1] if expr and expr[0] == "c" else expr
        if head and head[0] == "a" and head[2] == "register_fake":
            base = cn.dotted_ir(head[1])
            if base in ("torch.library", "library"):
                self.s.string_fakes = True
            elif base:
                self.s.fakes.add(base.rpartition(".")[2])

    def exprs_calls(self, root, node, line, scope, guards, loop, uses: bool = True) -> None:
        """Record every call inside an expression (or small statement), outermost first, and its
        value uses (not for assignment targets: `t[mask] = v` is a masked write, not a read)."""
        if scope.function is None:
            if scope.cls is None and isinstance(root, (cst.Expr, cst.Assign)):
                for call in cn.collect_calls(root):
                    self.note_fake(self.expr(call))
            return
        line = getattr(node, "lineno", line)
        reads: list[str] | None = [] if uses else None
        calls, found, inside = value_uses.calls_and_uses(root, line, bool(loop), reads)
        lines = cn.call_lines(node, calls) if node is not None and calls else None
        if uses:  # each with the statement's enclosing tests: a deployment that never takes them never uses it
            found = value_uses.at_call_lines(found, calls, lines)
            scope.function.value_uses.extend((*use, guards) for use in found) if guards else \
                scope.function.value_uses.extend(found)
            self.note_self_reads(scope.function, reads, line, guards, loop)
        if not calls:
            return
        for i, call in enumerate(calls):
            call_guards = guards + tuple((self.expr(t), taken, line) for t, taken in inside[i]) if inside[i] else guards
            func = self.expr(call.func)
            positional = sum(1 for a in call.args if a.keyword is None and not a.star)
            keywords = tuple(a.keyword.value for a in call.args if a.keyword is not None)
            call_line, call_end = lines[i] if lines else (line, line)
            # arguments only as deep as tensor-ness needs (three levels): cheaper than the whole tree
            args = tuple(cn.expr(a.value, ARG_DEPTH) for a in call.args if a.keyword is None and not a.star)
            kwargs = tuple((a.keyword.value, cn.expr(a.value, ARG_DEPTH)) for a in call.args if a.keyword is not None)
            stars = [a for a in call.args if a.star]
            if stars:  # as in the call's expression (cst_nodes.expr): which parameters a star fills is not known
                lone = stars[0].star == "**" and len(stars) == 1
                kwargs += ((cn.STARRED, cn.expr(stars[0].value, ARG_DEPTH) if lone else cn.UNKNOWN),)
            scope.function.calls.append(CallSite(call_line, func, positional, keywords, call_guards, loop,
                                                 args=args, kwargs=kwargs, end=call_end))

    @staticmethod
    def note_self_reads(function: FunctionSummary, reads: list[str], line: int, guards: tuple, loop: str) -> None:
        """The first read of each `self.x` in the function: where a property's getter first runs."""
        if not reads:
            return
        seen = {attr for attr, *_ in function.self_reads}
        for attr in reads:
            if attr not in seen:
                seen.add(attr)
                function.self_reads.append((attr, line, guards, loop))

    def expr(self, node) -> Expr:
        return cn.expr(node)

    def note_test(self, test, line: int, scope: _Scope, in_loop: bool, guards: tuple = ()) -> None:
        """An `if`/`while` test: a tensor here is a data-dependent branch (under the tests around it)."""
        if scope.function is not None:
            use = ("test", line, value_uses.test_expr(test), None, in_loop)
            scope.function.value_uses.append((*use, guards) if guards else use)


# ----- helpers (module level: pure functions over libcst nodes) -----------------------------------


def _paired_iteration(value: Expr) -> tuple | None:
    """What each name of `for a, b in enumerate(x)` / `zip(x, y)` iterates: (index, an item of x) or
    (an item of x, an item of y); None for other iterables."""
    if not value or value[0] != "it" or not value[1] or value[1][0] != "c":
        return None
    call = value[1]
    name = call[1][1] if call[1] and call[1][0] == "n" else ""
    if name == "enumerate" and call[2]:
        return (UNKNOWN, ("it", call[2][0]))
    if name == "zip" and call[2] and not any(a and a[0] == "q" for a in call[2]):
        return tuple(("it", a) for a in call[2])
    return None

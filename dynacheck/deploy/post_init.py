"""What `ServerArgs.__post_init__` derives from a launch before a rule reads it, read from the sources.

SGLang picks some settings at start-up from the model, the GPU and other settings: on sm100, 0.5.10 sets
`moe_runner_backend = "flashinfer_trtllm"` for DeepSeek V3 with an fp8 or ModelOpt FP4 checkpoint
(`server_args.py:1641-1650`), and `_handle_moe_kernel_config` then turns piecewise CUDA graphs off for that
backend (`:2719-2731`). A rule that hangs on such a derived setting is decided here by a small abstract
interpreter over the `ServerArgs` methods `__post_init__` calls, in order, never importing them.

What it knows: the launch's server-args values (flags over defaults), the model's architecture
(`self.get_model_config().hf_config.architectures[0]`), SGLang's GPU helpers (`is_sm100_supported()` and its
kin, read from their `partial(_check_cuda_device_version, ...)` definitions), the platform helpers
(`is_cuda()`, `is_hip()`, ...), `get_bool_env_var` over the deployment's environment, and whether the
checkpoint carries a quantization config (`get_quantization_config(hf_config)` is None without one). Anything
else is unknown: a test it cannot decide runs both branches and a field they set differently becomes
unknown, so a rule is claimed only when every way through the code decides it. `self.model_path` is a plain
checkpoint path (no `scheme://` connector). Only the methods that assign a field the rule reads (or a field
read by the tests around those assignments) are interpreted.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from dynacheck.deploy.post_init_plan import Plan

TOP = type("Unknown", (), {"__repr__": lambda self: "TOP"})()  # a value not decided by the launch


@dataclass(frozen=True)
class Member:
    """`SomeType.NAME`: an enum member, never equal to the empty string (`parse_connector_type` of a plain path)."""

    name: str


class _Config:  # `self.get_model_config()`
    pass


class _HFConfig:  # `self.get_model_config().hf_config`
    pass


MODEL_CONFIG, HF_CONFIG = _Config(), _HFConfig()
PLATFORM_HELPERS = {"is_cuda": "cuda", "is_hip": "rocm", "is_npu": "npu", "is_xpu": "xpu", "is_hpu": "hpu",
                    "is_cpu": "cpu", "is_musa": "musa", "is_mps": "mps"}
DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "npu": "npu", "hpu": "hpu", "cpu": "cpu"}  # get_device()


@dataclass(frozen=True)
class Launch:
    """What the interpreter is told about one launch."""

    architecture: str
    args: dict[str, Any]  # ServerArgs field -> value after the launch flags (defaults included)
    platform: str = "cuda"
    gpu_major: int | None = None
    cuda_version: tuple[int, int] | None = None
    env: dict[str, str] = field(default_factory=dict)
    quantized_checkpoint: bool | None = None  # whether config.json carries a quantization_config
    env_complete: bool = True  # a variable not in `env` is unset
    # GPU helper name -> (the capability majors it accepts, the least CUDA version), from utils/common.py
    gpu_helpers: dict[str, tuple[frozenset, tuple[int, int]]] = field(default_factory=dict)


@dataclass
class _State:
    fields: dict[str, Any]
    lines: dict[str, frozenset]  # field -> the lines that may have set its value
    locals: dict[str, Any] = field(default_factory=dict)
    returned: Any = False  # True, False or TOP (some ways through have returned)


class Undecided(Exception):
    """The code does something this interpreter does not follow where it matters."""


def join(a: Any, b: Any) -> Any:
    return a if _same(a, b) else TOP


def _same(a: Any, b: Any) -> bool:
    return a is b or (a is not TOP and b is not TOP and type(a) is type(b) and a == b)


def _copy(state: _State) -> _State:
    """Values are immutable (constants, tuples, sentinels), so the dicts are all a way through owns."""
    return _State(dict(state.fields), dict(state.lines), dict(state.locals), state.returned)


def _merge(left: _State, right: _State) -> _State:
    names = set(left.fields) | set(right.fields)
    fields = {n: join(left.fields.get(n, TOP), right.fields.get(n, TOP)) for n in names}
    lines = {n: left.lines.get(n, frozenset()) | right.lines.get(n, frozenset()) for n in names}
    local_names = set(left.locals) | set(right.locals)
    local = {n: join(left.locals.get(n, TOP), right.locals.get(n, TOP)) for n in local_names}
    returned = left.returned if _same(left.returned, right.returned) else TOP
    return _State(fields, lines, local, returned)


class Interpreter:
    """Runs methods of one class body (`ast.ClassDef`) over a `_State`."""

    def __init__(self, klass: ast.ClassDef, launch: Launch, methods: dict | None = None) -> None:
        self.methods = methods if methods is not None else \
            {n.name: n for n in klass.body if isinstance(n, ast.FunctionDef)}
        self.launch = launch

    def start(self, fields: frozenset | None = None) -> _State:
        args = self.launch.args
        return _State({k: v for k, v in args.items() if fields is None or k in fields}, {})

    def run_method(self, name: str, state: _State, stop_at: ast.stmt | None = None) -> _State:
        """`state` after `self.name()`; with `stop_at`, the state just before that statement runs (which
        must be reached on every way through)."""
        method = self.methods.get(name)
        if method is None:
            raise Undecided(f"ServerArgs.{name} is not defined")
        outer = state.locals, state.returned
        state.locals, state.returned = {}, False
        try:
            state = self._block(method.body, state, stop_at)
        except _Reached as reached:
            if reached.state.returned is not False:
                raise Undecided(f"ServerArgs.{name} may return before line {stop_at.lineno}") from None
            reached.state.locals, reached.state.returned = outer
            raise reached from None
        state.locals, state.returned = outer
        return state

    # statements
    def _block(self, body: Sequence[ast.stmt], state: _State, stop_at: ast.stmt | None) -> _State:
        for stmt in body:
            if state.returned is True:
                break
            if stmt is stop_at:
                raise _Reached(state)
            before = state
            state = self._statement(stmt, _copy(state) if state.returned is TOP else state, stop_at)
            if before.returned is TOP:  # this statement runs only on some ways through
                state = _merge(before, state)
        return state

    def _statement(self, stmt: ast.stmt, state: _State, stop_at) -> _State:
        if isinstance(stmt, ast.If):
            self._calls(stmt.test, state)
            truth = self.truth(stmt.test, state)
            if truth is True:
                return self._block(stmt.body, state, stop_at)
            if truth is False:
                return self._block(stmt.orelse, state, stop_at)
            if stop_at is not None and _holds(stmt, stop_at):
                raise Undecided(f"line {stmt.lineno}: `{ast.unparse(stmt.test)}` decides whether "
                                f"line {stop_at.lineno} runs")
            left = self._block(stmt.body, _copy(state), None)
            right = self._block(stmt.orelse, state, None)
            return _merge(left, right)
        if isinstance(stmt, (ast.Return, ast.Raise)):  # a raise: this way through does not start the server
            state.returned = True
            return state
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            self._calls(stmt.value, state)
            value = self.value(stmt.value, state)
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                self._assign(target, value, stmt.lineno, state)
            return state
        if isinstance(stmt, (ast.Expr, ast.Pass, ast.Import, ast.ImportFrom, ast.Assert, ast.Global,
                             ast.Nonlocal)):
            self._calls(stmt, state)
            return state
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return self._block(stmt.body, state, stop_at)
        if stop_at is not None and _holds(stmt, stop_at):
            raise Undecided(f"line {stop_at.lineno} sits in a {type(stmt).__name__.lower()} statement")
        for node in ast.walk(stmt):  # loops, try: whatever they may assign is unknown after them
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
                for target in assigned_targets(node):
                    self._assign(target, TOP, getattr(node, "lineno", 0), state)
            elif isinstance(node, ast.Return):
                state.returned = TOP if state.returned is False else state.returned
        self._calls(stmt, state)
        return state

    def _calls(self, node: ast.AST, state: _State) -> None:
        """A `self.method()` call inside a statement or expression: what that method assigns is unknown after it."""
        for node in ast.walk(node):
            if isinstance(node, ast.Call) and self_field(node.func) in self.methods:
                for inner in ast.walk(self.methods[self_field(node.func)]):
                    if isinstance(inner, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                        for target in assigned_targets(inner):
                            if self_field(target):
                                self._assign(target, TOP, inner.lineno, state)

    def _assign(self, target: ast.expr, value: Any, line: int, state: _State) -> None:
        name = self_field(target)
        if name:
            state.fields[name] = value
            state.lines[name] = frozenset({line})
        elif isinstance(target, ast.Name):
            state.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._assign(element, TOP, line, state)

    # expressions
    def truth(self, expr: ast.expr, state: _State) -> Any:
        """True, False, or TOP."""
        if isinstance(expr, ast.BoolOp):
            values = [self.truth(v, state) for v in expr.values]
            decisive = isinstance(expr.op, ast.Or)  # True decides an `or`, False an `and`
            if decisive in values:
                return decisive
            return TOP if TOP in values else not decisive
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.truth(expr.operand, state)
            return TOP if inner is TOP else not inner
        value = self.value(expr, state)
        if value is TOP:
            return TOP
        try:
            return bool(value)
        except Exception:  # noqa: BLE001 - a value whose truth is not a plain bool
            return TOP

    def value(self, expr: ast.expr, state: _State) -> Any:
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            items = [self.value(e, state) for e in expr.elts]
            return TOP if any(i is TOP for i in items) else tuple(items)
        if isinstance(expr, ast.Name):
            return state.locals.get(expr.id, TOP)
        if isinstance(expr, ast.BoolOp):  # the operand that decides it, as Python gives it
            stop = isinstance(expr.op, ast.Or)
            for operand in expr.values[:-1]:
                truth = self.truth(operand, state)
                if truth is TOP:
                    return TOP
                if truth is stop:
                    return self.value(operand, state)
            return self.value(expr.values[-1], state)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self.truth(expr, state)
        if isinstance(expr, ast.Compare):
            return self._compare(expr, state)
        if isinstance(expr, ast.IfExp):
            truth = self.truth(expr.test, state)
            return TOP if truth is TOP else self.value(expr.body if truth else expr.orelse, state)
        if isinstance(expr, ast.Attribute):
            name = self_field(expr)
            if name:
                return state.fields.get(name, TOP)
            owner = self.value(expr.value, state)
            if owner is MODEL_CONFIG and expr.attr in ("hf_config", "hf_text_config"):
                return HF_CONFIG
            if owner is HF_CONFIG and expr.attr == "architectures" and self.launch.architecture:
                return (self.launch.architecture,)
            if isinstance(expr.value, ast.Name) and expr.value.id[:1].isupper() and expr.value.id not in state.locals:
                return Member(expr.attr)
            return TOP
        if isinstance(expr, ast.Subscript):
            owner = self.value(expr.value, state)
            index = self.value(expr.slice, state)
            if isinstance(owner, tuple) and isinstance(index, int) and -len(owner) <= index < len(owner):
                return owner[index] if owner != (self.launch.architecture,) or index == 0 else TOP
            return TOP
        if isinstance(expr, ast.Call):
            return self._call(expr, state)
        return TOP

    def _call(self, call: ast.Call, state: _State) -> Any:
        if self_field(call.func) == "get_model_config" and not call.args:
            return MODEL_CONFIG
        name = call.func.id if isinstance(call.func, ast.Name) else ""
        launch = self.launch
        if name in PLATFORM_HELPERS and not call.args:
            return launch.platform == PLATFORM_HELPERS[name] if launch.platform else TOP
        if name in launch.gpu_helpers and not call.args:
            majors, least = launch.gpu_helpers[name]
            if launch.platform != "cuda":
                return False if launch.platform else TOP
            if launch.gpu_major is None or launch.cuda_version is None:
                return TOP
            return launch.gpu_major in majors and launch.cuda_version >= least
        if name == "get_bool_env_var" and call.args and isinstance(call.args[0], ast.Constant):
            default = self.value(call.args[1], state) if len(call.args) > 1 else "false"
            raw = launch.env.get(str(call.args[0].value), default if launch.env_complete else TOP)
            return TOP if raw is TOP else str(raw).lower() in ("true", "1")
        if name == "get_device" and not call.args and launch.platform in DEVICES:
            return DEVICES[launch.platform]
        if name == "get_quantization_config" and len(call.args) == 1:
            return None if launch.quantized_checkpoint is False else TOP
        if name == "parse_connector_type" and len(call.args) == 1 and self_field(call.args[0]) == "model_path":
            return ""
        return TOP

    def _compare(self, expr: ast.Compare, state: _State) -> Any:
        left = self.value(expr.left, state)
        results = []
        for op, right_expr in zip(expr.ops, expr.comparators):
            right = self.value(right_expr, state)
            results.append(_compare(op, left, right))
            left = right
        if False in results:
            return False
        return TOP if TOP in results else True


class _Reached(Exception):
    def __init__(self, state: _State) -> None:
        super().__init__()
        self.state = state


def _compare(op: ast.cmpop, left: Any, right: Any) -> Any:
    if isinstance(op, (ast.Is, ast.IsNot)):
        if left is TOP or right is not None:
            return TOP
        return (left is None) == isinstance(op, ast.Is)
    if isinstance(op, (ast.Eq, ast.NotEq)):
        if isinstance(left, Member) or isinstance(right, Member):
            member, other = (left, right) if isinstance(left, Member) else (right, left)
            if other == "":
                return isinstance(op, ast.NotEq)
            return TOP
        if left is TOP or right is TOP or not _plain(left) or not _plain(right):
            return TOP
        return (left == right) == isinstance(op, ast.Eq)
    if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
        if not numbers:
            return TOP
        return {ast.Lt: left < right, ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}[type(op)]
    if isinstance(op, (ast.In, ast.NotIn)):
        if left is TOP or right is TOP:
            return TOP
        if isinstance(right, tuple) and _plain(left) and all(_plain(r) for r in right):
            found = left in right
        elif isinstance(right, str) and isinstance(left, str):
            found = left in right
        else:
            return TOP
        return found == isinstance(op, ast.In)
    return TOP


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def self_field(expr: ast.expr) -> str:
    """`self.x` -> "x" (else "")."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return ""


def assigned_targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
        return [node.target]
    if isinstance(node, ast.NamedExpr):
        return [node.target]
    if isinstance(node, ast.With):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _holds(stmt: ast.stmt, inner: ast.stmt) -> bool:
    return any(node is inner for node in ast.walk(stmt))


def fields_read(expr: ast.expr) -> set[str]:
    return {name for node in ast.walk(expr) if (name := self_field(node))}


def fields_assigned(method: ast.FunctionDef) -> set[str]:
    return {name for node in ast.walk(method) for target in assigned_targets(node) if (name := self_field(target))}


def state_before(interpreter: Interpreter, steps: "Plan") -> _State:
    """The state just before the plan's statement runs (fields the plan does not read are left out)."""
    state = interpreter.start(steps.fields)
    for name in steps.before:
        state = interpreter.run_method(name, state)
    if steps.at_end:
        return interpreter.run_method(steps.method, state)
    try:
        interpreter.run_method(steps.method, state, stop_at=steps.statement)
    except _Reached as reached:
        return reached.state
    raise Undecided(f"line {steps.statement.lineno} is not reached from ServerArgs.{steps.method}")

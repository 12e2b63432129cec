"""Server flags the framework copies into the model's HF config, read from its source (never imported).

SGLang's `ModelConfig.__init__` writes `self.hf_config.encoder_only = encoder_only` (and
`language_only`), and `ModelConfig.from_server_args` passes `encoder_only=server_args.encoder_only`
(configs/model_config.py:221 and :266 in 0.5.9). A model then tests `if not config.encoder_only:`
before it builds its language model (qwen3_vl.py:803): a value every checkpoint sees the same way,
fixed by the launch flags. Without this, the census reads that field as a checkpoint's and leaves
the language model's layers out of what surely gets built.

Only a copy that surely happens is kept: an assignment at the top level of `__init__` (no branch,
loop or `try` around it) from a parameter `__init__` never reassigns, with no later rebinding of
`self.hf_config`, whose argument in `from_server_args`' `return ModelConfig(...)` is a field of the
server args (or of a local bound to a call on them: `cfg = resolving_view(server_args)`).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from dynacheck.sources.text import read_source


def read_config_copies(path: Path, class_name: str = "ModelConfig") -> dict[str, str]:
    """HF config field -> the server-args field copied into it ({} when the file or shape is not found).
    Read once per file version: a census builds a deployment per cell."""
    try:
        stat = path.stat()
    except OSError:
        return {}
    return dict(_read(str(path), stat.st_mtime_ns, stat.st_size, class_name))


@functools.lru_cache(maxsize=16)
def _read(path: str, _mtime: int, _size: int, class_name: str) -> tuple[tuple[str, str], ...]:
    try:
        tree = ast.parse(read_source(path))
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(sorted(_copies(tree, class_name).items()))


def _copies(tree: ast.Module, class_name: str) -> dict[str, str]:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        return {}
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init, factory = methods.get("__init__"), methods.get("from_server_args")
    if init is None or factory is None:
        return {}
    passed = _server_fields_passed(factory, class_name)
    return {field: passed[param] for field, param in _copied_params(init).items() if param in passed}


def _copied_params(init: ast.FunctionDef) -> dict[str, str]:
    """`self.hf_config.F = p` at the top level of `__init__`, p a parameter never reassigned, with
    no later `self.hf_config = ...`."""
    params = {a.arg for a in init.args.args + init.args.kwonlyargs}
    reassigned = {n.id for n in ast.walk(init) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    out: dict[str, str] = {}
    for stmt in init.body:
        for target in _targets(stmt):
            if _is_self_attr(target, "hf_config"):
                out.clear()  # a new config object: what was copied into the old one is gone
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Name):
            target, value = stmt.targets[0], stmt.value.id
            if isinstance(target, ast.Attribute) and _is_self_attr(target.value, "hf_config") \
                    and value in params and value not in reassigned:
                out[target.attr] = value
    return out


def _server_fields_passed(factory: ast.FunctionDef, class_name: str) -> dict[str, str]:
    """ModelConfig parameter -> server-args field, from `return ModelConfig(p=server_args.f, ...)`."""
    args = factory.args.posonlyargs + factory.args.args
    if not args:
        return {}
    views = {args[0].arg}  # the server args (a static method's first parameter)
    for stmt in factory.body:  # `cfg = resolving_view(server_args)`: a view of the same fields
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call) and len(stmt.value.args) == 1 and not stmt.value.keywords \
                and isinstance(stmt.value.args[0], ast.Name) and stmt.value.args[0].id in views:
            views.add(stmt.targets[0].id)
    out: dict[str, str] = {}
    for stmt in factory.body:
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in (class_name, "cls"):
            for keyword in stmt.value.keywords:
                value = keyword.value
                if keyword.arg and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                        and value.value.id in views:
                    out[keyword.arg] = value.attr
    return out


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _is_self_attr(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id == "self"

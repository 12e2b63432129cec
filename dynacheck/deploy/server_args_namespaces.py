"""SGLang's namespaced server arguments (0.5.23 and later), read from `arg_groups/fields/*.py`.

There `class ServerArgs` declares no field: `msgspec.Struct` classes carrying `_NS_PATH = "exec.graph"`
declare them as `name: A[T, "help" | Arg(...)] = default`, ServerArgs collects them flat (a field
belongs to exactly one namespace, `fields/__init__.py` `collect_input_fields`), and
`add_cli_args_from_dataclass` (`arg_groups/arg_utils.py`) makes each a flag: `--name-with-dashes`
(or `Arg(cli_name=)`) plus `Arg(aliases=)`, dest the field, `bool` a store_true, `no_cli` none.

Two things differ from the dataclass layout, and both are kept here:
- a field with `Arg(resolvable=True)` may be given its value by a resolution hook at start-up, so
  its declared default is not what the code reads: it stays unknown unless the user sets it;
- code reads fields through config bags by namespace (`get_exec().graph.torch_compile_max_bs`), so
  the namespace path segments are kept: reading one from the server-args object is the object.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from dynacheck.sources.text import read_source

_SCALARS = {"int": "int", "float": "float", "str": "", "bool": "bool"}
BOOLEAN_OPTIONAL = "boolean_optional"  # argparse.BooleanOptionalAction: `--x` stores True, `--no-x` False


def read_namespaces(fields_dir: Path, schema, zero_arg_actions: dict[str, str]) -> list[Path]:
    """Add every namespace field of `fields_dir` to `schema`; the files read, in order."""
    read: list[Path] = []
    for path in sorted(fields_dir.glob("*.py")):
        try:
            tree = ast.parse(read_source(path))
        except (OSError, SyntaxError, ValueError):
            continue  # a file that does not parse declares nothing dynacheck can read
        read.append(path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                namespace = _namespace_path(node)
                if namespace:
                    schema.segments.update(namespace.split("."))
                    _read_class(node, schema, zero_arg_actions)
    return read


def _namespace_path(cls: ast.ClassDef) -> str:
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == "_NS_PATH" and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            return stmt.value.value
    return ""


def read_annotated_flags(cls: ast.ClassDef, schema, zero_arg_actions: dict[str, str]) -> None:
    """The flags `add_cli_args_from_dataclass` makes of `class ServerArgs`'s own `A[T, ...]` fields
    (sglang 0.5.14 to 0.5.20 annotate the dataclass itself before the namespaces of 0.5.21); its
    fields and defaults are read with the dataclass."""
    _read_class(cls, schema, zero_arg_actions, flags_only=True)


def _read_class(cls: ast.ClassDef, schema, zero_arg_actions: dict[str, str], flags_only: bool = False) -> None:
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)) \
                or stmt.target.id.startswith("_"):
            continue
        name = stmt.target.id
        value_type, meta = _annotated(stmt.annotation)
        options = _arg_options(meta)
        if not flags_only:
            schema.fields.add(name)
            if options.get("resolvable") is True:
                schema.resolvable.add(name)
            elif stmt.value is not None:
                try:
                    schema.defaults[name] = ast.literal_eval(stmt.value)
                except (ValueError, SyntaxError, TypeError):
                    pass  # msgspec.field(default_factory=...), a call: not a literal
        if meta is None or options.get("no_cli") is True:
            continue  # no flag: set by the code only
        names = [options["cli_name"] if isinstance(options.get("cli_name"), str)
                 else "--" + name.replace("_", "-")]
        names += [a for a in options.get("aliases") or () if isinstance(a, str)]
        action, kind = _action_and_type(value_type, meta, zero_arg_actions)
        for flag in names:
            if action == BOOLEAN_OPTIONAL:  # argparse adds `--no-x` beside `--x`
                schema.flags[flag] = (name, "store_true", "")
                if flag.startswith("--"):
                    schema.flags["--no-" + flag[2:]] = (name, "store_false", "")
            else:
                schema.flags[flag] = (name, action, kind)


def _annotated(annotation: ast.expr) -> tuple[ast.expr | None, ast.expr | None]:
    """(T, metadata) of `A[T, meta]` / `Annotated[T, meta]`; (T, None) for a bare annotation."""
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, (ast.Name, ast.Attribute)) \
            and (getattr(annotation.value, "id", "") or getattr(annotation.value, "attr", "")) in ("A", "Annotated"):
        parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if len(parts) >= 2:
            return parts[0], parts[1]
        return (parts[0] if parts else None), None
    return annotation, None


def _arg_options(meta: ast.expr | None) -> dict[str, Any]:
    """The keywords of `Arg(...)` that decide the flag (literals only); {} for a help string."""
    if not (isinstance(meta, ast.Call) and getattr(meta.func, "id", getattr(meta.func, "attr", "")) == "Arg"):
        return {}
    out: dict[str, Any] = {}
    for keyword in meta.keywords:
        if keyword.arg is None:
            continue
        try:
            out[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError, TypeError):
            out[keyword.arg] = keyword.value  # a name: an action class, a type parser
    return out


def _action_and_type(value_type: ast.expr | None, meta: ast.expr, zero_arg_actions: dict[str, str]) -> tuple[str, str]:
    options = _arg_options(meta)
    action = options.get("action")
    if isinstance(action, str):
        return action, ""
    if isinstance(action, ast.Name):
        return zero_arg_actions.get(action.id, "store"), ""
    if isinstance(action, ast.Attribute) and action.attr == "BooleanOptionalAction":
        return BOOLEAN_OPTIONAL, ""
    if isinstance(action, ast.Attribute):  # another action of a module: read as taking a value
        return "store", ""
    inner = _unwrap_optional(value_type)
    label = _label(inner)
    if label == "bool":
        return "store_true", ""
    if "type_parser" in options:
        return "store", ""  # a parser of its own: the value stays the text given
    if label == "Literal" and isinstance(inner, ast.Subscript):
        first = inner.slice.elts[0] if isinstance(inner.slice, ast.Tuple) else inner.slice
        if isinstance(first, ast.Constant):
            return "store", _SCALARS.get(type(first.value).__name__, "")
    return "store", _SCALARS.get(label, "")


def _unwrap_optional(node: ast.expr | None) -> ast.expr | None:
    if isinstance(node, ast.Subscript) and _label(node) == "Optional":
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # T | None
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return side
    return node


def _label(node: ast.expr | None) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""

"""SGLang's launch arguments, read against the scanned `ServerArgs` source (never imported).

The dataclass gives each field its default (literal defaults only; the rest stay unknown), the
`add_argument` calls give the flag spellings, their `dest`, `action` and `type`. SGLang 0.5.23 moved
the fields into namespaces under `arg_groups/fields/` (server_args_namespaces.py reads them). The
user's arguments are then applied on top, the way argparse would.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynacheck.deploy.server_args_namespaces import read_annotated_flags, read_namespaces
from dynacheck.errors import UserError
from dynacheck.sources.text import read_source


@dataclass
class ServerArgsSchema:
    defaults: dict[str, Any] = field(default_factory=dict)  # field -> literal default
    fields: set[str] = field(default_factory=set)
    flags: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # --flag -> (dest, action, type)
    # where the fields are declared when `class ServerArgs` declares none and no layout read finds any
    elsewhere: str = ""
    segments: set[str] = field(default_factory=set)  # namespace path parts (`exec`, `graph`): read through
    resolvable: set[str] = field(default_factory=set)  # set by a start-up hook unless given: no default
    # argparse dest -> the field `ServerArgs.from_cli_args` copies it to (`args.tp_size = args.tensor_parallel_size`)
    renames: dict[str, str] = field(default_factory=dict)

_STORED = ("defaults", "fields", "flags", "elsewhere", "segments", "resolvable", "renames")
# a schema stored by another version of these readers is read again
_OWN_DIGEST = hashlib.sha256(Path(__file__).read_bytes() + Path(__file__).with_name(
    "server_args_namespaces.py").read_bytes()).hexdigest()[:16]


_SCHEMAS: dict[tuple, ServerArgsSchema] = {}  # cache: (path, mtime, size, disk cache) -> schema


def read_schema(path: Path, cache=None) -> ServerArgsSchema:
    """Fields, literal defaults and flags of `class ServerArgs` in SGLang's server_args.py.

    Cached per file version: a census builds one deployment per cell from the same file; with the
    scan's summary cache given, across processes too (a warm scan does not re-read 5,000 lines).
    """
    try:
        key = (tuple((str(p), st.st_mtime_ns, st.st_size) for p in _inputs(path) for st in (p.stat(),)),
               str(getattr(cache, "folder", "")))
    except OSError:
        key = None
    if key is not None and key in _SCHEMAS:
        return _SCHEMAS[key]
    schema = _stored_schema(path, cache)
    if key is not None:
        _SCHEMAS[key] = schema
    return schema


def _inputs(path: Path) -> list[Path]:
    """Every file the schema is read from: server_args.py, and where present the namespace files and
    the argparse actions they name."""
    groups = path.parent / "arg_groups"
    extra = sorted((groups / "fields").glob("*.py")) if (groups / "fields").is_dir() else []
    if (groups / "argparse_actions.py").is_file():
        extra.append(groups / "argparse_actions.py")
    return [path, *extra]


def _stored_schema(path: Path, cache) -> ServerArgsSchema:
    if cache is None or getattr(cache, "folder", None) is None:
        return _read_schema(path)
    digest = hashlib.sha256()
    try:
        for part in _inputs(path):
            digest.update(part.name.encode() + b"\0" + part.read_bytes())
    except OSError:
        return _read_schema(path)  # says why in one sentence
    name = f"server-args\0{_OWN_DIGEST}\0{digest.hexdigest()}"
    stored = cache.load_blob(name)
    if isinstance(stored, dict) and set(stored) == set(_STORED):
        return ServerArgsSchema(dict(stored["defaults"]), set(stored["fields"]), dict(stored["flags"]),
                                str(stored["elsewhere"]), set(stored["segments"]), set(stored["resolvable"]),
                                dict(stored["renames"]))
    schema = _read_schema(path)
    cache.store_blob(name, {"defaults": schema.defaults, "fields": sorted(schema.fields), "flags": schema.flags,
                            "elsewhere": schema.elsewhere, "segments": sorted(schema.segments),
                            "resolvable": sorted(schema.resolvable), "renames": schema.renames})
    return schema


def _read_schema(path: Path) -> ServerArgsSchema:
    try:
        tree = ast.parse(read_source(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise UserError(f"Could not read SGLang's server arguments from {path}: {exc}.") from None
    schema = ServerArgsSchema()
    zero_arg_actions = _zero_arg_actions(tree)
    parser_defaults: dict[str, Any] = {}
    groups = path.parent / "arg_groups"
    try:  # the argparse actions the flags of arg_groups name (0.5.14 and later)
        zero_arg_actions.update(_zero_arg_actions(ast.parse(read_source(groups / "argparse_actions.py"))))
    except (OSError, SyntaxError, ValueError):
        pass
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            read_annotated_flags(node, schema, zero_arg_actions)
            schema.renames = _cli_renames(node)
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    name = stmt.target.id
                    schema.fields.add(name)
                    if stmt.value is not None:
                        try:
                            schema.defaults[name] = ast.literal_eval(stmt.value)
                        except (ValueError, SyntaxError, TypeError):
                            pass
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            _flag(node, schema, zero_arg_actions, parser_defaults)
    namespaces = path.parent / "arg_groups" / "fields"
    if not schema.fields and namespaces.is_dir():
        read_namespaces(namespaces, schema, zero_arg_actions)
        if not schema.fields:
            schema.elsewhere = str(namespaces)
    # a launch from the command line gets argparse's default where add_argument gives one: 0.5.9's
    # `--kt-method` defaults to "AMXINT4" there and to None in the dataclass (bench/server_args_oracle.py)
    schema.defaults.update({d: v for d, v in parser_defaults.items() if d in schema.fields})
    return schema


def _cli_renames(klass: ast.ClassDef) -> dict[str, str]:
    """`args.tp_size = args.tensor_parallel_size` in `from_cli_args` (0.5.9 `server_args.py:5070-5075`): the
    field a launch flag whose argparse dest is not a field's name sets (`--tp-size` -> `tp_size`)."""
    method = next((n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "from_cli_args"), None)
    if method is None or len(method.args.args) < 2:
        return {}
    args = method.args.args[1].arg
    out = {}
    for stmt in method.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
            if all(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == args
                   for n in (target, value)):
                out[value.attr] = target.attr
    return out


def _zero_arg_actions(tree: ast.Module) -> dict[str, str]:
    """argparse.Action classes of the file that take no value (`nargs=0`), and what they store:
    "store_true" when their __call__ sets the dest to True, else "ignore" (e.g. a deprecation notice)."""
    actions: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is None:
            continue
        defaults = dict(zip([a.arg for a in init.args.args][-len(init.args.defaults):] if init.args.defaults else [],
                            init.args.defaults))
        nargs = defaults.get("nargs")
        if isinstance(nargs, ast.Constant) and nargs.value == 0:
            sets_true = "True" in ast.unparse(node) and "setattr" in ast.unparse(node)
            actions[node.name] = "store_true" if sets_true else "ignore"
    return actions


def _flag(call: ast.Call, schema: ServerArgsSchema, zero_arg_actions: dict[str, str] | None = None,
          parser_defaults: dict[str, Any] | None = None) -> None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longs = [n for n in names if n.startswith("--")]
    if not longs:
        return
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    dest = longs[0][2:].replace("-", "_")
    if isinstance(keywords.get("dest"), ast.Constant):
        dest = keywords["dest"].value
    if parser_defaults is not None and "default" in keywords:
        try:
            parser_defaults[dest] = ast.literal_eval(keywords["default"])
        except (ValueError, SyntaxError, TypeError):
            pass  # `default=ServerArgs.x` or a call: the dataclass default stands
    action = keywords.get("action")
    action_text = action.value if isinstance(action, ast.Constant) and isinstance(action.value, str) else "store"
    if isinstance(action, ast.Name):  # an Action class: what it stores when this file defines it, else its name
        action_text = (zero_arg_actions or {}).get(action.id, action.id)
    nargs = keywords.get("nargs")
    if isinstance(action, ast.Name) and nargs is not None and not (isinstance(nargs, ast.Constant) and nargs.value == 0):
        action_text = "store"  # an Action class given `nargs=None` (or "?", "+"): the flag takes a value
    kind = keywords.get("type")
    type_text = kind.id if isinstance(kind, ast.Name) else ""
    boolean_optional = isinstance(action, ast.Attribute) and action.attr == "BooleanOptionalAction"
    for name in names:
        if boolean_optional:  # argparse adds `--no-x` beside `--x`
            schema.flags[name] = (dest, "store_true", "")
            if name.startswith("--"):
                schema.flags["--no-" + name[2:]] = (dest, "store_false", "")
        else:
            schema.flags[name] = (dest, action_text, type_text)


class UnknownFlag(UserError):
    """A launch flag the scanned SGLang's parser does not declare (argparse: "unrecognized arguments")."""

    def __init__(self, flag: str, close: list[str]) -> None:
        super().__init__(f"--server-args: SGLang's ServerArgs has no flag {flag}.",
                         f"Did you mean: {', '.join(close)}?" if close else "")
        self.flag = flag


def apply_arguments(schema: ServerArgsSchema, text: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The server-args values after the user's launch arguments; an unknown flag raises UnknownFlag."""
    values = dict(schema.defaults)
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"--server-args could not be split: {exc}.", "Quote it as one argument.") from None
    if tokens and schema.elsewhere:
        # `class ServerArgs` declares no field and arg_groups/fields/ holds none dynacheck can read
        # (a layout after 0.5.23's namespaces): every flag would otherwise be "unknown"
        raise UserError(f"--server-args: this SGLang declares its server arguments in {schema.elsewhere}, "
                        "where dynacheck finds no field it can read, so no launch flag can be checked or applied.",
                        "Scan without --server-args and a preset, or report the SGLang version.")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag, eq, inline = token.partition("=")
        if not flag.startswith("-"):
            raise UserError(f"--server-args: {token!r} is not a flag.", "Write SGLang's launch arguments, e.g. "
                            "'--tp 8 --quantization modelopt_fp4 --enable-piecewise-cuda-graph'.")
        if flag not in schema.flags:
            raise UnknownFlag(flag, difflib.get_close_matches(flag, list(schema.flags), n=3))
        dest, action, kind = schema.flags[flag]
        if action in ("store_true", "store_false", "ignore"):
            if action != "ignore":  # a deprecated flag that takes no value and sets nothing
                values[dest] = action == "store_true"
            i += 1
            continue
        if eq:
            raw = inline
            i += 1
        else:
            if i + 1 >= len(tokens):
                raise UserError(f"--server-args: {flag} needs a value.")
            raw = tokens[i + 1]
            i += 2
        values[dest] = _convert(raw, kind, schema.defaults.get(dest))
    for dest, name in schema.renames.items():  # what from_cli_args copies: `--tp-size 8` is tp_size = 8
        if dest in values and name in schema.fields:
            values[name] = values[dest]
    return values, tuple(tokens)


def _convert(raw: str, kind: str, default: Any) -> Any:
    try:
        if kind == "int" or (not kind and isinstance(default, int) and not isinstance(default, bool)):
            return int(raw)
        if kind == "float" or (not kind and isinstance(default, float)):
            return float(raw)
    except ValueError:
        raise UserError(f"--server-args: {raw!r} is not a number.") from None
    return raw

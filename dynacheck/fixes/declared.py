"""Read a library's own op declarations statically: `@register_custom_op("ns::name", mutates_args=...)`
functions and the `@register_fake_op("ns::name")` fakes beside them, at module level and inside
module factories (FlashInfer's `get_fp4_quantization_module` defines its ops after loading the JIT
module and returns them in a SimpleNamespace).

Why: FlashInfer made both decorators no-ops (dispatch overhead), so its ops are plain Python that
Dynamo traces into the JIT build. The library already wrote the schema, the mutation list and the
fake: a fix registers exactly that declaration for real instead of inventing a fake per function.
Never imports the scanned code; one libcst parse per file that names a registrar.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import re
import textwrap
from dataclasses import dataclass

import libcst as cst

from dynacheck.sources.text import decode_source
from dynacheck.static.lazy_bodies import bodies_naming, headers_only
from dynacheck.static.summary import parse_unvalidated

OP_REGISTRARS = ("register_custom_op",)
REAL_REGISTRARS = ("custom_op",)  # torch.library.custom_op: already a real op in this version
FAKE_REGISTRARS = ("register_fake_op",)


@dataclass(frozen=True)
class Declared:
    """One op the library declares, with what a real registration needs."""

    op: str  # "flashinfer::rmsnorm"
    module: str  # "flashinfer.norm"
    function: str  # qualname: "_rmsnorm", or "get_fp4_quantization_module.<locals>.fp4_quantize_sm100"
    mutates: tuple[str, ...]
    line: int
    factory: str = ""  # the module-level function that defines it ("" at module level)
    exported_as: str = ""  # attribute of the factory's returned namespace holding it
    fake: str = ""  # qualname of the declared fake ("" when the library declares none)
    fake_line: int = 0
    op_source: str = ""  # the op's def without decorators, dedented (factory ops: the body the fake may run)
    op_signature: str = ""  # the same def with its body replaced by `...`
    fake_source: str = ""  # the fake's def without decorators, dedented
    schema_ok: bool = True  # every parameter and the return annotated with a type torch.library infers
    registered: bool = False  # the library registers it for real (`@torch.library.custom_op`): call torch.ops

    @property
    def name(self) -> str:
        return self.function.rsplit(".", 1)[-1]


def _registrar_call(deco: cst.Decorator, names: tuple[str, ...]) -> cst.Call | None:
    node = deco.decorator
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return node if last in names else None


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _op_name(call: cst.Call | None, function: str) -> tuple[str, str] | None:
    """(key to pair an op with its fake, op name). An op name built at run time
    (`f"flashinfer::{fname}"`, FlashInfer's activation factory) is keyed by its template and
    registered under a name of our own: `namespace::function`."""
    if call is None or not call.args:
        return None
    node = call.args[0].value
    name = _string(node)
    if name:
        return name, name
    if isinstance(node, cst.FormattedString):
        template = cst.Module([]).code_for_node(node)
        match = re.match(r"^[rRbBfF]*['\"]+(\w+)::", template)
        if match:
            return template, f"{match.group(1)}::{function.lstrip('_')}"
    return None


def _mutates(call: cst.Call) -> tuple[str, ...]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "mutates_args":
            value = arg.value
            if isinstance(value, (cst.Tuple, cst.List)):
                return tuple(s for s in (_string(e.value) for e in value.elements) if s)
            single = _string(value)
            return (single,) if single else ()  # `mutates_args=("")` is the string "": nothing mutated
    return ()


_SCALARS = ("Tensor", "int", "float", "bool", "str", "None", "Optional", "List", "list", "Tuple", "tuple",
            "Sequence", "torch", "dtype", "device", "SymInt", "Generator")
_PARAMETER_ONLY = {"str", "dtype", "device", "Generator"}  # a schema takes these as arguments, never returns them
NO_OUTPUT_FAKE = "<returns None>"  # `fake` of an op declared `-> None` without a fake: nothing to compute


def schema_inferable(fn: cst.FunctionDef, module: cst.Module) -> bool:
    """Every parameter and the return carry an annotation torch.library can turn into a schema.

    `torch.Generator` parameters count: infer_schema rejects them, but the schema language has
    `Generator?` and the patch module writes it (`_schema` in emit_runtime.py)."""
    params = [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]
    if fn.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or fn.params.star_kwarg is not None:
        return False
    annotations = [p.annotation for p in params] + [fn.returns]
    for n, annotation in enumerate(annotations):
        if annotation is None:
            return False
        text = module.code_for_node(annotation.annotation)
        words = {w for w in text.replace("[", " ").replace("]", " ").replace(",", " ").replace(".", " ").split()}
        allowed = set(_SCALARS) - (_PARAMETER_ONLY if n == len(annotations) - 1 else set())
        if not words or not words <= allowed:
            return False
    return True


def _returns_none(signature: str) -> bool:
    """The op is declared `-> None`: it only writes its mutated arguments, so a fake has nothing to make."""
    return bool(re.search(r"\)\s*->\s*None\s*:\s*\n", signature))


def _no_output_fake(signature: str) -> str:
    """A fake for an op declared `-> None` that mutates its arguments: the op's own parameters, no output
    (what torch.library asks of a fake for such an op; the library declares none for a few of them)."""
    head = signature.rsplit("...", 1)[0].rstrip()
    name = re.search(r"def\s+(\w+)", head).group(1)
    return head.replace(f"def {name}(", f"def _fake_{name.lstrip('_')}(", 1) + "\n    return None\n"


def _source(fn: cst.FunctionDef, module: cst.Module) -> str:
    return textwrap.dedent(module.code_for_node(fn.with_changes(decorators=(), leading_lines=())))


def _signature_only(fn: cst.FunctionDef, module: cst.Module) -> str:
    """The def with its body replaced by `...`: all a schema needs (keeps reports and patches small)."""
    body = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])])
    return _source(fn.with_changes(body=body), module)


def _returned_names(factory: cst.FunctionDef) -> dict[str, str]:
    """Local function name -> attribute in `return SimpleNamespace(attr=local, ...)`."""
    out: dict[str, str] = {}
    for stmt in factory.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Return) and isinstance(small.value, cst.Call):
                    for arg in small.value.args:
                        if arg.keyword is not None and isinstance(arg.value, cst.Name):
                            out[arg.value.value] = arg.keyword.value
                        elif arg.star == "**" and isinstance(arg.value, cst.Dict):  # **{fname: op}: any name
                            for element in arg.value.elements:
                                if isinstance(element, cst.DictElement) and isinstance(element.value, cst.Name):
                                    out[element.value.value] = "*"
    return out


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> cst.Module | None:
    """One libcst parse per file text, shared by the three readers (ops, signatures, their texts);
    read only, so without libcst's node checks (summary.parse_unvalidated)."""
    try:
        return parse_unvalidated(text)
    except (cst.ParserSyntaxError, RecursionError):
        return None


def _def_lines(module: cst.Module, text: str) -> dict[int, int]:
    """id(def node) -> its `def` line, for the defs of a module's body and those one level in. Read from
    `ast`, whose defs come in the same order in every body: libcst's PositionProvider gives the same
    lines (checked on every def of the pinned trees) but costs twice the parse."""
    out: dict[int, int] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None

    def walk(cst_body, ast_body) -> bool:
        defs = [s for s in cst_body if isinstance(s, cst.FunctionDef)]
        nodes = [s for s in ast_body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if len(defs) != len(nodes):
            return False
        for fn, node in zip(defs, nodes):
            out[id(fn)] = node.lineno
            if isinstance(fn.body, cst.IndentedBlock) and not walk(fn.body.body, node.body):
                return False
        return True

    if tree is None or not walk(module.body, tree.body):  # the two parsers disagree: ask libcst itself
        positions = cst.MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.PositionProvider)
        return {id(node): position.start.line for node, position in positions.items()
                if isinstance(node, cst.FunctionDef)}
    return out


def read_module(code: str, module_name: str) -> tuple[Declared, ...]:
    """The declarations in one module's source text."""
    if not any(r in code for r in OP_REGISTRARS + REAL_REGISTRARS):
        return ()
    text = bodies_naming(code, OP_REGISTRARS + REAL_REGISTRARS + FAKE_REGISTRARS)
    module = _parsed(text)
    if module is None:
        return ()
    lines = _def_lines(module, text)
    found: list[Declared] = []

    def scan(body, prefix: str, factory: str, exported: dict[str, str]) -> None:
        ops: dict[str, Declared] = {}
        fakes: dict[str, tuple[str, int, str]] = {}
        for stmt in body:
            if not isinstance(stmt, cst.FunctionDef):
                continue
            qual = prefix + stmt.name.value
            for deco in stmt.decorators:
                real = _registrar_call(deco, REAL_REGISTRARS)
                real_name = _string(real.args[0].value) if real is not None and real.args else None
                if real_name and "library" in module.code_for_node(real.func):
                    ops[real_name] = Declared(op=real_name, module=module_name, function=qual, mutates=_mutates(real),
                                              line=lines[id(stmt)], factory=factory, registered=True)
                    continue
                op_call = _registrar_call(deco, OP_REGISTRARS)
                fake_call = _registrar_call(deco, FAKE_REGISTRARS)
                named = _op_name(op_call, stmt.name.value) if prefix else (
                    _op_name(op_call, stmt.name.value) if op_call is not None and _string(op_call.args[0].value)
                    else None)
                if named:
                    key, name = named
                    ops[key] = Declared(
                        op=name, module=module_name, function=qual, mutates=_mutates(op_call),
                        line=lines[id(stmt)], factory=factory,
                        exported_as=exported.get(stmt.name.value, ""), op_source=_source(stmt, module),
                        op_signature=_signature_only(stmt, module),
                        schema_ok=schema_inferable(stmt, module))
                fake_named = _op_name(fake_call, stmt.name.value)
                fake_name = fake_named[0] if fake_named else None
                if fake_name:
                    fakes[fake_name] = (qual, lines[id(stmt)], _source(stmt, module))
            if not prefix and isinstance(stmt.body, cst.IndentedBlock):
                inner = [s for s in stmt.body.body if isinstance(s, cst.FunctionDef)]
                if inner:
                    scan(stmt.body.body, f"{qual}.<locals>.", qual, _returned_names(stmt))
        for name, decl in ops.items():
            if name in fakes:
                fake, line, source = fakes[name]
                decl = Declared(**{**decl.__dict__, "fake": fake, "fake_line": line, "fake_source": source})
            elif decl.mutates and not decl.registered and _returns_none(decl.op_signature):
                decl = Declared(**{**decl.__dict__, "fake": NO_OUTPUT_FAKE, "fake_line": decl.line,
                                   "fake_source": _no_output_fake(decl.op_signature)})
            found.append(decl)

    scan(module.body, "", "", {})
    return tuple(found)


_DISK = None  # a SummaryCache: the parsed declarations of a file, by its bytes, across processes


def use_disk_cache(cache) -> None:
    """Keep what the readers below find in the scan's signed summary cache (a warm scan parses nothing)."""
    global _DISK
    _DISK = cache if cache is not None and getattr(cache, "folder", None) is not None else None


def _on_disk(kind: str, path: str, extra: str, compute, encode=lambda v: v, decode=lambda v: v):
    """`compute(text)` for the file at `path`, stored under the hash of its bytes (plain values only)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    text = decode_source(data)
    if _DISK is None:
        return compute(text)
    name = f"declared\0{kind}\0{extra}\0{hashlib.sha256(data).hexdigest()}"
    stored = _DISK.load_blob(name)
    if stored is not None:
        try:
            return decode(stored)
        except (TypeError, ValueError):
            pass  # an entry of another layout: recompute it
    value = compute(text)
    _DISK.store_blob(name, encode(value))
    return value


def read_file(path: str, module_name: str) -> tuple[Declared, ...]:
    """The declarations in one source file (cached per path and disk cache: a scan asks once per module
    on a chain, and a new cache folder still gets its entries)."""
    return _read_file(path, module_name, _disk_folder())


def _disk_folder() -> str:
    return str(_DISK.folder) if _DISK is not None else ""


@functools.lru_cache(maxsize=512)
def _read_file(path: str, module_name: str, folder: str) -> tuple[Declared, ...]:
    found = _on_disk("ops-v2", path, module_name, lambda text: read_module(text, module_name),
                     encode=lambda decls: tuple(dataclasses.asdict(d) for d in decls),
                     decode=lambda rows: tuple(Declared(**{**row, "mutates": tuple(row["mutates"])}) for row in rows))
    return found if found is not None else ()


def read_signatures(path: str, module_name: str = "") -> dict[str, tuple[bool, bool]]:
    """Module-level function name -> (schema inferable, takes arguments), for files that declare ops."""
    return _read_signatures(path, _disk_folder())


@functools.lru_cache(maxsize=512)
def _read_signatures(path: str, folder: str) -> dict[str, tuple[bool, bool]]:
    found = _on_disk("signatures-v2", path, "", _signatures)
    return found if found is not None else {}


def _signatures(text: str) -> dict[str, tuple[bool, bool]]:
    module = _parsed(headers_only(text))
    if module is None:
        return {}
    out: dict[str, tuple[bool, bool]] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            p = stmt.params
            takes = bool(p.posonly_params or p.params or p.kwonly_params or p.star_kwarg
                         or p.star_arg not in (None, cst.MaybeSentinel.DEFAULT))
            out[stmt.name.value] = (schema_inferable(stmt, module), takes)
    return out


def read_signature_texts(path: str) -> dict[str, tuple[str, str, str]]:
    """Function qualname (module level and class methods) -> (parameters, call arguments, return) as source
    text, `self`/`cls` left out: what a custom-op skeleton needs to carry the function's real signature."""
    return _read_signature_texts(path, _disk_folder())


@functools.lru_cache(maxsize=512)
def _read_signature_texts(path: str, folder: str) -> dict[str, tuple[str, str, str]]:
    found = _on_disk("signature-texts", path, "", _signature_texts)
    return found if found is not None else {}


def _signature_texts(text: str) -> dict[str, tuple[str, str, str]]:
    module = _parsed(headers_only(text))
    if module is None:
        return {}
    out: dict[str, tuple[str, str, str]] = {}

    def one(fn: cst.FunctionDef, qualname: str) -> None:
        params = [p for p in (*fn.params.posonly_params, *fn.params.params) if p.name.value not in ("self", "cls")]
        kwonly = list(fn.params.kwonly_params)
        if fn.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or fn.params.star_kwarg is not None:
            return
        text = ", ".join(module.code_for_node(p.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
                         for p in params + kwonly)
        call = ", ".join([p.name.value for p in params] + [f"{p.name.value}={p.name.value}" for p in kwonly])
        returns = module.code_for_node(fn.returns.annotation) if fn.returns is not None else ""
        out[qualname] = (" ".join(text.split()), call, returns)

    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            one(stmt, stmt.name.value)
        elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
            for inner in stmt.body.body:
                if isinstance(inner, cst.FunctionDef):
                    one(inner, f"{stmt.name.value}.{inner.name.value}")
    return out

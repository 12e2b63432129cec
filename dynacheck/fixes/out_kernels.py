"""Functions whose JIT kernel only writes into a buffer they allocate: a custom op whose fake is the
function's own body with the kernel call made a no-op.

SGLang's `jit_kernel` functions are written this way (destination-passing style):

    out = torch.empty_like(x)
    module = _jit_hadamard_module(x.dtype)      # the JIT build (a tvm_ffi load_inline)
    module.hadamard_transform(x, out, scale)    # writes `out`, returns nothing
    return out.reshape(shapes_og)

Every shape, dtype and stride of the result comes from the Python around the kernel, so running the
body on fake tensors with the factory returning a stub whose calls do nothing gives eager's output
metadata, with no shape rule written by hand. The pattern is read from the source, never assumed:
the kernel's result is discarded, one of its arguments is a fresh allocation (`torch.empty*`,
`torch.zeros*`, `x.new_empty`), and the function returns an expression of that allocation. The
function's signature must have a custom-op schema (tensors, numbers, bools).
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import libcst as cst

from dynacheck.fixes.declared import _disk_folder, _on_disk, _parsed, read_signatures
from dynacheck.fixes.from_declared import MARKER, _relative, seal
from dynacheck.model import Fix, Hop
from dynacheck.static.lazy_bodies import headers_only

ALLOCATORS = ("empty", "empty_like", "zeros", "zeros_like", "new_empty", "new_zeros", "empty_strided")

Locate = Callable[[str], "tuple[str, str, str] | None"]


def out_kernel_fix(chain: Sequence[Hop], locate: Locate) -> Fix | None:
    """A custom op at the hop nearest the entry (not the entry) that follows the pattern above."""
    for i in range(1, len(chain)):
        found = locate(chain[i].function)
        if found is None:
            continue
        module, qualname, path = found
        if "." in qualname:  # module-level functions only: the op replaces the module attribute
            continue
        factory = out_kernel_factory(path, qualname)
        if factory and read_signatures(path).get(qualname, (False, True))[0]:
            return _fix(module, qualname, path, factory)
    return None


def out_kernel_factory(path: str, qualname: str) -> str:
    """The module-level factory whose kernel writes the function's returned buffer ('' when the
    function does not follow the pattern). Kept in the scan's signed cache, so a warm scan parses nothing."""
    return _out_kernel_factory(path, qualname, _disk_folder())


@functools.lru_cache(maxsize=512)
def _out_kernel_factory(path: str, qualname: str, folder: str) -> str:
    found = _on_disk("out-kernel-v1", path, qualname, lambda text: _factory_in(text, qualname))
    return found if isinstance(found, str) else ""


def _factory_in(text: str, qualname: str) -> str:
    module = _parsed(headers_only(text, keep=qualname))  # the other bodies do not matter
    if module is None:
        return ""
    function = next((s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == qualname), None)
    defined = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    if function is None:
        return ""
    factory = ""
    allocated: set[str] = set()
    kernels: dict[str, str] = {}  # local holding a factory's result -> the factory
    written: set[str] = set()
    returns: list[set[str]] = []
    for stmt in _statements(function.body):
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                name, value = small.targets[0].target.value, small.value
                if _allocates(value):
                    allocated.add(name)
                elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in defined:
                    kernels[name] = value.func.value
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                call = small.value
                if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name) \
                        and call.func.value.value in kernels:
                    written |= {a.value.value for a in call.args if isinstance(a.value, cst.Name)} & allocated
                    if written:
                        factory = kernels[call.func.value.value]
            elif isinstance(small, cst.Return):
                returns.append(_names(small.value) if small.value is not None else set())
    # every return hands back a fresh allocation (never an input), and the kernel writes one of them
    if written and returns and all(r & allocated for r in returns) and any(r & written for r in returns):
        return factory
    return ""


def _statements(block) -> list:
    """Statements of an indented block, including those inside `if`/`elif`/`else` (not nested defs)."""
    out: list = []
    for stmt in getattr(block, "body", ()):
        out.append(stmt)
        branch = stmt
        while isinstance(branch, cst.If):
            out.extend(_statements(branch.body))
            branch = branch.orelse
            if isinstance(branch, cst.Else):
                out.extend(_statements(branch.body))
    return out


def _allocates(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ALLOCATORS


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    node.visit(Names())
    return found


def _fix(module: str, qualname: str, path: str, factory: str) -> Fix:
    op = "dynacheck::" + (module.rsplit(".", 1)[-1] + "_" + qualname).replace(".", "_")
    code = (f"{MARKER}\n# torch.library.custom_op around the function + register_fake: its own body, the kernel a no-op\n"
            f"_wrap_out_kernel({module!r}, {qualname!r}, {op!r}, factory={factory!r})\n")
    summary = (f"Wrap `{module}.{qualname}` in torch.library.custom_op. Its kernel only writes a buffer the function "
               f"allocates, so the fake is the function's own body on fake tensors with `{factory}` returning a stub "
               "whose kernel calls do nothing: eager's shapes, dtypes and strides, no rule written by hand. "
               "What the kernel does to its inputs is not known, so the op may mutate any (mutates_args='unknown').")
    return Fix("custom_op", f"{module}.{qualname}", summary, file=_relative(module, path), snippet=seal(code), sound=True)

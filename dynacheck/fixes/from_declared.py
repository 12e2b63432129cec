"""Fixes built from the library's own op declarations (see `declared.py`), placed on a finding's chain.

Three shapes, tried from the entry down so that one fix covers as much of the chain as it can:
- a hop IS a module-level declared op with a fake (`flashinfer.norm._rmsnorm`): register it for real
  with `torch.library` using the library's fake and mutation list, and rebind every holder;
- a hop is a module factory without arguments whose declared op the caller takes
  (`get_sampling_module().top_k_renorm_probs(...)`): register the factory's declared ops for real and
  replace the factory by one that returns them, so the traced call never enters the JIT build;
- a hop is a factory with arguments (`get_fp4_quantization_module(backend).fp4_quantize_sm100`): wrap
  the caller, the public function, as a custom op when its signature has a schema; its fake is the
  public body run on fake tensors with the factory swapped for the library's declared fakes.

The fix's snippet is the exact code the patch module runs (`fix --emit` copies it), so what a
report shows is what gets applied.
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Sequence

from dynacheck.fixes.declared import NO_OUTPUT_FAKE, Declared, read_file, read_signatures
from dynacheck.model import Fix, Hop

MARKER = "# dynacheck: applies FlashInfer-style declared ops"
SEAL = "# dynacheck seal: "


def seal(code: str) -> str:
    """The code with an HMAC line (the user's key, kept outside the cache): `fix --emit` pastes only
    code whose seal verifies, so a tampered scan file cannot put code into the patch module."""
    from dynacheck.sources.trust import signing_key

    key = signing_key()
    if key is None:
        return code
    return _sealed(key, code.rstrip("\n") + "\n")


@functools.lru_cache(maxsize=256)
def _sealed(key: bytes, body: str) -> str:
    """A census seals the same few snippets for thousands of chains: each is signed once per key."""
    from dynacheck.sources.trust import sign

    return body + SEAL + sign(key, body.encode("utf-8")).hex() + "\n"


def unseal(snippet: str) -> str:
    """The code of a sealed snippet, or '' when the seal is missing or does not verify."""
    from dynacheck.sources.trust import signing_key, verify

    body, sep, tail = snippet.rpartition(SEAL)
    key = signing_key()
    if not sep or key is None:
        return ""
    try:
        signature = bytes.fromhex(tail.strip())
    except ValueError:
        return ""
    return body if verify(key, body.encode("utf-8"), signature) else ""

# Declared fakes measured wrong against eager; the fake is then the declared op's own body run with
# the JIT kernel stubbed (its allocations are eager's by construction). Evidence: reports/fixes-h200/.
OP_BODY_FAKES = {
    "flashinfer::fp4_quantize_sm100": "FlashInfer 0.6.3's declared fake returns int64 values and an int32 "
    "unswizzled scale buffer; eager returns uint8 values and a swizzled uint8 scale buffer",
}

Locate = Callable[[str], "tuple[str, str, str] | None"]  # function -> (module, qualname, path)


def declared_reads(chain: Sequence[Hop], locate: Locate) -> tuple | None:
    """What `declared_fix` reads of a chain, or None when no hop's file declares ops (then it finds no
    fix and no reason): the hops from the caller of the first hop whose file declares ops (start), the
    entry's package (`_library_entry`), and whether start is 0, 1 or more (`i == 0`, `caller == 0`).
    A census asks for thousands of chains that differ only above that hop (each model's own layers
    down to the same `ModelOptFp4LinearMethod.apply` -> `fp4_quantize`)."""
    start = next((i for i, hop in enumerate(chain) if _declares(hop, locate)), None)
    if start is None:
        return None
    return chain[0].package, min(start, 2), tuple(chain[max(start - 1, 0):])


def _declares(hop: Hop, locate: Locate) -> bool:
    found = locate(hop.function)
    return found is not None and bool(read_file(found[2], found[0]))


def declared_fix(chain: Sequence[Hop], locate: Locate) -> tuple[Fix | None, str]:
    """The declared-op fix nearest the entry on this chain, or (None, why none applies).

    The entry itself is wrapped only when it is the library's own function (a public API scan):
    a user's compiled forward is never made one opaque op.
    """
    why = ""
    for i in range(len(chain)):
        found = locate(chain[i].function)
        if found is None:
            continue
        module, qualname, path = found
        decls = read_file(path, module)
        if not decls:
            continue
        short = qualname.rsplit(".", 1)[-1]
        registered = next((d for d in decls if d.registered and not d.factory and d.op.endswith("::" + short)
                           and d.function != qualname), None)
        if registered is not None and (i > 0 or _library_entry(chain, i)):
            return _use_registered_fix(module, qualname, registered), ""
        own = next((d for d in decls if d.function == qualname and not d.registered), None)
        if own is not None and not own.factory:
            if i == 0 and not _library_entry(chain, i):
                continue
            if own.fake and own.schema_ok:
                return _module_op_fix(own, path), ""
            why = why or _missing(own)
            continue
        if own is not None:  # the walk resolved `factory().attr` straight to the nested op
            factory, attr, caller = own.factory, own.exported_as, i - 1
        elif any(d.factory == qualname for d in decls):
            factory, attr, caller = qualname, _attribute_taken(chain[i - 1].code, qualname) if i else "", i - 1
        else:
            continue
        if caller < 0 or caller == 0 and not _library_entry(chain, i):
            why = why or f"`{factory}`'s caller is the compiled entry itself"
            continue
        fix, reason = _factory_case(chain, caller, module, factory, attr, path, decls, locate)
        if fix is not None:
            return fix, ""
        why = why or reason
    return None, why


def _library_entry(chain: Sequence[Hop], i: int) -> bool:
    """The entry is a function of the library that declares the op (its public API), not user code."""
    return bool(chain[0].package) and chain[0].package == chain[i].package


def _factory_case(chain: Sequence[Hop], caller: int, module: str, factory: str, attr: str, path: str,
                  decls: Sequence[Declared], locate: Locate) -> tuple[Fix | None, str]:
    made = [d for d in decls if d.factory == factory]
    used = [d for d in made if not attr or d.exported_as in (attr, "*")]
    if not used:
        return None, f"`{factory}` declares no op named `{attr}`"
    keyed = _factory_takes_arguments(path, factory)
    if keyed:
        where = locate(chain[caller].function)
        schema = where is not None and read_signatures(where[2]).get(where[1], (False, True))[0]
        missing = [d for d in used if not d.fake and d.op not in OP_BODY_FAKES]
        if schema and not missing:
            return _public_wrap_fix(chain[caller].function, where, factory, used), ""
    usable = [d for d in made if d.fake and d.schema_ok and d.op not in OP_BODY_FAKES]
    if not attr:
        return None, f"the attribute taken from `{factory}()` is not on the call line"
    if not any(d.exported_as in (attr, "*") for d in usable):
        return None, _missing(used[0])
    return _factory_fix(module, factory, path, [d for d in usable if d.exported_as in (attr, "*")], attr, keyed), ""


def _use_registered_fix(module: str, qualname: str, registered: Declared) -> Fix:
    """The scanned version already registers `ns::name` for real: call it instead of the plain function."""
    namespace, name = registered.op.split("::")
    code = (f"{MARKER}\n# the library registers {registered.op} itself: every holder of the plain function calls it\n"
            f"_use_registered({module!r}, {qualname!r}, {registered.op!r})\n")
    summary = (f"Call `torch.ops.{namespace}.{name}` instead of `{module}.{qualname}`: this version registers "
               f"`{registered.op}` for real (`{module}.{registered.function}`, with its fake), while the plain "
               "function still traces into the JIT path; the patch rebinds every holder to the registered op.")
    return Fix("custom_op", f"{module}.{qualname}", summary, file=module.replace(".", "/") + ".py", line=registered.line,
               snippet=seal(code), sound=True)


def _missing(decl: Declared) -> str:
    if not decl.fake:
        return f"`{decl.op}` is declared without a fake"
    return f"`{decl.op}`'s signature has no custom-op schema (e.g. a Union argument, or no annotation)"


def _attribute_taken(code: str, factory: str) -> str:
    match = re.search(re.escape(factory.rsplit(".", 1)[-1]) + r"\([^()]*(?:\([^()]*\)[^()]*)*\)\s*\.\s*(\w+)", code)
    return match.group(1) if match else ""


def _factory_takes_arguments(path: str, qualname: str) -> bool:
    return read_signatures(path).get(qualname, (False, True))[1]


def _tuple(names: Sequence[str]) -> str:
    return "(" + "".join(f"{n!r}, " for n in names) + ")"


def _module_op_fix(decl: Declared, path: str) -> Fix:
    no_output = decl.fake == NO_OUTPUT_FAKE
    fake = f"fake=None, fake_source={decl.fake_source!r}" if no_output else f"fake={decl.fake!r}"
    code = (f"{MARKER}\n"
            f"_register_declared({decl.module!r}, {decl.function!r}, {decl.op!r}, "
            f"mutates={_tuple(decl.mutates)}, {fake})\n")
    with_fake = ("a fake that returns None (the library declares the op `-> None`, writing only "
                 f"{list(decl.mutates)}, and no fake)" if no_output else f"its declared fake `{decl.fake}`")
    summary = (f"Register FlashInfer's own declaration `{decl.op}` (`{decl.module}.{decl.function}`, mutates "
               f"{list(decl.mutates) or 'nothing'}) for real with torch.library and {with_fake} (register_fake), "
               "and rebind every holder: Dynamo then sees one op and never enters the JIT path.")
    return Fix("custom_op", f"{decl.module}.{decl.function}", summary, file=_relative(decl.module, path), line=decl.line,
               snippet=seal(code), sound=True)


def _factory_fix(module: str, factory: str, path: str, usable: list[Declared], attr: str, keyed: bool = False) -> Fix:
    ops = ",\n".join(f"    ({d.exported_as!r}, {d.op!r}, {_tuple(d.mutates)}, {d.op_signature!r}, {d.fake_source!r})"
                     for d in usable)
    code = (f"{MARKER}\n# torch.library.custom_op + register_fake for each declared op\n"
            f"_register_factory({module!r}, {factory!r}, [\n{ops},\n]{', keyed=True' if keyed else ''})\n")
    names = ", ".join(d.op for d in usable)
    summary = (f"Register the ops `{factory}` declares ({names}) for real with their declared fakes and make "
               f"`{factory}()` return them without building: the traced `{factory}().{attr}(...)` becomes one op.")
    if keyed:
        summary += " The factory's arguments travel to each op as a string key."
    return Fix("custom_op", f"{module}.{factory}", summary, file=_relative(module, path), line=usable[0].line,
               snippet=seal(code), sound=True)


def _public_wrap_fix(function: str, caller: tuple[str, str, str], factory: str, made: list[Declared]) -> Fix:
    module, qualname, path = caller
    fakes = ",\n".join(
        f"    {d.exported_as!r}: ({'op_body' if d.op in OP_BODY_FAKES else 'fake'!r}, "
        f"{(d.op_source if d.op in OP_BODY_FAKES else d.fake_source)!r})"
        for d in made if d.exported_as and (d.fake or d.op in OP_BODY_FAKES))
    op = "dynacheck::" + qualname.replace(".", "_")
    library_op = f"{module.split('.')[0]}::{qualname}"  # newer releases register the public function themselves
    code = (f"{MARKER}\n# torch.library.custom_op around the public function + register_fake from declared fakes\n"
            f"_wrap_public({module!r}, {qualname!r}, {op!r}, library_op={library_op!r}, "
            f"factory={factory.rsplit('.', 1)[-1]!r}, "
            f"fakes={{\n{fakes},\n}})\n")
    summary = (f"Wrap `{function}` in torch.library.custom_op with a register_fake that runs the function's own body on fake tensors with "
               f"`{factory}` swapped for the fakes FlashInfer declares beside its ops, so no shape rule is "
               "written by hand.")
    return Fix("custom_op", function, summary, file=_relative(module, path), snippet=seal(code), sound=True)


def _relative(module: str, path: str) -> str:
    """The file as reports show it: relative to the target root."""
    base = module.replace(".", "/")
    return base + "/__init__.py" if path.endswith("__init__.py") else base + ".py"

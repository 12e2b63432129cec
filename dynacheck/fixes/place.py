"""Put each fix at the right boundary of a chain, and say why a fix users ask for would not work.

FIELD_NOTES "Fix semantics": a custom op goes around the smallest function that owns the side
effect and returns tensors (for FlashInfer's FP4 path: `fp4_quantize`, not `get_cuda_version`);
a pre-warm is sound only when the forward reads a plain global the warm-up filled; never
`torch.compiler.disable` under fullgraph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from dynacheck.catalog import FixTemplate
from dynacheck.fixes.declared import read_signature_texts
from dynacheck.model import Fix, Hop


@dataclass(frozen=True)
class HopFacts:
    """What place() needs to know about each hop's function, beyond the Hop itself."""

    returns_tensors: bool
    has_params: bool  # besides self
    cached: bool  # functools.cache / lru_cache
    def_file: str = ""
    def_line: int = 0
    returns: str = ""  # the `-> T` annotation text ("" when not annotated)
    signature: tuple[str, str, str] | None = None  # (parameters, call arguments, return) source text, when known
    # or where to read it when a custom-op snippet asks: (source file, qualname). Read lazily because
    # only a chain's boundary function needs it, and reading means parsing the file's headers
    # (a census built it for every hop of every chain: 6 % of its CPU)
    signature_in: tuple[str, str] | None = None

    def signature_text(self) -> tuple[str, str, str] | None:
        if self.signature is not None or self.signature_in is None:
            return self.signature
        path, qualname = self.signature_in
        return read_signature_texts(path).get(qualname)


def op_returns_ok(annotation: str) -> bool:
    """A custom op can return tensors, ints, floats, bools, lists/tuples of them, or None (mutating ops).

    `str`, dicts, objects and unannotated returns have no schema: such a function is no custom-op boundary.
    """
    words = set(re.findall(r"[A-Za-z_]+", annotation))
    return bool(words) and words <= _OP_WORDS and ("Tensor" in words or words == {"None"})


_OP_WORDS = {"torch", "Tensor", "int", "float", "bool", "None", "Optional", "Tuple", "tuple", "List", "list",
             "Sequence", "SymInt"}


def boundary_index(chain: Sequence[Hop], facts: Sequence[HopFacts]) -> int:
    """Index of the hop to wrap as a custom op.

    The deepest hop that returns tensors, inside the package that owns the site; failing that,
    the first hop that enters the site's package (the library's public entry point).
    """
    site_package = chain[-1].package

    def usable(i: int) -> bool:  # a function a patch can reach: not nested in another function
        return i > 0 and chain[i].package == site_package and "<locals>" not in chain[i].function

    for i in range(len(chain) - 1, -1, -1):
        if facts[i].returns_tensors and usable(i):
            return i
    for i in range(len(chain)):
        if usable(i):
            return i
    return len(chain) - 1


def constant_index(chain: Sequence[Hop], facts: Sequence[HopFacts]) -> int | None:
    """The outermost hop below the boundary that takes no arguments: a process-wide probe."""
    for i in range(1, len(chain)):
        if not facts[i].has_params and not facts[i].returns_tensors:
            return i
    return None


def place(templates: Sequence[FixTemplate], chain: Sequence[Hop], facts: Sequence[HopFacts],
          other_hazards_below_boundary: int = 0, volatile: bool = False) -> tuple[Fix, ...]:
    """Concrete fixes for one finding, sound ones first, each with its place and one-sentence reason.

    `volatile`: the hazard's value changes between calls (a clock, a random draw), so computing it
    once at load time would change behaviour: it is moved out of the compiled region instead.
    """
    if not chain:
        return ()
    site = chain[-1]
    b = boundary_index(chain, facts)
    boundary = chain[b]
    cached_hops = [h.function for h, f in zip(chain, facts) if f.cached]
    fixes: list[Fix] = []
    for template in templates:
        fixes.append(_one(template, chain, facts, b, boundary, site, cached_hops, other_hazards_below_boundary,
                          volatile))
    # A site below a library boundary is best fixed at the boundary: one custom op covers every hazard
    # under it, while a hoist or guard edits library code for one site only.
    below_boundary = b < len(chain) - 1
    in_entry = len(chain) == 1 or site.function == chain[0].function
    fixes.sort(key=lambda f: (not f.sound, not (below_boundary and f.kind == "custom_op"),
                              in_entry and f.kind not in EDIT_KINDS))
    return tuple(fixes)


EDIT_KINDS = ("guard", "remove", "move_out")


def _unsound_reason(kind: str, chain: Sequence[Hop], facts: Sequence[HopFacts], index: int) -> str:
    """Why a wrapper fix cannot work for this function ("" when it can), read from the function itself."""
    hop = chain[index]
    if index == 0:
        return (f"Not sound: `{hop.function}` is the compiled entry itself; wrapping it makes the whole model "
                "opaque (custom op) or freezes its output (hoist). Edit the hazard's line instead.")
    if kind == "custom_op" and not op_returns_ok(facts[index].returns):
        shown = facts[index].returns or "no return annotation"
        return (f"Not sound: `{hop.function}` returns `{shown}`; a custom op takes and returns only tensors, "
                "ints, floats, bools or lists of them, so no schema exists for it.")
    if kind == "hoist" and facts[index].has_params:
        return (f"Not sound: `{hop.function}`'s result depends on its arguments, so a value computed once at load "
                "would be wrong for the next call.")
    return ""


def _one(template: FixTemplate, chain, facts, b: int, boundary: Hop, site: Hop, cached_hops: list[str],
         others: int, volatile: bool = False) -> Fix:
    kind = template.kind
    where = dict(file=facts[b].def_file or boundary.file, line=facts[b].def_line or boundary.line)
    if kind == "custom_op":
        unsound = _unsound_reason(kind, chain, facts, b)
        if unsound:
            return Fix("custom_op", boundary.function, unsound, sound=False, **where)
        reason = (f"Wrap `{boundary.function}` in torch.library.custom_op with a register_fake: it is the "
                  f"smallest function on this chain that owns the side effect and returns tensors, so Dynamo "
                  f"sees one opaque op and eager behaviour is kept.")
        return Fix("custom_op", boundary.function, reason,
                   snippet=custom_op_snippet(boundary.function, facts[b].signature_text()),
                   sound=template.sound, **where)
    if kind == "assume_constant_result":
        index = constant_index(chain, facts)
        if index is None:
            return Fix(kind, site.function, "Not applicable: every function on this chain takes arguments, so "
                       "no value here is fixed for the process.", sound=False)
        probe = chain[index]
        if others:
            return Fix(kind, probe.function,
                       f"Not enough alone: `{probe.function}` could be frozen at trace time, but {others} other "
                       f"untraceable call(s) are reached through `{boundary.function}`, so the compile still "
                       f"breaks; put the fix at `{boundary.function}`.", file=facts[index].def_file,
                       line=facts[index].def_line, snippet=f"torch._dynamo.assume_constant_result({probe.function})",
                       sound=False)
        return Fix(kind, probe.function, f"`{probe.function}` takes no arguments and its value is fixed for the "
                   "process: assume_constant_result runs it once at trace time and freezes the value.",
                   file=facts[index].def_file, line=facts[index].def_line,
                   snippet=f"torch._dynamo.assume_constant_result({probe.function})", sound=template.sound)
    if kind == "prewarm":
        if cached_hops:
            return Fix(kind, cached_hops[0], f"Pre-warming does not help: Dynamo traces through the "
                       f"functools.cache wrapper of `{cached_hops[0]}` into its body, warm or cold.", sound=False)
        return Fix(kind, site.function, "Sound only as a hoist: run it at model load and have the forward read a "
                   "plain module global that the warm-up filled.", sound=False)
    if kind == "allow_in_graph":
        return Fix(kind, site.function, "Not sound here: allow_in_graph runs the body at trace time with fake "
                   "tensors and again at every call, so the side effect still happens.", sound=False)
    if kind == "disable":
        return Fix(kind, boundary.function, "Not under fullgraph: torch.compiler.disable is itself a graph break "
                   "(GB0098), which fullgraph=True turns into an error.", sound=False)
    if kind == "hoist" and volatile:
        return Fix("move_out", site.function, f"Take the value outside the compiled region (read it in the "
                   f"caller of the compiled module and pass it in): `{site.function}` changes between calls, so "
                   "computing it once at load time would change what it returns.", file=site.file, line=site.line,
                   sound=template.sound)
    if kind == "hoist":
        unsound = _unsound_reason(kind, chain, facts, len(chain) - 1)
        if unsound:
            return Fix(kind, site.function, unsound, file=site.file, line=site.line, sound=False)
        return Fix(kind, site.function, f"Compute `{site.function}`'s result at import or model load and read a "
                   "plain module global inside the forward.", file=site.file, line=site.line, sound=template.sound)
    if kind == "guard" and branch_test(site.code) is not None:
        return Fix(kind, site.function, "Put `not torch.compiler.is_compiling() and` in front of the branch's test: "
                   "compiled, the test is never evaluated and the branch is not taken, so the code after it runs "
                   "instead (eager is unchanged). Keep this edit where that path computes the same result, e.g. "
                   "the branch is a shortcut.", file=site.file, line=site.line,
                   snippet=edit_snippet(kind, site.code), sound=template.sound)
    if kind == "guard":
        return Fix(kind, site.function, "Skip it when compiled with `if not torch.compiler.is_compiling():` — "
                   "note the call then never runs inside the compiled model.", file=site.file, line=site.line,
                   snippet=edit_snippet(kind, site.code), sound=template.sound)
    text = " ".join(template.text.split())
    return Fix(kind, site.function, text[:300], file=site.file, line=site.line,
               snippet=edit_snippet(kind, site.code) if kind in EDIT_KINDS else "", sound=template.sound)


def edit_snippet(kind: str, code: str) -> str:
    """The edit shown as code for a hazard line (the `fix --patch` diff applies the guard)."""
    if not code:
        return ""
    test = branch_test(code)
    if kind == "guard" and test is not None:
        keyword = code.split(None, 1)[0]
        return f"{keyword} not torch.compiler.is_compiling() and ({test}):"
    if kind == "guard":
        return f"if not torch.compiler.is_compiling():\n    {code}"
    if kind == "remove":
        return f"# removed from the compiled path: {code}"
    return f"# compute before calling the compiled model and pass the value in: {code}"


def branch_test(code: str) -> str | None:
    """The test of an `if`/`elif` line (`if a and b:` -> `a and b`), None for any other statement."""
    first = code.strip()
    for keyword in ("if ", "elif "):
        if first.startswith(keyword) and first.endswith(":"):
            return first[len(keyword):-1].strip()
    return None


SIGNATURE_MARK = "the function's real signature, read from its source"


def custom_op_snippet(qualname: str, signature: tuple[str, str, str] | None = None) -> str:
    """A custom-op wrapper to fill in: with the function's real parameters when the scan read them."""
    module, _, name = qualname.rpartition(".")
    params, call, returns = signature or ("*args", "*args", "")
    arrow = f" -> {returns}" if returns else ""
    mark = SIGNATURE_MARK if signature else "spell out the real signature"
    return (
        "import torch\n"
        f"import {module} as _lib\n\n"
        f"_orig = _lib.{name}\n\n"
        f"@torch.library.custom_op(\"dynacheck::{name}\", mutates_args=())\n"
        f"def {name}({params}){arrow}:  # {mark}\n"
        f"    return _orig({call})\n\n"
        f"@{name}.register_fake\n"
        f"def _({params}){arrow}:\n"
        f"    ...  # return empty tensors with the exact shapes/dtypes eager returns\n\n"
        f"_lib.{name} = {name}  # and every other module global bound to the original\n"
    )

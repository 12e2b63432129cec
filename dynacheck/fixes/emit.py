"""Emit a patch module (Python source) that applies the sound fix of each finding.

The module is generated, never hand-edited: `dynacheck fix --emit FILE`. Load it before start-up
(`import dynacheck_fixes` first thing, or from `sitecustomize`). It imports each patched library,
builds the wrapper, and rebinds every module global that holds the original function (`flashinfer.
fp4_quantize`, `flashinfer.fp4_quantization.fp4_quantize`, SGLang's `modelopt_quant.fp4_quantize`,
...), found by identity in `sys.modules`. `APPLIED` lists what was done.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

import ast

from dynacheck.fixes.from_declared import MARKER, seal, unseal
from dynacheck.fixes.emit_runtime import HEADER as _HEADER
from dynacheck.fixes.known_fakes import KNOWN_FAKES
from dynacheck.model import Finding, Fix

EMITTED_KINDS = ("custom_op", "assume_constant_result", "hoist")

_CUSTOM_OP = '''

# Fix {n}: custom_op at {at} ({why})
# Fake shapes from: {source}
def _fix_{n}():
    loaded = _load({at!r})
    if loaded is None or getattr(loaded[2], "__dynacheck_wrapped__", False):
        return
    owner, attr, original = loaded

    @torch.library.custom_op({op_name!r}, mutates_args=())
    def op({params}) -> {returns}:
        return original({call_args})

    @op.register_fake
    def _fake({params}) -> {returns}:
{fake_body}
    def wrapper({params}) -> {returns}:
        return op({call_args})

    wrapper.__wrapped__ = original
    wrapper.__dynacheck_wrapped__ = True
    wrapper.__name__ = original.__name__
    wrapper.__qualname__ = getattr(original, "__qualname__", original.__name__)
    _rebind(original, wrapper, "custom_op {op_name}", owner, attr)


_apply(_fix_{n}, {label!r})
'''

_SKELETON = '''

# Fix {n}: custom_op at {at} ({why})
# SKELETON: dynacheck has no known fake for this function. To enable it:
#   1. check `op`'s parameters and return: the function's own where the scan read them (tensors, ints, ...);
#   2. make `_fake` return empty tensors with exactly the shapes, dtypes and strides eager returns;
#   3. set ENABLE_FIX_{n} = True and check compiled output against eager.
ENABLE_FIX_{n} = False


def _fix_{n}():
    if not ENABLE_FIX_{n}:
        APPLIED.append({skeleton_note!r})
        return
    loaded = _load({at!r})
    if loaded is None:
        return
    owner, attr, original = loaded

    @torch.library.custom_op({op_name!r}, mutates_args=())
    def op({params}){arrow}:
        return original({call})

    @op.register_fake
    def _fake({params}){arrow}:
        raise NotImplementedError({fake_note!r})

    _rebind(original, op, "custom_op {op_name}", owner, attr)


_apply(_fix_{n}, {label!r})
'''

_DECLARED = '''

# Fix {n}: custom_op at {at} ({why})
# Built from the library's own op declarations in the scanned source (`dynacheck scan` showed this code).
def _fix_{n}():
{code}

_apply(_fix_{n}, "custom_op at {at}")
'''

_ASSUME_CONSTANT = '''

# Fix {n}: assume_constant_result at {at} ({why})
# Runs once at trace time and the value is frozen into the graph: only for a process-constant probe.
def _fix_{n}():
    loaded = _load({at!r})
    if loaded is None:
        return
    torch._dynamo.assume_constant_result(loaded[2])
    APPLIED.append({done_note!r})


_apply(_fix_{n}, {label!r})
'''

_HOIST = '''

# Fix {n}: hoist at {at} ({why})
# Computed once now, at import, outside any compiled region; the forward reads the frozen value.
def _fix_{n}():
    loaded = _load({at!r})
    if loaded is None:
        return
    owner, attr, original = loaded
    if isinstance(owner, type) or _takes_arguments(original):
        APPLIED.append({manual_note!r})
        return
    value = original()

    def hoisted(*args, **kwargs):
        return value

    hoisted.__wrapped__ = original
    _rebind(original, hoisted, "hoist", owner, attr)


_apply(_fix_{n}, {label!r})
'''


# A place a fix may name: a dotted Python name (nested functions as `<locals>`). Scan files are
# input, so anything else (quotes, newlines, code) is dropped before it can reach generated source.
_PLACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.(<locals>|[A-Za-z_][A-Za-z0-9_]*))*")
_WORD = re.compile(r"[^A-Za-z0-9_.:-]+")


def valid_place(at: object) -> bool:
    """True when `at` is a dotted Python name that generated code may mention."""
    return isinstance(at, str) and len(at) <= 400 and _PLACE.fullmatch(at) is not None


def first_sound_fixes(findings: Sequence[Finding]) -> list[tuple[Fix, Finding]]:
    """Each finding's first sound fix (the scan orders fixes best first), one per (kind, place).

    Fixes whose place is not a dotted Python name are left out: they cannot be applied, and the
    text of a scan file must never become code.
    """
    chosen: dict[tuple[str, str], tuple[Fix, Finding]] = {}
    for finding in findings:
        fix = next((f for f in finding.fixes if f.sound), None)
        if fix is None or not valid_place(fix.at):
            continue
        key = (fix.kind, _canonical(fix.at))
        if key not in chosen or (_declared_code(fix) and not _declared_code(chosen[key][0])):
            chosen[key] = (fix, finding)  # the declared-op code, when one chain has it, is the fix to apply
        elif _declared_code(fix) and "_register_factory(" in fix.snippet and _declared_code(chosen[key][0]):
            kept = chosen[key][0]
            merged = _merge_factory_ops(_declared_code(kept), _declared_code(fix))
            chosen[key] = (replace(kept, snippet=seal(merged)), chosen[key][1])
    return list(chosen.values())


APPLIED_KIND, SKELETON, MANUAL = "applied", "skeleton", "manual"


def category(fix: Fix) -> str:
    """What the patch module does with a fix: applies it, writes a disabled skeleton, or lists it as manual."""
    if fix.kind not in EMITTED_KINDS or fix.kind == "hoist" and _is_method(fix.at):
        return MANUAL
    if fix.kind == "custom_op" and not _declared_code(fix) and _known(fix) is None:
        return SKELETON
    return APPLIED_KIND


def chosen_fixes(findings: Sequence[Finding]) -> list[tuple[Fix, Finding]]:
    """The first sound fixes that the patch module writes code for (applied ones and skeletons)."""
    return [(f, x) for f, x in first_sound_fixes(findings) if f.kind in EMITTED_KINDS]


def applied_fixes(findings: Sequence[Finding]) -> list[tuple[Fix, Finding]]:
    """The first sound fixes that the patch module applies as generated (no skeletons, nothing by hand)."""
    return [(f, x) for f, x in first_sound_fixes(findings) if category(f) == APPLIED_KIND]


def manual_fixes(findings: Sequence[Finding]) -> list[tuple[Fix, Finding]]:
    """First sound fixes that need an edit by hand (remove, guard, ...): listed, never applied."""
    return [(f, x) for f, x in first_sound_fixes(findings) if f.kind not in EMITTED_KINDS]


def emission_lines(findings: Sequence[Finding], path: str) -> list[str]:
    """What `fix --emit` prints: each fix under what the module does with it, then the counts.

    The same classification writes the module's APPLIED lines, so the two agree (a test pins it).
    """
    rows = first_sound_fixes(findings)
    lines = []
    for wanted, title in ((APPLIED_KIND, "applied by the module"), (SKELETON, "skeleton, disabled until filled in"),
                          (MANUAL, "to do by hand (listed, not applied)")):
        chosen = [(fix, finding) for fix, finding in rows if category(fix) == wanted]
        if chosen:
            lines.append(f"{title}:")
            lines += [f"  {fix.kind:<24} {fix.at}  ({finding.rule})" for fix, finding in chosen]
    counts = {c: sum(category(f) == c for f, _ in rows) for c in (APPLIED_KIND, SKELETON, MANUAL)}
    lines.append(f"wrote {path}: {counts[APPLIED_KIND]} applied, {counts[SKELETON]} skeleton(s), "
                 f"{counts[MANUAL]} manual, from {len(findings)} finding(s)")
    return lines


def emit_patch(findings: Sequence[Finding]) -> str:
    """Source text of the patch module for these findings (deterministic: same input, same text)."""
    pairs = chosen_fixes(findings)
    listing = "\n".join(f"  {i}. [{category(fix)}] {fix.kind} at {fix.at}"
                         for i, (fix, _) in enumerate(pairs, 1)) or "  (none)"
    manual = manual_fixes(findings)
    if manual:
        listing += "\nTo do by hand (not applied here):\n" + "\n".join(
            f"  - {_word(fix.kind)} at {fix.at}: {' '.join(fix.summary.split())[:160]}" for fix, _ in manual)
    parts = [_HEADER.format(listing=_docstring_safe(listing))]
    for fix, _ in manual:
        parts.append(f"\nAPPLIED.append({f'manual, not applied: {fix.kind} at {_canonical(fix.at)}'!r})\n")
    for n, (fix, finding) in enumerate(pairs, 1):
        at = _canonical(fix.at)
        why = _word(f"{finding.rule} {finding.outcome.gb_id or finding.outcome.kind}".strip())
        if fix.kind == "custom_op":
            known = _known(fix)
            code = _declared_code(fix)
            if code:
                parts.append(_DECLARED.format(n=n, at=at, why=why, code=_indent(code, 4)))
            elif known is None:
                op_name = "dynacheck::" + _word("_".join(fix.at.split(".")[-2:])).replace(".", "_")
                params, call, arrow = _signature(fix)
                parts.append(_SKELETON.format(
                    n=n, at=at, why=why, op_name=op_name, params=params, call=call, arrow=arrow,
                    label=f"custom_op at {at}", skeleton_note=f"skeleton, disabled until filled in: {at}",
                    fake_note=f"dynacheck: write the fake for {at}: return empty tensors shaped as eager's outputs"))
            else:
                at = f"{known.module}.{known.attr}"
                parts.append(_CUSTOM_OP.format(
                    n=n, at=at, why=why, source=known.source, label=f"custom_op at {at}",
                    op_name=known.op_name, params=known.params, returns=known.returns,
                    call_args=known.call_args, fake_body=_indent(known.fake_body, 4),
                ))
        elif fix.kind == "assume_constant_result":
            parts.append(_ASSUME_CONSTANT.format(n=n, at=at, why=why, label=f"assume_constant_result at {at}",
                                                 done_note=f"assume_constant_result: {at}"))
        else:
            parts.append(_HOIST.format(
                n=n, at=at, why=why, label=f"hoist at {at}",
                manual_note=f"manual (takes arguments: compute it at model load yourself): hoist {at}"))
    return "".join(parts)


def _word(text: str) -> str:
    """Free text from a scan file reduced to what a generated comment may hold (no newlines, no quotes)."""
    return _WORD.sub(" ", text).strip()[:120]


def _docstring_safe(text: str) -> str:
    """Listing text that cannot end the module docstring or escape from it."""
    text = text.replace("\\", "/").replace('"', "'")
    return "".join(ch if ch == "\n" or ch.isprintable() else " " for ch in text)


def _signature(fix: Fix) -> tuple[str, str, str]:
    """(parameters, call arguments, ' -> return') of the skeleton: the function's own when the scan read them."""
    from dynacheck.fixes.place import SIGNATURE_MARK

    for line in fix.snippet.splitlines():
        if line.startswith("def ") and line.endswith(SIGNATURE_MARK):
            head = line[: -len(SIGNATURE_MARK)].rstrip().rstrip("#").rstrip().rstrip(":")
            inside, _, returns = head.partition("(")[2].rpartition(")")
            names = []
            for part in inside.split(","):
                name = part.split(":")[0].split("=")[0].strip()
                if name:
                    names.append(name)
            arrow = returns.replace("->", " -> ").replace("  ", " ").rstrip()
            if _plain_signature(inside, arrow, names):
                return inside, ", ".join(names), arrow
    return "*args", "*args", ""


_SAFE_SIGNATURE_NODES = (ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Name, ast.Attribute,
                         ast.Subscript, ast.Tuple, ast.List, ast.Constant, ast.BinOp, ast.BitOr, ast.Load,
                         ast.Pass, ast.UnaryOp, ast.USub, ast.Index if hasattr(ast, "Index") else ast.Name)


def _plain_signature(inside: str, arrow: str, names: list[str]) -> bool:
    """A signature from a scan file is pasted into the patch module only when it is plain: names,
    dotted annotations and constant defaults; no call, lambda or anything else that would run."""
    try:
        tree = ast.parse(f"def f({inside}){arrow}:\n    pass\n")
    except (SyntaxError, ValueError):
        return False
    if not all(isinstance(node, _SAFE_SIGNATURE_NODES) for node in ast.walk(tree)):
        return False
    return all(name.lstrip("*").isidentifier() for name in names)


def _merge_factory_ops(code: str, other: str) -> str:
    """One factory fix per factory: each chain's snippet names the ops its call takes; register them all."""
    lines = code.splitlines(keepends=True)
    have = {line for line in lines if line.startswith("    (")}
    extra = [line for line in other.splitlines(keepends=True) if line.startswith("    (") and line not in have]
    if not extra:
        return code
    last = max(i for i, line in enumerate(lines) if line.startswith("    ("))
    return "".join(lines[:last + 1] + extra + lines[last + 1:])


def _is_method(at: str) -> bool:
    """A hoist of a method is done by hand (the patch module refuses it): its owner is a class."""
    parts = at.split(".")
    return len(parts) > 1 and parts[-2][:1].isupper()


def _declared_code(fix: Fix) -> str:
    """The declared-op code of a fix, only when this machine's dynacheck made it (its seal verifies):
    code from a scan file that anyone could edit is never pasted into a module the user imports."""
    if fix.kind != "custom_op" or not fix.snippet.startswith(MARKER):
        return ""
    return unseal(fix.snippet)


def _known(fix: Fix):
    return KNOWN_FAKES.get(fix.at) or KNOWN_FAKES.get(_canonical(fix.at))


_ALIASES = {"flashinfer.fp4_quantize": "flashinfer.fp4_quantization.fp4_quantize"}


def _canonical(at: str) -> str:
    return _ALIASES.get(at, at)


def _indent(body: str, extra: int) -> str:
    pad = " " * extra
    return "".join(pad + line if line.strip() else line for line in body.splitlines(keepends=True))

"""`dynacheck fix --patch OUT.diff`: the fixes as a reviewable unified diff of the scanned sources.

Made with libcst transforms, one per kind of edit, against the files the scan read (paths relative
to each target root, so `patch -p1` applies it in that root):
- a module-level op the library declares with no-op registrars becomes a real registration in place:
  `@register_custom_op("ns::op", mutates_args=...)` -> `@torch.library.custom_op(...)` and its
  `@register_fake_op("ns::op")` fake -> `@<op>.register_fake`;
- a process-constant probe (no arguments, nothing tensor) gets `@torch._dynamo.assume_constant_result`;
- a side-effect statement (a bare call such as `print(...)` or `logger.info(...)`) written in the
  compiled code is guarded with `if not torch.compiler.is_compiling():`;
- a branch on a tensor's value (`if flag_from_item:`) gets `not torch.compiler.is_compiling() and`
  in front of its test: compiled, the test is never evaluated and the branch is not taken.
What only the patch module can do (replacing a module factory, wrapping a public function with a
derived fake) is listed in the diff's preamble, which `patch` and `git apply` ignore.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import libcst as cst
from libcst.metadata import PositionProvider

from dynacheck.fixes.emit import first_sound_fixes, valid_place
from dynacheck.fixes.from_declared import MARKER
from dynacheck.model import Finding, Fix, Target

_DECLARED = re.compile(r"_register_declared\('([\w.]+)', '(\w+)', '([\w:]+)', mutates=\(([^)]*)\), fake='(\w+)'\)")


@dataclass
class FileEdits:
    """What to change in one file."""

    declared: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # function -> (op, mutates)
    fakes: dict[str, str] = field(default_factory=dict)  # fake function -> op function
    guard_lines: set[int] = field(default_factory=set)
    constant: set[str] = field(default_factory=set)  # module-level functions to freeze at trace time


class _Rewrite(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: FileEdits) -> None:
        super().__init__()
        self.edits = edits
        self.depth = 0
        self.done: list[str] = []
        self.guarded: set[int] = set()
        self.left: list[str] = []  # declared ops a decorator edit cannot register (the patch module can)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        name = original.name.value
        if self.depth == 0 and name in self.edits.declared and "Generator" in cst.Module([]).code_for_node(original.params):
            self.edits.fakes = {k: v for k, v in self.edits.fakes.items() if v != name}
            self.left.append(f"register {self.edits.declared[name][0]} at {name} (a torch.Generator argument: "
                             "infer_schema rejects it; the patch module writes the schema)")
        elif self.depth == 0 and name in self.edits.declared:
            op, mutates = self.edits.declared[name]
            decorator = cst.parse_expression(f"torch.library.custom_op({op!r}, mutates_args={_tuple(mutates)})")
            updated = updated.with_changes(decorators=[
                d.with_changes(decorator=decorator) if _registrar(d, "register_custom_op") else d
                for d in updated.decorators])
            self.done.append(f"register {op} for real at {name}")
        if self.depth == 0 and name in self.edits.constant:
            decorator = cst.Decorator(decorator=cst.parse_expression("torch._dynamo.assume_constant_result"))
            updated = updated.with_changes(decorators=[*updated.decorators, decorator])
            self.done.append(f"assume_constant_result at {name}")
        if self.depth == 0 and name in self.edits.fakes:
            target = cst.parse_expression(f"{self.edits.fakes[name]}.register_fake")
            updated = updated.with_changes(decorators=[
                d.with_changes(decorator=target) if _registrar(d, "register_fake_op") else d
                for d in updated.decorators])
        return updated

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        line = self.get_metadata(PositionProvider, original).start.line
        if line not in self.edits.guard_lines:
            return updated
        self.guarded.add(line)
        self.done.append(f"guard branch at line {line}")
        compiling = cst.parse_expression("not torch.compiler.is_compiling()")
        test = updated.test
        if isinstance(test, cst.BooleanOperation) or not isinstance(test, (cst.Name, cst.Attribute, cst.Call)):
            test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if not test.lpar else test
        return updated.with_changes(test=cst.BooleanOperation(left=compiling, operator=cst.And(), right=test))

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated):
        line = self.get_metadata(PositionProvider, original).start.line
        if line not in self.edits.guard_lines or not _bare_call(original):
            return updated
        self.guarded.add(line)
        self.done.append(f"guard line {line}")
        test = cst.parse_expression("not torch.compiler.is_compiling()")
        return cst.If(test=test, body=cst.IndentedBlock(body=[updated.with_changes(leading_lines=())]),
                      leading_lines=updated.leading_lines)


def _registrar(decorator: cst.Decorator, name: str) -> bool:
    node = decorator.decorator
    func = node.func if isinstance(node, cst.Call) else None
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return last == name


def _bare_call(statement: cst.SimpleStatementLine) -> bool:
    """Only a statement whose value nobody reads can be skipped when compiled."""
    return len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr) \
        and isinstance(statement.body[0].value, cst.Call)


def _tuple(names: Sequence[str]) -> str:
    return "(" + "".join(f"{n!r}, " for n in names) + ")"


def _locate(targets: Sequence[Target], relative: str) -> tuple[Path, str] | None:
    for target in targets:
        path = Path(target.root) / relative
        if path.is_file():
            return path, relative
    return None


def _module_file(targets: Sequence[Target], module: str) -> tuple[Path, str] | None:
    base = module.replace(".", "/")
    return _locate(targets, base + ".py") or _locate(targets, base + "/__init__.py")


def plan_edits(findings: Sequence[Finding], targets: Sequence[Target]) -> tuple[dict, list[str]]:
    """Edits per file (absolute path -> (relative path, FileEdits)), and what only the module can do."""
    files: dict[Path, tuple[str, FileEdits]] = {}
    module_only: list[str] = []

    def edits_for(found: tuple[Path, str]) -> FileEdits:
        return files.setdefault(found[0], (found[1], FileEdits()))[1]

    for fix, finding in first_sound_fixes(findings):
        declared = _DECLARED.search(fix.snippet) if fix.snippet.startswith(MARKER) else None
        if declared:
            module, function, op, mutates, fake = declared.groups()
            found = _module_file(targets, module)
            if found is not None:
                edits = edits_for(found)
                edits.declared[function] = (op, tuple(re.findall(r"'([^']*)'", mutates)))
                edits.fakes[fake] = function
                continue
        if fix.kind in ("guard", "remove") and _guardable(fix, finding):
            continue  # per line, below: one fix place (the function) can hold several hazard lines
        if fix.kind == "assume_constant_result" and fix.file:
            found = _locate(targets, fix.file)
            if found is not None:
                edits_for(found).constant.add(fix.at.rsplit(".", 1)[-1])
                continue
        module_only.append(f"{fix.kind} at {fix.at}")
    for finding in findings:
        first = next((f for f in finding.fixes if f.sound), None)
        if first is not None and first.kind in ("guard", "remove") and valid_place(first.at) \
                and _guardable(first, finding):
            found = _locate(targets, finding.site.file)
            if found is not None:
                edits_for(found).guard_lines.add(finding.site.line)
            else:
                module_only.append(f"{first.kind} at {finding.site.file}:{finding.site.line}")
    return files, module_only


def _guardable(fix: Fix, finding: Finding) -> bool:
    guard = next((f for f in finding.fixes if f.kind == "guard"), None)
    return guard is not None and guard.sound and finding.outcome.fatal_under_fullgraph


def guarded_sites(findings: Sequence[Finding], targets: Sequence[Target]) -> set[tuple[str, int]]:
    """(file, line) of every hazard line `fix --patch` guards: what its diff clears (fix coverage)."""
    return {(relative, line) for relative, rewrite, _, _ in _rewrites(findings, targets)[0] for line in rewrite.guarded}


def _rewrites(findings: Sequence[Finding], targets: Sequence[Target]):
    """([(relative path, rewrite, text before, text after)], fixes the diff cannot make)."""
    files, module_only = plan_edits(findings, targets)
    out = []
    for path in sorted(files):
        relative, edits = files[path]
        before = path.read_text(encoding="utf-8")
        rewrite = _Rewrite(edits)
        out.append((relative, rewrite, before, cst.MetadataWrapper(cst.parse_module(before)).visit(rewrite).code))
    return out, module_only


def make_patch(findings: Sequence[Finding], targets: Sequence[Target]) -> tuple[str, list[str], list[str]]:
    """(unified diff text, edits made, fixes left to the patch module or to hand)."""
    rewrites, module_only = _rewrites(findings, targets)
    chunks, done = [], []
    for relative, rewrite, before, after in rewrites:
        edits = rewrite.edits
        if rewrite.done and "import torch\n" not in after and not re.search(r"^import torch\b", after, re.M):
            after = "import torch\n" + after
        module_only += rewrite.left
        for line in sorted(edits.guard_lines - rewrite.guarded):  # a branch or an assignment: its value is read
            module_only.append(f"guard at {relative}:{line} (neither a bare call nor an if/elif test: edit by hand)")
        if after != before:
            done += [f"{relative}: {d}" for d in rewrite.done]
            chunks.append("".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                                       f"a/{relative}", f"b/{relative}")))
    preamble = ["dynacheck fix --patch: source edits for the fixes below (apply with `patch -p1` in the target root).",
                *[f"  edited: {d}" for d in done]]
    if module_only:
        preamble += ["Not expressible as a source edit here (use `dynacheck fix --emit`, or edit by hand):",
                     *[f"  {m}" for m in module_only]]
    return "\n".join(preamble) + "\n\n" + "".join(chunks), done, module_only

"""Whether the compile of the entry uses `fullgraph=True`, and what that makes of each finding.

Without knowing, a finding reports both outcomes: the GB id under the default compile and
whether `fullgraph=True` would fail there. When the user says `--fullgraph`, or the scanned code
decorates the entry with `@torch.compile(..., fullgraph=True)`, the scan states the one outcome
that compile has: fatal findings say so, and findings that only break the default compile
(`.item()`, data-dependent shapes) are marked as not breaking this compile, at `info`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from dynacheck.model import Finding
from dynacheck.static.ir import Expr, dotted
from dynacheck.static.values import Evaluator, Value

COMPILERS = ("torch.compile", "torch._dynamo.optimize")


def declared(evaluator: Evaluator, entries: Iterable[Value], texts: Iterable[str]) -> str:
    """Why the compile is known to be fullgraph ("" when it is not): the entry's own decorator."""
    for entry, text in zip(entries, texts):
        scope = evaluator.function_scope(entry)
        if scope is None or scope.function is None:
            continue
        for decorator in scope.function.decorators:
            if _is_fullgraph_compile(decorator, evaluator, scope):
                return f"`@torch.compile(fullgraph=True)` on {text} ({scope.module.path}:{scope.function.line})"
    return ""


def _is_fullgraph_compile(expr: Expr, evaluator: Evaluator, scope) -> bool:
    if not expr or expr[0] != "c":
        return False
    fullgraph = dict(expr[3]).get("fullgraph")
    if fullgraph != ("n", "True"):
        return False
    names = {dotted(expr[1]) or ""}
    names |= {v.name for v in evaluator.eval(expr[1], scope)[:4] if v.kind == "ext"}
    return bool(names & set(COMPILERS))


def apply(findings: Iterable[Finding], source: str) -> list[Finding]:
    """Findings as they read for a compile known to use fullgraph=True (`source` says why)."""
    out = []
    for finding in findings:
        outcome = finding.outcome
        if outcome.fatal_under_fullgraph:
            detail = f"fatal for this compile (fullgraph=True: {source})"
            out.append(replace(finding, outcome=replace(outcome, detail=_join(detail, outcome.detail))))
        elif outcome.kind == "graph_break":
            detail = f"no break under this compile (fullgraph=True: {source}); it breaks only the default compile"
            out.append(replace(finding, severity="info", outcome=replace(outcome, detail=_join(detail, outcome.detail))))
        else:
            out.append(finding)
    return out


def _join(first: str, rest: str) -> str:
    return f"{first}; {rest}" if rest else first

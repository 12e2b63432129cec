"""Breaks on every way an open test can go: conditional fatal findings that together cover each outcome.

A finding under a test the deployment does not decide is conditional: it breaks only if the test goes
its way. FlashInfer 0.7's `_rmsnorm_impl` builds its CUDA JIT module `if _use_cuda_norm(input.device)`
and compiles a CuTe DSL kernel otherwise (`norm/__init__.py:1284-1295`): each break is conditional, yet a
fullgraph compile takes one of the two ways and breaks either way. Here a set of such findings counts as
fatal when every combination of the tests they wait on reaches one of them.

A test is one guard (file, line, text) in one calling context: the chain up to the function that holds it
(`_context`), so the same test reached through two call sites is two tests. A condition that is not a
test (`first call only`, `an exception was raised`) is a test whose other way reaches nothing, so it only
counts where a finding on that other way exists too (it never does for those kinds).
"""

from __future__ import annotations

from itertools import product
from typing import Sequence

from dynacheck.model import Condition, Finding

MAX_TESTS = 8  # tests one claim is worked out over: 2**8 combinations


def fatal_every_way(findings: Sequence[Finding]) -> tuple[tuple[Finding, ...], tuple[Condition, ...]]:
    """(the conditional fatal findings that together break whichever way their tests go, each test as a
    condition with its text), or ((), ()) when some combination reaches none of them."""
    literals = {f: _literals(f) for f in findings
                if not f.unconditional and f.outcome.fatal_under_fullgraph and f.outcome.gb_id != "GB7000"}
    literals = {f: lits for f, lits in literals.items() if lits is not None}
    while True:  # a test seen one way only cannot be covered the other way: drop what waits on it
        ways: dict[tuple, set[bool]] = {}
        for lits in literals.values():
            for test, taken, _ in lits:
                ways.setdefault(test, set()).add(taken)
        kept = {f: lits for f, lits in literals.items() if all(len(ways[test]) == 2 for test, _, _ in lits)}
        if len(kept) == len(literals):
            break
        literals = kept
    tests = list(ways) if literals else []
    if not tests or len(tests) > MAX_TESTS:
        return (), ()
    for combination in product((True, False), repeat=len(tests)):
        taken = dict(zip(tests, combination))
        if not any(all(taken[test] is way for test, way, _ in lits) for lits in literals.values()):
            return (), ()
    # each test as its text without the way it goes (`clusters_eligible`, not `not clusters_eligible`)
    named = {test: Condition(test[2], test[0], test[1], condition.kind)
             for lits in literals.values() for test, _, condition in lits}
    return tuple(literals), tuple(named[test] for test in tests)


def _literals(finding: Finding) -> list[tuple[tuple, bool, Condition]] | None:
    """(test, the way it must go, the condition) per condition of the finding; None when a condition's
    place on the chain is not found (no claim rests on it)."""
    out = []
    for condition in finding.conditions:
        text, taken = condition.text, True
        while text.startswith("not "):  # the else way of `if not x:` reads `not not x`
            text, taken = text[4:], not taken
        context = _context(finding, condition)
        if context is None:
            return None
        out.append(((condition.file, condition.line, text, context), taken, condition))
    return out


def _context(finding: Finding, condition: Condition) -> tuple | None:
    """The calling context of the function holding the condition's test: the hops before it (function
    and call line) and its name. That function is taken as the last hop in the test's file whose call
    comes at or after the test: never one above the real one (whose own call comes after its test), so
    two findings share a context only when they reach the test the same way."""
    at = next((i for i in range(len(finding.chain) - 1, -1, -1)
               if finding.chain[i].file == condition.file and finding.chain[i].line >= condition.line), None)
    if at is None:
        return None
    return tuple((hop.function, hop.line) for hop in finding.chain[:at]) + (finding.chain[at].function,)

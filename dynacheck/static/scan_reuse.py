"""A census scan answered by the same forward's scan on the deployment before it, when what it reads is the same.

A census walks every forward on each deployment of a chain, each evaluator forked from the one before it
(ScanSession.engine): the fork keeps every memo entry that read no fact the two deployments differ in, and
a scan on the new deployment replays those. On a fork that changes the GPU only, most walks come out as they
were, and what such a scan costs is the replay itself: every node's expansion linked again, the value
hazards found again, the findings, fix plan and first break built again (bench/RESULTS.md, "Census phases").

So before walking, the census checks whether the walk would be the one it made on the deployment before,
by asking the evaluator for exactly what that walk was made of (Reacher.walk builds it from nothing else):
- each entry resolves to an equal value, with the same root node key;
- each node the earlier walk expanded, in the order it expanded them, gets the same scope object
  (Evaluator.walk_scope) and an expansion equal to the one replayed then: the same object when the fork kept
  it, or worked out again (it read a fact the deployments differ in) and equal;
- the value hazards found over that walk (TensorHazards.hits, run for real) are equal;
- the fullgraph declaration reads the same.
Then the new walk would be the same walk, its hits the same hits, and the findings, fix plan and first break
the session's builder makes from them the same: the cell's record is the earlier one. Every question the check
asks is one the scan would have asked, in the same order, so what it reads (its facts, its architecture
tests) is what the scan would have read. A check that fails has worked out what the walk needs anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dynacheck.catalog import load_catalog
from dynacheck.static.fullgraph import declared
from dynacheck.static.reach import TRACE, Reacher, Walk


# in an evaluator's `sites`: the (scope, mode) pairs whose expansion differs from the one the deployment before
# it replayed there (an object, not a memo entry: a fork drops it, as it is per deployment)
CHANGED = ("scan-reuse-changed",)


@dataclass
class Before:
    """What a scan was made of (scan_targets' `keep`), and the census record it gave."""

    entries: tuple[str, ...]
    entry_values: list
    walk: Walk
    value_hits: list
    why_fullgraph: str
    record: Any

    @classmethod
    def of(cls, entries, kept: dict, record) -> "Before | None":
        walk = kept.get("walk")
        if walk is None or walk.truncated or walk.wrapper_roots or walk.entry_defaults:
            return None  # a walk cut short, or started through a wrapper: not checked, scanned again
        return cls(tuple(entries), kept["entry_values"], walk, kept["value_hits"], kept["why_fullgraph"], record)


def unchanged(session, spec, before: Before) -> bool:
    """Whether a scan of `before.entries` on `spec`'s deployment would walk exactly `before.walk` (and so
    give `before.record`), asked of the session's evaluator for it (see the module's docstring)."""
    from dynacheck.static.scan import TENSOR_HAZARDS, hazard_test, resolve_entry  # scan.py imports its users

    _, evaluator, boundaries = session.engine(spec)
    entry_values = [resolve_entry(e, evaluator, session.locator) for e in before.entries]
    if entry_values != before.entry_values:
        return False
    reacher = Reacher(evaluator, boundaries, hazard_test(load_catalog()))
    roots = [node.key for node in before.walk.nodes.values() if node.parent is None]
    if roots != list(dict.fromkeys(reacher._key(value, (), TRACE) for value in entry_values)):
        return False
    # a scope's expansion is one memo entry per evaluator: one found changed is changed for every walk
    changed = evaluator.sites.setdefault(CHANGED, set())
    if changed and any((node.scope, node.key.mode) in changed for node, expansion in before.walk.expanded
                       if expansion is not None):
        return False
    for node, expansion in before.walk.expanded:
        scope = evaluator.walk_scope(node.func, node.bound)
        if scope is not node.scope:
            return False
        if expansion is None:
            continue  # nothing to expand then: nothing now (the same scope)
        now = reacher._expansion(node.key, scope)
        if now is not expansion and now != expansion:
            changed.add((scope, node.key.mode))
            return False
    hazards = evaluator.sites.get(TENSOR_HAZARDS)
    if hazards is None:
        return False  # every scan of a deployment makes it: none made yet, nothing to compare with
    if hazards.hits(before.walk) != before.value_hits:
        return False
    return declared(evaluator, entry_values, list(before.entries)) == before.why_fullgraph


"""Which break Dynamo hits first in the compiled frame: a depth-first walk in trace order.

Dynamo traces the entry's body statement by statement and descends into each call when it
reaches it, evaluating a call's arguments before the call itself. Under `fullgraph=True` the first
break it meets is the one the user sees; the others are only reached after that one is fixed.
Only calls that hold on the deployment (no open conditions) are followed.
"""

from __future__ import annotations

from typing import Iterable

from dynacheck.model import Finding
from dynacheck.static.reach import NodeKey, Walk

MAX_STEPS = 50_000


def first_break(walk: Walk, findings: Iterable[Finding], index, display, chain_along=None) -> dict:
    """The first fatal, unconditional site in trace order, as {function, file, line, callee, rule, gb_id},
    and with `chain_along` (the walk's edges from the entry to the site's function, and the site's line
    -> the chain as hop records), `chain`: the way Dynamo gets there, which need not be the site's
    shortest chain (a FlashInfer JIT load reached first under the attention, shortest under the MoE)."""
    fatal = {}
    for finding in findings:
        if finding.outcome.fatal_under_fullgraph and not finding.conditions and finding.status != "suppressed":
            fatal.setdefault((finding.site.file, finding.site.line), finding)
    if not fatal:
        return {}
    children: dict[NodeKey, list[tuple[int, int, NodeKey, object]]] = {}
    for key, node in walk.nodes.items():
        for edge in (node, *node.others):
            if edge.parent is not None and not edge.conditional:
                # `f(x).g()`: f runs before g (its callee expression holds a call)
                children.setdefault(edge.parent, []).append((edge.call_line, edge.chained, key, edge))
    hits: dict[NodeKey, list[int]] = {}
    for hit in walk.hits:
        if not hit.conditions:
            hits.setdefault(hit.at, []).append(hit.call.line)
    roots = [node for node in walk.nodes.values() if node.parent is None]
    seen: set[NodeKey] = set()
    steps = 0
    edges: list = []  # the edges from the root to the function being visited

    def visit(key: NodeKey) -> Finding | None:
        nonlocal steps
        if key in seen or steps > MAX_STEPS:
            return None
        seen.add(key)
        summary = index.module(key.module)
        fn = summary.functions.get(key.qualname) if summary is not None else None
        if fn is None:
            return None
        path = display(summary.path)
        below = sorted(children.get(key, ()), key=lambda item: item[:2])
        # the lines of its calls and of the property reads that run a getter (`if self.is_aot:`), in the
        # order the calls are made: by the last line of the calls that start there (a call in the
        # arguments of a call that spans several lines is made before it), then by line
        ends: dict[int, int] = {}
        for c in fn.calls:
            ends[c.line] = max(ends.get(c.line, c.line), c.end or c.line)
        # (and the lines of value hazards, which need not hold a call: `if not (... x.data_ptr() % 32 == 0):`)
        lines = sorted({c.line for c in fn.calls} | {item[0] for item in below} | set(hits.get(key, ())),
                       key=lambda n: (ends.get(n, n), n))
        for line in lines:
            steps += 1
            # a call's arguments run before the call: the callees on a line before the line's own hazard
            for call_line, _, child, edge in below:
                if call_line == line:
                    edges.append(edge)
                    found = visit(child)
                    if found is not None:
                        return found
                    edges.pop()
            if line in hits.get(key, ()) and (path, line) in fatal:
                return fatal[(path, line)]
        return None

    for root in roots:
        edges[:] = [root]
        found = visit(root.key)
        if found is not None:
            out = {"function": found.site.function, "file": found.site.file, "line": found.site.line,
                   "callee": found.site.callee, "rule": found.rule, "gb_id": found.outcome.gb_id}
            if chain_along is not None:
                out["chain"] = chain_along(list(edges), found.site.line)
            return out
    return {}

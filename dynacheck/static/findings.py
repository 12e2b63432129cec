"""Turn the walk's hits into findings: chain, site, Dynamo outcome, placed fixes, fingerprint.

One finding per hazard site and rule, with the shortest chain that reaches it (the walk is
breadth-first); how many other chains reach the same site is counted, not repeated.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from dynacheck.catalog import Catalog, Rule
from dynacheck.fixes.place import HopFacts, boundary_index, place
from dynacheck.gate.fingerprint import fingerprint
from dynacheck.model import Finding, Hop, Outcome, Site, severity_rank
from dynacheck.static import reach
from dynacheck.static.index import Index
from dynacheck.static.reach import Hit, NodeKey, Walk
from dynacheck.static.values import weaker

CACHE_DECORATORS = ("functools.cache", "functools.lru_cache")


class SourceLines:
    """Source lines of files on chains, read once each."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def line(self, path: str, number: int) -> str:
        if path not in self._lines:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    self._lines[path] = handle.read().splitlines()
            except OSError:
                self._lines[path] = []
        lines = self._lines[path]
        return lines[number - 1].strip() if 0 < number <= len(lines) else ""


class FindingBuilder:
    def __init__(self, index: Index, catalog: Catalog, display: Callable[[str], str],
                 package_of: Callable[[str], str]) -> None:
        self.index = index
        self.catalog = catalog
        self.display = display  # absolute path -> path shown to users
        self.package_of = package_of  # absolute path -> distribution name
        self.lines = SourceLines()

    def build(self, walk: Walk, entry_of: Callable[[NodeKey], str]) -> list[Finding]:
        best: dict[tuple, tuple[Finding, list[HopFacts]]] = {}
        counts: dict[tuple, int] = {}
        for hit in walk.hits:
            rule = self._rule(hit)
            if rule is None:
                continue
            chain, facts = self._chain(walk, hit)
            if not chain:
                continue
            site = self._site(hit, chain[-1])
            key = (site.file, site.line, rule.id)
            counts[key] = counts.get(key, 0) + 1
            if key in best:
                continue
            finding = Finding(
                rule=rule.id, title=rule.title, severity=self._severity(rule, hit), site=site,
                chain=tuple(chain), outcome=self._outcome(rule, hit, walk), family=rule.family,
                confidence=self._confidence(chain, hit), entry=entry_of(hit.at),
                note=self._note(hit),
            )
            best[key] = (finding, facts)
        findings = []
        below = self._hazards_below(best)
        for key, (finding, facts) in best.items():
            rule = self.catalog.get(finding.rule)
            fixes = place(rule.fixes, finding.chain, facts, below.get(key, 0))
            finding = replace(finding, fixes=fixes, also_reached_by=counts[key] - 1)
            findings.append(replace(finding, fingerprint=fingerprint(finding)))
        findings.sort(key=lambda f: (-severity_rank(f.severity), len(f.chain), f.site.file, f.site.line))
        return findings

    # ----- pieces ------------------------------------------------------------------------------

    def _rule(self, hit: Hit) -> Rule | None:
        if hit.kind == "call":
            return self.catalog.match_call(hit.callee)
        if hit.kind == "method":
            return self.catalog.match_method(hit.callee)
        if hit.kind == "boundary":
            return self.catalog.boundary(hit.boundary)
        if hit.kind == "pruned":
            return self.catalog.boundary("skipped_when_compiled")
        return None

    def _chain(self, walk: Walk, hit: Hit) -> tuple[list[Hop], list[HopFacts]]:
        keys: list[NodeKey] = []
        key: NodeKey | None = hit.at
        while key is not None and len(keys) < 200:
            keys.append(key)
            key = walk.nodes[key].parent
        keys.reverse()
        hops: list[Hop] = []
        facts: list[HopFacts] = []
        for i, key in enumerate(keys):
            node = walk.nodes[key]
            module = self.index.module(key.module)
            fn = module.functions.get(key.qualname) if module else None
            if module is None or fn is None:
                return [], []
            line = walk.nodes[keys[i + 1]].call_line if i + 1 < len(keys) else hit.call.line
            path = module.path
            notes = [n for n in (node.note, self._loop_note(walk, keys, i)) if n]
            if node.via == "class hierarchy fallback" and not node.note:
                notes.append("the attribute's class is not known statically: every subclass is followed")
            hops.append(Hop(
                function=f"{key.module}.{fn.qualname.split('@')[0]}", file=self.display(path), line=line,
                via=node.via, confidence=node.confidence, package=self.package_of(path),
                note="; ".join(notes), code=self.lines.line(path, line),
            ))
            decorators = {self._decorator_name(d) for d in fn.decorators}
            facts.append(HopFacts(
                returns_tensors="Tensor" in fn.returns_annotation,
                has_params=bool([p for p in fn.params if p not in ("self", "cls")]),
                cached=bool(decorators & set(CACHE_DECORATORS)) or any("cache" in d for d in decorators),
                def_file=self.display(path), def_line=fn.line,
            ))
        return hops, facts

    @staticmethod
    def _decorator_name(expr) -> str:
        from dynacheck.static.ir import dotted

        head = expr[1] if expr and expr[0] == "c" else expr
        return dotted(head) or ""

    @staticmethod
    def _loop_note(walk: Walk, keys: list[NodeKey], i: int) -> str:
        if i + 1 < len(keys):
            loop = walk.nodes[keys[i + 1]].loop
            if loop:
                return f"called inside `for ... in {loop}`"
        return ""

    def _site(self, hit: Hit, last: Hop) -> Site:
        module = self.index.module(hit.at.module)
        path = module.path if module else ""
        return Site(file=last.file, line=hit.call.line, function=last.function, callee=hit.callee,
                    code=self.lines.line(path, hit.call.line), package=last.package)

    def _outcome(self, rule: Rule, hit: Hit, walk: Walk) -> Outcome:
        outcome = rule.outcome
        if hit.mode == reach.TRACE_TIME and hit.kind in ("call", "method"):
            return replace(outcome, kind="trace_time", fatal_under_fullgraph=False,
                           detail="inside an allow_in_graph / nonstrict_trace function: no graph break, but it "
                                  "runs at trace time (fake tensors) and again at every call")
        if hit.mode == reach.CONSTANT and hit.kind in ("call", "method"):
            return replace(outcome, kind="trace_time", fatal_under_fullgraph=False,
                           detail="inside an assume_constant_result function: runs once at trace time; the "
                                  "value is frozen into the graph")
        if outcome.kind == "graph_break" and self._in_loop(walk, hit.at):
            loop_rule = self.catalog.boundary("break_in_layer_loop")
            extra = "; the break is reached inside a loop, so Dynamo falls back to eager for the whole " \
                    "enclosing frame under the default compile"
            if loop_rule is not None and loop_rule.outcome.gb_id:
                extra += f" ({loop_rule.outcome.gb_id})"
            return replace(outcome, detail=(outcome.detail + extra).strip("; "))
        return outcome

    @staticmethod
    def _in_loop(walk: Walk, key: NodeKey) -> bool:
        node = walk.nodes.get(key)
        while node is not None:
            if node.loop:
                return True
            node = walk.nodes.get(node.parent) if node.parent else None
        return False

    @staticmethod
    def _severity(rule: Rule, hit: Hit) -> str:
        if hit.mode == reach.CONSTANT and hit.kind in ("call", "method"):
            return "info"
        if hit.mode == reach.TRACE_TIME and hit.kind in ("call", "method") and rule.severity == "error":
            return "warning"
        return rule.severity

    @staticmethod
    def _confidence(chain: list[Hop], hit: Hit) -> str:
        confidence = hit.confidence
        for hop in chain:
            confidence = weaker(confidence, hop.confidence)
        return confidence

    @staticmethod
    def _note(hit: Hit) -> str:
        if hit.kind == "pruned":
            return f"under `if {hit.boundary}:`: Dynamo never takes this branch, so `{hit.callee}` is skipped " \
                   "when compiled (it still runs in eager mode)"
        if hit.kind == "method":
            return f"`.{hit.callee}()` on a value whose type is not known statically (usually a tensor)"
        return hit.note

    @staticmethod
    def _hazards_below(best: dict) -> dict[tuple, int]:
        """For each finding, how many other fatal sites share its custom-op boundary."""
        groups: dict[str, list[tuple]] = {}
        for key, (finding, facts) in best.items():
            if not finding.outcome.fatal_under_fullgraph:
                continue
            boundary = finding.chain[boundary_index(finding.chain, facts)].function
            groups.setdefault(boundary, []).append(key)
        out: dict[tuple, int] = {}
        for keys in groups.values():
            for key in keys:
                out[key] = len(keys) - 1
        return out

"""Turn the walk's hits into findings: chain, site, Dynamo outcome, placed fixes, fingerprint.

One finding per hazard site and rule, with the shortest chain that reaches it (the walk is
breadth-first); how many other chains reach the same site is counted, not repeated.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from types import SimpleNamespace
from typing import Callable

from dynacheck.catalog import Catalog, Rule
from dynacheck.fixes.from_declared import declared_fix, declared_reads
from dynacheck.fixes.out_kernels import out_kernel_fix
from dynacheck.fixes.place import HopFacts, boundary_index, op_returns_ok, place
from dynacheck.gate.fingerprint import assign_fingerprints
from dynacheck.model import Condition, Finding, Fix, Hop, Outcome, Site, confidence_rank, severity_rank
from dynacheck.static import reach
from dynacheck.static.ir import dotted
from dynacheck.static.index import Index
from dynacheck.static.reach import Hit, NodeKey, Walk
from dynacheck.static.values import weaker

CACHE_DECORATORS = ("functools.cache", "functools.lru_cache")
MAX_ALTERNATIVES = 4


def _memo(function: Callable[[str], str]) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def lookup(path: str) -> str:
        if path not in cache:
            cache[path] = function(path)
        return cache[path]

    return lookup


def _path(walk: Walk, key: NodeKey | None) -> list[NodeKey]:
    """Entry-to-node keys along the first (shortest) parents."""
    keys: list[NodeKey] = []
    while key is not None and len(keys) < 200:
        keys.append(key)
        key = walk.nodes[key].parent
    keys.reverse()
    return keys


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


def walk_signature(walk: Walk, entry_of: Callable[[NodeKey], str]) -> tuple:
    """Everything of a walk that its findings and first break are built from: each node's key and the
    fields of every edge into it, each hit (its call site by identity: summaries live as long as the
    session), the entries the roots are named by, and whether the walk was cut short."""
    def edge(e) -> tuple:
        return e.parent, e.call_line, e.via, e.confidence, e.note, e.loop, e.conditions, e.conditional, e.chained

    nodes = tuple((key, edge(node), tuple(edge(o) for o in node.others)) for key, node in walk.nodes.items())
    hits = tuple((h.at, id(h.call), h.call.line, h.callee, h.kind, h.boundary, h.mode, h.confidence, h.note,
                  h.conditions) for h in walk.hits)
    roots = tuple(entry_of(key) for key, node in walk.nodes.items() if node.parent is None)
    return nodes, hits, roots, walk.truncated


class FindingBuilder:
    def __init__(self, index: Index, catalog: Catalog, display: Callable[[str], str],
                 package_of: Callable[[str], str]) -> None:
        self.index = index
        self.catalog = catalog
        self.display = _memo(display)  # absolute path -> path shown to users
        self.package_of = _memo(package_of)  # absolute path -> distribution name
        self.lines = SourceLines()
        self._located: dict[str, tuple[str, str, str] | None] = {}
        # a census builds findings for hundreds of walks with one builder (ScanSession.finding_builder):
        # a hop is the same wherever it appears, and a function's facts are its own
        self._hops: dict[tuple, Hop] = {}
        self._facts: dict[tuple[str, str], HopFacts] = {}
        self._placements: dict[tuple, tuple] = {}
        self._declared_fixes: dict[tuple, tuple] = {}
        self._declared_by_reads: dict[tuple, tuple] = {}  # declared_reads -> declared_fix's answer
        # walk signature -> (the hits' call sites, kept so their ids stay theirs; the findings)
        self._built: dict[tuple, tuple] = {}
        self._first_breaks: dict[tuple, dict] = {}

    def build(self, walk: Walk, entry_of: Callable[[NodeKey], str], signature: tuple | None = None) -> list[Finding]:
        """The walk's findings. With its `walk_signature`, once per signature for the builder's life: a
        census walks about half of its forwards on some deployment the same way as on one before it
        (bf16 on sm90, sm100 and sm120 alike), and equal signatures give equal findings."""
        if signature is not None:
            done = self._built.get(signature)
            if done is None:
                done = self._built[signature] = (tuple(h.call for h in walk.hits), tuple(self.build(walk, entry_of)))
            return list(done[1])
        candidates: dict[tuple, list[tuple[Finding, list[HopFacts]]]] = {}
        for hit in walk.hits:
            rule = self._rule(hit)
            if rule is None:
                continue
            for chain, facts, conditions in self._chains(walk, hit):
                site = self._site(hit, chain[-1])
                finding = Finding(
                    rule=rule.id, title=rule.title, severity=self._severity(rule, hit), site=site,
                    chain=tuple(chain), outcome=self._outcome(rule, hit, walk), family=rule.family,
                    confidence=self._confidence(chain, hit), entry=entry_of(hit.at),
                    note=self._note(hit), conditions=conditions,
                )
                candidates.setdefault((site.file, site.line, rule.id), []).append((finding, facts))
        best, counts = self._rank(candidates)
        self._add_loop_findings(best, counts)
        findings = []
        below = self._hazards_below(best)
        for key, (finding, facts) in best.items():
            rule = self.catalog.get(finding.rule)
            volatile = rule.family == "time" or "random" in rule.name
            fixes = finding.fixes or self._placed(rule, finding.chain, facts, below.get(key, 0), volatile)
            if not finding.fixes and finding.outcome.fatal_under_fullgraph:
                declared, why = self._declared(finding.chain)
                if declared is not None:
                    fixes = (declared, *fixes)
                elif why:  # the library declares ops here, but none a fix can use: say why
                    at = next((f.at for f in fixes if f.kind == "custom_op"), finding.site.function)
                    fixes = (*fixes, Fix("custom_op", at, f"No declared op fix: {why}.", sound=False))
            findings.append(replace(finding, fixes=fixes, also_reached_by=counts[key] - 1))
        findings = list(assign_fingerprints(findings))
        findings.sort(key=lambda f: (bool(f.conditions), -severity_rank(f.severity), not f.outcome.fatal_under_fullgraph,
                                     -confidence_rank(f.confidence), len(f.chain), f.site.file, f.site.line))
        return findings

    def first_break(self, signature: tuple, compute: Callable[[], dict]) -> dict:
        """`first_break.first_break` of a walk and its findings, once per signature (see build)."""
        found = self._first_breaks.get(signature)
        if found is None:
            found = self._first_breaks[signature] = compute()
        return dict(found)  # each result its own record

    # The fixes of a chain depend on its hops and their facts only (frozen records): they are worked
    # out once for all the scans of a census.

    def _placed(self, rule, chain: tuple, facts: list, below: int, volatile: bool) -> tuple:
        key = (rule.id, chain, tuple(facts), below, volatile)
        hit = self._placements.get(key)
        if hit is None:
            hit = self._placements[key] = place(rule.fixes, chain, facts, below, volatile)
        return hit

    def _declared(self, chain: tuple) -> tuple:
        """The declared-op (or out-kernel) fix for this chain, and why none applies."""
        hit = self._declared_fixes.get(chain)
        if hit is None:
            reads = declared_reads(chain, self._locate)
            found = self._declared_by_reads.get(reads) if reads is not None else (None, "")
            if found is None:
                found = self._declared_by_reads[reads] = declared_fix(chain, self._locate)
            declared, why = found
            hit = self._declared_fixes[chain] = (declared or out_kernel_fix(chain, self._locate), why)
        return hit

    @staticmethod
    def _rank(candidates: dict) -> tuple[dict, dict]:
        """Per site and rule, its chains best first: unconditional, surest, shortest; distinct only."""
        best: dict[tuple, tuple[Finding, list[HopFacts]]] = {}
        counts: dict[tuple, int] = {}
        for (file, line, rule), found in candidates.items():
            found.sort(key=lambda item: (bool(item[0].conditions), -confidence_rank(item[0].confidence),
                                         len(item[0].chain)))
            seen: set = set()
            rank = 0
            for finding, facts in found:
                names = tuple(h.function for h in finding.chain)
                if names in seen:
                    continue
                seen.add(names)
                if rank <= MAX_ALTERNATIVES:
                    best[(file, line, rule, rank)] = (finding, facts)
                rank += 1
            for r in range(min(rank, MAX_ALTERNATIVES + 1)):
                counts[(file, line, rule, r)] = rank
        return best, counts

    def _add_loop_findings(self, best: dict, counts: dict) -> None:
        """One DC096-style finding per loop call whose subtree holds a fatal graph break (GB7000)."""
        rule = self.catalog.boundary("break_in_layer_loop")
        if rule is None:
            return
        surest_first = sorted(best.values(), key=lambda item: (bool(item[0].conditions),
                                                                  -confidence_rank(item[0].confidence),
                                                                  len(item[0].chain)))
        for finding, facts in surest_first:
            if finding.outcome.kind != "graph_break" or finding.rule == rule.id:
                continue
            index = next((i for i, h in enumerate(finding.chain[:-1]) if "called inside `for" in h.note), None)
            if index is None:
                continue
            hop, callee = finding.chain[index], finding.chain[index + 1]
            key = (hop.file, hop.line, rule.id, 0)
            counts[key] = counts.get(key, 0) + 1
            if key in best:
                continue
            site = Site(file=hop.file, line=hop.line, function=hop.function, callee=callee.function,
                        code=hop.code, package=hop.package)
            inner = finding.chain[boundary_index(finding.chain, facts)]
            fixes = (Fix("custom_op", inner.function,
                         f"Fix the first break below the loop at its boundary: wrap `{inner.function}` in a "
                         f"custom op (see the finding at {finding.site.file}:{finding.site.line}); the loop then "
                         "compiles.", file=inner.file, line=inner.line, sound=True),
                     Fix("disable", callee.function, "Not a fix: disabling the layer is itself a graph break "
                         "(GB0098) inside the loop, so the frame is still skipped.", sound=False))
            loop = Finding(rule=rule.id, title=rule.title, severity=rule.severity, site=site,
                           chain=finding.chain[:index + 1], outcome=rule.outcome, family=rule.family,
                           confidence=finding.confidence, entry=finding.entry, fixes=fixes,
                           conditions=finding.conditions,
                           note=f"first break below: {finding.site.callee} at {finding.site.file}:{finding.site.line}")
            best[key] = (loop, facts[:index + 1])

    # ----- pieces ------------------------------------------------------------------------------

    def _locate(self, function: str) -> tuple[str, str, str] | None:
        """(module, qualname, path) of a hop's function, from the modules the walk already loaded."""
        if function not in self._located:
            self._located[function] = None
            parts = function.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                summary = self.index.module(".".join(parts[:cut]))
                if summary is not None:
                    qualname = ".".join(parts[cut:])
                    if qualname in summary.functions or qualname.split(".<locals>")[0] in summary.functions:
                        self._located[function] = (".".join(parts[:cut]), qualname, summary.path)
                        break
        return self._located[function]

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

    def _chains(self, walk: Walk, hit: Hit) -> list[tuple[list[Hop], list[HopFacts]]]:
        """The shortest chain, then one per other way into the site's package (shortest first).

        A site inside a library is reached through a few public functions of that library from
        several places in the model (the FP4 quantize of a linear layer, the MoE kernels...);
        each way in is worth showing once.
        """
        nodes = [walk.nodes[k] for k in _path(walk, hit.at)]
        primary = self._chain(walk, nodes, hit)
        if not primary[0]:
            return []
        chains = [primary + (self._conditions(nodes, hit),)]
        seen = {tuple(h.function for h in primary[0])}
        for alternative in self._ways_in(walk, hit):
            if len(chains) > 2 * MAX_ALTERNATIVES:
                break
            built = self._chain(walk, alternative, hit)
            names = tuple(h.function for h in built[0])
            if built[0] and names not in seen:
                seen.add(names)
                chains.append(built + (self._conditions(alternative, hit),))
        return chains

    def _conditions(self, nodes: list, hit: Hit) -> tuple[Condition, ...]:
        """What a chain depends on: the open facts of each call on it, then of the hazard call."""
        out: list[Condition] = []
        for condition in [c for n in nodes for c in n.conditions] + list(hit.conditions):
            shown = replace(condition, file=self.display(condition.file)) if condition.file else condition
            if shown not in out:
                out.append(shown)
        return tuple(out)

    def _ways_in(self, walk: Walk, hit: Hit) -> list[list]:
        """Node sequences entry → outside caller → package entry point → ... → the site's function."""
        package = self._module_package(hit.at.module)
        next_hop: dict[NodeKey, tuple] = {hit.at: ()}
        queue = deque([hit.at])
        ways: list[tuple[int, list]] = []
        while queue:
            key = queue.popleft()
            node = walk.nodes[key]
            for edge in (node, *node.others):
                parent = edge.parent
                if parent is None:
                    continue
                if self._module_package(parent.module) == package:
                    if parent not in next_hop:
                        next_hop[parent] = (key, edge)
                        queue.append(parent)
                    continue
                head = [walk.nodes[k] for k in _path(walk, parent)]
                tail = [edge]
                current = key
                while next_hop.get(current):
                    current, step = next_hop[current]
                    tail.append(step)
                tail_keys = {t.key for t in tail}
                if any(n.key in tail_keys for n in head):
                    continue
                ways.append((len(head) + len(tail), head + tail))
                if len(ways) > 4 * MAX_ALTERNATIVES:
                    queue.clear()
                    break
        ways.sort(key=lambda item: item[0])
        return [way for _, way in ways]

    def _module_package(self, module: str) -> str:
        summary = self.index.module(module)
        return self.package_of(summary.path) if summary is not None else ""

    def _chain(self, walk: Walk, nodes: list, hit: Hit) -> tuple[list[Hop], list[HopFacts]]:
        keys = [n.key for n in nodes]
        hops: list[Hop] = []
        facts: list[HopFacts] = []
        for i, key in enumerate(keys):
            node = nodes[i]
            module = self.index.module(key.module)
            fn = module.functions.get(key.qualname) if module else None
            if module is None or fn is None:
                return [], []
            line = nodes[i + 1].call_line if i + 1 < len(keys) else hit.call.line
            hop_key = (key.module, key.qualname, line, node.via, node.confidence, node.note, self._loop_note(nodes, i))
            hop = self._hops.get(hop_key)
            if hop is None:
                hop = self._hops[hop_key] = self._hop(module.path, fn, *hop_key)
            hops.append(hop)
            fn_facts = self._facts.get((module.path, fn.qualname))
            if fn_facts is None:
                fn_facts = self._facts[(module.path, fn.qualname)] = self._hop_facts(module.path, fn)
            facts.append(fn_facts)
        return hops, facts

    def chain_along(self, nodes: list, line: int) -> list[dict]:
        """The hops along `nodes` (walk edges, the entry first) to a site at `line` in the last one's
        function, as chain records: the way the trace-order first break is reached (first_break.py)."""
        hops, _ = self._chain(None, nodes, SimpleNamespace(call=SimpleNamespace(line=line)))
        return [{"function": h.function, "file": h.file, "line": h.line, "code": h.code} for h in hops]

    def _hop(self, path: str, fn, module: str, qualname: str, line: int, via: str, confidence: str, note: str,
             loop_note: str) -> Hop:
        notes = [n for n in (note, loop_note) if n]
        if via == "class hierarchy fallback" and not note:
            notes.append("the attribute's class is not known statically: every subclass is followed")
        return Hop(function=f"{module}.{fn.qualname.split('@')[0]}", file=self.display(path), line=line,
                   via=via, confidence=confidence, package=self.package_of(path),
                   note="; ".join(notes), code=self.lines.line(path, line))

    def _hop_facts(self, path: str, fn) -> HopFacts:
        decorators = {self._decorator_name(d) for d in fn.decorators}
        return HopFacts(
            returns_tensors=op_returns_ok(fn.returns_annotation), returns=fn.returns_annotation,
            signature_in=(path, fn.qualname.split("@")[0]) if "<locals>" not in fn.qualname else None,
            has_params=bool([p for p in fn.params if p not in ("self", "cls")]),
            cached=bool(decorators & set(CACHE_DECORATORS)) or any("cache" in d for d in decorators),
            def_file=self.display(path), def_line=fn.line,
        )

    @staticmethod
    def _decorator_name(expr) -> str:
        head = expr[1] if expr and expr[0] == "c" else expr
        return dotted(head) or ""

    @staticmethod
    def _loop_note(nodes: list, i: int) -> str:
        if i + 1 < len(nodes):
            loop = nodes[i + 1].loop
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

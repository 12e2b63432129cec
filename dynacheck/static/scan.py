"""The static scan, end to end: targets → summaries → walk from the entries → findings.

Nothing here imports or runs the scanned code; torch, when installed, is only asked about its
own graph-break registry (through the catalogue).
"""

from __future__ import annotations

import difflib
import gc
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from dynacheck import __version__
from dynacheck.catalog import load_catalog
from dynacheck.errors import UserError
from dynacheck.fixes.declared import use_disk_cache
from dynacheck.static import engine_store, result_cache
from dynacheck.deploy.build import DeploymentSpec, build_deployment, pin_quantization
from dynacheck.deploy.facts import ARCH_FACT, GPU_FACT
from dynacheck.deploy.piecewise_off import ENFORCE_FLAG
from dynacheck.fixes.plan import fix_plan
from dynacheck.model import Problem, ScanResult, ScanStats, Target
from dynacheck.sources.locate import ModuleLocator
from dynacheck.sources.resolve import default_cache_dir, resolve_target
from dynacheck.static.argument_calls import problem_text
from dynacheck.static.cache import SummaryCache
from dynacheck.static.dynamo import Boundaries
from dynacheck.static.findings import FindingBuilder, walk_signature
from dynacheck.static.first_break import first_break
from dynacheck.static.index import Index
from dynacheck.static.ir import render
from dynacheck.static.partial_values import answers_alike
from dynacheck.static.prefetch import Prefetch
from dynacheck.static.presets import preset_entries
from dynacheck.static.reach import Reacher
from dynacheck.static.startup import model_class_module, model_unbuildable
from dynacheck.static.fullgraph import apply as apply_fullgraph
from dynacheck.static.fullgraph import declared
from dynacheck.static.tensors import INT_TOLIST, TensorHazards
from dynacheck.static.values import Evaluator, Value

Progress = Callable[[str], None]


def scan(target_specs: Sequence[str], entries: Sequence[str] = (), preset: str | None = None, *,
         cache_dir: Path | None = None, offline: bool = False, progress: Progress | None = None,
         deployment: DeploymentSpec | None = None, fullgraph: bool = False,
         entry_defaults: bool = False) -> ScanResult:
    """Resolve each target spec (pip requirement, wheel, folder or installed name) and scan it.

    `fullgraph`: the entry is compiled with `fullgraph=True`; findings state that compile's outcome.
    `entry_defaults`: each entry is called with its required arguments only (scan_targets)."""
    if not target_specs:
        raise UserError("No target to scan.", "Pass --target SPEC (e.g. sglang==0.5.9) or a folder.")
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    targets = []
    for spec in target_specs:
        if progress:
            progress(f"resolving {spec}")
        counts = getattr(progress, "counts", None)  # downloads and unpacking report files done of total
        targets.append(resolve_target(spec, cache_dir=cache, offline=offline, progress=counts))
    return scan_targets(targets, entries, preset, cache_dir=cache, progress=progress, deployment=deployment,
                        fullgraph=fullgraph, entry_defaults=entry_defaults)


def scan_roots(roots: Sequence[Path | str], entries: Sequence[str], *, cache_dir: Path | None = None,
               preset: str | None = None, deployment: DeploymentSpec | None = None,
               fullgraph: bool = False, entry_defaults: bool = False) -> ScanResult:
    """Scan folders that hold packages (fixtures, a checkout's src/), without any download."""
    targets = [resolve_target(str(root), cache_dir=cache_dir or default_cache_dir()) for root in roots]
    return scan_targets(targets, entries, preset, cache_dir=cache_dir, deployment=deployment,
                        fullgraph=fullgraph, entry_defaults=entry_defaults)


def scan_targets(targets: Sequence[Target], entries: Sequence[str], preset: str | None = None, *,
                 cache_dir: Path | None = None, progress: Progress | None = None,
                 observer: dict | None = None, deployment: DeploymentSpec | None = None,
                 fullgraph: bool = False, session: "ScanSession | None" = None, reuse: bool = True,
                 entry_defaults: bool = False, keep: dict | None = None) -> ScanResult:
    """Scan resolved targets; `observer`, when given, receives internals for benchmarks (parsed files);
    `keep`, what a later deployment's scan of the same entry is checked against (static/scan_reuse.py).
    With `entry_defaults`, each entry is called with its required arguments only (the FlashInfer API
    census): its other parameters hold their defaults, which decide its branches.

    The deployment (a preset's, overridden by `deployment`'s fields) is evaluated during the walk:
    branches it never takes are pruned, and what stays open becomes each chain's conditions.

    The cycle collector is paused meanwhile: summaries are hundreds of thousands of small tuples that
    it would rescan again and again (measured: the warm flagship scan takes 0.67 s instead of 1.1 s);
    the walk's garbage is acyclic and freed by reference counting.
    """
    collecting = gc.isenabled()
    gc.disable()
    own = session is None
    if own:
        session = ScanSession.open(targets, cache_dir, progress, prefetch=True)
    try:
        return _scan_targets(targets, entries, preset, cache_dir=cache_dir, progress=progress, observer=observer,
                             deployment=deployment, fullgraph=fullgraph, session=session, reuse=reuse, single=own,
                             entry_defaults=entry_defaults, keep=keep)
    finally:
        if own:
            session.close()
        if collecting:
            gc.enable()


def _scan_targets(targets: Sequence[Target], entries: Sequence[str], preset: str | None, *,
                  cache_dir: Path | None, progress: Progress | None, observer: dict | None,
                  deployment: DeploymentSpec | None, fullgraph: bool, session: "ScanSession",
                  reuse: bool, single: bool, entry_defaults: bool = False, keep: dict | None = None) -> ScanResult:
    started = time.perf_counter()
    all_entries = list(entries)
    if preset:
        all_entries.extend(e for e in preset_entries(preset, targets) if e not in all_entries)
    if not all_entries:
        raise UserError("No entry to start from.", "Pass --entry module.path:Class.method or --preset glm5.")
    catalog = load_catalog()
    alone = single  # not a census: a stored engine may serve it, a benchmark's cold run included
    single = single and observer is None  # a census or a benchmark's cold run walks every time
    problems: list[Problem] = session.problems
    locator, cache, index = session.locator, session.cache, session.index
    spec = _merged_spec(preset, deployment)
    key = None
    if single and reuse:
        key = result_cache.inputs_key(targets, all_entries, preset, spec, fullgraph,
                                      session.tree_files() + result_cache.spec_files(spec), catalog.torch_version,
                                      entry_defaults)
        reused = result_cache.load(cache, key, time.perf_counter() - started)
        if reused is not None:
            if progress:
                progress("no input changed since an earlier scan: its answer is reused")
            return reused
    stored = _stored_engine(session, targets, spec, catalog.torch_version) if alone else None
    facts, evaluator, boundaries = session.engine(spec)
    if facts.refused and not any(p.kind == "refused" for p in problems):
        problems.append(Problem("refused", "", f"this deployment does not start: {facts.refused}"))
    if facts.runner_missing and not any(p.kind == "runner_missing" for p in problems):
        problems.append(Problem("runner_missing", "", f"{facts.runner_missing}: the batch that runner traces "
                                "with and the globals it sets while compiling are not assumed"))
    if single and facts.piecewise_off and not any(p.kind == "piecewise_off" for p in problems):  # a census: per cell
        # the model-list reasons end by naming the flag; a rule on a derived setting or a launch flag need not
        what = "it" if ENFORCE_FLAG in facts.piecewise_off else ENFORCE_FLAG
        problems.append(Problem("piecewise_off", "", f"{facts.piecewise_off}: the findings are for a launch that "
                                f"adds {what}"))
    if single:  # a census says it per cell (census/run.py)
        try:
            stopped = _does_not_start(facts, evaluator, locator)
        except Exception as exc:  # noqa: BLE001 - the check is extra: the scan goes on (RecursionError too)
            stopped = ""
            if not any(p.kind == "startup_check_failed" for p in problems):
                problems.append(Problem("startup_check_failed", "", f"whether the model starts was not worked out "
                                        f"({type(exc).__name__}: {exc}); the findings do not depend on it"))
        if stopped and not any(p.kind == "does_not_start" for p in problems):
            problems.append(Problem("does_not_start", "", f"{stopped}: the findings below are for a server that "
                                    "does not come up on this deployment"))
    entry_values = [resolve_entry(e, evaluator, locator) for e in all_entries]
    if progress:
        progress(f"walking from {len(entry_values)} entr{'y' if len(entry_values) == 1 else 'ies'}")

    walk = Reacher(evaluator, boundaries, hazard_test(catalog)).walk(entry_values, defaults=entry_defaults)
    def breaks_at(name: str) -> bool:
        rule = catalog.match_call(name)
        return rule is not None and rule.outcome.kind == "graph_break" and bool(rule.outcome.gb_id)

    hazards = evaluator.sites.get(TENSOR_HAZARDS)  # one per deployment: what it learns holds for every scan
    if hazards is None:
        hazards = evaluator.sites[TENSOR_HAZARDS] = TensorHazards(evaluator, breaks_at, boundaries.compile_time_value)
    used: list | None = [] if keep is not None else None
    value_hits = hazards.hits(walk, used)
    # `.tolist()` on a tensor known to hold integers is DC119 (GB0033), not the float case DC051
    ints = {(h.at, h.call.line) for h in value_hits if h.boundary == INT_TOLIST}
    walk.hits = [h for h in walk.hits if not (h.kind == "method" and h.callee == "tolist"
                                              and (h.at, h.call.line) in ints)] + value_hits
    if walk.truncated and not any(p.kind == "truncated" for p in problems):  # once (a stored engine's are restored)
        problems.append(Problem("truncated", "", "the walk stopped at its node limit; results are partial"))
    entry_names = {(v.module, v.name): text for v, text in zip(entry_values, all_entries)}
    for root, owner in walk.wrapper_roots.items():  # a decorator's wrapper walked as the entry's first root
        entry_names.setdefault((root.module, root.qualname), entry_names.get(owner, ""))

    def entry_of(key) -> str:
        node = walk.nodes[key]
        while node.parent is not None:
            node = walk.nodes[node.parent]
        return entry_names.get((node.key.module, node.key.qualname), "")

    if observer is not None:
        observer["parsed_files"] = [m.path for m in index.loaded() if not Path(m.path).is_dir()]
        observer["prefetched"] = index.prefetch.taken if index.prefetch is not None else 0
    use_disk_cache(cache)  # the op declarations the fixes read: parsed once per file version, like summaries
    builder = session.finding_builder(catalog)
    signature = walk_signature(walk, entry_of) if not single else None  # a census: once per signature
    findings = builder.build(walk, entry_of, signature)
    why_fullgraph = "the --fullgraph option" if fullgraph else declared(evaluator, entry_values, all_entries)
    if why_fullgraph:
        findings = apply_fullgraph(findings, why_fullgraph)
    if keep is not None:
        keep.update(entry_values=entry_values, walk=walk, value_hits=value_hits, tensor_entries=used,
                    why_fullgraph=why_fullgraph)
    stats = ScanStats(
        files_in_trees=len(session.tree_files()),
        files_parsed=cache.parsed + cache.hits,
        cache_hits=cache.hits,
        functions_visited=len(walk.nodes),
        seconds=round(time.perf_counter() - started, 3),
    )
    result = ScanResult(
        targets=tuple(targets), entries=tuple(all_entries), findings=tuple(findings),
        problems=tuple(_display_problems(problems + _unreadable_folders(locator) + _body_errors(index)
                                         + _argument_calls(walk, index), locator)),
        stats=stats,
        tool_version=__version__, torch_version=catalog.torch_version,
        deployment=facts.to_dict() | ({"fullgraph": why_fullgraph} if why_fullgraph else {})
        | ({"first_call": True} if facts.cold else {}) | ({"required_args_only": True} if entry_defaults else {}),
        fix_plan=fix_plan(findings, unconditional_only=facts.given),
        first_break=_first_break(builder, signature, why_fullgraph,
                                 lambda: first_break(walk, findings, index, locator.display_path, builder.chain_along)),
    )
    if session.flush_each_scan:
        cache.flush()  # bodies summarized on demand during this scan: stored for the next one
    if key is not None:
        result_cache.store(cache, key, result, [m.path for m in index.loaded() if not Path(m.path).is_dir()])
    # stored when new or grown, by a warm scan: a cold one is mostly parsing, and writing the store (a few
    # tenths of a second on the flagship) would take it past a bare parse; the next scan, warm, stores it
    if stored is not None and stored[1] != _memo_size(evaluator) and not cache.parsed:
        engine_store.save(cache, stored[0], (facts, evaluator, boundaries), index, problems)
    return result


def _stored_engine(session: "ScanSession", targets: Sequence[Target], spec: DeploymentSpec,
                   torch_version: str) -> tuple[str, int] | None:
    """For a single scan: the engine store's key for this deployment and, when a stored engine was
    loaded into the session (engine_store.py), the size of its memo; None when the store is off."""
    if not engine_store.enabled() or session.cache.folder is None or not engine_store.fresh_process():
        return None
    plain = replace(spec, architecture=None)
    key = engine_store.store_key(result_cache.inputs_key(
        targets, (), None, plain, False, session.tree_files() + result_cache.spec_files(spec), torch_version))
    if repr(plain) in session._engines:
        return key, -1
    engine = engine_store.load(session.cache, key, session.index, session.problems)
    if engine is None:
        return key, -1
    session._engines[repr(plain)] = engine
    session.cache.hits += sum(1 for m in session.index.loaded() if not Path(m.path).is_dir())
    return key, _memo_size(engine[1])


def _memo_size(evaluator: Evaluator) -> int:
    """How much the engine has worked out (its tensor hazards, made again by every scan, not counted)."""
    return len(evaluator.sites) - (TENSOR_HAZARDS in evaluator.sites) + len(evaluator.partial._memo) \
        + len(evaluator._names)


def _first_break(builder: FindingBuilder, signature: tuple | None, why_fullgraph: str, compute) -> dict:
    return compute() if signature is None else builder.first_break((signature, why_fullgraph), compute)


def _switch_architecture(engine: tuple, architecture: str) -> tuple:
    """The engine with `config.architectures` naming `architecture`. What read the previous one is
    dropped only when the new one answers a test recorded since the last drop otherwise
    (`architectures[0] in [...]`): the name is read by such tests only (partial_values.ARCHITECTURE)."""
    facts, evaluator, boundaries = engine
    if facts.architecture == architecture or facts.model_config:
        return engine
    partial = evaluator.partial
    if not answers_alike(partial.architecture_tests, facts.architecture, architecture):
        evaluator.forget(ARCH_FACT)
        boundaries.forget(ARCH_FACT)
        hazards = evaluator.sites.get(TENSOR_HAZARDS)
        if hazards is not None:
            hazards.forget(ARCH_FACT)
        partial.architecture_tests = set()
    facts.architecture = architecture
    return engine


TENSOR_HAZARDS = ("tensor-hazards",)  # the deployment's TensorHazards, in its evaluator's `sites`
MAX_ENGINES = 16  # deployments whose evaluators a session keeps (a census has 12 by default)


class ScanSession:
    """The locator, summary cache and index of one set of targets, shared by many scans (a census):
    each module's summary is loaded once per process instead of once per scan.

    The index holds deployment-independent summaries only, so scans with different deployments
    and entries can share it; problems accumulate across the scans that share it.
    """

    def __init__(self, locator: ModuleLocator, cache: SummaryCache, index: Index, problems: list[Problem]):
        self.locator, self.cache, self.index, self.problems = locator, cache, index, problems
        self._files: list[Path] | None = None
        self._engines: dict[str, tuple] = {}  # deployment -> (facts, evaluator, boundaries), most recent last
        # GPU capability -> memo table -> entries that read the GPU and nothing else, from the chain's
        # deployments walked so far on that GPU (engine)
        self._gpu_answers: dict = {}
        self._builder: FindingBuilder | None = None
        # store the summaries whose bodies a scan filled after each scan; a census stores them once
        # per task instead (a module's summary is pickled whole each time it is stored)
        self.flush_each_scan = True

    def engine(self, spec: DeploymentSpec, fork_from: DeploymentSpec | None = None) -> tuple:
        """The deployment's facts and the evaluator that reads them, shared by every scan of this
        session with an equal deployment: a census walks 100+ forwards per deployment, and what
        the evaluator learns (module flags, server-args getters, quant pins, decorator effects,
        guard truths) holds for all of them. A few deployments are kept, least recently used out.

        With `fork_from` (a deployment whose engine is kept, differing from this one in its GPU and
        checkpoint format at most), the new evaluator starts with what that one memoized without
        reading the facts they differ in.

        A census cell's model class (`spec.architecture`) is not part of the key: the deployment's
        engine is switched to it in place (_switch_architecture)."""
        architecture = spec.architecture or ""
        spec = replace(spec, architecture=None)
        key = repr(spec)
        if key in self._engines:
            self._engines[key] = self._engines.pop(key)
            return _switch_architecture(self._engines[key], architecture)
        facts = build_deployment(spec, self.locator, self.cache)
        parent = self._engines.get(repr(fork_from)) if fork_from is not None else None
        dirty = parent[0].fork_difference(facts) if parent is not None else None
        if parent is not None and dirty is not None:
            if dirty & GPU_FACT:  # what the GPU alone decided is kept for the chain's next deployment on it
                found = self._gpu_answers.setdefault(_capability(parent[0]), {})
                for table, entries in parent[1].reading_only(GPU_FACT).items():
                    found.setdefault(table, {}).update(entries)
            evaluator = parent[1].fork(facts, dirty)
            if dirty & GPU_FACT:
                evaluator.restore(self._gpu_answers.get(_capability(facts), {}))
            pin_quantization(facts, evaluator, self.locator)
            boundaries = parent[2].fork(evaluator, dirty)
            hazards = parent[1].sites.get(TENSOR_HAZARDS)
            if hazards is not None:
                evaluator.sites[TENSOR_HAZARDS] = hazards.fork(evaluator, boundaries.compile_time_value, dirty)
        else:
            self._gpu_answers = {}  # a new chain: another family of deployments
            evaluator = Evaluator(self.index, facts)
            pin_quantization(facts, evaluator, self.locator)
            boundaries = Boundaries(evaluator)
        engine = (facts, evaluator, boundaries)
        self._engines[key] = engine
        while len(self._engines) > MAX_ENGINES:
            self._engines.pop(next(iter(self._engines)))
        return _switch_architecture(engine, architecture)

    def finding_builder(self, catalog) -> FindingBuilder:
        """One builder for the session's scans: what it reads (source lines, hops, op declarations)
        is the same for every walk over these targets."""
        if self._builder is None or self._builder.catalog is not catalog:
            self._builder = FindingBuilder(self.index, catalog, self.locator.display_path,
                                           lambda p: _package(self.locator, p))
        return self._builder

    def release(self, spec: DeploymentSpec) -> None:
        """Let one deployment's evaluator go (a census is done with it)."""
        self._engines.pop(repr(replace(spec, architecture=None)), None)

    def tree_files(self) -> list[Path]:
        """Every module file of the targets (listed once per session)."""
        if self._files is None:
            self._files = list(self.locator.iter_files())
        return self._files

    def files_in_trees(self) -> int:
        return len(self.tree_files())

    @classmethod
    def open(cls, targets: Sequence[Target], cache_dir: Path | None = None,
             progress: Progress | None = None, prefetch: bool = False) -> "ScanSession":
        """`prefetch`: a second core summarizes what the walk is likely to read next (prefetch.py);
        for a single scan, not for a census, whose processes use the cores already."""
        problems: list[Problem] = []
        locator = ModuleLocator(targets)
        cache = (_CountingCache if progress else SummaryCache)(cache_dir if cache_dir is not None
                                                               else default_cache_dir())
        if progress:
            cache.progress = progress
        index = Index(locator, cache, problems)
        if prefetch:
            index.prefetch = Prefetch.for_scan(locator)
        return cls(locator, cache, index, problems)

    def close(self) -> None:
        """Stop the prefetch worker, if one was started."""
        if self.index.prefetch is not None:
            self.index.prefetch.close()


def _merged_spec(preset: str | None, given: DeploymentSpec | None) -> DeploymentSpec:
    """The user's deployment flags on top of the preset's deployment."""
    spec = given or DeploymentSpec()
    if preset and not spec.preset:
        spec = replace(spec, preset=preset)
    return spec


def hazard_test(catalog) -> Callable[[str, str], bool]:
    """What the walk asks of a call it reaches: (kind "call"|"method", name) -> a catalog rule matches it."""
    def is_hazard(kind: str, name: str) -> bool:
        return (catalog.match_call(name) if kind == "call" else catalog.match_method(name)) is not None
    return is_hazard


def resolve_entry(entry: str, evaluator: Evaluator, locator: ModuleLocator) -> Value:
    """`pkg.module:Class.method` or `pkg.module:function` to a function value; suggestions when unknown."""
    module_name, sep, qualname = entry.partition(":")
    if not sep or not module_name or not qualname:
        raise UserError(f"Entry {entry!r} is not of the form module.path:Class.method.",
                        "Example: sglang.srt.models.deepseek_v2:DeepseekV2Model.forward")
    summary = evaluator.index.module(module_name)
    path = locator.find(module_name) if summary is None else None
    if path is not None:  # the file is there but was skipped: say why, not "not in the targets"
        why = next((p.message for p in evaluator.index.problems if p.file == str(path)), "it could not be read")
        why = why.removesuffix(": skipped")
        raise UserError(f"Entry module {module_name!r} ({locator.display_path(path)}) was skipped: {why}.",
                        "Pick an entry in a module dynacheck can read, or fix that file.")
    if summary is None:
        close = _close(module_name, _module_names(locator))
        raise UserError(f"Entry module {module_name!r} is not in the scanned targets.", close)
    if summary.error:
        raise UserError(f"Entry module {module_name!r} could not be parsed ({summary.error}).")
    if qualname in summary.functions:
        owner = summary.functions[qualname].cls
        self_cls = Value("cls", module_name, owner) if owner else None
        return Value("func", module_name, qualname, "entry", self_cls=self_cls)
    cls_name, _, method = qualname.rpartition(".")
    if cls_name in summary.classes and method:
        cls = Value("cls", module_name, cls_name)
        for value in evaluator.member(Value("inst", module_name, cls_name), method, 1):
            if value.kind == "func":
                return Value("func", value.module, value.name, "entry", self_cls=cls)
    names = list(summary.functions) + [f"{c}.{m}" for c, k in summary.classes.items() for m in k.methods]
    raise UserError(f"Entry {entry!r} names no function in {module_name}.", _close(qualname, names))


class _CountingCache(SummaryCache):
    """The summary cache, saying every few files how many the walk has read (parsed or from cache)."""

    progress: Progress | None = None

    def summary(self, path, module, is_package, data, prefetch=None):  # type: ignore[override]
        summary = super().summary(path, module, is_package, data, prefetch)
        read = self.parsed + self.hits
        if self.progress is not None and read % 5 == 0:
            self.progress(f"walking: {read} files read ({self.parsed} parsed, {self.hits} from cache)")
        return summary


def _close(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, list(dict.fromkeys(options)), n=3, cutoff=0.5)  # each name once
    return f"Did you mean: {', '.join(close)}?" if close else ""


def _module_names(locator: ModuleLocator) -> list[str]:
    names = []
    for path in locator.iter_files():
        name = locator.module_name_of(path)
        if name:
            names.append(name)
        if len(names) > 20_000:
            break
    return names


def _package(locator: ModuleLocator, path: str) -> str:
    target = locator.target_of(path)
    return target.name if target is not None else ""


def _unreadable_folders(locator: ModuleLocator) -> list[Problem]:
    """Folders the walk needed but could not list: their modules are missing from the results."""
    return [Problem("unreadable", folder, f"folder could not be listed ({why}): its modules were skipped")
            for folder, why in sorted(locator.unreadable.items())]


def _body_errors(index: Index) -> list[Problem]:
    """Deferred bodies (lazy_bodies.py) that could not be summarized: those functions look empty."""
    return [Problem("syntax_error", m.path, f"{error}: skipped") for m in index.loaded() for error in m.body_errors]


def _does_not_start(facts, evaluator, locator: ModuleLocator) -> str:
    """Why the model class the deployment's model config names does not start on it, or ''
    (static/startup.py; a quantized deployment with a known architecture only)."""
    name = str(facts.architecture or next(iter(facts.model_config.get("architectures") or ()), ""))
    if not name or not evaluator.pins:
        return ""
    module = model_class_module(locator, facts.framework.get("models_package", ""), name)
    found = model_unbuildable(evaluator, module, name) if module else None
    return found.reason(name, locator.display_path(found.file)) if found is not None else ""


def _argument_calls(walk, index) -> list[Problem]:
    """One problem per call of an entry's own required argument (an entry called with its required
    arguments only, reach.Walk.argument_calls): its verdict depends on what the caller passes."""
    out = []
    for key, call, param in walk.argument_calls:
        summary = index.module(key.module)
        out.append(Problem("argument_call", summary.path if summary is not None else "",
                           problem_text(call.line, render(call.func), f"{key.module}.{key.qualname}", param)))
    return out


def _display_problems(problems: list[Problem], locator: ModuleLocator) -> list[Problem]:
    return [Problem(p.kind, locator.display_path(p.file) if p.file else "", p.message) for p in problems]


def _capability(facts) -> object:
    """What a deployment's GPU answers (the fact GPU_FACT stands for: Deployment.fork_difference)."""
    return facts.external_call("torch.cuda.get_device_capability")

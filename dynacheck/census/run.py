"""Run a census: each distinct compiled forward x each deployment, one scan per pair.

Models that share a forward (many CausalLM classes wrap the same `LlamaModel`) share its cells.
Every scan of a worker shares one ScanSession, so each module summary is loaded once per process
(and parsed once for the whole census: the summary cache is on disk, keyed by content hash).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import time
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from dynacheck.census.matrix import CensusDeployment
from dynacheck.census.models import ModelEntry, registered_models
from dynacheck.deploy.build import DeploymentSpec, launch_of, load_framework, unstartable
from dynacheck.deploy.facts import Deployment
from dynacheck.deploy.piecewise_off import derived_turns_off, has_derived_rules, piecewise_turned_off
from dynacheck.deploy.post_init import Launch
from dynacheck.deploy.runner import framework_file, missing_runner
from dynacheck.deploy.server_args import apply_arguments, read_schema
from dynacheck.errors import UserError
from dynacheck.fixes.plan import fix_plan
from dynacheck.model import Finding, PlanEntry, ScanResult, Target
from dynacheck.static.every_way import fatal_every_way

Progress = Callable[[str], None]


@dataclass
class Census:
    """The census's data: one record per (model, deployment) plus what could not be walked."""

    targets: list[str]
    deployments: list[dict[str, Any]]
    cells: list[dict[str, Any]] = field(default_factory=list)
    not_applicable: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"census_version": "1", "targets": self.targets, "deployments": self.deployments,
                "cells": self.cells, "not_applicable": self.not_applicable, "errors": self.errors,
                "stats": self.stats}


def _order_key(finding: Finding) -> tuple:
    """Program order, approximately: the chain's hop lines compared hop by hop (Dynamo traces
    calls in the order they appear, so the smaller line at the first differing hop comes first)."""
    return tuple((hop.line) for hop in finding.chain) + (finding.site.line,)


def _fatal(findings: Sequence[Finding]) -> list[Finding]:
    """Unconditional sites that stop a fullgraph compile (a GB7000 loop fallback is a consequence
    of a break inside the loop, so the break itself is named instead)."""
    return [f for f in findings if f.unconditional and f.outcome.fatal_under_fullgraph
            and f.outcome.gb_id != "GB7000"]


def site_counts(findings: Sequence[Finding]) -> tuple[int, int]:
    """(fatal, conditional) distinct sites, a site being a `file:line` as the fix plan counts them. A
    finding is one chain to a site (up to five ways in are kept per site), so counting findings counted a
    site once per chain. Fatal: one that stops a fullgraph compile on every path (a layer loop's GB7000
    fallback included, as the fix plan that clears it counts it). Conditional: a site that only chains
    under an open condition reach."""
    fatal = {(f.site.file, f.site.line) for f in findings if f.unconditional and f.outcome.fatal_under_fullgraph}
    unconditional = {(f.site.file, f.site.line) for f in findings if f.unconditional}
    conditional = {(f.site.file, f.site.line) for f in findings if not f.unconditional} - unconditional
    return len(fatal), len(conditional)


def first_fixed(findings: Sequence[Finding], plan: Sequence[PlanEntry]) -> Finding | None:
    """The first break (program order) that the cell's first fix clears: the break to read
    beside the fix. Without a fix plan, the first fatal site."""
    fatal = _fatal(findings)
    if plan:
        step = (plan[0].kind, plan[0].at)
        cleared = [f for f in fatal if next(((x.kind, x.at) for x in f.fixes if x.sound), None) == step]
        fatal = cleared or fatal
    return min(fatal, key=_order_key) if fatal else None


def _site(finding: Finding | None) -> dict[str, Any] | None:
    if finding is None:
        return None
    return {"gb_id": finding.outcome.gb_id, "rule": finding.rule, "title": finding.title,
            "file": finding.site.file, "line": finding.site.line, "function": finding.site.function,
            "callee": finding.site.callee,
            "chain": [{"function": h.function, "file": h.file, "line": h.line, "code": h.code}
                      for h in finding.chain]}


def _trace_first(result: ScanResult) -> dict[str, Any] | None:
    """The scan's own first break (trace order, `ScanResult.first_break`), with its chain."""
    first = getattr(result, "first_break", None) or {}
    if not first:
        return None
    finding = next((f for f in result.findings if (f.site.file, f.site.line) == (first.get("file"), first.get("line"))
                    and f.unconditional), None)
    record = _site(finding) if finding is not None else {}
    # the chain Dynamo takes to it in trace order, which need not be the finding's shortest one
    return record | {k: first[k] for k in ("gb_id", "rule", "file", "line", "function", "callee", "chain") if k in first}


def cell_record(result: ScanResult) -> dict[str, Any]:
    """What a census keeps of one scan. A cell with no unconditional fatal site that breaks whichever way
    its open tests go takes `every_way_fields` (its first break then in program order); `fatal_sites`
    stays the unconditional count."""
    findings = result.findings
    plan = result.fix_plan
    fatal_sites, conditional_sites = site_counts(findings)
    record = {
        "fatal_sites": fatal_sites,
        "conditional_sites": conditional_sites,
        "first_break": _trace_first(result),
        "first_fixed": _site(first_fixed(findings, plan)),
        "fix": plan[0].to_dict() if plan else None,
        "breaks_by_function": sorted({f.site.function for f in findings
                                      if f.unconditional and f.outcome.fatal_under_fullgraph}),
        "every_way": None,
    }
    ways = every_way_fields(findings) if not fatal_sites else None
    if ways:
        record |= ways | {"first_fixed": ways["first_break"]}
    return record


def every_way_fields(findings: Sequence[Finding]) -> dict[str, Any] | None:
    """For findings that break only under open tests, but whichever way those go (static/every_way.py):
    the tests (`every_way`), the first of those breaks in program order, and the first step of a fix plan
    over them; None when some way breaks nothing. Shared by the model and the FlashInfer API census."""
    every, tests = fatal_every_way(findings)
    if not every:
        return None
    plan = fix_plan(every, unconditional_only=False)
    return {"every_way": [{"test": c.text, "file": c.file, "line": c.line} for c in tests],
            "first_break": _site(min(every, key=_order_key)), "fix": plan[0].to_dict() if plan else None}


def whichever_way(tests: Sequence[dict[str, Any]]) -> str:
    """`whichever way `T` (file:line) goes`, for a record's `every_way` (markdown; the HTML renders its spans)."""
    named = " and ".join(f"`{t['test']}` ({t['file']}:{t['line']})" for t in tests)
    return f"whichever way {named} {'goes' if len(tests) == 1 else 'go'}"


def breaks(cell: dict[str, Any]) -> bool:
    """Whether a census cell's compile breaks: an unconditional fatal site, or a break every way (cell_record)."""
    return bool(cell["fatal_sites"] or cell.get("every_way"))


# one session per worker process: the index (module summaries) is shared by every scan it runs
_WORKER: dict[str, Any] = {}


def _init_worker(targets: list[Target], cache_dir: Path | None, bodies: str = "", passes=None) -> None:
    """`bodies`: the census's folder where its workers share deferred bodies (body_exchange.py);
    `passes`: where a worker puts `(deployment name, cells)` after each deployment of a task (a
    multiprocessing queue the main process reads for its progress line, or a `_Progress`)."""
    from dynacheck.static.body_exchange import BodyExchange
    from dynacheck.static.scan import ScanSession

    gc.disable()  # a worker process only walks: see run_census
    _WORKER["targets"] = targets
    _WORKER["session"] = ScanSession.open(targets, cache_dir)
    if bodies:
        _WORKER["session"].cache.exchange = BodyExchange(Path(bodies))
    _WORKER["session"].flush_each_scan = False  # _walk_chain stores the filled bodies once, at its end
    _WORKER["cache_dir"] = cache_dir
    _WORKER["passes"] = passes


def _walk_chain(chain: list[CensusDeployment], entries: list[list[str]],
                classes: dict[str, list[str]] | None = None,
                modules: dict[str, str] | None = None) -> list[list[tuple]]:
    """Every forward on each deployment of a chain (deployments that differ in their GPU and
    checkpoint format only), in order; a failure is a reason string, never a crash. Each
    deployment's evaluator is forked from the one walked before it (ScanSession.engine), and all
    are let go at the end. `classes`: the model classes whose cells each forward gives
    (_walk_entries); `modules`: where each model class is defined (its start-up check, _unbuildable)."""
    session = _WORKER["session"]
    out, walked = [], None
    _WORKER["before"] = {}  # (forward, class) -> its scan on the deployment walked last (scan_reuse.Before)
    try:
        for deployment, walk in zip(chain, entries):
            _WORKER["now"], _WORKER["reused"] = {}, 0
            found = _walk_entries(deployment, walk, walked, classes or {}, modules or {})
            out.append(found)
            if _WORKER.get("passes") is not None:
                _WORKER["passes"].put((deployment.name, len(found), _WORKER["reused"]))
            if any(isinstance(record, dict) and "refused" not in record for _, _, record in found):
                if walked is not None:  # the next one forks from this one
                    session.release(walked)
                walked = deployment.spec()
                _WORKER["before"] = _WORKER["now"]
            else:  # refused or failed: nothing walked to fork from
                session.release(deployment.spec())
    finally:
        for deployment in chain:
            session.release(deployment.spec())
        session.cache.flush()  # the bodies this task summarized, for the next census or scan
        _WORKER.pop("before", None)
        _WORKER.pop("now", None)
    return out


def _walk_entries(deployment: CensusDeployment, entries: list[str], fork_from: DeploymentSpec | None = None,
                  classes: dict[str, list[str]] | None = None,
                  modules: dict[str, str] | None = None) -> list[tuple[str, str, dict[str, Any] | str]]:
    """`(forward, model class, record)` per forward, the class "" when the record holds for every
    class whose cells the forward gives. Each forward is walked with its first class as
    `config.architectures`; when the walk compared it with a name (`is_deepseek_nsa(config)`,
    facts.ARCH_FACT), again for each group of the other classes that answer those tests otherwise.
    A class that does not start on the deployment (static/startup.py) gets `{"unbuildable": why,
    "of": the forward's record}` instead of the record."""
    from dynacheck.deploy.facts import ARCH_FACT
    from dynacheck.static.partial_values import answers_alike

    out: list[tuple[str, str, dict[str, Any] | str]] = []
    session = _WORKER["session"]
    try:
        facts = session.engine(deployment.spec(), fork_from)[0]
    except UserError as exc:
        return [(entry, "", str(exc)) for entry in entries]
    except Exception as exc:  # noqa: BLE001 - the deployment's facts could not be read: every cell says why
        return [(entry, "", f"internal error: {type(exc).__name__}: {exc}") for entry in entries]
    if facts.refused:  # the framework never loads it: nothing is compiled, nothing to walk
        return [(entry, "", {"refused": facts.refused}) for entry in entries]
    for entry in entries:
        names = (classes or {}).get(entry) or [""]
        blocked = {name: why for name in names
                   if (why := _unbuildable(deployment, name, (modules or {}).get(name, "")))}
        starting = [name for name in names if name not in blocked]
        if not starting:  # no class on this forward starts: nothing of it is compiled, nothing to walk
            out.extend((entry, name, {"unbuildable": blocked[name]}) for name in names)
            continue
        record, read, tests = _walk_cell(deployment, entry, starting[0])
        if not read & ARCH_FACT and not blocked:
            out.append((entry, "", record))
            continue
        walked = [(starting[0], tests, record)]  # a class answering a walk's tests alike gets its record
        for name in names:
            same = next((r for first, t, r in walked if answers_alike(t, first, name)), None) \
                if read & ARCH_FACT else record
            if same is None and name not in blocked:
                got, _, tests = _walk_cell(deployment, entry, name)
                walked.append((name, tests, got))
                same = got
            if name in blocked:  # the forward's record is kept beside it, to count the walks
                same = {"unbuildable": blocked[name]} | ({"of": same} if same is not None else {})
            out.append((entry, name, same))
    return out


def _unbuildable(deployment: CensusDeployment, name: str, module: str) -> str:
    """Why model class `name` does not start on the deployment (a layer its constructors build cannot
    be built with the checkpoint's quant config: static/startup.py), or ''. A check that fails leaves the
    cell walked, as before the check existed (none failed on the 0.5.9 and 0.5.10 censuses)."""

    from dynacheck.static.startup import model_unbuildable

    if not name or not module or not deployment.quantization:
        return ""
    session = _WORKER["session"]
    try:
        failure = model_unbuildable(session.engine(replace(deployment.spec(), architecture=name))[1], module, name)
    except Exception:  # noqa: BLE001 - a check that cannot read the model leaves its cell walked
        return ""
    return failure.reason(name, session.locator.display_path(failure.file)) if failure is not None else ""


def _walk_cell(deployment: CensusDeployment, entry: str,
               architecture: str) -> tuple[dict[str, Any] | str, int, frozenset]:
    """One scan's record (or why it failed), the deployment facts its walk read, and the architecture
    tests recorded by then (partial.PartialEvaluator._architecture_test)."""
    from dynacheck.static.scan import scan_targets
    from dynacheck.static.scan_reuse import Before, unchanged

    session = _WORKER["session"]
    spec = replace(deployment.spec(), architecture=architecture or None)
    before = _WORKER.get("before", {}).get((entry, architecture))
    try:
        evaluator = session.engine(spec)[1]
        saved = evaluator.reads_begin()
        try:
            if before is not None and _unchanged(unchanged, session, spec, before):
                record = before.record  # the same walk as on the deployment before: the same record
                _WORKER["reused"] = _WORKER.get("reused", 0) + 1  # counted for the census's stats
            else:
                kept: dict = {}
                result = scan_targets(_WORKER["targets"], [entry], None, cache_dir=_WORKER["cache_dir"],
                                      deployment=spec, session=session, keep=kept)
                record = cell_record(result)
                before = Before.of([entry], kept, record)
        finally:
            read = evaluator.reads_end(saved)
        if before is not None and "now" in _WORKER:
            _WORKER["now"][(entry, architecture)] = before
        return record, read, frozenset(evaluator.partial.architecture_tests)
    except UserError as exc:
        return str(exc), 0, frozenset()
    except Exception as exc:  # noqa: BLE001 - one cell's analyzer failure must not end the census
        return f"internal error: {type(exc).__name__}: {exc}", 0, frozenset()


def _unchanged(check, session, spec, before) -> bool:
    """scan_reuse.unchanged, where a check that fails to run means the scan runs."""
    try:
        return check(session, spec, before)
    except Exception:  # noqa: BLE001 - the scan itself then says what fails
        return False


def _tasks(deployments: Sequence[CensusDeployment], entries: list[str],
           wanted: dict[str, list[CensusDeployment]], workers: int = 2) -> list[tuple[list[CensusDeployment], list[list[str]]]]:
    """The census's units of work: chains of deployments that differ in their GPU and checkpoint
    format only (CensusDeployment.family: one evaluator per chain, forked from one deployment to
    the next: ScanSession.engine), each with its forwards in one fixed order.

    The first and the last chains (the default matrix is one) are walked in two fixed halves of
    their forwards, each with evaluators of its own, so that two workers start on different
    forwards and finish together. With more `workers` than that gives tasks, the chains are cut
    further, each into interleaved parts (`forwards[i::k]`) in proportion to its forwards, so that
    every worker has one: a census on 16 cores is not walked on 2.

    A cell does not depend on how its chain is cut: each equals a scan of that cell alone
    (`python bench/census_alone.py`), and `tests/test_census.py` compares 1, 2 and 3 workers."""
    chains: dict[tuple, list[CensusDeployment]] = {}
    for deployment in deployments:
        chains.setdefault(deployment.family(), []).append(deployment)
    tasks = []
    for chain in chains.values():
        walks = [[e for e in entries if d in wanted[e]] for d in chain]
        if any(walks):
            tasks.append((chain, walks))
    cuts = [1] * len(tasks)
    for at in {0, len(tasks) - 1} if tasks else ():
        cuts[at] = 2
    if workers > sum(cuts):  # one part per worker, shared by the chains in proportion to their forwards
        sizes = [len(set().union(*map(set, walks))) for _, walks in tasks]
        cuts = [1] * len(tasks)
        while sum(cuts) < workers and any(c < n for c, n in zip(cuts, sizes)):
            at = max((i for i in range(len(tasks)) if cuts[i] < sizes[i]), key=lambda i: sizes[i] / cuts[i])
            cuts[at] += 1
    out = []
    for (chain, walks), k in zip(tasks, cuts):
        k = min(k, max(len(w) for w in walks))
        out.extend((chain, [w[i::k] for w in walks]) for i in range(k))
    return out


def _one_failure(results: dict[tuple[str, str], dict[str, Any] | str]) -> str:
    """The reason when every (forward, deployment) scan failed for the same one (the targets or the
    deployments, not a model: e.g. a ServerArgs layout that cannot be read), else ''. A table of
    a thousand identical error cells would hide it."""
    reasons = set(results.values()) if all(isinstance(r, str) for r in results.values()) else set()
    return reasons.pop() if len(reasons) == 1 else ""


class _Progress:
    """The census's progress line: one step per deployment of each task (a chain's half), as the
    workers report them, so a census of a minute says more than "0 of 2 parts"."""

    def __init__(self, progress: Progress | None, steps: int) -> None:
        self.progress, self.steps, self.done, self.cells, self.reused = progress, steps, 0, 0, 0

    def put(self, item: tuple) -> None:
        """`(deployment name, forward x deployment pairs, scans answered by the deployment before)`."""
        name, cells, reused = item
        self.done += 1
        self.cells += cells
        self.reused += reused
        if self.progress:
            self.progress(f"census: {self.done}/{self.steps} deployment passes walked ({self.cells} forward x "
                          f"deployment pairs, last {name})")


def _in_workers(tasks: list, jobs: int, targets: list[Target], cache_dir: Path | None, passes: _Progress,
                classes: dict[str, list[str]], modules: dict[str, str]) -> list:
    """Each task's output, in task order, walked by `jobs` worker processes; their progress reports
    are read while they work."""
    bodies = tempfile.mkdtemp(prefix="dynacheck-census-bodies-")
    reports = multiprocessing.Queue()
    executor = ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(targets, cache_dir, bodies, reports))
    try:
        futures = [executor.submit(_walk_chain, chain, walks, classes, modules) for chain, walks in tasks]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2)
            _drain(reports, passes, block=False)
        _drain(reports, passes, block=True)  # what the workers put just before their last result
        return [future.result() for future in futures]
    finally:
        executor.shutdown()
        reports.close()
        shutil.rmtree(bodies, ignore_errors=True)


def _drain(reports, passes: _Progress, block: bool) -> None:
    while passes.done < passes.steps:
        try:
            item = reports.get(timeout=2.0) if block else reports.get_nowait()
        except (queue.Empty, OSError, EOFError):
            return
        passes.put(item)


def _sglang_root(targets: Sequence[Target]) -> Path:
    for target in targets:
        if (Path(target.root) / "sglang" / "srt" / "models").is_dir():
            return Path(target.root)
    raise UserError("The census needs an SGLang target.", "Add --target sglang==0.5.9 (or the version you run).")


def _not_applicable(model: ModelEntry, deployment: CensusDeployment, roots: Sequence[Path] = (),
                    launches: dict[str, Launch] | None = None) -> str | None:
    """Why the cell is not walked, read from the sources: nothing is compiled for the model, the release turns
    piecewise CUDA graphs off for it on this launch (deploy/piecewise_off.py: by its architecture, or by a
    setting ServerArgs derives, `launches` holding each deployment's), or the checkpoint's quantization is not
    applied to it."""
    if model.not_compiled:
        return model.not_compiled
    turned_off = piecewise_turned_off(roots, model.name, deployment.server_args) if roots else ""
    launch = (launches or {}).get(deployment.name)
    if not turned_off and launch is not None and model.name:
        turned_off = derived_turns_off(roots, replace(launch, architecture=model.name))
    if turned_off:
        return turned_off
    if deployment.quantization and not model.takes_quant_config:
        return (f"{model.name}.__init__ (and its SGLang bases) take no quant_config: a "
                f"{deployment.quantization} checkpoint is not applied to this model")
    return None


def _launches(roots: Sequence[Path], deployments: Sequence[CensusDeployment], cache) -> dict[str, Launch]:
    """Each deployment as deploy/post_init.py is told it (no architecture yet): its server args after its
    flags, GPU, platform and environment, and a quantized checkpoint exactly when it names a quantization."""
    server = framework_file(roots, load_framework("sglang").get("server_args_file", ""))
    if server is None or not has_derived_rules(server):  # 0.5.9: nothing to decide, no schema to apply
        return {}
    schema = read_schema(server, cache)
    out = {}
    for deployment in deployments:
        try:
            args, given = apply_arguments(schema, deployment.server_args)
        except UserError:  # refused: its cells are n/a for that
            continue
        facts = Deployment(gpu=deployment.gpu, platform=deployment.platform, env=dict(deployment.env),
                           env_complete=True, server_args=args, server_args_given=given)
        out[deployment.name] = replace(launch_of(facts), quantized_checkpoint=bool(deployment.quantization))
    return out


def run_census(targets: Sequence[Target], deployments: Sequence[CensusDeployment], *,
               cache_dir: Path | None = None, jobs: int | None = None,
               progress: Progress | None = None, models: Sequence[str] = ()) -> Census:
    """The census of every registered model (or those named in `models`) x `deployments`.

    The cycle collector is off throughout (here and in the workers): the summaries and memos are
    millions of objects that each collection would rescan, for
    garbage that reference counting frees."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run_census(targets, deployments, cache_dir=cache_dir, jobs=jobs, progress=progress, models=models)
    finally:
        if collecting:
            gc.enable()


def _run_census(targets: Sequence[Target], deployments: Sequence[CensusDeployment], *,
                cache_dir: Path | None, jobs: int | None, progress: Progress | None,
                models: Sequence[str]) -> Census:
    started = time.perf_counter()
    from dynacheck.sources.cache import default_cache_dir
    from dynacheck.static.cache import SummaryCache

    cache = SummaryCache(cache_dir if cache_dir is not None else default_cache_dir())
    registered = registered_models(_sglang_root(targets), jobs=max(1, jobs or os.cpu_count() or 1), cache=cache)
    if models:
        registered = [m for m in registered if m.name in set(models)]
        if not registered:
            raise UserError("None of the --model names is registered by the scanned SGLang.",
                            "Names are class names from an EntryClass list, e.g. GlmMoeDsaForCausalLM.")
    # a deployment whose launch flags this SGLang lacks never starts, and one without a piecewise runner
    # compiles nothing: every cell of it is n/a for that one reason, before any reason of a model's
    # (sglang 0.5.23 has neither --enable-piecewise-cuda-graph nor the runner)
    roots = [Path(t.root) for t in targets]
    no_runner = missing_runner(roots, load_framework("sglang"))
    if no_runner:
        no_runner += ": no forward is compiled the way the census walks it"
    refused = {d.name: why for d in deployments
               if (why := "; and ".join(filter(None, (unstartable(roots, d.server_args, cache), no_runner))))}
    census = Census([t.spec for t in targets],
                    [d.to_dict() | ({"refused": refused[d.name]} if d.name in refused else {}) for d in deployments])
    launches = _launches(roots, deployments, cache)
    classes_listed = sum(1 for m in registered if m.name)  # a nameless entry is a file's error
    wanted: dict[str, list[CensusDeployment]] = {}
    for model in registered:
        if not model.entry:
            if not model.name or (not model.not_compiled and len(refused) < len(deployments)):  # nameless: a
                # model file that could not be parsed (census/models.py), whatever the deployments
                census.errors.append({"model": model.name, "module": model.module, "reason": model.how})
            continue
        for deployment in deployments:
            if deployment.name not in refused and _not_applicable(model, deployment, roots, launches) is None \
                    and deployment not in wanted.setdefault(model.entry, []):
                wanted[model.entry].append(deployment)
    results: dict[tuple[str, str], dict[str, Any] | str] = {}
    by_class: dict[tuple[str, str, str], dict[str, Any] | str] = {}  # where a forward's cells differ per class
    entries = sorted(wanted, key=lambda e: -len(wanted[e]))
    classes: dict[str, list[str]] = {}
    for model in registered:
        if model.entry in wanted:
            classes.setdefault(model.entry, []).append(model.name)
    modules = {model.name: model.module for model in registered}
    jobs = max(1, jobs or os.cpu_count() or 1)
    tasks = _tasks(deployments, entries, wanted, jobs)
    jobs = min(jobs, len(tasks) or 1)
    passes = _Progress(progress, sum(len(chain) for chain, _ in tasks))
    if progress:
        progress(f"census: {classes_listed} model classes, {len(entries)} distinct forwards x {len(deployments)} "
                 f"deployments, walked in {jobs} process{'es' if jobs > 1 else ''}")
    if jobs == 1:
        _init_worker(list(targets), cache_dir, passes=passes)
        outputs = [_walk_chain(chain, walks, classes, modules) for chain, walks in tasks]
    else:
        outputs = _in_workers(tasks, jobs, list(targets), cache_dir, passes, classes, modules)
    walks = set()  # a record given to several classes is one walk (the same object, pickling keeps it)
    for (chain, _), output in zip(tasks, outputs):
        for deployment, found in zip(chain, output):
            for entry, name, record in found:
                if name:
                    by_class[(entry, deployment.name, name)] = record
                results.setdefault((entry, deployment.name), record)
                walked = record.get("of") if isinstance(record, dict) and "unbuildable" in record else record
                if walked is not None:
                    walks.add((entry, deployment.name, id(walked)))
    reason = _one_failure(results)
    if reason:
        raise UserError(f"No cell of the census could be walked: {reason}")
    for model in registered:
        if not model.name or (not model.entry and not model.not_compiled and len(refused) < len(deployments)):
            continue
        for deployment in deployments:
            reason = refused.get(deployment.name) or _not_applicable(model, deployment, roots, launches)
            base = {"model": model.name, "module": model.module, "deployment": deployment.name}
            if reason:
                census.not_applicable.append(base | {"reason": reason})
                continue
            record = by_class.get((model.entry, deployment.name, model.name), results[(model.entry, deployment.name)])
            if isinstance(record, dict) and ("refused" in record or "unbuildable" in record):
                census.not_applicable.append(base | {"reason": record.get("refused") or record["unbuildable"]})
                continue
            if isinstance(record, str):
                census.errors.append(base | {"reason": record})
                continue
            census.cells.append(base | {"entry": model.entry, "entry_how": model.how} | record)
    census.stats = {"models": classes_listed, "forwards": len(entries),
                    "scans": len(walks),
                    "scans_reused": passes.reused,  # answered by the same walk on the deployment before
                    "jobs": jobs, "seconds": round(time.perf_counter() - started, 2)}
    return census

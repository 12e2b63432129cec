"""A second core summarizes what the walk is likely to ask for next, while the walk goes on.

A cold scan spends most of its time in libcst, one module or one deferred body at a time, in the
order the walk asks for them. The walk itself is one sequence, but what it asks next is mostly
predictable from what it has read: the modules a loaded module imports, the definitions it imports
from them, and the names a summarized body refers to (on the flagship, 95 of the 113 modules and
227 of the 283 bodies the walk read were named so before it asked for them).

A forked worker summarizes those hints, the most recent first, with the same code the walk would
run (`summarize`, `summarize_body`) on the same text. When the walk needs a module or a body, it
takes the worker's result if there is one, waits if the worker is on that very item, and otherwise
summarizes it itself and tells the worker to drop it. So the answer never depends on the worker,
only the time does; a worker that dies or falls behind costs nothing but its help.

Used by single scans on Linux with two or more usable cores (the worker is forked: a spawned one
would import everything again); a census's processes use the cores already. `DYNACHECK_PREFETCH=0`
turns it off.
"""

from __future__ import annotations

import collections
import hashlib
import multiprocessing
import os
import pickle
import queue
import shutil
import sys
import tempfile
from typing import Iterable

from dynacheck.static import lazy_bodies
from dynacheck.static.cache import SummaryUnpickler
from dynacheck.static.ir import names_in
from dynacheck.static.summary import ModuleSummary, summarize, summarize_body

WAIT_SECONDS = 30.0  # the longest a take waits for the item the worker is on (a huge file)


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def data_key(data: bytes) -> str:
    """Which text a result was made from: the worker reads the file on its own."""
    return hashlib.sha1(data).hexdigest()


class Prefetch:
    """The walk's side: hints out, results in. The worker starts at the first summary the walk has
    to make itself (a warm scan never starts one)."""

    def __init__(self, locator) -> None:
        self.locator = locator
        self._worker: multiprocessing.process.BaseProcess | None = None
        self._inbox = self._outbox = None
        self._done: dict[tuple, object] = {}
        self._current: tuple | None = None  # the item the worker said it started and has not finished
        self._hinted: set[tuple] = set()
        self._known: set[str] = set()  # modules whose text the worker has (it made them, or was sent them)
        self._early: list[ModuleSummary] = []  # read from the summary cache before the worker started
        self.failed = False
        self.taken = 0  # results used instead of a summary made here (tests, benchmarks)

    @classmethod
    def for_scan(cls, locator) -> "Prefetch | None":
        if os.environ.get("DYNACHECK_PREFETCH", "1") == "0" or usable_cores() < 2:
            return None
        if not sys.platform.startswith("linux"):
            return None  # a spawned worker would import everything again, and fork is unsafe on macOS
        return cls(locator)

    # ----- the walk asks --------------------------------------------------------------------------

    def take_module(self, module: str, data: bytes) -> ModuleSummary | None:
        """The worker's summary of `module` made from these bytes, else None (summarize it here).
        The first call starts the worker: the walk has met a module the summary cache lacks."""
        self._start()
        made = self._take(("m", module))
        if not isinstance(made, tuple) or made[0] != data_key(data):
            return None
        self.taken += 1
        self._known.add(module)
        return made[1]

    def take_body(self, summary: ModuleSummary, name: str, span: tuple[int, int]) -> ModuleSummary | str | None:
        made = self._take(("b", summary.module, name))
        if not isinstance(made, tuple) or made[0] != span:
            return None
        self.taken += 1
        return made[1]

    # ----- hints ---------------------------------------------------------------------------------

    def after_module(self, summary: ModuleSummary) -> None:
        """A module the walk has read: the worker gets its text (for its bodies) and its imports."""
        summary._prefetch = self  # its fills ask here first
        if self._worker is None:
            if not self.failed:
                self._early.append(summary)
            return
        text = summary.__dict__.get("_source")
        if summary.pending and summary.module not in self._known and text is not None:
            self._known.add(summary.module)
            self._send(("text", summary.module, summary.path, summary.is_package, text, dict(summary.pending)))
        targets = [b.value for bindings in summary.bindings.values() for b in bindings
                   if b.kind == "import" and isinstance(b.value, str)]
        self._hint_imports(targets + list(summary.star_imports), urgent=False)

    def after_body(self, summary: ModuleSummary, name: str) -> None:
        """A body the walk has read: the names it refers to are likely next."""
        if self._worker is None or self.failed:
            return
        names, imports = _references(summary, name)
        pending = summary.pending
        items = []
        for ref in names:
            if ref in pending:
                items.append(("b", summary.module, ref))
            for binding in summary.bindings.get(ref, ()):
                if binding.kind == "import" and isinstance(binding.value, str):
                    imports.append(binding.value)
        self._hint_imports(imports, urgent=True, items=items)

    def queued(self, module: str, qualname: str) -> None:
        """The walk has queued this function: its body is read when the walk reaches it, in queue order."""
        item = ("b", module, qualname.partition(".")[0])
        if self._worker is not None and item not in self._hinted:
            self._hinted.add(item)
            self._send(("hint", "queued", [("m", module), item]))

    def _hint_imports(self, targets: Iterable[str], urgent: bool, items: list | None = None) -> None:
        """Hints for imported names: the module and the packages above it (a dotted name is resolved
        through them), and for a body's own references (`urgent`: the walk is in that body now) the
        definition named too. A module's imports wait behind them: most are never used by the walk,
        and hinting the definitions they name cost more than it saved (measured on the flagship)."""
        items = items or []
        for target in targets:
            head, _, tail = target.rpartition(".")
            items.append(("m", target))
            if head:
                if urgent:
                    items.append(("b", head, tail))
                while head:
                    items.append(("m", head))
                    head = head.rpartition(".")[0]
        new = [item for item in dict.fromkeys(items) if item not in self._hinted]
        if new:
            self._hinted.update(new)
            self._send(("hint", urgent, new))

    # ----- the worker ----------------------------------------------------------------------------

    def _start(self) -> None:
        if self._worker is not None or self.failed:
            return
        try:
            context = multiprocessing.get_context("fork")
            self._folder = tempfile.mkdtemp(prefix="dynacheck-prefetch-")
            self._inbox, self._outbox = context.Queue(), context.Queue()  # puts never block the walk
            self._worker = context.Process(target=_serve, name="dynacheck-prefetch", daemon=True,
                                           args=(self._inbox, self._outbox, self.locator, self._folder,
                                                 os.getpid()))
            self._worker.start()
        except (OSError, ValueError):  # no fork, no processes left: scan without help
            self.failed, self._worker = True, None
            return
        early, self._early = self._early, []
        for summary in early:
            self.after_module(summary)

    def _send(self, message: tuple) -> None:
        if self._worker is None or self.failed:
            return
        if not self._worker.is_alive():  # nobody would read it: the queue's thread would block on a full pipe
            self.failed = True
            return
        try:
            self._inbox.put(message)
        except (OSError, ValueError):
            self.failed = True

    def _take(self, item: tuple):
        if self._worker is None or self.failed:
            return None
        self._drain(block=False)
        if item in self._done:
            return self._read(self._done.pop(item))
        if self._current == item:  # the worker is on it: its result comes before anything else would
            while self._current == item and item not in self._done and not self.failed:
                self._drain(block=True)
            return self._read(self._done.pop(item, None))
        if item in self._hinted:
            self._send(("drop", item))
        self._hinted.add(item)  # made here: never hinted again
        return None

    def _drain(self, block: bool) -> None:
        try:
            while True:
                message = self._outbox.get(block, WAIT_SECONDS) if block else self._outbox.get_nowait()
                block = False
                if message[0] == "start":
                    self._current = message[1]
                elif message[0] == "done":
                    self._done[message[1]] = message[2]
                    if self._current == message[1]:
                        self._current = None
        except queue.Empty:
            if block:  # waited for an item in progress: the worker is stuck or gone
                self.failed = True
        except (OSError, EOFError, ValueError):
            self.failed = True
        if self._worker is not None and not self._worker.is_alive() and not self.failed and block:
            self.failed = True

    def _read(self, number: int | None):
        """A result the worker wrote (results go through files, so those never asked for cost nothing),
        in this scan's own 0700 folder."""
        if number is None:
            return None
        try:
            with open(os.path.join(self._folder, f"{number}.pickle"), "rb") as handle:
                return SummaryUnpickler(handle).load()  # summary classes only, as for the cache
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            return None

    def close(self) -> None:
        """End the worker and drop what it made; the queues' threads are not waited for at exit
        (a message the worker will never read must not hold the process)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.terminate()
            worker.join(1.0)
            for channel in (self._inbox, self._outbox):
                channel.cancel_join_thread()
                channel.close()
            shutil.rmtree(self._folder, ignore_errors=True)
        self._done.clear()


# ----- the worker process --------------------------------------------------------------------------


def _serve(inbox, outbox, locator, folder: str, parent: int) -> None:
    """Summarize hinted modules and bodies, the most recent hint first, until the scan closes it.
    `parent` is the scan's pid, taken before the fork (the scan may be gone before this starts)."""
    done = _Results(outbox, folder)
    queued: collections.deque[tuple] = collections.deque()
    urgent: list[tuple] = []
    later: list[tuple] = []
    dropped: set[tuple] = set()
    texts: dict[str, tuple] = {}  # module -> (path, is_package, lines, spans)
    tried: set[tuple] = set()
    while True:
        while not inbox.empty() or not (queued or urgent or later):
            try:
                message = inbox.get(timeout=1.0)
            except queue.Empty:
                if os.getppid() != parent:  # the scan was killed: nobody will close this worker
                    shutil.rmtree(folder, ignore_errors=True)
                    return
                continue
            if message[0] == "hint" and message[1] == "queued":
                queued.extend(message[2])
            elif message[0] == "hint":
                (urgent if message[1] else later).extend(reversed(message[2]))  # a batch keeps its order
            elif message[0] == "drop":
                dropped.add(message[1])
            elif message[0] == "text":
                _, module, path, is_package, text, spans = message
                texts.setdefault(module, (path, is_package, text.splitlines(keepends=True), spans))
        item = queued.popleft() if queued else urgent.pop() if urgent else later.pop()
        if item in dropped or item in tried:
            continue
        tried.add(item)
        if item[0] == "m":
            _module_job(item, locator, texts, done)
        else:
            _body_job(item, locator, texts, done, tried)


class _Results:
    """The worker's side of the results: a file each, and a notice on the queue."""

    def __init__(self, outbox, folder: str) -> None:
        self.outbox, self.folder, self.count = outbox, folder, 0

    def start(self, item: tuple) -> None:
        self.outbox.put(("start", item))

    def put(self, item: tuple, result: tuple) -> None:
        self.count += 1
        path = os.path.join(self.folder, f"{self.count}.pickle")
        with open(path + ".tmp", "wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(path + ".tmp", path)
        self.outbox.put(("done", item, self.count))


def _module_job(item: tuple, locator, texts: dict, done: _Results) -> None:
    module = item[1]
    if module in texts:
        return  # the walk has it already
    path = locator.find(module)
    if path is None or path.is_dir():
        return
    try:
        data = path.read_bytes()
    except OSError:
        return
    done.start(item)
    text = data.decode("utf-8-sig", errors="replace")
    summary = summarize(text, module, str(path), locator.is_package(module))
    texts[module] = (str(path), summary.is_package, text.splitlines(keepends=True), dict(summary.pending))
    done.put(item, (data_key(data), summary))


def _body_job(item: tuple, locator, texts: dict, done: _Results, tried: set) -> None:
    _, module, name = item
    if module not in texts and ("m", module) not in tried:
        tried.add(("m", module))
        _module_job(("m", module), locator, texts, done)
    if module not in texts:
        return
    path, is_package, lines, spans = texts[module]
    span = spans.get(name)
    if span is None:
        return
    done.start(item)
    part = summarize_body(module, path, is_package, *lazy_bodies.chunk(lines, *span))
    done.put(item, (span, part))


def _references(summary: ModuleSummary, name: str) -> tuple[set[str], list[str]]:
    """Plain names the definition `name` refers to, and the dotted targets of its local imports."""
    exprs: list = []
    imports: list[str] = []
    prefix = name + "."
    for qualname, fn in dict.items(summary.functions):
        if qualname != name and not qualname.startswith(prefix):
            continue
        exprs.extend(call.func for call in fn.calls)
        exprs.extend(fn.decorators)
        exprs.extend(fn.returns)
        for values in fn.assigns.values():
            exprs.extend(values)
        for values in fn.self_assigns.values():
            exprs.extend(values)
        imports.extend(fn.local_imports.values())
    for qualname, klass in dict.items(summary.classes):
        if qualname == name or qualname.startswith(prefix):
            exprs.extend(klass.bases)
            exprs.extend(klass.decorators)
    return names_in(exprs), imports

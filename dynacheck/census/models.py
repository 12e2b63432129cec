"""The model classes SGLang registers, read from `sglang/srt/models/*.py` without importing them.

Each file's `EntryClass = X` or `EntryClass = [X, Y]` names the classes. The forward a census walks
is the one the piecewise runner compiles: `getattr(model, "language_model", model).model`, found
from `self.model = DeepseekV2Model(...)` (or a method that returns the class) in `__init__` or a
base's. A class without `.model`, or one loaded only by a speculative draft worker, gets no entry
and the reason (read from SGLang's runner and ModelConfig), never a walk of code nobody compiles.
"""

from __future__ import annotations

import ast
import hashlib
import multiprocessing
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dynacheck.census import runner_facts
from dynacheck.errors import one_line
from dynacheck.sources.text import PARSE_FAILURES, decode_source

MODELS_PACKAGE = "sglang.srt.models"
RUNNER_MODULE = runner_facts.RUNNER_MODULE
MODEL_CONFIG_MODULE = "sglang.srt.configs.model_config"


@dataclass(frozen=True)
class ModelEntry:
    """One registered model class and the forward a census walks from."""

    name: str  # the registered class, e.g. GlmMoeDsaForCausalLM
    module: str  # where it is registered
    entry: str  # module:Class.forward walked from ("" when nothing is compiled or it is unresolved)
    how: str  # "compiled module (self.model = X)" | why there is no entry
    takes_quant_config: bool  # its __init__ (or a base's) accepts quant_config
    not_compiled: str = ""  # why the piecewise runner compiles nothing for it (read from SGLang's sources)


@dataclass
class _Module:
    name: str
    classes: dict[str, ast.ClassDef]
    imports: dict[str, str]  # local name -> "module:Name"
    tree: ast.Module | None = None


def _read(path: Path, name: str, digests: dict[str, str | None] | None = None,
          problems: dict[str, str] | None = None) -> _Module | None:
    """`digests`: where the bytes read are recorded (path -> sha256), so a stored list can be checked;
    `problems`: why a module could not be read (module -> one line), so the census can say it."""
    try:
        data = path.read_bytes()
        if digests is not None:
            digests[str(path)] = hashlib.sha256(data).hexdigest()
        tree = ast.parse(decode_source(data))
    except PARSE_FAILURES as exc:
        if problems is not None:
            problems[name] = one_line(exc)
        return None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imports: dict[str, str] = {}
    for node in _statements(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return _Module(name, classes, imports, tree)


_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.Module):
    """Every statement (and except handler / match case) in `ast.walk`'s breadth-first order,
    without visiting expressions: an import is a statement, and a model file is mostly expressions
    (a full `ast.walk` of SGLang's models was most of the model listing's time)."""
    todo = deque(tree.body)
    while todo:
        node = todo.popleft()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDERS))


def _registered(tree: ast.Module | None) -> tuple[list[str], list[str]]:
    """The class names of the module's `EntryClass` (its last top-level assignment, as SGLang's registry
    reads the module attribute), and the source of each item or assignment that is not a plain class name
    (`mod.Cls`, a call, `EntryClass += ...`): the census says it could not list those, never drops them."""
    if tree is None:
        return [], []
    names: list[str] = []
    unread: list[str] = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if not any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in targets) or node.value is None:
            continue
        value = node.value
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        if isinstance(node, ast.AugAssign):  # `EntryClass += [...]`: what it adds, unread
            unread.append(ast.unparse(node))
            continue
        names = [i.id for i in items if isinstance(i, ast.Name)]
        unread = [ast.unparse(i) for i in items if not isinstance(i, ast.Name)]
    return names, unread


class _Sources:
    """Modules of the SGLang tree, read on demand (ast), and class lookup through imports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._modules: dict[str, _Module | None] = {}
        self.read: dict[str, str | None] = {}  # every path looked up -> sha256 of its bytes, None if absent
        self.problems: dict[str, str] = {}  # module -> why it could not be read (a parse error)

    def module(self, name: str) -> _Module | None:
        if name not in self._modules:
            path = self.root / (name.replace(".", "/") + ".py")
            self.read.setdefault(str(path), None)
            self._modules[name] = _read(path, name, self.read, self.problems) if path.is_file() else None
        return self._modules[name]

    def find_class(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        found = self.module(module)
        if found is None or depth > 4:
            return None
        if name in found.classes:
            return module, found.classes[name]
        target = found.imports.get(name)
        if target and target.startswith("sglang."):
            other, _, real = target.partition(":")
            return self.find_class(other, real, depth + 1)
        return None

    def mro(self, module: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """The class and its SGLang bases, nearest first (depth-first, like a simple MRO)."""
        chain, todo, seen = [], [(module, cls)], set()
        while todo and len(chain) < 12:
            mod, node = todo.pop(0)
            if (mod, node.name) in seen:
                continue
            seen.add((mod, node.name))
            chain.append((mod, node))
            for base in node.bases:
                if isinstance(base, ast.Name):
                    found = self.find_class(mod, base.id)
                    if found:
                        todo.append(found)
        return chain


def _init_of(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return _method(cls, "__init__")


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _self_assignment(init: ast.FunctionDef, attr: str) -> ast.expr | None:
    """The value of the first `self.<attr> = value` in `__init__` (tuple targets included)."""
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if _is_self_attr(target, attr):
                return node.value
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for sub, value in zip(target.elts, node.value.elts):
                    if _is_self_attr(sub, attr):
                        return value
    return None


def _is_self_attr(node: ast.expr, attr: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name)
            and node.value.id == "self")


def _calls_super_init(init: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
               for n in ast.walk(init))


_UNRESOLVED = "unresolved"


def _attribute_class(sources: _Sources, chain, attr: str):
    """The class `self.<attr>` holds after construction: (module, ClassDef), None when never assigned
    (the attribute does not exist), or (_UNRESOLVED, text) when assigned from something not read here.

    The nearest `__init__` that assigns it wins; an `__init__` that does not call a base's `__init__`
    ends the search (the bases' assignments never run)."""
    for mod, cls in chain:
        init = _init_of(cls)
        if init is None:
            continue
        value = _self_assignment(init, attr)
        if value is not None:
            return _class_of(sources, chain, mod, value)
        if not _calls_super_init(init):
            return None
    return None


def _class_of(sources: _Sources, chain, mod: str, value: ast.expr):
    if isinstance(value, ast.IfExp):  # `X(...) if cond else Y(...)`: the first branch (the usual one)
        value = value.body
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        found = sources.find_class(mod, value.func.id) or _parameter_default(sources, chain, value.func.id)
        return found if found is not None else (_UNRESOLVED, ast.unparse(value.func))
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and _is_self_attr(value.func, value.func.attr):
        name = value.func.attr  # `self.model = self._init_model(...)`: what the method returns
        for method_mod, owner in chain:
            method = _method(owner, name)
            if method is None:
                continue
            for node in ast.walk(method):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Call) \
                        and isinstance(node.value.func, ast.Name):
                    found = sources.find_class(method_mod, node.value.func.id)
                    if found is not None:
                        return found
            break
    return (_UNRESOLVED, ast.unparse(value)[:80])


def _parameter_default(sources: _Sources, chain, name: str):
    """`self.model = language_model_cls(...)` with `language_model_cls=Qwen3LLMModel` a parameter of
    `__init__`: the default of the most derived `__init__` that declares it (it passes its own down)."""
    for mod, cls in chain:
        init = _init_of(cls)
        if init is None:
            continue
        params = init.args.args + init.args.kwonlyargs
        defaults = dict(zip([a.arg for a in init.args.args][-len(init.args.defaults):] if init.args.defaults else [],
                            init.args.defaults))
        defaults.update({a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d is not None})
        if name in [a.arg for a in params] and isinstance(defaults.get(name), ast.Name):
            return sources.find_class(mod, defaults[name].id)
    return None


def _language_model_paths(sources: _Sources) -> dict[str, tuple[str, ...]]:
    """`resolve_language_model`'s exceptions: class name -> attribute path (Qwen3-Omni: thinker.model)."""
    module = sources.module(RUNNER_MODULE)
    if module is None or module.tree is None:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.FunctionDef) and node.name == "resolve_language_model":
            for branch in ast.walk(node):
                if isinstance(branch, ast.If) and isinstance(branch.test, ast.Compare) \
                        and isinstance(branch.test.comparators[0], ast.Constant) and branch.body \
                        and isinstance(branch.body[0], ast.Return):
                    path = ast.unparse(branch.body[0].value).split(".")[1:]
                    out[str(branch.test.comparators[0].value)] = tuple(path)
    return out


def draft_only_classes(sources: _Sources) -> dict[str, str]:
    """Classes SGLang loads only for a speculative draft worker, which never builds the piecewise
    runner (`can_run_piecewise_cuda_graph` returns False for it): the names `ModelConfig` substitutes
    under `is_draft_model`, with the line that does it."""
    module = sources.module(MODEL_CONFIG_MODULE)
    if module is None or module.tree is None:
        return {}
    out: dict[str, str] = {}
    where = MODEL_CONFIG_MODULE.replace(".", "/") + ".py"
    for node in ast.walk(module.tree):
        if isinstance(node, ast.If) and "is_draft_model" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str) and "architectures" in ast.unparse(stmt.targets[0]):
                    out.setdefault(stmt.value.value, f"{where}:{stmt.lineno}")
    return out


DRAFT_MODULE_SUFFIXES = ("_nextn", "_mtp", "_eagle", "_eagle3")


def _has_forward(cls: ast.ClassDef) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward" for n in cls.body)


def _forward_of(sources: _Sources, found) -> str:
    """`module:Class.forward` of the compiled class itself when it or an SGLang base defines forward
    ("" if none). The receiver is the class, not the base that defines forward: Qwen3Model inherits
    Qwen2Model.forward, and its layers are the Qwen3DecoderLayer its `__init__` passes down."""
    mod, cls = found
    return f"{mod}:{cls.name}.forward" if any(_has_forward(c) for _, c in sources.mro(*found)) else ""


def _defines(chain, attr: str) -> bool:
    """Some method of the class or its SGLang bases assigns `self.<attr>` (tuple targets included),
    or a class body defines it: `self.layers, self.start_layer, self.end_layer = make_layers(...)`."""
    for _, cls in chain:
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == attr:
                return True  # a property
            names = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
            if any(isinstance(n, ast.Name) and n.id == attr for n in names):
                return True  # a class attribute
        for node in ast.walk(cls):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                if any(_is_self_attr(t, attr) for t in [target, *getattr(target, "elts", ())]):
                    return True
    return False


def resolve(sources: _Sources, module: str, name: str, draft: dict[str, str] | None = None,
            paths: dict[str, tuple[str, ...]] | None = None,
            runner: runner_facts.RunnerFacts = runner_facts.DEFAULT) -> ModelEntry:
    """The forward the piecewise runner compiles for this class, or why it compiles none.

    The runner first sets `model.model = resolve_language_model(model)` (`model.model`, or the path
    that function names) and then compiles `getattr(model, "language_model", model).model`
    (`model_runner.py` `init_piecewise_cuda_graphs`, `piecewise_cuda_graph_runner.py`)."""
    found = sources.find_class(module, name)
    if found is None:
        return ModelEntry(name, module, "", f"class {name} not found in {module} or its imports", False)
    chain = sources.mro(*found)
    takes_quant = any("quant_config" in [a.arg for a in init.args.args + init.args.kwonlyargs]
                      for _, c in chain if (init := _init_of(c)) is not None)
    draft = draft or {}
    if name in draft or module.rsplit(".", 1)[-1].endswith(DRAFT_MODULE_SUFFIXES):
        why = (f"ModelConfig substitutes it for draft models only ({draft[name]})" if name in draft
               else f"registered in a draft module ({module.rsplit('.', 1)[-1]}.py)")
        return ModelEntry(name, module, "", f"draft-only class: {why}", takes_quant,
                          not_compiled=f"a speculative draft class ({why}); {runner.draft}")
    path = (paths or {}).get(name, ("model",))
    holder, how = found, []
    for attr in path:  # model.model must exist: the runner assigns it before anything else
        held = _attribute_class(sources, sources.mro(*holder), attr) if holder[0] != _UNRESOLVED else holder
        if held is None:
            return ModelEntry(name, module, "", f"no `.{'.'.join(path)}`", takes_quant,
                              not_compiled=f"{name} has no `.{'.'.join(path)}`: {runner.no_model}")
        how.append(f"self.{attr} = {held[1] if held[0] == _UNRESOLVED else held[1].name}")
        holder = held
    language = _attribute_class(sources, chain, "language_model")
    if language is not None:  # compiled: model.language_model.model
        if language[0] == _UNRESOLVED:
            return ModelEntry(name, module, "", f"self.language_model = {language[1]} (not read)", takes_quant)
        compiled = _attribute_class(sources, sources.mro(*language), "model")
        how = [f"self.language_model = {language[1].name}"] + ([f".model = {compiled[1].name if compiled[0] != _UNRESOLVED else compiled[1]}"]
                                                                if compiled else [])
        if compiled is None:
            return ModelEntry(name, module, "", "no `.language_model.model`", takes_quant,
                              not_compiled=f"{name}.language_model ({language[1].name}) has no `.model`: the runner "
                                           "raises AttributeError when it compiles `language_model.model`")
        holder = compiled
    if holder[0] == _UNRESOLVED:
        return ModelEntry(name, module, "", f"{' -> '.join(how)}: not read statically", takes_quant)
    if not _defines(sources.mro(*holder), "layers"):  # the runner reads the compiled module's `.layers`
        return ModelEntry(name, module, "", f"{' -> '.join(how)}: no `.layers`", takes_quant,
                          not_compiled=f"{holder[1].name}, the module the runner compiles for {name}, has no "
                                       f"`.layers`: {runner.no_layers}")
    entry = _forward_of(sources, holder)
    if not entry:
        return ModelEntry(name, module, "", f"{' -> '.join(how)}: no forward defined", takes_quant)
    return ModelEntry(name, module, entry, f"compiled module ({' -> '.join(how)})", takes_quant)


def registered_models(sglang_root: Path, jobs: int = 1, cache=None) -> list[ModelEntry]:
    """Every class named in an `EntryClass` of `sglang/srt/models/*.py`, with its compiled forward.

    `sglang_root` is the folder holding the `sglang` package. With `jobs` > 1 the model files are
    read in that many forked processes (every other file each): parsing them is about 2 s of a
    census's start, before its workers have anything to walk. The list is the same either way.
    With `cache` (the scan's SummaryCache) the list is stored with the digest of every file read for
    it, and given back while none of them, nor the set of model files, has changed: a census of one
    `--model` does not parse all the others again.
    """
    files = sorted((sglang_root / MODELS_PACKAGE.replace(".", "/")).glob("*.py"))
    name = f"census-models\0{sglang_root}\0{_OWN_DIGEST}"
    stored = cache.load_blob(name) if cache is not None else None
    if _still_valid(stored, files):
        return [ModelEntry(**entry) for entry in stored["entries"]]
    if jobs > 1 and len(files) > 1 and "fork" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("fork")  # the children need nothing but this module
        with ProcessPoolExecutor(jobs, mp_context=context) as pool:
            parts = list(pool.map(_registered_in, [sglang_root] * jobs, [files[i::jobs] for i in range(jobs)]))
    else:
        parts = [_registered_in(sglang_root, files)]
    by_file = {path: entries for part, _ in parts for path, entries in part}
    found = [entry for path in files for entry in by_file.get(path.name, [])]
    if cache is not None:
        read = {path: digest for _, part_read in parts for path, digest in part_read.items()}
        cache.store_blob(name, {"listing": [f.name for f in files], "files": read,
                                "entries": [asdict(entry) for entry in found]})
    return found


_OWN_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]  # a new reader reads again


def _still_valid(stored: Any, files: list[Path]) -> bool:
    """A stored model list whose model files are the same set and whose every read file has the same
    bytes (and every file it found absent is still absent)."""
    if not isinstance(stored, dict) or set(stored) != {"listing", "files", "entries"}:
        return False
    if stored["listing"] != [f.name for f in files]:
        return False
    for path, digest in stored["files"].items():
        try:
            now = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            now = None
        if now != digest:
            return False
    return True


def _not_listed(module: str, why: str) -> ModelEntry:
    """What a model file registers that cannot be listed: an entry with no class name, which the census
    puts in its errors (census/run.py)."""
    return ModelEntry("", module, "", why, False)


def _registered_in(sglang_root: Path, files: list[Path]) -> tuple[list[tuple[str, list[ModelEntry]]], dict]:
    """The registered classes of these model files, per file (their bases are read where they are),
    and the digests of every file read for them."""
    sources = _Sources(sglang_root)
    draft, paths, runner = draft_only_classes(sources), _language_model_paths(sources), runner_facts.read(sources)
    out: list[tuple[str, list[ModelEntry]]] = []
    for path in files:
        module = f"{MODELS_PACKAGE}.{path.stem}"
        read = sources.module(module)  # one parse serves the EntryClass list and the class lookups
        if read is None and module in sources.problems:  # its classes are unknown: said, not dropped
            out.append((path.name, [_not_listed(module, f"{path.name} could not be parsed ({sources.problems[module]}): "
                                                        "the classes it registers are not listed")]))
            continue
        names, unread = _registered(read.tree if read is not None else None)
        out.append((path.name, [resolve(sources, module, name, draft, paths, runner) for name in names]
                    + [_not_listed(module, f"{path.name} registers `{item}` in EntryClass, which is not read "
                                           "statically: what it registers is not listed") for item in unread]))
    return out, sources.read

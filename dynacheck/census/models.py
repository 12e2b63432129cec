"""The model classes SGLang registers, read from `sglang/srt/models/*.py` without importing them.

Each file's `EntryClass = X` or `EntryClass = [X, Y]` names the classes; the forward the piecewise
runner compiles is the inner model's (`self.model = DeepseekV2Model(...)` in the class's `__init__`
or a base's), falling back to the class's own forward. Which one was used is recorded.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

MODELS_PACKAGE = "sglang.srt.models"


@dataclass(frozen=True)
class ModelEntry:
    """One registered model class and the forward a census walks from."""

    name: str  # the registered class, e.g. GlmMoeDsaForCausalLM
    module: str  # where it is registered
    entry: str  # module:Class.forward walked from ("" when unresolved)
    how: str  # "inner model (self.model = X)" | "own forward" | why unresolved
    takes_quant_config: bool  # its __init__ (or a base's) accepts quant_config


@dataclass
class _Module:
    name: str
    classes: dict[str, ast.ClassDef]
    imports: dict[str, str]  # local name -> "module:Name"


def _read(path: Path, name: str) -> _Module | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imports: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return _Module(name, classes, imports)


def _registered(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass"
                                                for t in node.targets):
            value = node.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            names = [i.id for i in items if isinstance(i, ast.Name)]
    return names


class _Sources:
    """Modules of the SGLang tree, read on demand (ast), and class lookup through imports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._modules: dict[str, _Module | None] = {}

    def module(self, name: str) -> _Module | None:
        if name not in self._modules:
            path = self.root / (name.replace(".", "/") + ".py")
            self._modules[name] = _read(path, name) if path.is_file() else None
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
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _inner_model(init: ast.FunctionDef) -> str | None:
    """The class name in `self.model = X(...)` inside `__init__`, if any."""
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and target.attr == "model"
                        and isinstance(target.value, ast.Name) and target.value.id == "self"):
                    func = node.value.func
                    if isinstance(func, ast.Name):
                        return func.id
    return None


def _has_forward(cls: ast.ClassDef) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward" for n in cls.body)


def resolve(sources: _Sources, module: str, name: str) -> ModelEntry:
    found = sources.find_class(module, name)
    if found is None:
        return ModelEntry(name, module, "", f"class {name} not found in {module} or its imports", False)
    chain = sources.mro(*found)
    takes_quant = any("quant_config" in [a.arg for a in init.args.args + init.args.kwonlyargs]
                      for _, c in chain if (init := _init_of(c)) is not None)
    for mod, cls in chain:
        init = _init_of(cls)
        if init is None:
            continue
        inner = _inner_model(init)
        if inner:
            target = sources.find_class(mod, inner)
            if target is not None:
                return ModelEntry(name, module, f"{target[0]}:{inner}.forward",
                                  f"inner model (self.model = {inner}(...) in {cls.name}.__init__)", takes_quant)
        break  # the nearest __init__ decides what self.model is
    for mod, cls in chain:
        if _has_forward(cls):
            return ModelEntry(name, module, f"{mod}:{cls.name}.forward", "own forward (no self.model found)",
                              takes_quant)
    return ModelEntry(name, module, "", "no forward defined in the class or its SGLang bases", takes_quant)


def registered_models(sglang_root: Path) -> list[ModelEntry]:
    """Every class named in an `EntryClass` of `sglang/srt/models/*.py`, with its compiled forward.

    `sglang_root` is the folder holding the `sglang` package.
    """
    models_dir = sglang_root / MODELS_PACKAGE.replace(".", "/")
    sources = _Sources(sglang_root)
    entries: list[ModelEntry] = []
    for path in sorted(models_dir.glob("*.py")):
        module = f"{MODELS_PACKAGE}.{path.stem}"
        for name in _registered(path):
            entries.append(resolve(sources, module, name))
    return entries

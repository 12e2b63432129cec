"""A short proof that no model class can fail the start-up check on a deployment, before walking any.

`startup.model_unbuildable` walks down from one model class through every layer its constructors build,
and a census asks it for ~110 classes on each quantized deployment: on an FP8 or ModelOpt NVFP4
checkpoint, where no class fails, that was a quarter of a warm census. Every failure it can report
comes from one place, `startup._failing_assert`: a constructor's unguarded `assert self.A is not None`
(SGLang's linear layers, `layers/linear.py:216, 265, 330, 450`) where each assignment of `self.A` in the
instance's constructors gives None once the parameters they read are bound by where they came from
(the loader's config, a literal None, or nothing known). So when, for every class that has such an
assert (and every subclass of one, which runs it), some assignment of `self.A` surely runs and surely
gives something other than None under *every* such binding, no model class can fail, and the walk is
not needed. `Fp8Config.get_quant_method` gives a method to every `LinearBase` (`quantization/fp8.py:200-208`),
so the linear layers' asserts all hold; `Mxfp4Config`'s gives None (`mxfp4.py:268-285`): no proof,
and the walk runs as before.

Reading every class of the scanned trees would be a parse of all of them, so the classes are found in
the text first, a superset: files with an `assert self.A is not None` whose enclosing `def` may be an
`__init__` (a line the backward scan cannot read as a block header keeps the file), then the classes
whose bases name one of those classes, or a name an import gives one (`from m import X as Y`), to a fixed
point, kept when a module that imports theirs, transitively (the text's import statements, function-local
ones included), is the model's or the config's: the walk down names classes through imports only. Only
those files are summarized. A name bound by a plain assignment at module level or one block in (`Base =
layers.ReplicatedLinear`, under a `try:` too) is an alias like an import's; a class whose bases hold a call (`class A(make_base())`) may subclass anything, so
it is read too (as itself: the evaluator's MRO decides what it runs, as in the walk down). Not followed: a
submodule reached as an attribute of its package with no import of it.

Each class is read as an instance of exactly that class (each subclass as its own) with no allocation,
in an evaluator of its own per assignment read: a reading that never looked at an attribute of that
instance gives what it gives for any instance, so `_none_everywhere`'s own steps apply; one that did
proves something only when it surely runs and surely gives a value other than None (an instance that
knows more narrows that value, never widens it). That evaluator reads a function's returns with the pairs
of returns that together cover their outer guards (partial_calls._covering), which the walk does not.
"""

from __future__ import annotations

import re
from itertools import product
from weakref import WeakKeyDictionary

from dynacheck.static import startup
from dynacheck.static.ir import names_in
from dynacheck.static.partial import PartialEvaluator
from dynacheck.static.partial_values import Ref
from dynacheck.static.value_types import NONE_VALUE, Value

MAX_VARIABLES = 5  # constructor parameters one attribute's assignments read: 3**5 bindings
_ASSERT = re.compile(rb"assert[\s(\\]*self\.\w+[\s\\)]+is[\s\\]+not[\s\\]+None")
# one pass over a file (prefixed with a newline: a literal first character keeps the search fast):
# `from .m import (a, b as c)` / `from m import a` (to the end of the line) / `import a.b as c, d` /
# `class Name(bases):` with its indent
_STATEMENTS = re.compile(rb"\n([ \t]*)(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*)"
                         rb"|import[ \t]+([^\n#;]*)|class[ \t]+(\w+)[ \t]*\(([^)]*)\))")
# `Name = a.b.Name` at module level, or one block in (`try:`/`if`): another name for a class, as an import's
# `as` is (a pass of its own: at every line's indent it took four times the statements' time)
_ALIAS = re.compile(rb"\n(?:    |\t)?([A-Za-z_]\w*)[ \t]*=[ \t]*([A-Za-z_][\w.]*)[ \t]*(?:#[^\n]*)?(?=\n|\Z)")
_BLOCKS = ("if", "elif", "else", "for", "while", "with", "try", "except", "finally", "async", "match", "case")
_UNBOUND = object()
_TEXT: WeakKeyDictionary = WeakKeyDictionary()  # locator -> _TextIndex


def no_layer_fails(ev, config: Value, module: str) -> bool:
    """Whether no instance of a scanned class that the code of `module` (a model class's) can name can
    fail its constructor's `assert self.A is not None` with `config` as the loader's quant config (so
    no model class of `module` fails the start-up check). Kept in the evaluator's site memo with the
    facts it read, as model_unbuildable is."""
    return startup.pinned_memo(ev, ("startup-refute", module), lambda: _proved_or_not(ev, config, module))


def _proved_or_not(ev, config: Value, module: str) -> bool:
    try:
        return _proved(ev, config, module)
    except (RecursionError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return False  # a reading that fails proves nothing: the walk down runs, as without the proof


def _proved(ev, config: Value, module: str) -> bool:
    """The classes to read are those of the modules the model's module and the config's import, as the
    text says (a superset of what the start-up walk can name: it resolves names through imports only)."""
    text = _text_index(ev.index.locator)
    roots = {module, config.module} | {target.partition(":")[0] for target in ev.pins.values()}
    asserting: list[Value] = []
    for name in text.asserting:
        if not roots & text.importers(name):
            continue
        summary = ev.index.module(name)
        if summary is None or summary.error:
            return False
        for qualname in summary.classes:
            init = ev._own_init(Value("cls", name, qualname))
            if init is not None and any(not guards and startup._checked_attribute(test) is not None
                                        for test, _, guards in init.asserts):
                asserting.append(Value("cls", name, qualname))
    subclasses = []
    for name, qualname, nested in text.subclasses(frozenset(cls.name.rpartition(".")[2] for cls in asserting)):
        if roots & text.importers(name):
            if nested:
                return False  # it cannot be named as a module's class
            subclasses.append((name, qualname))
    classes = asserting + [Value("cls", name, qualname) for name, qualname in subclasses]
    return all(startup.pinned_memo(ev, ("startup-holds", cls.module, cls.name),
                                   lambda cls=cls: _holds(ev, cls, config))
               for cls in dict.fromkeys(classes))


def _holds(ev, cls: Value, config: Value) -> bool:
    """Every checked attribute of an instance of `cls` (its constructors' unguarded asserts) surely gets
    a value other than None, under every binding of the parameters its assignments read."""
    inst = Value("inst", cls.module, cls.name)
    chain = startup._init_chain(ev, inst)
    attrs = {attr for owner in chain for test, _, guards in ev._own_init(owner).asserts
             if not guards and (attr := startup._checked_attribute(test)) is not None}
    return all(_attribute_holds(ev, inst, chain, attr, config) for attr in sorted(attrs))


def _attribute_holds(ev, inst: Value, chain: list[Value], attr: str, config: Value) -> bool:
    """`startup._none_everywhere` is False for every instance of `inst`'s class, under every binding of the
    parameters the assignments of `self.attr` read to the loader's config, None, or nothing known."""
    assignments = []  # (owner, its __init__, value, guards, the parameters they read)
    for owner in chain:
        init = ev._own_init(owner)
        for value, guards in zip(init.self_assigns.get(attr, ()), init.self_assign_guards.get(attr, ())):
            read = names_in([value] + [t for t, _, _ in guards]) & set(init.params[1:])
            assignments.append((owner, init, value, guards, {(id(init), name) for name in read}))
    variables = sorted({v for *_, read in assignments for v in read})
    if not assignments or len(variables) > MAX_VARIABLES:
        return False
    for choice in product((config, NONE_VALUE, _UNBOUND), repeat=len(variables)):
        binding = dict(zip(variables, choice))
        if not _none_everywhere_fails(ev, inst, assignments, binding, config):
            return False
    return True


def _none_everywhere_fails(ev, inst: Value, assignments: list, binding: dict, config: Value) -> bool:
    """`startup._none_everywhere` read step by step for an instance of the class with no allocation: an
    assignment whose reading never looked at the instance gives what it gives for any instance; one that
    did proves something only when it surely runs and surely gives a value other than None (an instance
    that knows more narrows that value, never widens it)."""
    for owner, init, value, guards, read in assignments:
        bound = tuple((name, (binding[(key, name)],)) for key, name in sorted(read)
                      if binding[(key, name)] is not _UNBOUND)
        if not any(values[0] is config for _, values in bound):
            return True  # no parameter from the model's quant_config: the check gives up
        partial = _ProofPartial(ev, inst)
        try:
            scope = startup._init_scope(ev, inst, owner, init, bound)
            reachable, conditions = partial.guards(guards, scope) if guards else (True, ())
            result = partial.const(value, scope, 0) if reachable and not conditions else None
        finally:
            ev.partial.reads |= partial.reads  # what the proof read is what its memo entry read
            ev.partial.architecture_tests |= partial.architecture_tests
        if partial.touched:
            return result is not None and result.values is not None and not result.opens \
                and bool(result.values) and None not in set(result.values)
        if not reachable:
            continue
        if conditions or result.values is None or result.opens or set(result.values) != {None}:
            return True
    return False  # every assignment gives None (the check claims), or none runs (no claim, but no proof)


class _ProofPartial(PartialEvaluator):
    """A partial evaluator of its own (its memo holds nothing read for another assignment) that notes
    when the reading looks at an attribute of the instance being proved, and reads a function's returns
    with the pairs that together cover their guards (partial_calls._covering)."""

    covering = True

    def __init__(self, ev, inst: Value) -> None:
        super().__init__(ev, ev.partial.dep)
        self.watched = (inst.module, inst.name)
        self.touched = False

    def _member(self, value, attr, scope, depth):
        if isinstance(value, Ref) and value.value.kind == "inst" and value.value.expr is None \
                and (value.value.module, value.value.name) == self.watched:
            self.touched = True
        return super()._member(value, attr, scope, depth)


# ----- the classes to read, found in the text ---------------------------------------------------------

def _text_index(locator) -> "_TextIndex":
    """What the text of the trees says, read once per locator (the trees do not change under a session)."""
    index = _TEXT.get(locator)
    if index is None:
        index = _TEXT[locator] = _TextIndex(locator)
    return index


class _TextIndex:
    """The modules that may assert in an `__init__`, every class header that names bases (its module,
    name, whether it is nested, the names in its bases), what each module imports, and the names an
    import gives another name (`X as Y`)."""

    def __init__(self, locator) -> None:
        self.asserting: list[str] = []
        self.headers: list[tuple[str, str, bool, frozenset[str], bool]] = []  # ..., bases hold a call
        self.aliases: dict[str, set[str]] = {}
        self.imports: dict[str, set[str]] = {}
        self._closures: dict[str, frozenset] = {}  # module -> importers(module)
        self._reverse: dict[str, set[str]] | None = None  # module -> the modules that import it
        self._subclasses: dict[frozenset, list] = {}
        for path in locator.iter_files():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            module = locator.module_name_of(path)
            if not module:
                continue
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            if b"assert" in data and _asserts_in_init(data):
                self.asserting.append(module)
            self.imports[module] = self._read(module, b"\n" + data, package)

    def _read(self, module: str, data: bytes, package: str) -> set[str]:
        """The file's class headers (kept), and every module an import statement may load: `from a.b
        import c` names `a.b` and `a.b.c` (c may be a submodule), relative ones resolved against the
        package (reachable adds each parent package)."""
        out: set[str] = set()
        for target, value in _ALIAS.findall(data):  # `Base = layers.Linear`: `Base` names what `Linear` names
            self.aliases.setdefault(value.decode().rpartition(".")[2], set()).add(target.decode())
        for indent, source, names, plain, cls, bases in _STATEMENTS.findall(data):
            if cls:
                self.headers.append((module, cls.decode(), bool(indent),
                                     frozenset(n.decode() for n in re.findall(rb"\w+", bases)), b"(" in bases))
            elif plain:  # `import a.b as c, d`
                out.update(item.split()[0].decode() for item in plain.split(b",") if item.split())
            elif source or names:
                text = source.decode()
                dots = len(text) - len(text.lstrip("."))
                if dots:
                    parts = package.split(".") if package else []
                    text = ".".join(parts[: len(parts) - dots + 1] + ([text[dots:]] if text[dots:] else []))
                out.add(text)
                for item in names.strip(b"()").replace(b"\\", b" ").split(b","):
                    words = item.split()
                    if not words:
                        continue
                    out.add(f"{text}.{words[0].decode()}")
                    if len(words) == 3 and words[1] == b"as":
                        self.aliases.setdefault(words[0].decode(), set()).add(words[2].decode())
        out.discard("")
        return out

    def importers(self, module: str) -> frozenset[str]:
        """The modules that import `module`, transitively, and itself: the code that can name its classes."""
        if self._reverse is None:
            self._reverse = {}
            for name, imported in self.imports.items():
                for target in imported:
                    while target:  # importing `a.b.c` runs `a` and `a.b` first
                        self._reverse.setdefault(target, set()).add(name)
                        target = target.rpartition(".")[0]
        if module not in self._closures:
            seen, todo = set(), [module]
            while todo:
                name = todo.pop()
                if name not in seen:
                    seen.add(name)
                    todo.extend(self._reverse.get(name, ()))
            self._closures[module] = frozenset(seen)
        return self._closures[module]

    def subclasses(self, names: frozenset[str]) -> list[tuple[str, str, bool]]:
        """(module, class, whether it is nested) of each class whose bases name one of `names` (or a
        name an import or an assignment gives one, or such a class), to a fixed point, and of each class
        whose bases hold a call (it may subclass any of them)."""
        if names not in self._subclasses:
            known, found = set(names), {}
            while True:
                known |= {alias for name in list(known) for alias in self.aliases.get(name, ())}
                grown = False
                for module, name, nested, bases, called in self.headers:
                    if (called or bases & known) and (module, name) not in found:
                        found[(module, name)] = nested
                        grown |= name not in known
                        known.add(name)
                if not grown:
                    break
            self._subclasses[names] = [(module, name, nested) for (module, name), nested in found.items()]
        return self._subclasses[names]


def _asserts_in_init(data: bytes) -> bool:
    """Whether some `assert self.A is not None` of the file may be in an `__init__`."""
    lines = None
    for hit in _ASSERT.finditer(data):
        if lines is None:
            lines = data.split(b"\n")
        if _maybe_in_init(lines, data.count(b"\n", 0, hit.start())):
            return True
    return False


def _maybe_in_init(lines: list[bytes], row: int) -> bool:
    """Scan back from the assert's line to the `def` it sits in: True when that is `__init__`, or when
    a less indented line on the way is not a block header (a string or a continuation line: unsure)."""
    line = lines[row]
    indent = len(line) - len(line.lstrip())
    at = row
    while at > 0:
        at -= 1
        earlier = lines[at]
        text = earlier.strip()
        if not text or text.startswith(b"#"):
            continue
        depth = len(earlier) - len(earlier.lstrip())
        if depth >= indent:
            continue
        if text.startswith((b")", b"]")):  # the last line of a header split over lines (black's `):`)
            at = _opening(lines, at, depth)
            if at < 0:
                return True
            text = lines[at].strip()
        if text.startswith((b"def ", b"async def ")):
            return text.split(b"(")[0].split()[-1] == b"__init__"
        if text.startswith(b"class "):
            return False  # in a class body, outside any method
        word = text.split()[0].split(b":")[0].split(b"(")[0].decode("latin-1")
        if word not in _BLOCKS or not text.endswith(b":"):
            return True
        indent = depth
    return False  # module level


def _opening(lines: list[bytes], at: int, depth: int) -> int:
    """The line of the same indent above `at` that a multi-line header starts on, or -1."""
    for row in range(at - 1, -1, -1):
        text = lines[row].strip()
        if text and not text.startswith(b"#") and len(lines[row]) - len(lines[row].lstrip()) <= depth:
            return row if len(lines[row]) - len(lines[row].lstrip()) == depth else -1
    return -1

"""Deferred top-level bodies (lazy_bodies.py): a lookup summarizes exactly what an eager parse would."""

from __future__ import annotations

import dataclasses
import pickle
import textwrap
from pathlib import Path

import pytest

from dynacheck.static.cache import SummaryCache
from dynacheck.static.lazy_bodies import Defs
from dynacheck.static.summary import summarize

SOURCE = textwrap.dedent('''\
    import os
    from .sibling import helper

    LIMIT = 4


    @decorate(1)
    def probe(path):
        """Reads the flag."""
        value = os.environ.get("FLAG")
        if value:
            return helper(path)
        return None


    class Engine(Base, metaclass=Meta):
        @staticmethod
        def build(x):
            out = make(x)
            return out

        def run(self, x):
            def inner(y):
                return probe(y)
            return inner(x)


    def tail(a,
             b): return a


    def short():
        return 1


    def binds():
        global LIMIT
        LIMIT = 8
        return LIMIT


    def with_fake(x):
        lib.register_fake(x)
        return x
        pass


    if os.environ.get("A"):
        def variant():
            return 1
            pass
            pass
    else:
        def variant():
            return 2
            pass
            pass
''')


def _plain(summary) -> dict:
    """Everything a summary says, with deferred bodies summarized, as plain data."""
    return {
        "functions": {k: dataclasses.asdict(v) for k, v in sorted(summary.functions.items())},
        "classes": {k: dataclasses.asdict(v) for k, v in sorted(summary.classes.items())},
        "bindings": summary.bindings, "fakes": summary.fakes, "string_fakes": summary.string_fakes,
        "exports": summary.exports, "star_imports": summary.star_imports, "error": summary.error,
    }


def test_only_plain_long_top_level_bodies_are_deferred():
    summary = summarize(SOURCE, "pkg.mod", "mod.py", False)
    # a one-line or header-tail body, a `global`, a register_fake and names defined twice stay eager
    assert set(summary.pending) == {"probe", "Engine"}
    assert isinstance(summary.functions, Defs)


def test_a_lookup_summarizes_the_body_an_eager_parse_gives():
    eager = summarize(SOURCE, "pkg.mod", "mod.py", False, defer=False)
    lazy = summarize(SOURCE, "pkg.mod", "mod.py", False)
    assert eager.pending == {}
    assert lazy.functions.get("Engine.run.<locals>.inner") is not None  # fills `Engine` only
    assert set(lazy.pending) == {"probe"}
    assert dataclasses.asdict(lazy.functions["Engine.run"]) == dataclasses.asdict(eager.functions["Engine.run"])
    assert lazy.classes["Engine"].methods == {"build": "Engine.build", "run": "Engine.run"}
    assert _plain(lazy) == _plain(eager)  # iterating summarizes the rest
    assert lazy.pending == {}


def test_line_numbers_of_a_deferred_body_are_the_files():
    lazy = summarize(SOURCE, "pkg.mod", "mod.py", False)
    probe = lazy.functions["probe"]
    assert probe.line == SOURCE.splitlines().index("def probe(path):") + 1
    call_lines = {c.line for c in probe.calls}
    assert SOURCE.splitlines().index("        return helper(path)") + 1 in call_lines


def test_decorated_first_statement_of_a_class_body_is_blanked_whole():
    source = "class A(ABC):\n    @abstractmethod\n    def f(self):\n        '''doc'''\n        return 1\n"
    lazy = summarize(source, "m", "m.py", False)
    assert lazy.error == "" and lazy.pending == {"A": (1, 5)}
    assert lazy.classes["A"].methods == {"f": "A.f"}


def test_the_cache_stores_bodies_filled_after_the_first_store(tmp_path: Path):
    data = SOURCE.encode()
    first = SummaryCache(tmp_path)
    summary = first.summary(tmp_path / "mod.py", "pkg.mod", False, data)
    assert first.parsed == 1 and set(summary.pending) == {"probe", "Engine"}
    summary.functions.get("probe")
    first.flush()

    second = SummaryCache(tmp_path)
    again = second.summary(tmp_path / "mod.py", "pkg.mod", False, data)
    assert second.hits == 1 and set(again.pending) == {"Engine"}  # probe came from the cache, done
    assert "probe" in dict(dict.items(again.functions))
    assert again.classes.get("Engine").methods  # the rest is still read from the file's text
    assert _plain(again) == _plain(summarize(SOURCE, "pkg.mod", "mod.py", False, defer=False))


def test_a_change_to_the_summarizer_s_code_is_a_new_cache_key(tmp_path: Path, monkeypatch):
    """Entries of one SUMMARY_VERSION made by other summarizer code (an experiment that used the
    number first) were read back as current: `for i, layer in enumerate(...)` kept its old shape."""
    from dynacheck.static import cache

    data = SOURCE.encode()
    SummaryCache(tmp_path).summary(tmp_path / "mod.py", "pkg.mod", False, data)
    same = SummaryCache(tmp_path)
    same.summary(tmp_path / "mod.py", "pkg.mod", False, data)
    assert same.hits == 1
    monkeypatch.setattr(cache, "_SUMMARIZER", "another summarizer")
    changed = SummaryCache(tmp_path)
    changed.summary(tmp_path / "mod.py", "pkg.mod", False, data)
    assert changed.hits == 0 and changed.parsed == 1


def test_a_pickled_summary_carries_no_source_text():
    summary = summarize(SOURCE, "pkg.mod", "mod.py", False)
    blob = pickle.dumps(summary)
    assert b"Reads the flag" not in blob
    loaded = pickle.loads(blob)
    assert type(loaded.functions) is dict and set(loaded.pending) == {"probe", "Engine"}


def test_a_body_without_its_text_is_reported_not_raised():
    loaded = pickle.loads(pickle.dumps(summarize(SOURCE, "pkg.mod", "mod.py", False)))
    loaded.attach_source("")  # a text that no longer holds the body
    assert loaded.functions.get("probe") is not None  # the skeleton's entry stands
    assert loaded.body_errors and loaded.body_errors[0].startswith("probe:")


@pytest.mark.wheels
@pytest.mark.slow
def test_deferred_summaries_equal_eager_ones_on_a_real_tree(pinned_targets):
    """Every sixth module of the pinned FlashInfer tree (all 398 take 45 s): the same summary either way."""
    root = Path(next(t.root for t in pinned_targets if "flashinfer" in t.name))
    files = sorted(root.rglob("*.py"))[::6]
    assert len(files) > 60
    deferred = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        lazy = summarize(text, "flashinfer.x", str(path), False)
        deferred += len(lazy.pending)
        assert _plain(lazy) == _plain(summarize(text, "flashinfer.x", str(path), False, defer=False)), path
    assert deferred > 100


@pytest.mark.wheels
@pytest.mark.slow
def test_fix_readers_read_the_same_from_a_partial_parse(pinned_targets, monkeypatch):
    """The op declarations and signatures the fixes read: the same from the blanked text as from the file."""
    from dynacheck.fixes import declared, out_kernels

    root = Path(next(t.root for t in pinned_targets if "flashinfer" in t.name))
    files = [p for p in sorted(root.rglob("*.py")) if "register_custom_op" in p.read_text(errors="replace")]
    assert len(files) > 10
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    partial = [(declared.read_module(t, "m"), declared._signatures(t), declared._signature_texts(t)) for t in texts]
    sglang = Path(next(t.root for t in pinned_targets if "sglang" in t.name))
    hadamard = (sglang / "sglang/jit_kernel/hadamard.py").read_text(encoding="utf-8")
    kernels = out_kernels._factory_in(hadamard, "hadamard_transform")
    assert kernels == "_jit_hadamard_module"
    monkeypatch.setattr(declared, "bodies_naming", lambda text, words: text)
    monkeypatch.setattr(declared, "headers_only", lambda text, keep="": text)
    monkeypatch.setattr(out_kernels, "headers_only", lambda text, keep="": text)
    whole = [(declared.read_module(t, "m"), declared._signatures(t), declared._signature_texts(t)) for t in texts]
    assert partial == whole
    assert sum(len(p[0]) for p in partial) > 20  # declarations were found, not two empty answers
    assert kernels == out_kernels._factory_in(hadamard, "hadamard_transform")


@pytest.mark.parametrize("newline, indent", [("\r\n", "    "), ("\n", "\t")])
def test_crlf_and_tab_indented_bodies_defer_the_same(newline, indent):
    source = newline.join([
        "import os", "", "@register(",  "    'x')", "def f(a,", "      b=1):",
        f"{indent}'''doc'''", f"{indent}if a:", f"{indent}{indent}return os.getcwd()", f"{indent}return b", "",
        "class C:", f"{indent}def m(self):", f"{indent}{indent}x = f(1)", f"{indent}{indent}y = x", f"{indent}{indent}return y", "",
    ])
    lazy = summarize(source, "m", "m.py", False)
    assert set(lazy.pending) == {"f", "C"}
    assert _plain(lazy) == _plain(summarize(source, "m", "m.py", False, defer=False))


def test_the_word_global_in_a_comment_does_not_keep_a_body():
    source = "def rank():\n    # the global rank of this process\n    '''global rank'''\n    r = 0\n    r += 1\n    return r\n"
    assert summarize(source, "m", "m.py", False).pending == {"rank": (1, 6)}
    bound = source.replace("    r = 0\n", "    global R\n    R = 0\n    r = R\n")
    assert summarize(bound, "m", "m.py", False).pending == {}  # a real `global` binds a module name


def test_a_parse_without_node_validation_summarizes_the_same(monkeypatch):
    """parse_unvalidated skips libcst's per-node checks only: the summary is the validated parse's,
    and nodes built after it (a fix's codemod) are checked again."""
    import libcst as cst

    from dynacheck.static import summary as summary_module

    fixtures = sorted((Path(__file__).parent / "fixtures").rglob("*.py"))
    assert len(fixtures) > 20
    texts = [SOURCE] + [p.read_text(encoding="utf-8", errors="replace") for p in fixtures]
    fast = [_plain(summarize(text, "pkg.mod", "mod.py", False)) for text in texts]
    monkeypatch.setattr(summary_module, "parse_unvalidated", cst.parse_module)
    assert fast == [_plain(summarize(text, "pkg.mod", "mod.py", False)) for text in texts]
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # validation is back


def test_validation_is_restored_when_the_parse_fails():
    import libcst as cst

    from dynacheck.static.summary import parse_unvalidated

    with pytest.raises(cst.ParserSyntaxError):
        parse_unvalidated("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")

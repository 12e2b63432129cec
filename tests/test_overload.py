"""`@typing.overload` stubs never stand for the function: the implementation after them does, in the
summary (module functions, class methods), in the scan, and in Dynamo."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from dynacheck.static.scan import scan_roots
from dynacheck.static.summary import summarize

ROOT = Path(__file__).parent / "fixtures" / "overload"
STUBS = (ROOT / "ovfx" / "stubs.py").read_text()


def test_the_name_holds_the_implementation_and_the_stubs_move_aside():
    summary = summarize(STUBS, "ovfx.stubs", "stubs.py", False, defer=False)
    implementation = summary.functions["single"]
    assert not implementation.decorators and implementation.line == 31
    assert sorted(q for q in summary.functions if q.startswith("single@")) == ["single@24", "single@28"]
    assert [b.value for b in summary.bindings["single"]] == ["single@24", "single@28", "single"]
    run = summary.functions[summary.classes["Wrapper"].methods["run"]]
    assert run.qualname == "Wrapper.run" and run.line == 18 and not run.decorators


def test_a_lone_stub_and_plain_redefinitions_keep_their_first_definition():
    """Only an implementation after a stub takes the name: two plain defs (if/else variants) keep both as
    before, the second as `name@line`, and a stub after an implementation changes nothing."""
    source = textwrap.dedent('''
        from typing import overload
        if X:
            def f():
                return 1
        else:
            def f():
                return 2
        def g():
            return 1
        @overload
        def g(x: int) -> int: ...
    ''')
    summary = summarize(source, "m", "m.py", False, defer=False)
    assert summary.functions["f"].line == 4 and "f@7" in summary.functions
    assert not summary.functions["g"].decorators and "g@12" in summary.functions


@pytest.mark.parametrize("entry, chain", [
    ("ovfx.stubs:Model.forward", ["ovfx.stubs.Model.forward", "ovfx.stubs.Wrapper.run"]),
    ("ovfx.stubs:single", ["ovfx.stubs.single"]),
])
def test_the_scan_walks_the_implementation(scan_cache, entry, chain):
    """Before, the method call and the entry resolved to the first stub (`...`) and found nothing: the
    FlashInfer API census called `single_decode_with_kv_cache` safe."""
    findings = scan_roots([ROOT], [entry], cache_dir=scan_cache).findings
    assert [(f.rule, [h.function for h in f.chain]) for f in findings] == [("DC001", chain)]
    assert findings[0].site.line in (19, 32)


@pytest.mark.torch
def test_dynamo_traces_the_implementation_not_the_stub():
    """The oracle: fullgraph fails on the implementation's subprocess call for both entries."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT))
    try:
        import ovfx.stubs as stubs
    finally:
        sys.path.remove(str(ROOT))
    for fn in (stubs.Model().forward, stubs.single):
        torch._dynamo.reset()
        with pytest.raises(Exception, match="subprocess|skipped|Unsupported"):
            torch.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))

"""An API entry that calls what its caller passes is not called safe: with one argument it compiles, with
another it breaks (FlashInfer's `fi_trace(func_or_method)` and `fast_decode_plan(self, ...)`). Real Dynamo
shows both ways; the scan names the call and the argument instead of a verdict it cannot know."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest
import torch

from dynacheck.census.flashinfer_api import api_census, api_markdown
from dynacheck.model import Target
from dynacheck.static.argument_calls import problem_text, read_problem
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "argument_calls"
FILE = "argpkg/api.py"


def _depends(cache: Path, entry: str, defaults: bool = True) -> set[tuple[str, int]]:
    result = scan_roots([ROOT], [f"argpkg.api:{entry}"], cache_dir=cache, entry_defaults=defaults)
    return {(d["argument"], d["line"]) for p in result.problems if p.kind == "argument_call"
            if (d := read_problem(p.file, p.message)) is not None}


def test_a_call_of_an_argument_or_of_a_value_read_from_it_is_named(scan_cache):
    assert _depends(scan_cache, "trace") == {("func_or_method", 9)}
    assert _depends(scan_cache, "apply") == {("fn", 17)}


def test_a_method_of_the_self_a_module_level_function_takes_is_named(scan_cache):
    assert _depends(scan_cache, "plan") == {("self", 13)}


def test_data_arguments_and_defaults_are_not(scan_cache):
    """`x.contiguous()` is a method of data the caller passes; `fn=None` is bound to its default, and the
    branch that calls it is not taken."""
    assert _depends(scan_cache, "shape") == set()
    assert _depends(scan_cache, "pick") == set()


def test_only_an_entry_called_with_required_arguments_only_says_so(scan_cache):
    """A model forward's arguments are whatever the caller passes, on every call: nothing to say."""
    assert _depends(scan_cache, "trace", defaults=False) == set()


def test_the_problem_line_reads_back():
    text = problem_text(9, "hook", "argpkg.api.trace", "func_or_method")
    assert read_problem(FILE, text) == {"argument": "func_or_method", "call": "hook(...)",
                                        "function": "argpkg.api.trace", "file": FILE, "line": 9}
    assert read_problem(FILE, "something else") is None


def test_the_api_census_does_not_call_such_a_function_safe(tmp_path):
    pkg = tmp_path / "flashinfer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .api import apply, shape\n")
    (pkg / "api.py").write_text((ROOT / "argpkg" / "api.py").read_text())
    data = api_census([Target(str(tmp_path), "flashinfer-python", "0", str(tmp_path), "folder")],
                      cache_dir=tmp_path / "cache")
    by_name = {r["function"]: r for r in data["functions"]}
    apply, shape = by_name["flashinfer.api:apply"], by_name["flashinfer.api:shape"]
    assert apply["safe"] is False and apply["fatal_sites"] == 0
    assert apply["depends_on"] == [{"argument": "fn", "call": "fn(...)", "function": "flashinfer.api.apply",
                                    "file": "flashinfer/api.py", "line": 17}]
    assert shape["safe"] is True and "depends_on" not in shape
    text = api_markdown(data)
    assert "1 of 2 exported functions are safe; 0 break or could not be walked; 1 call a value" in text
    assert "| `flashinfer.api:apply` | depends | 0 | depends on `fn`: `fn(...)` (flashinfer/api.py:17) |" in text


# ----- real Dynamo: the same entry compiles with one argument and breaks with another --------------------

@pytest.fixture
def api(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    yield importlib.import_module("argpkg.api")
    for name in ("argpkg.api", "argpkg"):
        sys.modules.pop(name, None)


def _compiles(fn, *args, **kwargs) -> bool:
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="eager", fullgraph=True)(*args, **kwargs)
    except torch._dynamo.exc.Unsupported:
        return False
    return True


def _traceable(x):
    return x * 2


def _locking(x):
    threading.Lock()  # what stopped the seed's capture (subprocess.Popen.__init__)
    return x * 2


class _Hooked:
    def __init__(self, hook):
        self.hook = hook


class _Wrapper:
    def __init__(self, plan):
        self._module = _Hooked(None)
        self._module.plan = plan


def test_dynamo_compiles_or_breaks_by_the_argument(api):
    x = torch.ones(2)
    assert _compiles(api.apply, x, _traceable) and not _compiles(api.apply, x, _locking)
    assert _compiles(api.trace, _Hooked(_traceable), x=x) and not _compiles(api.trace, _Hooked(_locking), x=x)
    assert _compiles(api.plan, _Wrapper(_traceable), x) and not _compiles(api.plan, _Wrapper(_locking), x)
    assert _compiles(api.shape, x) and _compiles(api.pick, x)

"""The catalogue against the real Dynamo: every rule's fixtures compiled on the installed torch.

A firing fixture must fail under ``fullgraph=True`` with the rule's GB type (as torch's own
registry spells it), or, for rules that are not fatal under fullgraph, trace cleanly; every
quiet fixture must trace cleanly with ``fullgraph=True``. The custom backend raises as soon as
Dynamo hands it a graph, so nothing the fixtures would do at run time ever runs.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dynacheck.catalog import load_catalog  # noqa: E402
from dynacheck.static.dynamo_registry import load_registry  # noqa: E402

pytestmark = pytest.mark.torch

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
# Rules whose behaviour this CPU test cannot reach, and why.
STATIC_ONLY = {
    "DC071": "needs a built tvm-ffi kernel library",
    "DC080": "fails at CUDA graph capture, not in Dynamo; needs a GPU",
    "DC135": "a CPU build has no capture query (test_the_capture_probe_is_gb0208_where_cuda_answers stands one in)",
}
NEEDS_MODULE = {"DC062": "tvm_ffi", "DC072": "cutlass.cute", "DC063": "cudnn"}  # nvidia-cutlass-dsl, not a dev dependency
# Fatal under fullgraph without a GB id: the text Dynamo's UserError carries instead.
FULLGRAPH_USER_ERROR = {"DC112": "data-dependent", "DC118": "data-dependent expression"}
RULES = load_catalog().rules
BUILTIN_NAMED = re.compile(r"trace the (Python )?builtin `[^`]+`")


class _Traced(Exception):
    """Raised by the test backend: Dynamo produced a whole graph."""


def _refuse_to_run(gm, example_inputs):
    raise _Traced()


def _caused_by_traced(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, _Traced):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def entry_callable(entry: str):
    module_name, qual = entry.split(":")
    class_name, method = qual.split(".")
    if str(FIXTURES) not in sys.path:
        sys.path.insert(0, str(FIXTURES))
    module = importlib.import_module(module_name)
    return getattr(getattr(module, class_name)(), method)


def trace_fullgraph(fn) -> BaseException | None:
    """The exception Dynamo raises under fullgraph, or None when it traced the whole forward."""
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=_refuse_to_run, fullgraph=True)(torch.ones(4))
    except Exception as exc:  # noqa: BLE001 - we classify whatever Dynamo raised
        return None if _caused_by_traced(exc) else exc
    return None


def gb_type_of(exc: BaseException) -> str:
    return getattr(exc, "gb_type", None) or str(exc).strip().splitlines()[0]


def _skip_unreachable(rule) -> None:
    if rule.id in STATIC_ONLY:
        pytest.skip(STATIC_ONLY[rule.id])
    if rule.id in NEEDS_MODULE:
        pytest.importorskip(NEEDS_MODULE[rule.id])


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_firing_fixture_behaves_as_the_rule_says(rule):
    _skip_unreachable(rule)
    exc = trace_fullgraph(entry_callable(rule.fixture_fire))
    if not rule.outcome.fatal_under_fullgraph:
        assert exc is None, f"{rule.id} says fullgraph survives, Dynamo raised {gb_type_of(exc)!r}"
        return
    assert exc is not None, f"{rule.id} says fatal under fullgraph, but Dynamo traced it"
    if rule.id in FULLGRAPH_USER_ERROR:
        assert FULLGRAPH_USER_ERROR[rule.id] in str(exc)
        return
    if rule.boundary == "break_in_layer_loop":
        return  # fullgraph reports the inner break; GB7000 only appears without fullgraph
    expected = load_registry()[rule.outcome.gb_id].gb_type
    assert gb_type_of(exc) == expected, f"{rule.id}: expected {rule.outcome.gb_id} ({expected})"
    quoted = BUILTIN_NAMED.search(rule.outcome.explanation)
    if quoted:  # the catalogue quotes Dynamo's text for skipped builtins: it must name the same builtin
        assert quoted.group(0) in str(exc), f"{rule.id}: Dynamo did not say {quoted.group(0)!r}"


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_quiet_fixture_compiles_with_fullgraph(rule):
    _skip_unreachable(rule)
    exc = trace_fullgraph(entry_callable(rule.fixture_quiet))
    assert exc is None, f"{rule.fixture_quiet} broke: {gb_type_of(exc)!r}"


def test_item_breaks_without_fullgraph_with_its_gb_type():
    rule = load_catalog().get("DC050")
    assert not rule.outcome.fatal_under_fullgraph  # FIELD_NOTES: the read alone survives fullgraph
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(entry_callable(rule.fixture_fire))(torch.ones(4))
    reasons = " ".join(str(b.reason) for b in explanation.break_reasons)
    assert load_registry()[rule.outcome.gb_id].gb_type in reasons


def test_item_value_without_branch_survives_fullgraph():
    """FIELD_NOTES row `t.item()`: under fullgraph the call alone does not raise."""
    assert trace_fullgraph(entry_callable("rulefx.data_dependent:ItemValueOnly.forward")) is None


def test_no_break_row_compiles_with_fullgraph():
    """FIELD_NOTES row: os.environ.get, a generator and a global dict write do not break."""
    assert trace_fullgraph(entry_callable("rulefx.nobreak:NoBreak.forward")) is None


def test_the_capture_probe_is_gb0208_where_cuda_answers(monkeypatch):
    """DC135 on a CPU build: the CUDA binding behind `torch.cuda.is_current_stream_capturing` is a dummy
    that raises, so a stand-in answers False as a GPU build's does; Dynamo then refuses the torch
    function's Python bool (GB0208), as measured on the H200 (bench/results/semantics-h200.json)."""
    if not torch.cuda.is_available():
        monkeypatch.setattr(torch.cuda.graphs, "_cuda_isCurrentStreamCapturing", lambda: False)
    rule = next(r for r in RULES if r.id == "DC135")
    module = importlib.import_module("rulefx.cuda_graph") if str(FIXTURES) in sys.path else None
    if module is None:
        sys.path.insert(0, str(FIXTURES))
        module = importlib.import_module("rulefx.cuda_graph")
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as caught:
        torch.compile(module.CaptureProbeFire().forward, backend=_refuse_to_run, fullgraph=True)(torch.ones(2))
    assert load_registry()[rule.outcome.gb_id].gb_type == caught.value.gb_type == "torch.* op returned non-Tensor"

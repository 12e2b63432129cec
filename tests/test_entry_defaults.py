"""An entry called with its required arguments only (the FlashInfer API census) holds its defaults:
they decide its branches, and a parameter with a default holds no tensor. Before, every option was an
unknown tensor: `if check_nan:` was a branch on a tensor and each option's sites were unconditional,
so the census named a break no default call meets. Real Dynamo is the oracle."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "entry_defaults"


def _sites(cache: Path, defaults: bool) -> set[tuple[int, str]]:
    result = scan_roots([ROOT], ["edpkg.api:reduce"], cache_dir=cache, entry_defaults=defaults)
    return {(f.site.line, f.site.callee) for f in result.findings if f.unconditional}


def test_the_defaults_decide_the_branches(scan_cache):
    assert _sites(scan_cache, defaults=True) == {(10, "builtins.print")}


def test_without_them_every_option_is_open(scan_cache):
    """The model forwards' convention: an entry's parameters are whatever the caller passes."""
    assert {(16, "builtins.print"), (10, "builtins.print"), (19, "torch.manual_seed")} <= _sites(scan_cache, False)


def test_the_first_break_is_the_default_way(scan_cache):
    first = scan_roots([ROOT], ["edpkg.api:reduce"], cache_dir=scan_cache, entry_defaults=True).first_break
    assert (first["line"], first["callee"]) == (10, "builtins.print")


@pytest.fixture
def api(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    yield importlib.import_module("edpkg.api")
    sys.modules.pop("edpkg.api", None)
    sys.modules.pop("edpkg", None)


def _break_line(fn, *args, **kwargs) -> int:
    """The user-code line Dynamo stops at under fullgraph (0 when it compiles)."""
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="eager", fullgraph=True)(*args, **kwargs)
    except torch._dynamo.exc.Unsupported as exc:
        return exc.real_stack[-1].lineno if getattr(exc, "real_stack", None) else -1
    return 0


def test_dynamo_stops_where_the_defaults_lead(api):
    x = torch.ones(2)
    assert _break_line(api.reduce, x) == 10
    assert _break_line(api.reduce, x, check_nan=True) == 16


def test_a_value_hazard_under_a_test_decided_against_it_is_not_one(scan_cache, api):
    """Value uses (a branch on a tensor) read their statement's tests as calls do: before, the NaN check
    was reported under `if check_nan:` decided False, and named sampling_from_probs' first break."""
    found = scan_roots([ROOT], ["edpkg.api:sample"], cache_dir=scan_cache, entry_defaults=True).findings
    assert found == ()
    opened = scan_roots([ROOT], ["edpkg.api:sample"], cache_dir=scan_cache).findings
    assert ("DC110", 29) in {(f.rule, f.site.line) for f in opened}
    assert _break_line(api.sample, torch.ones(2, 3)) == 0
    assert _break_line(api.sample, torch.ones(2, 3), check_nan=True) == 29


def test_the_scan_command_calls_an_entry_as_the_api_census_does(tmp_path, scan_cache):
    """`dynacheck scan --required-args-only --first-call`: the API census's reading of one function, with
    the report saying so; without the flags the same entry is read as a model forward."""
    import json

    from dynacheck.cli import main

    def run(*flags: str) -> dict:
        out = tmp_path / f"scan{len(flags)}.json"
        with pytest.raises(SystemExit):
            main(["scan", "--target", str(ROOT), "--entry", "edpkg.api:reduce", "--cache-dir", str(scan_cache),
                  "--format", "json", "--out", str(out), *flags])
        return json.loads(out.read_text())

    census_like = run("--required-args-only", "--first-call")
    assert {(f["site"]["line"], f["site"]["callee"]) for f in census_like["findings"]} == {(10, "builtins.print")}
    assert census_like["deployment"] == {"first_call": True, "required_args_only": True}
    forward_like = run()
    assert (16, "builtins.print") in {(f["site"]["line"], f["site"]["callee"]) for f in forward_like["findings"]}
    assert forward_like["deployment"] == {}


def test_a_default_the_function_refuses_is_left_for_the_caller(scan_cache, api):
    """`if cu_seqlens is None: raise`: with the default bound, the census read the raise and called the
    function safe (FlashInfer 0.7.4's chunk_gated_delta_product, which breaks in cuDNN on every call that
    works). The parameter is left unbound, `backend` keeps its default, and the first break is Dynamo's."""
    result = scan_roots([ROOT], ["edpkg.api:varlen"], cache_dir=scan_cache, entry_defaults=True)
    assert {(f.site.line, f.site.callee) for f in result.findings if f.unconditional} == {(43, "builtins.print")}
    assert (result.first_break["line"], result.first_break["callee"]) == (43, "builtins.print")
    x = torch.ones(2)
    assert _break_line(api.varlen, x, cu_seqlens=torch.tensor([0, 2])) == 43
    assert _break_line(api.varlen, x, cu_seqlens=torch.tensor([0, 2]), backend="cake") == 0


def test_a_default_refused_on_one_way_of_a_required_argument_stands(scan_cache):
    """`if layout == "paged": if tables is None: raise`: other layouts take `tables=None`, so the default
    holds and the paged branch past the check is not read as reached (the raise is)."""
    result = scan_roots([ROOT], ["edpkg.api:layouts"], cache_dir=scan_cache, entry_defaults=True)
    assert 53 not in {f.site.line for f in result.findings}


def test_an_entry_is_called_through_its_decorators_wrapper(scan_cache, api):
    """FlashInfer 0.7.4's experimental APIs: the user calls the wrapper, which warns on the first call
    (`nonlocal warned`) before the body runs. The API census (first call, required arguments only) walks
    the wrapper first and the body with its defaults; before, it started at the body and read the flag
    as the wrapper's own local, already set. Real Dynamo: the first compiled call stops at the warning,
    one after an eager call does not."""
    from dynacheck.census.flashinfer_api import DEFAULT_API_DEPLOYMENT

    result = scan_roots([ROOT], ["edpkg.api:preview"], cache_dir=scan_cache, deployment=DEFAULT_API_DEPLOYMENT,
                        entry_defaults=True)
    assert {(f.site.file.rpartition("/")[2], f.site.line, f.site.callee) for f in result.findings
            if f.unconditional} == {("experimental.py", 15, "warnings.warn")}
    assert (result.first_break["line"], result.first_break["callee"]) == (15, "warnings.warn")
    assert {f.entry for f in result.findings} == {"edpkg.api:preview"}
    x = torch.ones(2)
    assert _break_line(api.preview, x) == 15
    with pytest.warns(UserWarning, match="preview is experimental"):
        api.preview(x)  # eagerly: the flag is set
    assert _break_line(api.preview, x) == 0


def test_a_flag_the_first_call_sets_is_a_first_call_condition_when_warm(scan_cache):
    """Called from a forward on a deployment that ran before the compile (the model census's), the
    warning is conditional: `first call only`."""
    from dynacheck.deploy.build import DeploymentSpec

    result = scan_roots([ROOT], ["edpkg.api:calls_preview"], cache_dir=scan_cache,
                        deployment=DeploymentSpec(gpu="sm100", platform="cuda"))
    warns = [f for f in result.findings if f.site.callee == "warnings.warn"]
    assert len(warns) == 1 and not warns[0].unconditional
    assert [c.text for c in warns[0].conditions] == ["first call only: not warned (no call set it before the compile)"]

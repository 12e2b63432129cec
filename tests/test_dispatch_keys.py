"""A dispatch table indexed by a value the deployment decides (FlashInfer's FP4 module by compute
capability): the walk enters the entry Python would call, checked against the fixture run for real
with the GPU probe and the commands replaced."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

import libcst
import pytest
import torch

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.cst_nodes import expr
from dynacheck.static.partial_values import Release, release
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "dispatch"
FACTS = ROOT / "dispfx.toml"
GENERATORS = {"subprocess.run": "gen_sm121", "subprocess.check_output": "gen_sm120f", "subprocess.call": "gen_sm120",
              "os.system": "gen_sm100", "subprocess.Popen": "gen_sm90"}
CAPABILITY = {"sm90": (9, 0), "sm100": (10, 0), "sm120": (12, 0)}


def _entered(scan_cache, layout: str, gpu: str | None) -> set[str]:
    spec = DeploymentSpec(framework=FACTS, gpu=gpu, platform="cuda") if gpu else None
    result = scan_roots([ROOT], [f"dispfx.model:Model{layout}.forward"], cache_dir=scan_cache, deployment=spec)
    assert all(not f.conditions for f in result.findings)
    return {f.site.function.rpartition(".")[2] for f in result.findings}


def _run(monkeypatch, layout: str, gpu: str) -> set[str]:
    """What the fixture calls when run: the generator whose command it runs (CUDA 12.9, as the walk assumes)."""
    called: list[str] = []
    for name in GENERATORS:
        module, _, attr = name.rpartition(".")
        monkeypatch.setattr(sys.modules[module], attr, lambda *a, _n=name, **k: called.append(_n))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: CAPABILITY[gpu])
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    monkeypatch.syspath_prepend(str(ROOT))
    fp4 = importlib.import_module("dispfx.fp4")
    fp4.get_module_063.cache_clear()
    fp4.get_module_067.cache_clear()
    x = types.SimpleNamespace(device=types.SimpleNamespace(type="cuda", index=0))
    getattr(fp4, f"quantize_{layout}")(x)
    return {GENERATORS[name] for name in called}


@pytest.mark.parametrize("layout", ["063", "067"])
@pytest.mark.parametrize("gpu", ["sm90", "sm100", "sm120"])
def test_the_walk_enters_the_entry_the_deployment_s_key_picks(scan_cache, monkeypatch, layout, gpu):
    assert os is not None and subprocess is not None  # the modules the run replaces functions of
    truth = _run(monkeypatch, layout, gpu)
    assert len(truth) == 1
    assert _entered(scan_cache, layout, gpu) == truth
    if gpu == "sm120":  # 0.6.7 prefers the SM12x family module with CUDA >= 12.9
        assert truth == ({"gen_sm120f"} if layout == "067" else {"gen_sm120"})


def test_without_a_deployment_every_entry_is_walked(scan_cache):
    assert _entered(scan_cache, "063", None) == {"gen_sm121", "gen_sm120", "gen_sm100", "gen_sm90"}
    assert _entered(scan_cache, "067", None) == set(GENERATORS.values())


def test_f_strings_and_dict_keys_are_kept_in_the_summary():
    parse = libcst.parse_expression
    assert expr(parse('f"{major}{minor}"')) == ("fs", (("n", "major"), ("n", "minor")))
    assert expr(parse('f"a{{b}}{x}"')) == ("fs", (("k", "a{b}"), ("n", "x")))
    for odd in ('f"{x!r}"', 'f"{x:>4}"', 'f"{x=}"', 'f"\\n{x}"'):
        assert expr(parse(odd)) == ("k",), odd  # a value this reading would get wrong is not kept
    assert expr(parse('{"a": f, "b": g}')) == ("d", (("n", "f"), ("n", "g")), (("k", "a"), ("k", "b")))
    assert expr(parse('{**base, "b": g}')) == ("d", (("n", "g"),))  # the keys of `base` are not known


def test_versions_compare_as_packaging_does():
    from packaging import version

    pairs = [("12.9", "12.9"), ("12.9.0", "12.9"), ("12.8", "12.9"), ("13.0", "12.9"), ("12.10", "12.9")]
    for a, b in pairs:
        assert (release(a) >= release(b)) == (version.parse(a) >= version.parse(b)), (a, b)
        assert (release(a) == release(b)) == (version.parse(a) == version.parse(b)), (a, b)
    assert release("12.9rc1") is None and release(None) is None
    assert release("12.9.0") == Release((12, 9))

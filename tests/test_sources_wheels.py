"""The pinned real wheels resolve from the shared cache and hold the flagship chain's modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.errors import UserError
from dynacheck.sources import ModuleLocator, default_cache_dir, resolve_target

PINNED = ("sglang==0.5.9", "flashinfer-python==0.6.3")


@pytest.mark.wheels
def test_pinned_wheels_resolve_and_locate_the_flagship_modules():
    targets = []
    for spec in PINNED:
        try:
            targets.append(resolve_target(spec, cache_dir=default_cache_dir()))
        except UserError as exc:
            if exc.message.startswith("Cannot fetch"):
                pytest.skip(f"{spec} is not cached and the package index is unreachable: {exc.message}")
            raise
    assert [(t.kind, t.name, t.version) for t in targets] == [
        ("pip", "sglang", "0.5.9"),
        ("pip", "flashinfer-python", "0.6.3"),
    ]
    locator = ModuleLocator(targets)
    cpp_ext = locator.find("flashinfer.jit.cpp_ext")
    deepseek = locator.find("sglang.srt.models.deepseek_v2")
    assert cpp_ext is not None and cpp_ext.is_file()
    assert deepseek is not None and deepseek.is_file()
    assert "def get_cuda_version" in cpp_ext.read_text(encoding="utf-8")
    assert locator.display_path(cpp_ext) == "flashinfer/jit/cpp_ext.py"
    assert locator.target_of(cpp_ext).name == "flashinfer-python"
    assert locator.module_name_of(deepseek) == "sglang.srt.models.deepseek_v2"
    assert locator.is_package("flashinfer.jit")
    assert {"sglang", "flashinfer"} <= set(locator.top_level_names())
    files = list(locator.iter_files())
    assert len(files) > 1500 and all(f.suffix == ".py" for f in files)
    assert Path(targets[0].root).parent == default_cache_dir() / "trees"

"""A function whose JIT kernel only writes a buffer it allocates (SGLang's jit_kernel style) gets an
applied custom op whose fake is its own body with the kernel a no-op: read statically, emitted, and
proven against real Dynamo on CPU (fullgraph eager and inductor equal eager, opcheck passes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dynacheck.fixes.emit import category, emit_patch
from dynacheck.fixes.out_kernels import out_kernel_factory
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).resolve().parent / "fixtures" / "fixes" / "outfx"
KERN = str(ROOT / "jitlib" / "kern.py")


def test_the_pattern_is_read_from_the_body():
    assert out_kernel_factory(KERN, "scale") == "_jit_scale_module"
    assert out_kernel_factory(KERN, "scale_returns_input") == ""  # returns an input, not the written buffer
    assert out_kernel_factory(KERN, "scale_uses_result") == ""  # the kernel's own result is returned
    assert out_kernel_factory(KERN, "_jit_scale_module") == ""


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    return scan_roots([ROOT], ["outmodel.model:Model.forward"], cache_dir=tmp_path_factory.mktemp("cache")).findings


def test_the_fatal_build_gets_an_applied_custom_op_at_the_function(scanned):
    fatal = [f for f in scanned if f.outcome.fatal_under_fullgraph]
    assert fatal and {f.fixes[0].at for f in fatal} == {"jitlib.kern.scale"}
    assert all(category(f.fixes[0]) == "applied" and "_wrap_out_kernel(" in f.fixes[0].snippet for f in fatal)


@pytest.mark.torch
@pytest.mark.slow
def test_the_patch_compiles_fullgraph_equal_to_eager_and_passes_opcheck(scanned, tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "dynacheck_fixes.py").write_text(emit_patch(scanned))
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent('''
        import torch
        from outmodel.model import Model

        model, x = Model(), torch.randn(6, 8)
        try:
            torch.compile(model, fullgraph=True, backend="eager")(x)
            print("BEFORE compiled")
        except Exception as exc:
            print("BEFORE failed", type(exc).__name__)
        import dynacheck_fixes
        print("FAILED", [a for a in dynacheck_fixes.APPLIED if a.startswith("failed")])
        for backend in ("eager", "inductor"):
            torch._dynamo.reset()
            print("EQUAL", backend, torch.equal(torch.compile(model, fullgraph=True, backend=backend)(x), model(x)))
        result = torch.library.opcheck(torch.ops.dynacheck.kern_scale.default, (x.t(), 0.5))
        print("OPCHECK", all(v == "SUCCESS" for v in result.values()), result)
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "BEFORE failed" in out and "FAILED []" in out, out
    assert "EQUAL eager True" in out and "EQUAL inductor True" in out, out
    assert "OPCHECK True" in out, out

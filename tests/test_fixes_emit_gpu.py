"""Pin the emitted fp4_quantize fake against the real FlashInfer kernel (GPU), and the flagship break
against the real FlashInfer sources (CPU, when flashinfer is importable). Each runs in a fresh process:
the patch registers `dynacheck::fp4_quantize` once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dynacheck.capture.flagship import flagship_findings  # noqa: E402
from dynacheck.fixes.emit import emit_patch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _flashinfer_importable() -> bool:
    try:
        import flashinfer  # noqa: F401
    except Exception:
        return False
    return True


def _run(patch: Path, *parts: str) -> dict:
    script = "".join(textwrap.dedent(p) for p in parts)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               PYTHONWARNINGS="ignore", DYNACHECK_PATCH=str(patch))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


_LOAD_PATCH = """
    import importlib.util, os
    spec = importlib.util.spec_from_file_location("dynacheck_fixes", os.environ["DYNACHECK_PATCH"])
    patch = importlib.util.module_from_spec(spec); spec.loader.exec_module(patch)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fake_shapes_equal_eager_flashinfer_on_gpu(tmp_path):
    if not _flashinfer_importable():
        pytest.skip("flashinfer is not installed")
    patch = tmp_path / "dynacheck_fixes.py"
    patch.write_text(emit_patch(flagship_findings()))
    out = _run(patch, """
        import json, torch, flashinfer, flashinfer.fp4_quantization as fq
        from torch._subclasses.fake_tensor import FakeTensorMode
    """, _LOAD_PATCH, """
        real = fq.fp4_quantize.__wrapped__
        op = torch.ops.dynacheck.fp4_quantize.default
        rows = []
        for m, k, swz, colmajor in [(1, 6144, True, False), (3, 2048, True, False), (130, 12288, True, False),
                                    (257, 576, True, False), (5, 2048, False, False), (32, 512, True, True)]:
            x = torch.randn(k, m, device="cuda", dtype=torch.bfloat16).T if colmajor else \\
                torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            gs = torch.tensor([448.0 * 6 / float(x.abs().amax())], device="cuda")
            q, sf = real(x, gs, 16, False, swz, False, None)
            with FakeTensorMode() as mode:
                fq_, fsf = op(mode.from_tensor(x), mode.from_tensor(gs), 16, False, swz, False, None)
            rows.append([[list(t.shape), str(t.dtype), list(t.stride())] for t in (q, sf)] ==
                        [[list(t.shape), str(t.dtype), list(t.stride())] for t in (fq_, fsf)])
        print(json.dumps({"equal": rows}))
    """)
    assert out["equal"] == [True] * 6


@pytest.mark.wheels
def test_real_flashinfer_trace_breaks_at_get_cuda_version_and_the_patch_compiles(tmp_path):
    """CPU: pretend sm90 so the trace takes the GPU path through the real flashinfer 0.6.3 sources."""
    if not _flashinfer_importable():
        pytest.skip("flashinfer is not installed")
    patch = tmp_path / "dynacheck_fixes.py"
    patch.write_text(emit_patch(flagship_findings()))
    out = _run(patch, """
        import json, os, torch, flashinfer, flashinfer.fp4_quantization as fq
        os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
        fq.get_compute_capability = lambda device: (9, 0)
        from dynacheck.capture.breaks import break_event
        gs = torch.tensor([1.0])
        def f(x):
            return flashinfer.fp4_quantize(x, gs)
        def no_run(gm, ex):   # compile only: the real kernel needs a GPU
            return lambda *a: (torch.zeros(1), torch.zeros(1))
        x = torch.randn(4, 64, dtype=torch.bfloat16)
        result = {}
        try:
            torch.compile(f, backend=no_run, fullgraph=True)(x)
        except Exception as e:
            ev = break_event(e)
            result["break"] = [ev.gb_id, ev.site.function, [fr.function for fr in ev.user_stack]]
        torch._dynamo.reset()
    """, _LOAD_PATCH, """
        torch.compile(f, backend=no_run, fullgraph=True)(x)
        result["after"] = "compiled"
        print(json.dumps(result))
    """)
    gb, site, chain = out["break"]
    assert (gb, site) == ("GB0007", "flashinfer.jit.cpp_ext.get_cuda_version")
    assert chain[chain.index("fp4_quantize"):].count("get_fp4_quantization_module") == 1
    assert "is_cuda_version_at_least" in chain and chain[-1] == "__init__"
    assert out["after"] == "compiled"

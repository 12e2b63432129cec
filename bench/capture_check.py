"""GPU checks around FlashInfer's fp4_quantize (run by bench/gpu_capture.sh on the H200).

  python bench/capture_check.py --out DIR

Writes DIR/capture-checks.json with:
  jit_build      first eager call (FlashInfer JIT-builds its fp4 module with nvcc) and a second call, seconds
  fake_shapes    the emitted fix's register_fake vs eager: shape, dtype, stride for several (m, k) and layouts
  reference      FlashInfer's packed values / block scales vs the pure-torch reference quantizer, and whether
                 the kernel wrote its outputs at all (sentinel-filled memory left untouched => no-op kernel)
  compile        torch.compile(fullgraph) of a call to flashinfer.fp4_quantize before the fix (the break, with
                 frames) and after it (compiles; eager-vs-compiled equality; CUDA graph capture and replay)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dynacheck.capture import nvfp4  # noqa: E402
from dynacheck.capture.breaks import break_event  # noqa: E402
from dynacheck.capture.flagship import flagship_findings  # noqa: E402
from dynacheck.fixes.emit import emit_patch  # noqa: E402
from dynacheck.fixes.known_fakes import fp4_scale_shape  # noqa: E402

SHAPES = [(1, 6144), (3, 2048), (16, 512), (128, 12288), (130, 16384), (257, 576)]


def _num(v: torch.Tensor | float) -> float | None:
    """A JSON-safe float: None for NaN/inf (uninitialised fp8 bytes can decode to NaN)."""
    f = float(v)
    return f if f == f and abs(f) != float("inf") else None


def _guard(fn):
    def run(*a, **k):
        try:
            return fn(*a, **k)
        except Exception as exc:  # a check that crashes is reported, the others still run
            return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
    return run


@_guard
def jit_build(dev: torch.device) -> dict:
    import flashinfer

    x = torch.randn(8, 256, device=dev, dtype=torch.bfloat16)
    gs = nvfp4.global_scale_for(x.abs().amax()).to(dev)
    t = time.perf_counter()
    flashinfer.fp4_quantize(x, gs)
    torch.cuda.synchronize()
    first = time.perf_counter() - t
    t = time.perf_counter()
    flashinfer.fp4_quantize(x, gs)
    torch.cuda.synchronize()
    return {"first_call_s": round(first, 2), "second_call_s": round(time.perf_counter() - t, 5)}


@_guard
def fake_shapes(dev: torch.device) -> dict:
    """register_fake (from the emitted patch) vs eager, per (m, k) and layout; the patch must be loaded."""
    import flashinfer.fp4_quantization as fq
    from torch._subclasses.fake_tensor import FakeTensorMode

    original = fq.fp4_quantize.__wrapped__  # the real function behind the patch's wrapper
    op = torch.ops.dynacheck.fp4_quantize.default
    rows = []
    for (m, k) in SHAPES:
        for swizzled in (True, False):
            for column_major in (False, True):
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                if column_major:
                    if m % 16:
                        continue  # eager needs the transposed last dim to be a multiple of 16
                    x = torch.randn(k, m, device=dev, dtype=torch.bfloat16).T
                gs = nvfp4.global_scale_for(x.abs().amax()).to(dev)
                row = {"m": m, "k": k, "swizzled": swizzled, "column_major": column_major}
                try:
                    q, sf = original(x, gs, 16, False, swizzled, False, None)
                except Exception as exc:
                    row["eager_error"] = f"{type(exc).__name__}: {exc}"[:300]
                    rows.append(row)
                    continue
                with FakeTensorMode(allow_non_fake_inputs=False) as mode:
                    fx, fgs = mode.from_tensor(x), mode.from_tensor(gs)
                    fq_, fsf = op(fx, fgs, 16, False, swizzled, False, None)
                eager = [(tuple(t.shape), str(t.dtype), tuple(t.stride())) for t in (q, sf)]
                fake = [(tuple(t.shape), str(t.dtype), tuple(t.stride())) for t in (fq_, fsf)]
                row.update(eager=eager, fake=fake, equal=eager == fake)
                if not column_major:
                    row["formula_equal"] = tuple(sf.shape) == fp4_scale_shape(m, k, swizzled=swizzled)
                rows.append(row)
    return {"cases": rows, "all_equal": all(r.get("equal", False) for r in rows if "eager_error" not in r)}


@_guard
def reference(dev: torch.device) -> dict:
    import flashinfer

    out = {}
    for (m, k) in [(37, 2048), (128, 6144)]:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16) * 3
        gs = nvfp4.global_scale_for(x.float().abs().amax()).to(dev)
        ref_q, ref_sf = nvfp4.quantize(x, gs, swizzled=True)
        # Sentinel: fill the allocator's next blocks with 0x5A, free them, then quantize: a kernel that
        # writes nothing leaves the sentinel (or other stale bytes) in place.
        junk = [torch.full((m, k // 2), 0x5A, dtype=torch.uint8, device=dev),
                torch.full(ref_sf.shape, 0x5A, dtype=torch.uint8, device=dev)]
        del junk
        q, sf = flashinfer.fp4_quantize(x, gs)
        torch.cuda.synchronize()
        ref_lin = nvfp4.unswizzle_128x4(ref_sf.reshape(-1), m, k // 16)  # real rows only: padding is 0 in both
        same_size = sf.numel() == ref_sf.numel()
        fi_lin = nvfp4.unswizzle_128x4(sf.reshape(-1), m, k // 16) if same_size else None
        deq = nvfp4.dequantize(q, sf, gs) if same_size else None
        ref_deq = nvfp4.dequantize(ref_q, ref_sf, gs)
        amax = x.float().abs().max()
        out[f"{m}x{k}"] = {
            "shapes": {"flashinfer": [list(q.shape), list(sf.shape)],
                       "reference": [list(ref_q.shape), list(ref_sf.shape)]},
            "values_equal_frac": float((q == ref_q).float().mean()),
            "scales_equal_frac": float((fi_lin == ref_lin).float().mean()) if same_size else None,
            "values_sentinel_frac": float((q == 0x5A).float().mean()),
            "values_zero_frac": float((q == 0).float().mean()),
            "reference_dequant_rel_err": _num((ref_deq - x.float()).abs().max() / amax),
            "flashinfer_dequant_rel_err": _num((deq - x.float()).abs().max() / amax) if same_size else None,
        }
    cc = torch.cuda.get_device_capability(dev)
    out["compute_capability"] = "%d.%d" % cc
    out["kernel_expected_to_write"] = cc[0] >= 10
    out["note"] = ("flashinfer 0.6.3 compiles the quantize kernel body only for __CUDA_ARCH__ >= 1000 "
                   "(csrc/nv_internal/tensorrt_llm/kernels/quantization.cuh); on sm90 equal fractions near 0 "
                   "mean the call returned uninitialised buffers, not a layout disagreement")
    return out


def _compile_fp4(dev: torch.device) -> tuple[object, torch.Tensor, torch.Tensor]:
    import flashinfer

    x = torch.randn(16, 2048, device=dev, dtype=torch.bfloat16)
    gs = nvfp4.global_scale_for(x.abs().amax()).to(dev)

    def f(inp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return flashinfer.fp4_quantize(inp, gs)

    return f, x, gs


@_guard
def compile_before(dev: torch.device) -> dict:
    f, x, _ = _compile_fp4(dev)
    torch._dynamo.reset()
    try:
        torch.compile(f, backend="eager", fullgraph=True)(x)
    except Exception as exc:
        ev = break_event(exc)
        return {"compiled": False, "event": ev.to_dict(), "chain": [fr.function for fr in ev.user_stack]}
    return {"compiled": True}


@_guard
def compile_after(dev: torch.device) -> dict:
    f, x, _ = _compile_fp4(dev)
    torch._dynamo.reset()
    res: dict = {}
    for backend in ("eager", "inductor"):
        try:
            cf = torch.compile(f, backend=backend, fullgraph=True)
            q, sf = cf(x)
            qe, sfe = f(x)
            res[backend] = {"compiled": True, "shapes_equal": q.shape == qe.shape and sf.shape == sfe.shape,
                            "bitwise_equal": bool(torch.equal(q, qe) and torch.equal(sf, sfe))}
        except Exception as exc:
            res[backend] = {"compiled": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        torch._dynamo.reset()
    try:
        cf = torch.compile(f, backend="eager", fullgraph=True)
        static_x = x.clone()
        cf(static_x)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            cf(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = cf(static_x)
        g.replay()
        torch.cuda.synchronize()
        res["cuda_graph"] = {"captured": True, "shapes": [list(t.shape) for t in outs]}
    except Exception as exc:
        res["cuda_graph"] = {"captured": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    res["note"] = "bitwise equality is meaningful only where the kernel writes its outputs (sm >= 100)"
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("no CUDA: GPU checks skipped")
        (out / "capture-checks.json").write_text(json.dumps({"skipped": "no CUDA device"}))
        return 0
    dev = torch.device("cuda", 0)
    result = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(dev)}
    path = out / "capture-checks.json"

    def step(key: str, value: object) -> None:  # written after every step: a timeout keeps what ran
        result[key] = value
        path.write_text(json.dumps(result, indent=1, default=str))

    step("jit_build", jit_build(dev))
    step("compile_before_fix", compile_before(dev))
    patch = out / "dynacheck_fixes_checks.py"
    patch.write_text(emit_patch(flagship_findings()))
    ns: dict = {"__name__": "dynacheck_fixes_checks"}
    exec(compile(patch.read_text(), str(patch), "exec"), ns)
    step("patch_applied", ns["APPLIED"])
    step("fake_shapes", fake_shapes(dev))
    step("reference", reference(dev))
    step("compile_after_fix", compile_after(dev))
    before = result["compile_before_fix"]
    ev = before.get("event") or {}
    brief = {
        "jit_build": result["jit_build"],
        "before_fix": [ev.get("gb_id"), (ev.get("site") or {}).get("function")] if ev else before,
        "patch_applied": result["patch_applied"],
        "fake_shapes_all_equal": result["fake_shapes"].get("all_equal", result["fake_shapes"]),
        "reference": {k: v for k, v in result["reference"].items() if k != "note"},
        "after_fix": result["compile_after_fix"],
    }
    print(json.dumps(brief, indent=1, default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())

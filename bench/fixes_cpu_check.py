"""What can be checked of the emitted FlashInfer patch module without a GPU, against the real flashinfer 0.6.3.

FlashInfer imports on a CPU-only torch (with `pynvml` stubbed); its kernels cannot run, so this checks
what does not need them:
1. the patch module applies (APPLIED has no "failed" line);
2. without the patch none of the public functions below traces with fullgraph=True; with it, Dynamo traces each public function with fullgraph=True into one graph made of the registered ops
   (a backend that records the graph and runs nothing: the kernels are CUDA-only);
3. the fp4_quantize fake dynacheck derives (FlashInfer's declared op body, kernel stubbed) gives the
   shapes and dtypes of the formula that was pinned against the real kernel on an H200
   (`reports/capture-h200/capture-checks.json`), while FlashInfer's own declared fake does not.

    python bench/fixes_cpu_check.py --patch reports/fixes/flashinfer_public_fixes.py --out reports/fixes/cpu-check.json
  with flashinfer-python==0.6.3 (+ apache-tvm-ffi) importable, e.g. `pip install --no-deps --target DIR` and a
  `pynvml.py` stub on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import runpy
import textwrap
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")


def _trace(fn, *args):
    graphs = []

    def backend(gm, inputs):
        graphs.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        outputs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
        return lambda *a: [None] * len(outputs)

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=backend, fullgraph=True)(*args)
        return {"fullgraph": True, "graph_calls": graphs[-1] if graphs else []}
    except Exception as exc:
        return {"fullgraph": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}


def programs():
    import flashinfer
    import flashinfer.sampling

    x, w, r = torch.randn(4, 64), torch.randn(64), torch.randn(4, 64)
    probs = torch.softmax(torch.randn(4, 100), -1)
    return {
        "flashinfer.rmsnorm": (lambda x, w: flashinfer.rmsnorm(x, w), x, w),
        "flashinfer.fused_add_rmsnorm": (lambda x, r, w: flashinfer.fused_add_rmsnorm(x, r, w), x, r, w),
        "flashinfer.sampling.top_k_renorm_probs": (lambda p: flashinfer.sampling.top_k_renorm_probs(p, 5), probs),
        "flashinfer.gelu_and_mul": (lambda x: flashinfer.gelu_and_mul(x), torch.randn(4, 64)),
        "flashinfer.merge_state": (lambda a, s, b, t: flashinfer.merge_state(a, s, b, t), torch.randn(4, 2, 8),
                                   torch.randn(4, 2), torch.randn(4, 2, 8), torch.randn(4, 2)),
        "flashinfer.apply_rope_pos_ids": (lambda q, k, p: flashinfer.apply_rope_pos_ids(q, k, p),
                                          torch.randn(4, 2, 64), torch.randn(4, 2, 64), torch.arange(4, dtype=torch.int32)),
    }


def fp4_fakes():
    """Derived fake vs the H200-pinned formula vs FlashInfer's own declared fake (on a stand-in sm100)."""
    import flashinfer.fp4_quantization as fq
    from torch._subclasses.fake_tensor import FakeTensorMode

    from dynacheck.fixes.known_fakes import fp4_scale_shape

    fq.get_compute_capability = lambda device: (10, 0)  # a CPU stand-in for an sm100 device
    fq.device_support_pdl = lambda device: False
    tree = ast.parse(textwrap.dedent(inspect.getsource(fq.get_fp4_quantization_module.__wrapped__)))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_fake_fp4_quantize_sm100")
    node.decorator_list = []
    namespace = dict(fq.__dict__)
    exec(compile(ast.Module([node], []), "<declared fake>", "exec"), namespace)
    rows = []
    for m in (1, 2, 4, 8, 16, 130):
        for k in (2048, 6144):
            for swizzled in (True, False):
                with FakeTensorMode():
                    x = torch.empty(m, k, dtype=torch.bfloat16)
                    values, scales = torch.ops.dynacheck.fp4_quantize(x, None, 16, False, swizzled, False, None)
                    dv, ds = namespace["_fake_fp4_quantize_sm100"](x, None, 16, False, swizzled)
                    ds = ds.reshape((-1, k // 16))
                want_scales = fp4_scale_shape(m, k, swizzled=swizzled)
                rows.append({
                    "m": m, "k": k, "swizzled": swizzled,
                    "derived": [list(values.shape), str(values.dtype), list(scales.shape), str(scales.dtype)],
                    "formula": [[m, k // 2], "torch.uint8", list(want_scales), "torch.uint8"],
                    "declared_fake": [list(dv.shape), str(dv.dtype), list(ds.shape), str(ds.dtype)],
                })
    for row in rows:
        row["derived_equals_formula"] = row["derived"] == row["formula"]
        row["declared_equals_formula"] = row["declared_fake"] == row["formula"]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patch", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import flashinfer

    before = {name: _trace(fn, *xs) for name, (fn, *xs) in programs().items()}
    applied = runpy.run_path(str(args.patch))["APPLIED"]
    report = {"torch": torch.__version__, "flashinfer": flashinfer.__version__,
              "before_patch": {n: {k: v for k, v in t.items() if k != "graph_calls"} for n, t in before.items()},
              "applied_failed": [a for a in applied if a.startswith("failed")],
              "applied_lines": len(applied),
              "traces": {name: _trace(fn, *xs) for name, (fn, *xs) in programs().items()},
              "fp4_quantize_fake": fp4_fakes()}
    report["summary"] = {
        "patch_applies": not report["applied_failed"],
        "fullgraph_before_patch": sorted(n for n, t in before.items() if t["fullgraph"]),
        "fullgraph_traced": sorted(n for n, t in report["traces"].items() if t["fullgraph"]),
        "not_traced": sorted(n for n, t in report["traces"].items() if not t["fullgraph"]),
        "derived_fp4_fake_equals_h200_formula": all(r["derived_equals_formula"] for r in report["fp4_quantize_fake"]),
        "declared_fp4_fake_equals_h200_formula": any(r["declared_equals_formula"] for r in report["fp4_quantize_fake"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))
    return 0 if report["summary"]["patch_applies"] and not report["summary"]["not_traced"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

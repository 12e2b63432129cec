"""GPU check of the out-kernel fix on SGLang's real `hadamard_transform` (sglang 0.5.9 jit_kernel).

    python bench/out_kernel_check.py --patch reports/fixes/sglang_hadamard_fix.py --out DIR

The patch module is what `fix --emit` writes for the flagship scan's hadamard site (made on CPU:
see bench/gpu_out_kernel.sh). Checked here, on the GPU, with the real JIT kernel:
1. before the patch, `torch.compile(fullgraph=True)` of a function calling it fails;
2. the patch applies (no `failed` line);
3. per size the GLM-5 indexer uses (and two that take the padding path): the op's fake equals eager
   (shape, dtype, stride, device), and the op equals the unpatched function;
4. `torch.library.opcheck` on the op;
5. the function compiled fullgraph (eager and inductor backends) equals eager.
Writes DIR/out-kernel-check.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def _meta(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "dtype": str(t.dtype), "stride": list(t.stride()), "device": t.device.type}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patch", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    from sglang.jit_kernel import hadamard

    original = hadamard.hadamard_transform
    scale = 128 ** -0.5

    def program(x):  # what the NSA indexer's rotate_activation does, inside the compiled forward
        return hadamard.hadamard_transform(x * 2, scale=scale) + 1

    x = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    reference = program(x)  # builds the JIT module eagerly (the warm-up before the compile)
    try:
        torch.compile(program, fullgraph=True, backend="eager")(x)
        results["before"] = "compiled"
    except Exception as exc:  # noqa: BLE001 - the break is the expected outcome
        results["before"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    torch._dynamo.reset()

    spec = importlib.util.spec_from_file_location("dynacheck_fixes", args.patch)
    fixes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixes)
    results["applied"] = list(fixes.APPLIED)
    op = torch.ops.dynacheck.hadamard_hadamard_transform.default

    sizes = []
    for shape in ((1, 128), (7, 128), (64, 128), (2048, 128), (4, 16, 128), (64, 256), (64, 96), (64, 100)):
        row: dict = {"shape": list(shape)}
        try:
            t = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
            eager = op(t, scale)
            with FakeTensorMode() as mode:
                fake = op(mode.from_tensor(t), scale)
            row["eager"], row["fake"] = _meta(eager), _meta(fake)
            row["fake_equals_eager"] = row["eager"] == row["fake"]
            row["op_equals_function"] = bool(torch.equal(eager, original(t, scale)))
        except Exception as exc:  # noqa: BLE001 - a size the kernel refuses is recorded, not fatal
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        sizes.append(row)
    results["sizes"] = sizes
    try:
        check = torch.library.opcheck(op, (torch.randn(16, 128, device="cuda", dtype=torch.bfloat16), scale))
        results["opcheck"] = {k: str(v) for k, v in check.items()}
    except Exception as exc:  # noqa: BLE001
        results["opcheck"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    for backend in ("eager", "inductor"):
        torch._dynamo.reset()
        try:
            compiled = torch.compile(program, fullgraph=True, backend=backend)(x)
            results[f"fullgraph_{backend}"] = {"compiled": True, "equals_eager": bool(torch.equal(compiled, program(x))),
                                               "equals_unpatched": bool(torch.equal(compiled, reference))}
        except Exception as exc:  # noqa: BLE001
            results[f"fullgraph_{backend}"] = {"compiled": False, "error": traceback.format_exc()[-800:]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "out-kernel-check.json").write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    ok = (results["before"].startswith("failed") and not any(a.startswith("failed") for a in results["applied"])
          and all(r.get("fake_equals_eager") for r in sizes if "error" not in r)
          and all(v == "SUCCESS" for v in results["opcheck"].values())
          and all(results[f"fullgraph_{b}"].get("equals_eager") for b in ("eager", "inductor")))
    print("OUT-KERNEL CHECK", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

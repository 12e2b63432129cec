"""GPU proof of the emitted patch module: every op it registers that the program calls is checked, then
the program compiles with fullgraph=True and equals eager.

Steps (one process, results as JSON in --out):
1. before: each of `flashinfer.rmsnorm`, `fused_add_rmsnorm`, `sampling.top_k_renorm_probs`,
   `fp4_quantize` under `torch.compile(fullgraph=True, backend="eager")` without the patch;
2. import the patch module (`dynacheck fix --emit` output); keep its APPLIED list;
3. run the program eagerly at the capture's batch sizes (GLM-5 hidden 6144) under a dispatch mode that
   records every call of a `flashinfer::` / `dynacheck::` op; for each recorded call:
   `torch.library.opcheck` and a fake-vs-eager comparison (shapes, dtypes, strides, aliasing);
4. the same program compiled with fullgraph=True (eager and inductor backends) against eager;
5. FlashInfer 0.6.3's declared fake of `fp4_quantize_sm100` against eager (why dynacheck runs that
   op's own body with the kernel stubbed instead).

    python bench/fixes_check.py --patch reports/fixes/flashinfer_public_fixes.py --out OUT
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import runpy
import textwrap
import time
import traceback
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SIZES = (1, 2, 4, 8, 16)
HIDDEN = 6144
VOCAB = 1024  # probabilities row length for the sampling op (kept small: it is a shape check)
NAMESPACES = ("flashinfer", "dynacheck")


def program(x, residual, weight, probs, global_scale):
    import flashinfer
    import flashinfer.sampling

    normed = flashinfer.rmsnorm(x, weight)
    flashinfer.fused_add_rmsnorm(x, residual, weight)  # in place: x and residual
    renormed = flashinfer.sampling.top_k_renorm_probs(probs, 8)
    values, scales = flashinfer.fp4_quantize(normed, global_scale)
    return normed, x, residual, renormed, values, scales


def inputs(m: int):
    torch.manual_seed(m)
    x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
    return (x, torch.randn_like(x), torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16),
            torch.softmax(torch.randn(m, VOCAB, device="cuda"), -1), torch.ones(1, device="cuda"))


def clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


class Recorder(TorchDispatchMode):
    """Records each call of a library op (clones of its inputs, taken before the call)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace in NAMESPACES:
            self.calls.append((func, clone(args), {k: v.clone() if isinstance(v, torch.Tensor) else v
                                                    for k, v in kwargs.items()}))
        return func(*args, **kwargs)


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def describe(outputs, args, fake: bool):
    rows = []
    ins = _tensors(args)
    for t in _tensors(outputs):
        if fake:
            alias = any(t.untyped_storage()._cdata == i.untyped_storage()._cdata for i in ins)
        else:
            alias = any(t.untyped_storage().data_ptr() == i.untyped_storage().data_ptr() for i in ins)
        rows.append({"shape": list(t.shape), "dtype": str(t.dtype), "stride": list(t.stride()), "aliases_input": alias})
    return rows


def fake_vs_eager(func, args, kwargs):
    from torch._subclasses.fake_tensor import FakeTensorMode

    eager_args = clone(args)
    eager = describe(func(*eager_args, **kwargs), eager_args, fake=False)
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake_args = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        fake_kwargs = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        fake = describe(func(*fake_args, **fake_kwargs), fake_args, fake=True)
    return {"equal": eager == fake, "eager": eager, "fake": fake}


def opcheck(func, args, kwargs, tests=None):
    """torch.library.opcheck's results, or the failing test's message; `tests` narrows the checks run."""
    if tests is None and "fp4_quantize" in str(func) and torch.cuda.get_device_capability()[0] < 10:
        # FlashInfer 0.6.3 builds the FP4 kernel for sm100+ only: on sm90 it leaves its outputs unwritten,
        # so eager-vs-AOT output equality compares uninitialised memory; the other three checks still run
        tests = ("test_schema", "test_autograd_registration", "test_faketensor")
    try:
        result = torch.library.opcheck(func, clone(args), kwargs, **({"test_utils": tests} if tests else {}))
        return {k: v for k, v in result.items()}
    except Exception as exc:  # the failing test's message is the evidence
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:400]}"}


def compile_each(label, fn, args, backend="eager"):
    torch._dynamo.reset()
    try:
        out = torch.compile(fn, backend=backend, fullgraph=True)(*clone(args))
        torch.cuda.synchronize()
        return {"compiled": True, "out": out}
    except Exception as exc:
        return {"compiled": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:400]}"}


def _single(attr: str, pick):
    """One public function compiled alone; the module is imported outside the traced function
    (Dynamo refuses `__import__` itself, which would hide what the patch does)."""
    import importlib

    module_name, _, name = attr.rpartition(".")
    module = importlib.import_module(module_name)

    def run(x, r, w, p, g):
        return getattr(module, name)(*pick(x, r, w, p, g))

    return run


SINGLE = {
    "rmsnorm": lambda: _single("flashinfer.rmsnorm", lambda x, r, w, p, g: (x, w)),
    "fused_add_rmsnorm": lambda: _single("flashinfer.fused_add_rmsnorm", lambda x, r, w, p, g: (x, r, w)),
    "top_k_renorm_probs": lambda: _single("flashinfer.sampling.top_k_renorm_probs", lambda x, r, w, p, g: (p, 8)),
    "fp4_quantize": lambda: _single("flashinfer.fp4_quantize", lambda x, r, w, p, g: (x, g)),
}


def compare(eager, compiled, fp4_values_checked: bool):
    rows = []
    names = ("rmsnorm", "x_after_fused_add", "residual_after_fused_add", "top_k_renorm", "fp4_values", "fp4_scales")
    for name, a, b in zip(names, eager, compiled):
        row = {"output": name, "shape_equal": a.shape == b.shape, "dtype_equal": a.dtype == b.dtype,
               "stride_equal": a.stride() == b.stride()}
        if name.startswith("fp4") and not fp4_values_checked:
            row["values"] = "not checked: FlashInfer 0.6.3 compiles the fp4 quantize kernel for sm100+ only"
        else:
            row["max_abs_diff"] = float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
        rows.append(row)
    return rows


def declared_fp4_fake(m: int):
    """FlashInfer's own `_fake_fp4_quantize_sm100`, taken from its source, against eager's shapes."""
    import flashinfer.fp4_quantization as fq

    tree = ast.parse(textwrap.dedent(inspect.getsource(fq.get_fp4_quantization_module.__wrapped__)))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_fake_fp4_quantize_sm100")
    node.decorator_list = []
    namespace = dict(fq.__dict__)
    exec(compile(ast.Module([node], []), "<declared fake>", "exec"), namespace)
    x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
    values, scales = namespace["_fake_fp4_quantize_sm100"](x, torch.ones(1, device="cuda"))
    scales = scales.reshape((-1, HIDDEN // 16))
    eager_values, eager_scales = fq.fp4_quantize(x, torch.ones(1, device="cuda"))
    return {"m": m, "declared_fake": [[list(values.shape), str(values.dtype)], [list(scales.shape), str(scales.dtype)]],
            "eager": [[list(eager_values.shape), str(eager_values.dtype)],
                      [list(eager_scales.shape), str(eager_scales.dtype)]]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patch", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import flashinfer

    cc = torch.cuda.get_device_capability()
    report = {"torch": torch.__version__, "flashinfer": flashinfer.__version__, "device": torch.cuda.get_device_name(),
              "capability": list(cc), "sizes": list(SIZES), "hidden": HIDDEN}

    def save():
        (args.out / "fixes-check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")

    started = time.time()
    report["before"] = {name: {k: v for k, v in compile_each(name, fn, inputs(4)).items() if k != "out"}
                        for name, make in SINGLE.items() for fn in (make(),)}
    report["before_seconds"] = round(time.time() - started, 1)
    save()

    namespace = runpy.run_path(str(args.patch))
    report["applied"] = namespace["APPLIED"]
    save()

    checks = []
    for m in SIZES:
        recorder = Recorder()
        with recorder:
            program(*inputs(m))
        torch.cuda.synchronize()
        for func, call_args, kwargs in recorder.calls:
            row = {"m": m, "op": str(func)}
            try:
                row["fake_vs_eager"] = fake_vs_eager(func, call_args, kwargs)
            except Exception as exc:
                row["fake_vs_eager"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            if m in (1, 16):  # opcheck compiles through AOT dispatch: two sizes are enough
                row["opcheck"] = opcheck(func, call_args, kwargs)
            checks.append(row)
        save()
    report["op_checks"] = checks
    report["after_each"] = {name: {k: v for k, v in compile_each(name, fn, inputs(4)).items() if k != "out"}
                            for name, make in SINGLE.items() for fn in (make(),)}
    save()

    fp4_values = cc[0] >= 10
    report["program"] = []
    for backend in ("eager", "inductor"):
        for m in SIZES:
            data = inputs(m)
            eager = program(*clone(data))
            result = compile_each(f"program m={m}", program, data, backend=backend)
            row = {"backend": backend, "m": m, "compiled": result["compiled"]}
            if result["compiled"]:
                row["outputs"] = compare(eager, result["out"], fp4_values)
            else:
                row["error"] = result["error"]
            report["program"].append(row)
            save()
    try:
        report["declared_fp4_fake_vs_eager"] = [declared_fp4_fake(m) for m in (1, 16)]
    except Exception:
        report["declared_fp4_fake_vs_eager"] = traceback.format_exc()[-600:]
    ok_ops = all(r.get("fake_vs_eager", {}).get("equal") for r in checks)
    ok_opcheck = all(all(v == "SUCCESS" for v in r["opcheck"].values()) for r in checks if "opcheck" in r)
    ok_program = all(r["compiled"] and all(o["shape_equal"] and o["dtype_equal"] and o.get("max_abs_diff", 0) == 0
                                           for o in r["outputs"]) for r in report["program"])
    report["summary"] = {"fake_vs_eager_all_equal": ok_ops, "opcheck_all_pass": ok_opcheck,
                         "program_fullgraph_equal_eager": ok_program, "ops_checked": sorted({r["op"] for r in checks}),
                         "seconds": round(time.time() - started, 1)}
    save()
    print(json.dumps(report["summary"], indent=1))
    return 0 if ok_ops and ok_opcheck and ok_program else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""GPU proof of the declared-op fixes that needed more than infer_schema (issue 12): FlashInfer 0.6.3's
sampling ops take `generator: Optional[torch.Generator]` (the patch writes the schema `Generator?`), and
`append_paged_mla_kv_cache` is declared `-> None` without a fake (the patch gives it one that returns
None). One process, results as JSON in --out:

1. before: the program below under `torch.compile(fullgraph=True)` without the patch;
2. import the patch module (`dynacheck fix --emit` output, reports/fixes/flashinfer_public_fixes.py);
3. run the program eagerly, recording every `flashinfer::` op call; per call `torch.library.opcheck`
   and fake vs eager (shapes, dtypes, strides, aliasing); the registered schemas;
4. the program compiled with fullgraph=True (eager and inductor backends) against eager, the default
   CUDA generator seeded the same before each run (the ops draw their seed and offset from it).

    python bench/sampling_check.py --patch reports/fixes/flashinfer_public_fixes.py --out OUT
"""

from __future__ import annotations

import argparse
import json
import runpy
import time
from pathlib import Path

import torch

from fixes_check import Recorder, clone, fake_vs_eager  # noqa: E402 - same folder (the script's own)
from fixes_check import opcheck as _opcheck  # noqa: E402

# A sampling op draws a new seed/offset from the CUDA generator at every call, so opcheck's
# eager-vs-AOT output comparison would compare two different draws; its other checks run.
RANDOM_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor")


def opcheck(func, args, kwargs):
    return _opcheck(func, args, kwargs, tests=RANDOM_TESTS if "sampling" in str(func) else None)


SIZES = (1, 4, 16)
VOCAB = 1024
PAGE, CKV, KPE = 16, 512, 64


def program(probs, logits, append_ckv, append_kpe, batch_indices, positions, ckv_cache, kpe_cache,
            kv_indices, kv_indptr, kv_last_page_len):
    import flashinfer.page
    import flashinfer.sampling

    flashinfer.page.append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache,
                                              kpe_cache, kv_indices, kv_indptr, kv_last_page_len)
    top_p = flashinfer.sampling.top_p_sampling_from_probs(probs, 0.9)
    top_k = flashinfer.sampling.top_k_sampling_from_probs(probs, 8)
    plain = flashinfer.sampling.sampling_from_probs(probs)
    from_logits = flashinfer.sampling.sampling_from_logits(logits)
    return top_p, top_k, plain, from_logits, ckv_cache, kpe_cache


def inputs(m: int):
    """m sequences; each appends 3 tokens to its own page of the MLA KV cache."""
    torch.manual_seed(m)
    cuda = dict(device="cuda")
    probs = torch.softmax(torch.randn(m, VOCAB, **cuda), -1)
    logits = torch.randn(m, VOCAB, **cuda)
    nnz = 3 * m
    append_ckv = torch.randn(nnz, CKV, dtype=torch.bfloat16, **cuda)
    append_kpe = torch.randn(nnz, KPE, dtype=torch.bfloat16, **cuda)
    batch_indices = torch.arange(m, dtype=torch.int32, **cuda).repeat_interleave(3)
    positions = torch.arange(3, dtype=torch.int32, **cuda).repeat(m)
    ckv_cache = torch.zeros(m, PAGE, CKV, dtype=torch.bfloat16, **cuda)
    kpe_cache = torch.zeros(m, PAGE, KPE, dtype=torch.bfloat16, **cuda)
    kv_indices = torch.arange(m, dtype=torch.int32, **cuda)
    kv_indptr = torch.arange(m + 1, dtype=torch.int32, **cuda)
    kv_last_page_len = torch.full((m,), 3, dtype=torch.int32, **cuda)
    return (probs, logits, append_ckv, append_kpe, batch_indices, positions, ckv_cache, kpe_cache,
            kv_indices, kv_indptr, kv_last_page_len)


def seeded(fn, data):
    torch.cuda.manual_seed(1234)
    out = fn(*data)
    torch.cuda.synchronize()
    return out


NAMES = ("top_p", "top_k", "sampling_from_probs", "sampling_from_logits", "ckv_cache", "kpe_cache")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patch", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import flashinfer

    report = {"torch": torch.__version__, "flashinfer": flashinfer.__version__, "device": torch.cuda.get_device_name(),
              "capability": list(torch.cuda.get_device_capability()), "sizes": list(SIZES)}

    def save():
        (args.out / "sampling-check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")

    started = time.time()
    try:
        torch._dynamo.reset()
        torch.compile(program, fullgraph=True, backend="eager")(*inputs(4))
        report["before"] = "compiled"
    except Exception as exc:
        report["before"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    save()

    namespace = runpy.run_path(str(args.patch))
    report["applied_failures"] = [a for a in namespace["APPLIED"] if a.startswith("failed")]
    report["schemas"] = {}
    for name in ("top_p_sampling_from_probs", "top_k_sampling_from_probs", "sampling_from_probs",
                 "sampling_from_logits", "append_paged_mla_kv_cache"):
        try:
            report["schemas"][name] = str(getattr(torch.ops.flashinfer, name).default._schema)
        except Exception as exc:  # not registered: the row says so
            report["schemas"][name] = f"not registered ({type(exc).__name__})"
    save()

    checks = []
    for m in SIZES:
        recorder = Recorder()
        with recorder:
            seeded(program, inputs(m))
        for func, call_args, kwargs in recorder.calls:
            row = {"m": m, "op": str(func)}
            try:
                row["fake_vs_eager"] = fake_vs_eager(func, call_args, kwargs)
            except Exception as exc:
                row["fake_vs_eager"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            row["opcheck"] = opcheck(func, call_args, kwargs)
            checks.append(row)
        save()
    report["op_checks"] = checks

    report["program"] = []
    for backend in ("eager", "inductor"):
        for m in SIZES:
            data = inputs(m)
            eager = seeded(program, clone(data))
            torch._dynamo.reset()
            row = {"backend": backend, "m": m}
            try:
                compiled = seeded(torch.compile(program, fullgraph=True, backend=backend), clone(data))
                row["compiled"] = True
                row["outputs"] = [{"output": n, "shape_equal": a.shape == b.shape, "dtype_equal": a.dtype == b.dtype,
                                   "stride_equal": a.stride() == b.stride(), "equal": bool(torch.equal(a, b))}
                                  for n, a, b in zip(NAMES, eager, compiled)]
            except Exception as exc:
                row["compiled"] = False
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            report["program"].append(row)
            save()
    ok_ops = bool(checks) and all(r.get("fake_vs_eager", {}).get("equal") for r in checks)
    ok_opcheck = all(all(v == "SUCCESS" for v in r["opcheck"].values()) for r in checks)
    ok_program = all(r["compiled"] and all(o["equal"] and o["stride_equal"] for o in r["outputs"])
                     for r in report["program"])
    report["summary"] = {"before_fails": report["before"] != "compiled", "fake_vs_eager_all_equal": ok_ops,
                         "opcheck_all_pass": ok_opcheck, "program_fullgraph_equal_eager": ok_program,
                         "ops_checked": sorted({r["op"] for r in checks}), "seconds": round(time.time() - started, 1)}
    save()
    print(json.dumps(report["summary"], indent=1))
    return 0 if ok_ops and ok_opcheck and ok_program else 1


if __name__ == "__main__":
    raise SystemExit(main())

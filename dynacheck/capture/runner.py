"""One capture run in one process (one TP rank): build, calibrate, compile, capture, replay, time.

Returns a plain dict per rank; `command.py` merges ranks and writes the JSON summary.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from dynacheck.capture import linear
from dynacheck.capture.breaks import break_event
from dynacheck.capture.model import Glm5Config, Glm5Model
from dynacheck.capture.piecewise import CaptureState, PiecewiseBackend

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass
class CaptureOptions:
    layers: int = 2
    tp: int = 1
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    dtype: str = "bf16"
    experts: int | None = None  # None: 16 at full size, 4 at tiny size
    size: str = "auto"  # auto | full | tiny
    device: str = "auto"  # auto | cuda | cpu
    quantizer: str = "auto"  # auto | flashinfer | reference
    fix_module: str = ""  # path of the emitted patch module to import ("" = no fix)
    out: str = "reports/capture"
    timing_iters: int = 10
    seed: int = 0
    save_outputs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_device(choice: str) -> torch.device:
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        from dynacheck.errors import UserError

        raise UserError("--device cuda was asked for but torch sees no CUDA device.", "Use --device auto or cpu.")
    return torch.device("cuda")


def config_for(opts: CaptureOptions, device: torch.device) -> tuple[Glm5Config, str]:
    size = opts.size if opts.size != "auto" else ("full" if device.type == "cuda" else "tiny")
    base = Glm5Config() if size == "full" else Glm5Config.tiny()
    experts = opts.experts or (16 if size == "full" else base.experts)
    cfg = Glm5Config(**{**asdict(base), "layers": opts.layers, "experts": experts,
                        "top_k": min(base.top_k, experts)})
    return cfg, size


def load_fix(path: str) -> dict[str, Any]:
    """Import the emitted patch module (after the quantizer is bound, as a server imports it at start-up)."""
    spec = importlib.util.spec_from_file_location("dynacheck_fix_patch", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import fix module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    report = getattr(module, "APPLIED", None)
    return {"module": str(path), "applied": list(report) if report else []}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step_ms(fn: Any, device: torch.device, iters: int) -> float:
    fn()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) * 1000.0 / iters


def _compare(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    diff = (out.float() - ref.float()).abs()
    scale = ref.float().abs().max().clamp(min=1e-12)
    return {"max_abs": float(diff.max()), "max_rel": float(diff.max() / scale)}


def run_rank(rank: int, opts: CaptureOptions) -> dict[str, Any]:
    """Everything one rank does; never raises for a compile/capture failure (it is the finding)."""
    device = resolve_device(opts.device)
    shard = linear.Shard(rank, opts.tp)
    if device.type == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dtype = DTYPES[opts.dtype]
    binding = linear.bind_quantizer(device, opts.quantizer)
    result: dict[str, Any] = {"rank": rank, "device": str(device), "quantizer": asdict(binding),
                              "skipped": [], "breaks": [], "batch_sizes": []}
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
        result["compute_capability"] = "%d.%d" % torch.cuda.get_device_capability(device)
    else:
        result["skipped"].append("CUDA graph capture and replay: no CUDA device (pieces run eagerly)")
        if binding.source != "flashinfer":
            result["skipped"].append("FlashInfer fp4_quantize and FP4 GEMM: no CUDA device (reference quantizer)")
    if opts.fix_module:
        result["fix"] = load_fix(opts.fix_module)
    cfg, size = config_for(opts, device)
    result["size"], result["config"] = size, asdict(cfg)

    t0 = time.perf_counter()
    with torch.no_grad():
        model = Glm5Model(cfg, shard, device=device, dtype=dtype, seed=opts.seed).eval()
    result["build_s"] = round(time.perf_counter() - t0, 3)
    gen = torch.Generator(device=device).manual_seed(opts.seed + 1)
    inputs = {b: torch.randn(b, cfg.hidden, generator=gen, device=device, dtype=dtype)
              for b in sorted(set(opts.batch_sizes), reverse=True)}
    positions = {b: torch.arange(b, device=device) for b in inputs}
    big = max(inputs)
    linear.calibrate(model, lambda: model(inputs[big], positions[big]))

    state = CaptureState(use_cuda_graphs=False)
    state.stable = {t.data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    if device.type == "cuda":
        state.pool = torch.cuda.graph_pool_handle()
    _raise_recompile_limit(len(inputs) + 2)
    compiled = torch.compile(model, backend=PiecewiseBackend(state), fullgraph=True, dynamic=False)

    outputs: dict[str, torch.Tensor] = {}
    for b, x in inputs.items():  # descending, as SGLang captures (big graphs first share the pool)
        entry: dict[str, Any] = {"batch_size": b}
        result["batch_sizes"].append(entry)
        with torch.no_grad():
            ref = model(x, positions[b]).clone()
            entry["eager_ms"] = round(_step_ms(lambda: model(x, positions[b]), device, opts.timing_iters), 4)
            t1 = time.perf_counter()
            try:
                compiled(x, positions[b])
                _sync(device)
            except Exception as exc:  # the break is the result
                event = break_event(exc, rank=rank, compiled_frame=f"{type(model).__qualname__}.forward")
                entry.update(compiled=False, captured=False, error_type=type(exc).__name__,
                             gb_id=event.gb_id, compile_s=round(time.perf_counter() - t1, 3))
                if not any(e["gb_type"] == event.gb_type and e["site"] == (event.site and event.site.to_dict())
                           for e in result["breaks"]):
                    result["breaks"].append(event.to_dict())
                continue
            entry["compile_s"] = round(time.perf_counter() - t1, 3)
            entry["compiled"] = True
            split = state.splits[-1]
            entry["pieces"], entry["attention_ops"] = len(split.pieces), len(split.attention)
            entry["custom_ops"] = split.custom_ops
            if device.type == "cuda":
                _capture(compiled, x, positions[b], ref, state, entry, device)
            else:
                entry["captured"] = None
                out = compiled(x, positions[b]).clone()
                entry["replay"] = _compare(out, ref)
                entry["replay_ms"] = round(_step_ms(lambda: compiled(x, positions[b]), device, opts.timing_iters), 4)
            if opts.save_outputs:
                outputs[str(b)] = ref.float().cpu()
    if opts.save_outputs:
        torch.save(outputs, Path(opts.out) / f"outputs-rank{rank}.pt")
    return result


def _capture(compiled: Any, x: torch.Tensor, pos: torch.Tensor, ref: torch.Tensor, state: CaptureState,
             entry: dict[str, Any], device: torch.device) -> None:
    """Capture every piece for this shape, replay, compare with the eager model's output."""
    state.use_cuda_graphs, state.capturing = True, True
    t = time.perf_counter()
    try:
        compiled(x, pos)
        torch.cuda.synchronize(device)
    except Exception as exc:
        entry.update(captured=False, error_type=type(exc).__name__, error=str(exc).splitlines()[0][:300])
        return
    finally:
        state.capturing = False
    entry["capture_s"] = round(time.perf_counter() - t, 3)
    entry["captured"] = True
    out = compiled(x, pos).clone()
    entry["replay"] = _compare(out, ref)
    entry["replay_ms"] = round(_step_ms(lambda: compiled(x, pos), device, 20), 4)


def _raise_recompile_limit(n: int) -> None:
    """One Dynamo compile per batch size (static shapes, as each captured size is its own graph)."""
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), n))


def tp_worker(rank: int, opts: CaptureOptions, port: int) -> None:
    """torch.multiprocessing entry: one TP rank over torch.distributed, result written as JSON."""
    import json

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(opts.tp), LOCAL_RANK=str(rank))
    use_cuda = resolve_device(opts.device).type == "cuda"
    if use_cuda:
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=opts.tp)
    try:
        result = run_rank(rank, opts)
    except Exception as exc:
        import traceback

        result = {"rank": rank, "error": f"{type(exc).__name__}: {exc}"[:2000],
                  "traceback": traceback.format_exc()[-4000:]}
    # The result is written before teardown: on the H200 host, destroying an NCCL group whose
    # communicator was captured into CUDA graphs hung both ranks (measured, bench/capture.md).
    Path(opts.out, f"rank{rank}.json").write_text(json.dumps(result, indent=1, default=str))
    _teardown(dist, use_cuda)


def _teardown(dist, use_cuda: bool, seconds: float = 30.0) -> None:
    """Free the captured graphs, then destroy the group; a teardown that hangs ends the rank instead."""
    import gc
    import threading

    torch._dynamo.reset()  # drops the compiled pieces and the CUDA graphs they hold
    gc.collect()
    if use_cuda:
        torch.cuda.synchronize()
    done = threading.Event()

    def destroy() -> None:
        dist.destroy_process_group()
        done.set()

    threading.Thread(target=destroy, daemon=True).start()
    if not done.wait(seconds):
        print(f"rank teardown: destroy_process_group did not return in {seconds:.0f} s; exiting the rank",
              flush=True)
        os._exit(0)

"""NVFP4 linear layers as SGLang's `ModelOptFp4LinearMethod` runs them, plus tensor-parallel variants.

The activation goes through the module global `fp4_quantize`, bound once by `bind_quantizer()`:
FlashInfer's real `fp4_quantize` on CUDA when FlashInfer imports (the call Dynamo must trace, as in
SGLang 0.5.9, where `modelopt_quant.fp4_quantize` is bound at import), otherwise the pure-torch
reference. A fix module rebinds this global like any other holder of the original function.

FlashInfer 0.6.3 compiles its quantize kernel body only for `__CUDA_ARCH__ >= 1000`
(`quantization.cuh`): on sm90 the call launches an empty kernel and returns uninitialised buffers.
There the call is still made (it is the path under test) and its values are replaced by the
reference quantizer's (through a `torch.where` on a False flag, so the launch stays in the graph),
so the model's numbers stay meaningful; `QUANT.kernel_writes_output` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from dynacheck.capture import nvfp4


def reference_fp4_quantize(x: torch.Tensor, global_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Same signature and output shapes as `flashinfer.fp4_quantize(x, gs)` (swizzled 128x4 scales)."""
    return nvfp4.quantize(x, global_scale, swizzled=True)


@dataclass
class QuantBinding:
    """Which quantize/GEMM the NVFP4 layers use in this process (set once before the model is built)."""

    source: str = "reference"  # flashinfer | reference
    kernel_writes_output: bool = True  # False on sm < 100: FlashInfer's kernel body is compiled out
    fp4_gemm: str = "dequantize-bf16"  # flashinfer-mm_fp4 | dequantize-bf16
    note: str = ""


QUANT = QuantBinding()
fp4_quantize: Callable[..., tuple[torch.Tensor, torch.Tensor]] = reference_fp4_quantize
mm_fp4: Callable[..., torch.Tensor] | None = None


def bind_quantizer(device: torch.device, choice: str = "auto") -> QuantBinding:
    """Bind `fp4_quantize` (and the FP4 GEMM) for `device`, the way SGLang binds them at import.

    choice: auto (FlashInfer on CUDA when importable), flashinfer (also on CPU, e.g. a stand-in
    package in tests), reference.
    """
    global fp4_quantize, mm_fp4
    fp4_quantize, mm_fp4 = reference_fp4_quantize, None
    QUANT.__init__()
    if choice == "reference" or (choice == "auto" and device.type != "cuda"):
        QUANT.note = "pure-torch reference quantizer, dequantize-then-GEMM"
        return QUANT
    try:
        from flashinfer import (
            fp4_quantize as fi_quantize,  # lazily: only this path needs it
        )
    except Exception as exc:  # ImportError, or a CUDA/tvm-ffi load error
        if choice == "flashinfer":
            raise
        QUANT.note = f"flashinfer not importable ({type(exc).__name__}: {exc}); reference quantizer"
        return QUANT
    fp4_quantize = fi_quantize
    QUANT.source = "flashinfer"
    if device.type != "cuda":
        QUANT.note = "flashinfer fp4_quantize bound on CPU (stand-in package); dequantize-then-GEMM"
        return QUANT
    major, minor = torch.cuda.get_device_capability(device)
    QUANT.kernel_writes_output = major >= 10
    if major >= 10:
        from flashinfer import mm_fp4 as fi_mm_fp4

        mm_fp4 = fi_mm_fp4
        QUANT.fp4_gemm = "flashinfer-mm_fp4"
    else:
        QUANT.note = (
            f"sm{major}{minor}: flashinfer.fp4_quantize is called, but its kernel body is compiled only for "
            "__CUDA_ARCH__ >= 1000, so its output is replaced by the reference quantizer's; "
            "GEMM = dequantize then bf16"
        )
    return QUANT


class Nvfp4Linear(nn.Module):
    """y = x W^T with W in NVFP4 (packed e2m1, swizzled e4m3 block scales, global scale), as SGLang stores it."""

    def __init__(self, weight: torch.Tensor, input_amax: float = 8.0, out_dtype: torch.dtype = torch.bfloat16,
                 weight_amax: torch.Tensor | None = None):
        super().__init__()
        n, k = weight.shape
        if k % nvfp4.BLOCK:
            raise ValueError(f"in_features must be a multiple of 16, got {k}")
        self.in_features, self.out_features, self.out_dtype = k, n, out_dtype
        # A checkpoint's weight_scale_2 belongs to the whole tensor: TP shards pass the full amax.
        w_amax = weight.float().abs().amax() if weight_amax is None else weight_amax.float()
        weight_gs = nvfp4.global_scale_for(w_amax).to(weight.device)
        packed, sf_linear = nvfp4.quantize(weight, weight_gs, swizzled=False)
        self.register_buffer("weight", packed, persistent=True)  # (n, k/2) uint8
        self.register_buffer("weight_scale", sf_linear.view(torch.float8_e4m3fn))  # (n, k/16), linear
        swz = nvfp4.swizzle_128x4(sf_linear).view(torch.float8_e4m3fn)
        self.register_buffer("weight_scale_interleaved", swz.reshape(-1, (k // 16 + 3) // 4 * 4))
        self.register_buffer("weight_scale_2", (1.0 / weight_gs).reshape(()))
        # Dequantized copy for GPUs without an FP4 GEMM (sm90) and for CPU: computed once at load.
        w_deq = nvfp4.dequantize(packed, sf_linear, weight_gs, swizzled=False, dtype=out_dtype)
        self.register_buffer("weight_dequant", w_deq)
        self.register_buffer("kernel_valid", torch.tensor(False, device=weight.device))
        self.set_input_amax(input_amax)

    def set_input_amax(self, amax: float) -> None:
        """Static activation calibration, as a ModelOpt checkpoint's `input_scale` (= amax / 2688)."""
        dev = self.weight.device
        input_scale = torch.tensor(amax / (nvfp4.E4M3_MAX * nvfp4.E2M1_MAX), dtype=torch.float32, device=dev)
        self.register_buffer("input_scale", input_scale)
        self.register_buffer("input_scale_inv", (1.0 / input_scale).reshape(1))
        self.register_buffer("alpha", (input_scale * self.weight_scale_2).reshape(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, self.in_features)
        x_fp4, x_sf = fp4_quantize(x2, self.input_scale_inv)
        if not QUANT.kernel_writes_output:
            # Keep the kernel's outputs in the graph (a pure op whose results go unused would be
            # dead-code-eliminated, and the CUDA graph would not hold the FlashInfer launch), but
            # select the reference values: `kernel_valid` is False wherever this branch runs.
            ref_fp4, ref_sf = reference_fp4_quantize(x2, self.input_scale_inv)
            x_fp4 = torch.where(self.kernel_valid, x_fp4, ref_fp4)
            x_sf = torch.where(self.kernel_valid, x_sf, ref_sf)
        if mm_fp4 is not None:
            out = mm_fp4(
                x_fp4, self.weight.T, x_sf, self.weight_scale_interleaved.T, self.alpha, self.out_dtype
            )
        else:
            x_deq = nvfp4.dequantize(x_fp4, x_sf, self.input_scale_inv, swizzled=True, dtype=self.out_dtype)
            out = x_deq @ self.weight_dequant.T
        return out.reshape(*shape[:-1], self.out_features)


@dataclass(frozen=True)
class Shard:
    """This rank's place in tensor parallelism."""

    rank: int = 0
    size: int = 1

    def rows(self, w: torch.Tensor) -> torch.Tensor:
        """Column-parallel: this rank's output rows."""
        step = w.shape[0] // self.size
        return w[self.rank * step : (self.rank + 1) * step]

    def cols(self, w: torch.Tensor) -> torch.Tensor:
        """Row-parallel: this rank's input columns."""
        step = w.shape[1] // self.size
        return w[:, self.rank * step : (self.rank + 1) * step]


def all_reduce(x: torch.Tensor, shard: Shard) -> torch.Tensor:
    """Sum over TP ranks with a traceable functional collective (no graph break)."""
    if shard.size == 1:
        return x
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    return funcol.all_reduce(x, "sum", dist.group.WORLD)


class RowParallel(nn.Module):
    """Row-parallel NVFP4 linear: local partial product, then all-reduce."""

    def __init__(self, full_weight: torch.Tensor, shard: Shard, out_dtype: torch.dtype):
        super().__init__()
        self.shard = shard
        self.linear = Nvfp4Linear(shard.cols(full_weight).contiguous(), out_dtype=out_dtype,
                                  weight_amax=full_weight.abs().amax())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return all_reduce(self.linear(x), self.shard)


def calibrate(model: nn.Module, run: Callable[[], object], margin: float = 1.0) -> dict[str, float]:
    """Set every Nvfp4Linear's static input scale from the activation amax seen in one eager run."""
    seen: dict[str, float] = {}
    hooks = []
    for name, mod in model.named_modules():
        if isinstance(mod, Nvfp4Linear):

            def hook(m: nn.Module, args: tuple, _name: str = name) -> None:
                seen[_name] = max(seen.get(_name, 0.0), float(args[0].detach().abs().amax()))

            hooks.append(mod.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            run()
    finally:
        for h in hooks:
            h.remove()
    seen = _max_over_ranks(seen)
    for name, mod in model.named_modules():
        if isinstance(mod, Nvfp4Linear) and name in seen:
            mod.set_input_amax(max(seen[name] * margin, 1e-4))
    return seen


def _max_over_ranks(seen: dict[str, float]) -> dict[str, float]:
    """A checkpoint's input_scale is one number for the whole layer: every TP rank uses the max."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1 or not seen:
        return seen
    names = sorted(seen)
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([seen[n] for n in names], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return dict(zip(names, t.tolist()))

"""The flagship finding, hand-built from FIELD_NOTES (the static engine produces the same shape):
GLM-5 forward -> ModelOptFp4LinearMethod.apply -> flashinfer fp4_quantize -> ... -> get_cuda_version
-> subprocess.check_output -> threading.Lock() in Popen.__init__: GB0007, fatal under fullgraph.
"""

from __future__ import annotations

from dynacheck.model import (
    VIA_ATTR_TYPE,
    VIA_ENTRY,
    VIA_IMPORT,
    VIA_MODULE,
    VIA_MODULE_CALL,
    Finding,
    Fix,
    Hop,
    Outcome,
    Site,
)

_CHAIN = (
    ("sglang.srt.models.deepseek_v2.DeepseekV2Model.forward", "sglang/srt/models/deepseek_v2.py", VIA_ENTRY),
    ("sglang.srt.models.deepseek_v2.DeepseekV2MLP.forward", "sglang/srt/models/deepseek_v2.py", VIA_MODULE_CALL),
    ("sglang.srt.layers.linear.MergedColumnParallelLinear.forward", "sglang/srt/layers/linear.py", VIA_MODULE_CALL),
    ("sglang.srt.layers.quantization.modelopt_quant.ModelOptFp4LinearMethod.apply",
     "sglang/srt/layers/quantization/modelopt_quant.py", VIA_ATTR_TYPE),
    ("flashinfer.fp4_quantization.fp4_quantize", "flashinfer/fp4_quantization.py", VIA_IMPORT),
    ("flashinfer.fp4_quantization.get_fp4_quantization_module", "flashinfer/fp4_quantization.py", VIA_MODULE),
    ("flashinfer.fp4_quantization.gen_fp4_quantization_module", "flashinfer/fp4_quantization.py", VIA_MODULE),
    ("flashinfer.jit.cpp_ext.is_cuda_version_at_least", "flashinfer/jit/cpp_ext.py", VIA_IMPORT),
    ("flashinfer.jit.cpp_ext.get_cuda_version", "flashinfer/jit/cpp_ext.py", VIA_MODULE),
)


def flagship_findings() -> tuple[Finding, ...]:
    """The one finding `--fix` applies when no scan file is given."""
    chain = tuple(Hop(function=f, file=file, line=0, via=via, package=file.split("/")[0]) for f, file, via in _CHAIN)
    return (
        Finding(
            rule="DC001",
            title="subprocess.check_output(nvcc --version) reached from the compiled forward",
            severity="error",
            site=Site(file="flashinfer/jit/cpp_ext.py", line=0, function="flashinfer.jit.cpp_ext.get_cuda_version",
                      callee="subprocess.check_output", package="flashinfer-python"),
            chain=chain,
            outcome=Outcome(kind="graph_break", gb_id="GB0007", gb_type="Attempted to call function marked as skipped",
                            fatal_under_fullgraph=True,
                            detail="at threading.Lock() inside subprocess.Popen.__init__"),
            fixes=(
                Fix(kind="custom_op", at="flashinfer.fp4_quantization.fp4_quantize",
                    summary="Wrap fp4_quantize in torch.library.custom_op with a register_fake: the smallest "
                            "function that owns the side effects and returns tensors."),
                Fix(kind="assume_constant_result", at="flashinfer.jit.cpp_ext.get_cuda_version", sound=False,
                    summary="Not enough: build_and_load, file locks and the ninja build stay in the trace."),
                Fix(kind="prewarm", at="flashinfer.fp4_quantization.get_fp4_quantization_module", sound=False,
                    summary="Dynamo ignores functools.cache while tracing; a warm cache changes nothing."),
            ),
            entry="sglang.srt.models.deepseek_v2:DeepseekV2Model.forward",
            family="process",
        ),
    )

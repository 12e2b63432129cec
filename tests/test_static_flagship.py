"""The flagship case on the real pinned wheels: SGLang 0.5.9 + FlashInfer 0.6.3, GLM-5 preset."""

from __future__ import annotations

import pytest

from dynacheck.static.scan import scan_targets

pytestmark = pytest.mark.wheels

FLAGSHIP = [
    "sglang.srt.models.deepseek_v2.DeepseekV2Model.forward",
    "sglang.srt.models.deepseek_v2.DeepseekV2DecoderLayer.forward",
    "sglang.srt.models.deepseek_v2.DeepseekV2MLP.forward",
    "sglang.srt.layers.linear.ColumnParallelLinear.forward",
    "sglang.srt.layers.quantization.modelopt_quant.ModelOptFp4LinearMethod.apply",
    "flashinfer.fp4_quantization.fp4_quantize",
    "flashinfer.fp4_quantization.get_fp4_quantization_module",
    "flashinfer.fp4_quantization.gen_fp4_quantization_sm1*_module",
    "flashinfer.fp4_quantization.gen_fp4_quantization_module",
    "flashinfer.jit.cpp_ext.is_cuda_version_at_least",
    "flashinfer.jit.cpp_ext.get_cuda_version",
]


@pytest.fixture(scope="module")
def glm5(pinned_targets, scan_cache):
    return scan_targets(pinned_targets, [], "glm5", cache_dir=scan_cache)


def _matches(functions, pattern_chain) -> bool:
    from fnmatch import fnmatchcase

    return len(functions) == len(pattern_chain) and all(fnmatchcase(f, p) for f, p in zip(functions, pattern_chain))


def test_flagship_chain_with_every_hop(glm5):
    candidates = [f for f in glm5.findings
                  if f.site.function == "flashinfer.jit.cpp_ext.get_cuda_version"
                  and f.site.callee == "subprocess.check_output"]
    assert candidates, "get_cuda_version's nvcc probe was not reached"
    flagship = [f for f in candidates if _matches([h.function for h in f.chain], FLAGSHIP)]
    assert flagship, [[h.function for h in f.chain] for f in candidates]
    finding = flagship[0]
    assert finding.rule == "DC001"
    assert finding.outcome.gb_id == "GB0007" and finding.outcome.fatal_under_fullgraph
    assert "Popen.__init__" in finding.outcome.detail
    assert finding.site.file == "flashinfer/jit/cpp_ext.py" and "nvcc" in finding.site.code
    for hop in finding.chain:
        assert hop.file.endswith(".py") and hop.line > 0 and hop.code, hop
    by_name = {h.function.rpartition(".")[2]: h for h in finding.chain}
    # the deployment (ModelOpt NVFP4) decides self.quant_method: no hierarchy fallback, high confidence
    assert by_name["apply"].via == "attribute type" and by_name["apply"].confidence == "high"
    assert finding.confidence == "high" and finding.conditions == ()
    assert "functools.cache" in by_name["get_fp4_quantization_module"].note
    assert "functools.cache" in by_name["get_cuda_version"].note
    assert by_name["fp4_quantize"].line == 677 and "get_fp4_quantization_module" in by_name["fp4_quantize"].code


def test_flagship_fix_is_a_custom_op_at_fp4_quantize(glm5):
    finding = next(f for f in glm5.findings if f.site.function == "flashinfer.jit.cpp_ext.get_cuda_version"
                   and _matches([h.function for h in f.chain], FLAGSHIP))
    first = finding.fixes[0]
    assert (first.kind, first.at, first.sound) == ("custom_op", "flashinfer.fp4_quantization.fp4_quantize", True)
    assert "register_fake" in first.summary and "register_fake" in first.snippet
    unsound = {f.kind: f for f in finding.fixes if not f.sound}
    assert "prewarm" in unsound and "traces through" in unsound["prewarm"].summary
    assert "disable" in unsound and "GB0098" in unsound["disable"].summary
    constant = [f for f in finding.fixes if f.kind == "assume_constant_result"]
    assert constant and not constant[0].sound and "fp4_quantize" in constant[0].summary


def test_chain_is_not_cut_at_the_no_op_register_custom_op(glm5):
    kernel_calls = [f for f in glm5.findings
                    if f.site.function.endswith("get_fp4_quantization_module.<locals>.fp4_quantize_sm100")]
    assert kernel_calls, "the body of the @register_custom_op function was not traced"
    last = kernel_calls[0].chain[-1]
    assert "returns the function unchanged" in last.note
    assert kernel_calls[0].site.callee.startswith("tvm_ffi")


def test_other_hazards_on_the_path_are_listed_with_honest_confidence(glm5):
    rules = {f.rule for f in glm5.findings}
    assert {"DC001", "DC030", "DC071"} <= rules  # subprocess, logging, a JIT kernel call
    for finding in glm5.findings:
        if any(h.via == "class hierarchy fallback" for h in finding.chain):
            assert finding.confidence == "low"
    assert glm5.stats.files_parsed < glm5.stats.files_in_trees / 4  # only what the entry reaches


def test_custom_op_fixes_are_placed_where_a_patch_can_reach(glm5):
    for finding in glm5.findings:
        for fix in finding.fixes:
            if fix.kind == "custom_op" and fix.sound:
                assert "<locals>" not in fix.at, (finding.site, fix.at)
    kernel = next(f for f in glm5.findings if f.site.function.endswith("<locals>.fp4_quantize_sm100"))
    assert kernel.fixes[0].at == "flashinfer.fp4_quantization.fp4_quantize"


def _site_first(scan, file: str, line: int):
    return next(f for f in scan.findings if (f.site.file, f.site.line) == (file, line))


def test_the_crash_site_leads_with_the_flagship_chain_and_fix(glm5):
    """Issue 9: cpp_ext.py:69 is unconditional, GB0007, its first finding is the FIELD_NOTES chain."""
    first = _site_first(glm5, "flashinfer/jit/cpp_ext.py", 69)
    assert first.conditions == () and first.outcome.gb_id == "GB0007" and first.confidence == "high"
    assert _matches([h.function for h in first.chain], FLAGSHIP), [h.function for h in first.chain]
    assert (glm5.fix_plan[0].kind, glm5.fix_plan[0].at) == ("custom_op", "flashinfer.fp4_quantization.fp4_quantize")
    assert glm5.deployment["gpu"] == "sm120" and glm5.deployment["quantization"] == "modelopt_fp4"


def test_paths_the_deployment_never_takes_are_gone(glm5):
    never = ("MoriEPMoE", "DeepEPMoE", "FlashInferFusedMoE", "Fp8LinearMethod", "forward_normal_dual_stream",
             "forward_deepep")
    for finding in glm5.findings:
        if finding.conditions:
            continue
        names = [h.function for h in finding.chain]
        assert not any(n.rpartition(".")[0].endswith(never) or n.endswith(never) for n in names), names


def test_sm100_binds_sgl_kernel_quantize(pinned_targets, scan_cache):
    """modelopt_quant binds fp4_quantize to FlashInfer's only when is_sm120_supported()."""
    from dynacheck.deploy.build import DeploymentSpec

    sm100 = scan_targets(pinned_targets, [], "glm5", cache_dir=scan_cache, deployment=DeploymentSpec(gpu="sm100"))
    assert sm100.deployment["gpu"] == "sm100"
    for finding in sm100.findings:
        names = [h.function for h in finding.chain]
        if finding.conditions or "sglang.srt.layers.quantization.modelopt_quant.ModelOptFp4LinearMethod.apply" \
                not in names:
            continue
        assert "flashinfer.fp4_quantization.fp4_quantize" not in names, names


def test_symm_mem_flag_changes_the_answer(pinned_targets, scan_cache, glm5):
    """`use_symmetric_memory` returns a nullcontext unless `--enable-symm-mem`: without the flag no pynccl
    allocator site is reachable; with it they are, behind the allocator's lazy `if _mem_pool is None:`
    (first use: whether an earlier eager step made the pool decides whether the compile meets it), and the
    context's constructor asks `torch.cuda.is_current_stream_capturing()` (DC135, GB0208) every time."""
    from dynacheck.deploy.build import DeploymentSpec

    def pynccl(scan):
        return [f for f in scan.findings if "pynccl_allocator" in f.site.file]

    assert not pynccl(glm5)
    with_flag = scan_targets(pinned_targets, [], "glm5", cache_dir=scan_cache,
                             deployment=DeploymentSpec(server_args="--enable-symm-mem"))
    assert with_flag.deployment["server_args"].endswith("--enable-symm-mem")
    found = pynccl(with_flag)
    probe = [f for f in found if f.rule == "DC135"]
    assert [(f.site.line, f.unconditional) for f in probe][:1] == [(154, True)]
    lazy = [f for f in found if f.rule != "DC135"]
    assert lazy and all(any("_mem_pool is None" in c.text for c in f.conditions) for f in lazy)


def test_the_first_break_in_trace_order_is_the_nvcc_probe(glm5):
    """Dynamo evaluates `get_fp4_quantization_module(...)` before the kernel method it returns; with CUDA_HOME
    unset, get_cuda_path's `which nvcc` (cpp_ext.py:49) comes before `nvcc --version` (:69)."""
    first = glm5.first_break
    assert (first["file"], first["gb_id"]) == ("flashinfer/jit/cpp_ext.py", "GB0007")
    assert first["function"] in ("flashinfer.jit.cpp_ext.get_cuda_path", "flashinfer.jit.cpp_ext.get_cuda_version")


@pytest.mark.parametrize("preset, reachable", [("deepseek-v3", True), ("glm5", False)])
def test_model_config_decides_the_fused_routing_branch(pinned_targets, scan_cache, preset, reachable):
    """topk.py:759 takes FlashInfer's fused routing only when topk_group * num_expert_group >= topk:
    DeepSeek-V3 4 * 8 >= 8, GLM-5 1 * 1 < 8. The values come from the model config through TopK's constructor
    and the TopKConfig dataclass; shared-experts fusion is switched off so topk is the config's 8."""
    from dynacheck.deploy.build import DeploymentSpec

    scan = scan_targets(pinned_targets, [], preset, cache_dir=scan_cache,
                        deployment=DeploymentSpec(server_args="--disable-shared-experts-fusion"))
    fused = [f for f in scan.findings if f.site.file == "flashinfer/fused_moe/fused_routing_dsv3.py" and not f.conditions]
    assert bool(fused) is reachable

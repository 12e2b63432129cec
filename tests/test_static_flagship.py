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
    assert by_name["apply"].via == "class hierarchy fallback" and by_name["apply"].confidence == "low"
    assert finding.confidence == "low"
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
    assert {"DC001", "DC020", "DC030"} <= rules  # subprocess, file I/O, logging
    confidences = {f.confidence for f in glm5.findings}
    assert "low" in confidences and "high" in confidences
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

"""Which models a SGLang release serves without piecewise CUDA graphs, read from its ServerArgs and
ModelConfig sources (deploy/piecewise_off.py): 0.5.10 turns them off for a list of architectures and for
multimodal models unless `--enforce-piecewise-cuda-graph`; 0.5.9 (opt-in) turns nothing off."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.census.matrix import CensusDeployment
from dynacheck.census.models import ModelEntry
from dynacheck.census.run import _not_applicable
from dynacheck.deploy.piecewise_off import piecewise_turned_off

SERVER_ARGS = '''class ServerArgs:
    def _handle_piecewise_cuda_graph(self):
        if self.enforce_piecewise_cuda_graph:
            self.disable_piecewise_cuda_graph = False
            return
        if self.get_model_config().is_piecewise_cuda_graph_disabled_model:
            self.disable_piecewise_cuda_graph = True
        if self.speculative_algorithm is not None:
            self.disable_piecewise_cuda_graph = True
        if self.get_model_config().is_multimodal:
            self.disable_piecewise_cuda_graph = True
'''
MODEL_CONFIG = '''class ModelConfig:
    def __init__(self, enable_multimodal=None):
        if enable_multimodal is None:
            mm_disabled_models = [
                "QuietVLForConditionalGeneration",
            ]


multimodal_model_archs = [
    "PictureVLForConditionalGeneration",
    "QuietVLForConditionalGeneration",
]

piecewise_cuda_graph_disabled_model_archs = [
    "SparseForCausalLM",
]
'''


def _release(root: Path, server_args: str = SERVER_ARGS) -> Path:
    srt = root / "sglang" / "srt"
    (srt / "configs").mkdir(parents=True)
    (srt / "server_args.py").write_text(server_args)
    (srt / "configs" / "model_config.py").write_text(MODEL_CONFIG)
    return root


def test_a_listed_architecture_is_turned_off_with_the_lines_that_do_it(tmp_path):
    why = piecewise_turned_off([_release(tmp_path)], "SparseForCausalLM", "--quantization fp8")
    assert why.startswith("SGLang turns piecewise CUDA graphs off for SparseForCausalLM")
    assert "(sglang/srt/configs/model_config.py:15)" in why and "(sglang/srt/server_args.py:6, " in why
    assert why.endswith("nothing is compiled unless the launch adds --enforce-piecewise-cuda-graph")


def test_a_multimodal_model_is_turned_off_unless_multimodal_is_off_for_it(tmp_path):
    root = _release(tmp_path)
    why = piecewise_turned_off([root], "PictureVLForConditionalGeneration", "")
    assert "a multimodal model" in why and "model_config.py:10" in why and "server_args.py:10" in why
    # ModelConfig leaves multimodal off for its `mm_disabled_models`, unless the launch turns it on
    assert piecewise_turned_off([root], "QuietVLForConditionalGeneration", "") == ""
    assert "a multimodal model" in piecewise_turned_off([root], "QuietVLForConditionalGeneration", "--enable-multimodal")
    assert "a multimodal model" in piecewise_turned_off([root], "QuietVLForConditionalGeneration",
                                                        "--model-impl transformers")


def test_enforcing_keeps_every_model_compiled(tmp_path):
    root = _release(tmp_path)
    assert piecewise_turned_off([root], "SparseForCausalLM", "--enforce-piecewise-cuda-graph") == ""
    assert piecewise_turned_off([root], "PictureVLForConditionalGeneration", "--enforce-piecewise-cuda-graph") == ""
    assert piecewise_turned_off([root], "LlamaForCausalLM", "") == ""


def test_a_release_without_the_rule_or_with_another_override_turns_nothing_off(tmp_path):
    """0.5.9 has no such handler (piecewise is opt-in); a handler that skips on another flag is not the one
    this reading knows, so it claims nothing rather than guess."""
    opt_in = _release(tmp_path / "a", "class ServerArgs:\n    enable_piecewise_cuda_graph: bool = False\n")
    assert piecewise_turned_off([opt_in], "SparseForCausalLM", "") == ""
    other = _release(tmp_path / "b", SERVER_ARGS.replace("self.enforce_piecewise_cuda_graph", "self.force_it"))
    assert piecewise_turned_off([other], "SparseForCausalLM", "") == ""
    broken = _release(tmp_path / "c", "class ServerArgs(:\n")
    assert piecewise_turned_off([broken], "SparseForCausalLM", "") == ""


def test_the_census_makes_such_a_cell_not_applicable_with_that_reason(tmp_path):
    root = _release(tmp_path)
    deployment = CensusDeployment("bf16/sm90", "", "sm90")
    sparse = ModelEntry("SparseForCausalLM", "sglang.srt.models.sparse", "sglang.srt.models.sparse:SparseModel.forward",
                        "compiled module", True)
    llama = ModelEntry("LlamaForCausalLM", "sglang.srt.models.llama", "sglang.srt.models.llama:LlamaModel.forward",
                       "compiled module", True)
    assert "piecewise_cuda_graph_disabled_model_archs" in _not_applicable(sparse, deployment, [root])
    assert _not_applicable(llama, deployment, [root]) is None
    enforced = CensusDeployment("bf16/sm90", "--enforce-piecewise-cuda-graph", "sm90")
    assert _not_applicable(sparse, enforced, [root]) is None


@pytest.mark.wheels
def test_the_real_releases():
    """0.5.10: GLM-5 (GlmMoeDsa) is on the list, Qwen2.5-VL is multimodal, Step3-VL has multimodal off by
    default, Llama is compiled; 0.5.9 turns nothing off."""
    from dynacheck.errors import UserError
    from dynacheck.sources.resolve import resolve_target

    try:
        new, old = (Path(resolve_target(f"sglang=={v}", offline=True).root) for v in ("0.5.10", "0.5.9"))
    except UserError as exc:
        pytest.skip(f"sglang wheels not in the wheel cache: {exc}")
    assert "model_config.py:1355" in piecewise_turned_off([new], "GlmMoeDsaForCausalLM", "--quantization modelopt_fp4")
    assert "a multimodal model" in piecewise_turned_off([new], "Qwen2_5_VLForConditionalGeneration", "")
    assert piecewise_turned_off([new], "Step3VLForConditionalGeneration", "") == ""
    assert piecewise_turned_off([new], "LlamaForCausalLM", "") == ""
    assert piecewise_turned_off([old], "GlmMoeDsaForCausalLM", "--enable-piecewise-cuda-graph") == ""


NSA_CONFIG = MODEL_CONFIG + '''

def is_deepseek_nsa(config) -> bool:
    return getattr(config, "index_topk", None) is not None


class NsaModelConfig:
    def __init__(self):
        self.is_piecewise_cuda_graph_disabled_model = (
            is_piecewise_cuda_graph_disabled_model(self.hf_config.architectures)
            or is_deepseek_nsa(self.hf_text_config)
        )
'''
NSA_MODEL = '''import subprocess

import torch

from sglang.srt.configs.model_config import is_deepseek_nsa


class Indexer(torch.nn.Module):
    def forward(self, x):
        subprocess.check_output(["nvcc", "--version"])
        return x


class NsaModel(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_nsa = is_deepseek_nsa(config)
        if self.use_nsa:
            self.indexer = Indexer()

    def forward(self, x):
        if self.use_nsa:
            x = self.indexer(x)
        return x
'''


def _nsa_release(root: Path) -> Path:
    _release(root, SERVER_ARGS.replace("class ServerArgs:\n", "class ServerArgs:\n    enforce_piecewise_cuda_graph: bool = False\n\n"
                                       "    @staticmethod\n    def add_cli_args(parser):\n"
                                       "        parser.add_argument('--enforce-piecewise-cuda-graph', action='store_true')\n\n", 1))
    srt = root / "sglang" / "srt"
    (srt / "configs" / "model_config.py").write_text(NSA_CONFIG.replace("class ModelConfig:", "class _Unused:", 1)
                                                     .replace("class NsaModelConfig:", "class ModelConfig:", 1))
    (srt / "models").mkdir()
    (srt / "models" / "nsa.py").write_text(NSA_MODEL)
    for folder in (root / "sglang", srt, srt / "configs", srt / "models"):
        (folder / "__init__.py").touch()
    return root


def test_a_predicate_that_would_turn_piecewise_off_is_false_in_a_compiled_forward(tmp_path):
    """0.5.10 turns piecewise off when `is_deepseek_nsa(hf_text_config)`: a forward it does compile has no NSA
    indexer, whatever the checkpoint. With --enforce-piecewise-cuda-graph the predicate is open again."""
    from dynacheck.deploy.build import DeploymentSpec
    from dynacheck.static.scan import scan_roots

    root = _nsa_release(tmp_path)

    def sites(server_args: str) -> set[tuple[str, bool]]:
        spec = DeploymentSpec(server_args=server_args, gpu="sm90", platform="cuda")
        found = scan_roots([root], ["sglang.srt.models.nsa:NsaModel.forward"], cache_dir=tmp_path / "cache",
                           deployment=spec).findings
        return {(f.site.callee, f.unconditional) for f in found}

    assert sites("") == set()
    assert "subprocess.check_output" in {callee for callee, _ in sites("--enforce-piecewise-cuda-graph")}


def test_a_scan_of_a_model_the_release_does_not_compile_says_so(tmp_path):
    """The single scan (its model config names the architecture) names it as a problem line, and its findings
    are those of an enforced launch: the predicate is not pinned (this checkpoint has `index_topk`, so the NSA
    branch is taken); the JSON's deployment carries the reason."""
    from dynacheck.deploy.build import DeploymentSpec
    from dynacheck.static.scan import scan_roots

    root = _nsa_release(tmp_path)
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["SparseForCausalLM"], "index_topk": 64}')
    spec = DeploymentSpec(server_args="", gpu="sm90", platform="cuda", model_config=config)
    result = scan_roots([root], ["sglang.srt.models.nsa:NsaModel.forward"], cache_dir=tmp_path / "cache",
                        deployment=spec)
    off = [p for p in result.problems if p.kind == "piecewise_off"]
    assert len(off) == 1 and off[0].message.startswith("SGLang turns piecewise CUDA graphs off for SparseForCausalLM")
    assert off[0].message.endswith("the findings are for a launch that adds it")
    assert "piecewise_cuda_graph_disabled_model_archs" in result.deployment["piecewise_off"]
    assert "subprocess.check_output" in {f.site.callee for f in result.findings}

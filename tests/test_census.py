"""The census: model enumeration read from sources, the deployment matrix, cells, and views."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dynacheck.census import render
from dynacheck.census.matrix import CensusDeployment, default_deployments, load_deployments
from dynacheck.census.models import registered_models
from dynacheck.errors import UserError


def _tree(tmp_path: Path) -> Path:
    models = tmp_path / "sglang" / "srt" / "models"
    models.mkdir(parents=True)
    (models / "base.py").write_text(
        "class BaseModel:\n    def __init__(self, config):\n        self.layers, self.start, self.end = [], 0, 0\n"
        "    def forward(self, x):\n        return x\n"
        "class BaseForCausalLM:\n    def __init__(self, config, quant_config=None):\n"
        "        self.model = BaseModel(config)\n")
    (models / "child.py").write_text(
        "from sglang.srt.models.base import BaseForCausalLM, BaseModel\n"
        "class ChildForCausalLM(BaseForCausalLM):\n    pass\n"
        "class DerivedModel(BaseModel):\n    pass\n"
        "class DerivedForCausalLM:\n    def __init__(self, config, quant_config=None):\n"
        "        self.model = DerivedModel(config)\n"
        "class Plain:\n    def __init__(self, config):\n        self.head = 1\n"
        "    def forward(self, x):\n        return x\n"
        "class Empty:\n    pass\n"
        "EntryClass = [ChildForCausalLM, Plain, Empty, DerivedForCausalLM]\n")
    return tmp_path


def test_models_are_read_from_entry_class_lists(tmp_path):
    found = {m.name: m for m in registered_models(_tree(tmp_path))}
    assert set(found) == {"ChildForCausalLM", "Plain", "Empty", "DerivedForCausalLM"}
    child = found["ChildForCausalLM"]
    assert child.entry == "sglang.srt.models.base:BaseModel.forward"  # the inner model, through the base
    # an inherited forward is walked with the compiled class as its receiver (Qwen3Model(Qwen2Model))
    assert found["DerivedForCausalLM"].entry == "sglang.srt.models.child:DerivedModel.forward"
    assert "self.model = BaseModel" in child.how and child.takes_quant_config
    # no `.model`: the runner raises at `model.model = resolve_language_model(model)`; its own forward is never compiled
    assert found["Plain"].entry == "" and "AttributeError" in found["Plain"].not_compiled
    assert not found["Plain"].takes_quant_config
    assert found["Empty"].entry == "" and found["Empty"].not_compiled


def test_a_model_file_starting_with_a_byte_order_mark_is_read(tmp_path):
    """Python drops a leading UTF-8 byte-order mark; `ast.parse` of the text with it is a SyntaxError,
    so its classes went missing from the census (sglang 0.5.9's models/qwen2_classification.py)."""
    root = _tree(tmp_path)
    (root / "sglang/srt/models/marked.py").write_bytes(
        b"\xef\xbb\xbffrom sglang.srt.models.base import BaseForCausalLM\n"
        b"class MarkedForCausalLM(BaseForCausalLM):\n    pass\nEntryClass = [MarkedForCausalLM]\n")
    found = {m.name: m for m in registered_models(root)}
    assert found["MarkedForCausalLM"].entry == "sglang.srt.models.base:BaseModel.forward"


def test_an_entry_class_item_that_is_not_a_class_name_is_said_not_dropped(tmp_path):
    root = _tree(tmp_path)
    (root / "sglang/srt/models/odd.py").write_text(
        "from sglang.srt.models import base\nfrom sglang.srt.models.base import BaseForCausalLM\n"
        "class OddForCausalLM(BaseForCausalLM):\n    pass\n"
        "EntryClass: list = [OddForCausalLM, base.BaseForCausalLM]\n")
    listed = registered_models(root)
    assert "OddForCausalLM" in {m.name for m in listed}
    said = [m for m in listed if not m.name and m.module == "sglang.srt.models.odd"]
    assert len(said) == 1 and "`base.BaseForCausalLM`" in said[0].how and "not listed" in said[0].how


def test_model_files_read_in_forked_processes_give_the_same_list(tmp_path):
    """A census reads the model files in its worker count of processes, every other file each; a
    class whose base lives in the other half (ChildForCausalLM's, in base.py) is still resolved."""
    root = _tree(tmp_path)
    (root / "sglang/srt/models/zeta.py").write_text("class ZetaForCausalLM:\n    pass\nEntryClass = ZetaForCausalLM\n")
    serial = registered_models(root)
    assert [m.name for m in serial][:1] == ["ChildForCausalLM"] and serial[-1].name == "ZetaForCausalLM"
    assert registered_models(root, jobs=2) == serial and registered_models(root, jobs=3) == serial


RUNNER = '''
def resolve_language_model(model):
    model_cls_name = model.__class__.__name__
    if model_cls_name == "OmniForConditionalGeneration":
        return model.thinker.model
    return model.model
'''

CONFIG = '''
class ModelConfig:
    def _config_draft_model(self):
        is_draft_model = self.is_draft_model
        if is_draft_model and self.hf_config.architectures[0] == "TextForCausalLM":
            self.hf_config.architectures[0] = "TextForCausalLMMTP"
'''

MODELS = '''
from sglang.srt.models.base import BaseModel


class TextModel:
    def __init__(self, config):
        self.layers = []

    def forward(self, x):
        return x


class OtherModel:
    layers = ()

    def forward(self, x):
        return x


class HeadOnly:
    def __init__(self, config):
        self.decoder = TextModel(config)

    def forward(self, x):
        return x


class HeadOnlyForCausalLM:
    def __init__(self, config, quant_config=None):
        self.model = HeadOnly(config)


class TextForCausalLM:
    def __init__(self, config, quant_config=None):
        self.model = self._init_model(config)

    def _init_model(self, config):
        return TextModel(config)


class VisionForConditionalGeneration:
    def __init__(self, config, quant_config=None, language_model_cls=OtherModel):
        self.model = language_model_cls(config)
        self.language_model = TextForCausalLM(config)


class VisionBase:
    def __init__(self, config, quant_config=None, language_model_cls=OtherModel):
        self.model = language_model_cls(config)


class DerivedVision(VisionBase):
    def __init__(self, config, quant_config=None, language_model_cls=TextModel):
        super().__init__(config, quant_config, language_model_cls)


class Thinker:
    def __init__(self, config):
        self.model = TextModel(config)


class OmniForConditionalGeneration:
    def __init__(self, config):
        self.thinker = Thinker(config)


class TextForCausalLMMTP(TextForCausalLM):
    pass


EntryClass = [TextForCausalLM, VisionForConditionalGeneration, VisionBase, DerivedVision,
              OmniForConditionalGeneration, TextForCausalLMMTP, HeadOnlyForCausalLM]
'''


def test_the_entry_is_what_the_piecewise_runner_compiles(tmp_path):
    """`getattr(model, "language_model", model).model`, after `resolve_language_model` (read from the
    runner's source); draft-only classes (read from ModelConfig) compile nothing."""
    root = _tree(tmp_path)
    srt = root / "sglang" / "srt"
    for folder, name, text in (("model_executor", "model_runner.py", RUNNER), ("configs", "model_config.py", CONFIG),
                               ("models", "text.py", MODELS)):
        (srt / folder).mkdir(exist_ok=True)
        (srt / folder / name).write_text(text)
    found = {m.name: m for m in registered_models(root)}
    text = "sglang.srt.models.text:TextModel.forward"
    assert found["TextForCausalLM"].entry == text  # self.model = self._init_model(...) -> its return
    assert found["VisionForConditionalGeneration"].entry == text  # language_model.model, not model
    assert "self.language_model = TextForCausalLM" in found["VisionForConditionalGeneration"].how
    assert found["VisionBase"].entry == "sglang.srt.models.text:OtherModel.forward"  # its own default class
    assert found["DerivedVision"].entry == text  # the subclass passes its default down
    assert found["OmniForConditionalGeneration"].entry == text  # resolve_language_model: thinker.model
    mtp = found["TextForCausalLMMTP"]
    assert mtp.entry == "" and "draft" in mtp.not_compiled and "model_config.py:6" in mtp.how
    # the compiled module has no `.layers` (OPTModel keeps them in `.decoder`): the runner's loop over
    # them raises, so nothing is compiled and nothing is walked
    head = found["HeadOnlyForCausalLM"]
    assert head.entry == "" and "HeadOnly, the module the runner compiles" in head.not_compiled


def test_not_applicable_reasons_are_what_the_scanned_runner_does(tmp_path):
    """0.5.9's runner raises on a model without `.model` / `.layers`; 0.5.10's turns piecewise off with
    a warning first; a draft worker is refused by `can_run_piecewise_cuda_graph` or by speculative
    decoding turning it off in ServerArgs. Each reason quotes the scanned release, with its line."""
    from dynacheck.census import runner_facts
    from dynacheck.census.models import _Sources

    raising = ("class ModelRunner:\n    def can_run_piecewise_cuda_graph(self):\n        if self.is_draft_worker:\n"
               "            return False\n        return True\n\n    def init_piecewise_cuda_graphs(self):\n"
               "        self.model.model = resolve_language_model(self.model)\n"
               "        for layer in language_model.model.layers:\n            pass\n")
    guarded = ("class ModelRunner:\n    def init_piecewise_cuda_graphs(self):\n"
               "        if not hasattr(self.model, 'model'):\n            return\n"
               "        self.model.model = resolve_language_model(self.model)\n"
               "        if not hasattr(language_model.model, 'layers'):\n            return\n")
    speculative = "class ServerArgs:\n    def _handle(self):\n        if self.speculative_algorithm is not None:\n" \
                  "            self.disable_piecewise_cuda_graph = True\n"
    srt = tmp_path / "sglang" / "srt"
    (srt / "model_executor").mkdir(parents=True)
    (srt / "model_executor" / "model_runner.py").write_text(raising)
    facts = runner_facts.read(_Sources(tmp_path))
    assert "raises AttributeError at `self.model.model = resolve_language_model(self.model)` " \
           "(model_executor/model_runner.py:8)" in facts.no_model
    assert "raises AttributeError at `for ... in language_model.model.layers` (model_executor/model_runner.py:9)" \
        in facts.no_layers
    assert "`can_run_piecewise_cuda_graph` returns False for a draft worker (model_executor/model_runner.py:3)" \
        == facts.draft
    (srt / "model_executor" / "model_runner.py").write_text(guarded)
    (srt / "server_args.py").write_text(speculative)
    facts = runner_facts.read(_Sources(tmp_path))
    assert "turns piecewise CUDA graphs off for it with a warning (model_executor/model_runner.py:3)" in facts.no_model
    assert "(model_executor/model_runner.py:6)" in facts.no_layers and "off" in facts.no_layers
    assert facts.draft.startswith("speculative decoding") and "server_args.py:3" in facts.draft


def test_default_matrix_is_quantizations_by_gpus():
    names = [d.name for d in default_deployments()]
    assert len(names) == 12 and "nvfp4/sm120" in names and "bf16/sm90" in names
    nvfp4 = next(d for d in default_deployments() if d.name == "nvfp4/sm120")
    assert nvfp4.quantization == "modelopt_fp4" and "--enable-piecewise-cuda-graph" in nvfp4.server_args


def test_deployments_file(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text('[[deployment]]\nname = "a"\nserver_args = "--quantization fp8"\ngpu = "sm90"\n'
                    'env = { X = "1" }\n')
    (only,) = load_deployments(path)
    assert only == CensusDeployment("a", "--quantization fp8", "sm90", "cuda", (("X", "1"),), "fp8")
    path.write_text('[[deployment]]\nserver_args = ""\n')
    with pytest.raises(UserError):
        load_deployments(path)


def _data() -> dict:
    first = {"gb_id": "GB0007", "rule": "DC001", "title": "t", "file": "f.py", "line": 3, "function": "m.f",
             "callee": "c", "chain": [{"function": "m.g", "file": "g.py", "line": 1, "code": "f()"}]}
    return {"targets": ["sglang==0"], "deployments": [{"name": "q/sm1"}, {"name": "q/sm2"}],
            "cells": [{"model": "A", "deployment": "q/sm1", "entry": "m:A.forward", "entry_how": "own",
                       "fatal_sites": 2, "conditional_sites": 1, "first_break": first,
                       "fix": {"kind": "custom_op", "at": "m.f", "sites": 2, "fatal_sites": 2},
                       "breaks_by_function": ["m.f"]}],
            "not_applicable": [{"model": "A", "deployment": "q/sm2", "reason": "no quant_config"}],
            "errors": [], "stats": {"models": 1, "forwards": 1}}


def test_views_link_cells_to_chain_and_fix():
    data = _data()
    md = render.markdown(data)
    assert "[2 GB0007](#a-q-sm1)" in md and "### A-q-sm1" in md and "custom_op at `m.f`" in md
    assert "| A | [2 GB0007](#a-q-sm1) | n/a |" in md
    page = render.to_html(data)
    assert "href='#A-q-sm1'" in page and "id='A-q-sm1'" in page and "<script" not in page
    assert render.what_breaks_most(data)["fix"] == [("m.f", 1)]


def test_the_html_page_says_what_a_cell_and_n_a_mean_and_lists_each_reason_once():
    data = _data()
    data["not_applicable"].append({"model": "A", "deployment": "q/sm3", "reason": "no quant_config"})
    data["errors"].append({"model": "B", "deployment": "q/sm1", "reason": "walk failed at `x.py:3` <here>"})
    page, md = render.to_html(data), render.markdown(data)
    assert "<code>n/a</code>: nothing is compiled there" in page and "`n/a`: nothing is compiled there" in md
    assert page.count("<li>A: no quant_config</li>") == 1 and md.count("- A: no quant_config") == 1
    # reasons are escaped, their code spans kept
    assert "<li>B: walk failed at <code>x.py:3</code> &lt;here&gt;</li>" in page


@pytest.mark.wheels
def test_glm5_nvfp4_sm120_cell(pinned_targets, scan_cache):
    """The seed's cell: GB0007 on flashinfer's CUDA version probe, fixed at fp4_quantize; on sm100
    the quantize call is sgl_kernel's, so the fix is elsewhere."""
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name in ("nvfp4/sm120", "nvfp4/sm100", "nvfp4/sm90")]
    census = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1, models=["GlmMoeDsaForCausalLM"])
    cells = {c["deployment"]: c for c in census.cells}
    # ModelOptFp4Config.get_min_capability() is 100: the loader refuses sm90, so that cell is not walked
    (refused,) = [n for n in census.not_applicable if n["deployment"] == "nvfp4/sm90"]
    assert "needs compute capability 100" in refused["reason"] and "nvfp4/sm90" not in cells
    sm120 = cells["nvfp4/sm120"]
    assert sm120["entry"] == "sglang.srt.models.deepseek_v2:DeepseekV2Model.forward"
    first = sm120["first_break"]
    assert first["gb_id"] == "GB0007" and first["file"] == "flashinfer/jit/cpp_ext.py"
    assert "flashinfer.jit.cpp_ext.get_cuda_version" in [h["function"] for h in first["chain"]] + [first["function"]]
    assert sm120["fix"]["at"] == "flashinfer.fp4_quantization.fp4_quantize"
    assert cells["nvfp4/sm100"]["fix"]["at"] != "flashinfer.fp4_quantization.fp4_quantize"


@pytest.mark.wheels
def test_glm5_bf16_first_stops_in_the_norm_jit_build_under_the_nsa_indexer(pinned_targets, scan_cache):
    """Without FP4 the FlashInfer JIT is still reached: the NSA indexer's k_norm is SGLang's LayerNorm,
    which calls flashinfer.norm.layernorm, whose cached get_norm_module() builds the 'norm' JitSpec;
    Dynamo stops at the build's first file probe, `if self.is_aot:` (flashinfer/jit/core.py:309 ->
    :260, a property read), before the lock and the ninja run. This is the route the flagship labels
    list at flashinfer/norm.py:29 (bench/labels, kind "route"). Since stop 40 the first break is the
    indexer's branch on an `.item()` value just above the call that leads there (`nsa_indexer.py:966`,
    DC118, a line that starts no call: the first-break walk skipped it); the JIT route is still walked."""
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name == "bf16/sm120"]
    census = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1, models=["GlmMoeDsaForCausalLM"])
    (cell,) = census.cells
    first = cell["first_break"]
    assert (first["file"], first["line"], first["rule"]) == ("sglang/srt/layers/attention/nsa/nsa_indexer.py", 966,
                                                            "DC118")
    assert "flashinfer.jit.core.JitSpec.is_aot" in cell["breaks_by_function"]


@pytest.mark.wheels
def test_xielu_breaks_only_with_the_optional_xielu_package(pinned_targets, scan_cache):
    """XIELU sets its CUDA kernel only after `import xielu.ops` succeeds (layers/activation.py:217-222),
    and its forward logs under compile only when the kernel is set (:283-290). `xielu` is not among
    sglang's requirements (presets/sglang.toml `absent_packages`), so the five models that reach XIELU
    (Apertus builds it, the others through the activation registry) no longer first break there."""
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name == "bf16/sm90"]
    models = ["ApertusForCausalLM", "PersimmonForCausalLM", "ArceeForCausalLM"]
    census = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1, models=models)
    assert sorted(c["model"] for c in census.cells) == sorted(models)
    for cell in census.cells:
        assert (cell["first_break"] or {}).get("function") != "sglang.srt.layers.activation.XIELU.forward"
        assert not any("XIELU" in f for f in cell["breaks_by_function"])


@pytest.mark.wheels
def test_decoder_layers_picked_by_a_constructor_parameter_are_walked(pinned_targets, scan_cache):
    """Qwen3Model(Qwen2Model) passes `decoder_layer_type=Qwen3DecoderLayer` to Qwen2Model.__init__,
    whose `make_layers` lambda calls it (models/qwen3.py:320-332, qwen2.py:294-306); Gemma2 assigns
    `self.layers = make_layers(...)`, whose returns hold only PPMissingLayer placeholders around the
    offloader's list (utils/common.py:646-661). Both read clean in every cell before: their layers were
    never walked. On nvfp4/sm120 their quantized linears reach the FP4 probe as Llama's do."""
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name == "nvfp4/sm120"]
    census = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1,
                        models=["Qwen3ForCausalLM", "Gemma2ForCausalLM"])
    cells = {c["model"]: c for c in census.cells}
    for model, layer in (("Qwen3ForCausalLM", "Qwen3DecoderLayer.forward"),
                         ("Gemma2ForCausalLM", "Gemma2DecoderLayer.forward")):
        first = cells[model]["first_break"]
        assert first["gb_id"] == "GB0007" and first["function"] == "flashinfer.jit.cpp_ext.get_cuda_version"
        hops = [h["function"].rpartition(".")[0].rpartition(".")[2] + "." + h["function"].rpartition(".")[2]
                for h in first["chain"]]
        assert layer in hops and "Qwen2DecoderLayer.forward" not in hops
        assert cells[model]["fix"]["at"] == "flashinfer.fp4_quantization.fp4_quantize"


@pytest.mark.wheels
def test_classes_sharing_a_forward_differ_where_the_architecture_decides(pinned_targets, scan_cache):
    """DeepseekV2ForCausalLM and DeepseekV3ForCausalLM compile the same DeepseekV2Model.forward, but only
    an architecture in `is_deepseek_nsa`'s list builds the NSA indexer (configs/model_config.py:54-66,
    `self.use_nsa`, models/deepseek_v2.py:1101): the V2 cells lose the indexer's breaks (its k_norm's
    FlashInfer layernorm, the hadamard kernel), the V3 cells keep them (`index_topk` is unknown without
    a checkpoint, so the path stays walked)."""
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name == "bf16/sm120"]
    census = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1,
                        models=["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"])
    cells = {c["model"]: c for c in census.cells}
    assert cells["DeepseekV2ForCausalLM"]["entry"] == cells["DeepseekV3ForCausalLM"]["entry"]
    indexer = lambda cell: {f for f in cell["breaks_by_function"]  # noqa: E731
                            if "nsa_indexer" in f or f in ("flashinfer.norm.layernorm",
                                                           "sglang.jit_kernel.hadamard.hadamard_transform")}
    assert indexer(cells["DeepseekV2ForCausalLM"]) == set()
    assert "sglang.srt.layers.attention.nsa.nsa_indexer.Indexer.forward_cuda" in indexer(cells["DeepseekV3ForCausalLM"])
    assert cells["DeepseekV2ForCausalLM"]["fatal_sites"] < cells["DeepseekV3ForCausalLM"]["fatal_sites"]


@pytest.mark.wheels
@pytest.mark.slow
def test_a_cell_is_what_its_model_walked_alone_gives(pinned_targets, scan_cache):
    """Apertus after Afmoe in one evaluator, and Apertus alone: SGLang's `_TP` used to be memoized as
    unknown when Apertus first asked for it at the depth limit (deep in QKVParallelLinear), so walked
    alone it never resolved `get_tp_group().all_reduce`; walked after Afmoe, it did."""
    from dynacheck.census.run import run_census

    # three chains: the first and the last are walked in halves (an evaluator per forward), the middle
    # one, fp8, walks Afmoe then Apertus with one evaluator
    wanted = [d for d in default_deployments() if d.name in ("bf16/sm90", "fp8/sm90", "nvfp4/sm100")]
    both = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1,
                      models=["AfmoeForCausalLM", "ApertusForCausalLM"])
    alone = run_census(pinned_targets, wanted, cache_dir=scan_cache, jobs=1, models=["ApertusForCausalLM"])
    cell = lambda census: [c for c in census.cells if (c["model"], c["deployment"]) ==  # noqa: E731
                           ("ApertusForCausalLM", "fp8/sm90")]
    assert cell(both) == cell(alone) and len(cell(alone)) == 1
    # and fp8 on sm90 does not reach the Marlin kernel (SGLang auto-enables it on sm80-88 only)
    assert not any("gptq_marlin" in f for c in both.cells for f in c["breaks_by_function"])


def test_public_entries_are_reexported_functions(tmp_path):
    from dynacheck.census.flashinfer_api import public_entries

    pkg = tmp_path / "flashinfer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .norm import rmsnorm, Norm\nfrom .gone import x\nimport os\n")
    (pkg / "norm.py").write_text("def rmsnorm(x):\n    return x\nclass Norm:\n    pass\n")
    assert public_entries(tmp_path) == ["flashinfer.norm:rmsnorm"]


def test_the_api_census_says_what_it_could_not_parse(tmp_path):
    """A re-exporting module that does not parse: each name it gives is a record with the reason (a
    function or not, nobody can tell); an `__init__.py` that does not parse: one clear error, no traceback."""
    from dynacheck.census.flashinfer_api import api_census, exported
    from dynacheck.errors import UserError
    from dynacheck.model import Target

    pkg = tmp_path / "flashinfer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .norm import rmsnorm\nfrom .broken import fused, Op\n")
    (pkg / "norm.py").write_text("def rmsnorm(x):\n    return x\n")
    (pkg / "broken.py").write_text("def fused(x:\n")
    entries, unread = exported(tmp_path)
    assert entries == ["flashinfer.norm:rmsnorm"] and set(unread) == {"flashinfer.broken:fused", "flashinfer.broken:Op"}
    assert all("broken.py could not be parsed (SyntaxError" in why for why in unread.values())
    data = api_census([Target(str(tmp_path), "flashinfer-python", "0", str(tmp_path), "folder")],
                      cache_dir=tmp_path / "cache")
    by_name = {r["function"]: r for r in data["functions"]}
    assert by_name["flashinfer.norm:rmsnorm"]["safe"] is True
    assert by_name["flashinfer.broken:fused"]["safe"] is None and "could not be parsed" in by_name["flashinfer.broken:fused"]["error"]
    (pkg / "__init__.py").write_text("from .norm import (rmsnorm\n")
    with pytest.raises(UserError, match="__init__.py could not be parsed"):
        exported(tmp_path)


def test_a_function_that_breaks_whichever_way_its_open_test_goes_is_not_safe(tmp_path):
    """FlashInfer 0.7.4's `rmsnorm` builds a CUDA JIT module if `_use_cuda_norm(...)` and compiles a CuTe DSL
    kernel otherwise (`norm/__init__.py:1284-1295`): no break is unconditional, yet either way breaks. Such
    a function is not safe; its record names the test, its first break and a fix over those breaks. One
    that breaks one way only stays safe (its break is conditional)."""
    from dynacheck.census.flashinfer_api import api_census, api_markdown
    from dynacheck.model import Target

    pkg = tmp_path / "flashinfer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .norm import both, one\n")
    (pkg / "norm.py").write_text(
        "import os\nimport subprocess\n\n\ndef _use_jit() -> bool:\n    try:\n        import flashinfer_jit_cache\n"
        "        return True\n    except ImportError:\n        return False\n\n\n"
        "def both(x):\n    if _use_jit():\n        subprocess.run(['nvcc', '--version'])\n    else:\n"
        "        os.system('true')\n    return x\n\n\n"
        "def one(x):\n    if _use_jit():\n        subprocess.run(['nvcc', '--version'])\n    return x\n")
    data = api_census([Target(str(tmp_path), "flashinfer-python", "0", str(tmp_path), "folder")],
                      cache_dir=tmp_path / "cache")
    by_name = {r["function"]: r for r in data["functions"]}
    both, one = by_name["flashinfer.norm:both"], by_name["flashinfer.norm:one"]
    assert (both["safe"], both["fatal_sites"], both["conditional_sites"]) == (False, 0, 2)
    assert both["every_way"] == [{"test": "_use_jit()", "file": "flashinfer/norm.py", "line": 14}]
    assert both["first_break"]["line"] == 15 and both["fix"]["at"] == "flashinfer.norm.both"
    assert (one["safe"], one["every_way"], one["first_break"]) == (True, None, None)
    text = api_markdown(data)
    assert "1 of 2 exported functions are safe" in text
    assert "whichever way `_use_jit()` (flashinfer/norm.py:14) goes" in text


def test_compare_sorts_cells_into_fixed_broken_changed():
    from dynacheck.census.compare import compare, compare_markdown

    old, new = _data(), _data()
    new["targets"] = ["sglang==1"]
    new["cells"] = [dict(old["cells"][0], fatal_sites=0, first_break=None, fix=None),
                    dict(old["cells"][0], model="B")]
    diff = compare(old, new)
    assert [c["model"] for c in diff["fixed"]] == ["A"] and diff["added_models"] == ["B"]
    assert not diff["broken"] and "fixed (fatal before, none after): 1" in compare_markdown(diff)


def test_compare_names_cells_that_stop_or_start_being_applicable():
    """A release that drops the launch flag: the cell is not "fixed" and its model not "removed"."""
    from dynacheck.census.compare import compare, compare_markdown

    old, new = _data(), _data()
    why = "this SGLang has no launch flag --enable-piecewise-cuda-graph"
    new["cells"] = [dict(old["cells"][0], model="B")]
    new["not_applicable"] = [{"model": "A", "deployment": "q/sm1", "reason": why}]
    diff = compare(old, new)
    assert not diff["fixed"] and diff["removed_models"] == [] and diff["added_models"] == ["B"]
    assert diff["not_applicable_after"] == [{"model": "A", "deployment": "q/sm1", "fatal_before": 2,
                                             "reason_after": why}]
    text = compare_markdown(diff)
    assert "walked before, not applicable after: 1 (1 of them fatal before)" in text and f"| 1 | {why} |" in text
    back = compare(new, old)
    assert [(c["model"], c["fatal_after"]) for c in back["applicable_after"]] == [("A", 2)]


def test_a_deployment_the_framework_does_not_start_is_said_once():
    data = _data()
    why = "this SGLang has no launch flag --enable-piecewise-cuda-graph (read from sglang/srt/server_args.py)"
    data["deployments"][1]["refused"] = why
    data["not_applicable"] = [{"model": "A", "deployment": "q/sm2", "reason": why}]
    md = render.markdown(data)
    assert f"1 of 2 deployments do not start on this SGLang (q/sm2): {why}; every cell of them is n/a." in md
    assert f"- A: {why}" not in md  # not repeated per model at the end
    assert why in render.to_html(data) and "## Models x deployments" in md
    data["cells"], data["deployments"][0]["refused"] = [], why  # nothing starts: no grid of n/a
    for text in (render.markdown(data), render.to_html(data), render.terminal(data)):
        assert "2 of 2 deployments do not start" in text and "no grid is drawn" in text
        assert "| A |" not in text and "<td>A</td>" not in text and "\nA " not in text


def test_a_model_file_that_does_not_parse_is_said_not_dropped(tmp_path):
    """Its classes are unknown, so none can be listed; the census names the file and why, once, whatever
    the deployments (here every one is refused), and its reports show the module."""
    from dynacheck.census import render
    from dynacheck.census.matrix import CensusDeployment
    from dynacheck.census.run import run_census
    from dynacheck.model import Target

    root = _tree(tmp_path)
    (root / "sglang/srt/models/broken.py").write_text("class BrokenForCausalLM(:\n    pass\nEntryClass = BrokenForCausalLM\n")
    listed = registered_models(root)
    assert [m.module for m in listed if not m.name] == ["sglang.srt.models.broken"]
    assert {m.name for m in listed if m.name} == {"ChildForCausalLM", "Plain", "Empty", "DerivedForCausalLM"}
    ns = Path(__file__).parent / "fixtures" / "deploy_ns" / "nsfx"
    srt = root / "sglang" / "srt"
    (srt / "server_args.py").write_text((ns / "server_args.py").read_text().replace("nsfx", "sglang.srt"))
    shutil.copytree(ns / "arg_groups", srt / "arg_groups")
    deployment = CensusDeployment(name="bf16/sm90", server_args="--enable-piecewise-cuda-graph", gpu="sm90")
    census = run_census([Target(str(root), "sglang", "0", str(root), "folder")], [deployment],
                        cache_dir=tmp_path / "cache", jobs=1).to_dict()
    broken = [e for e in census["errors"] if e["module"] == "sglang.srt.models.broken"]
    assert len(broken) == 1 and broken[0]["model"] == "" and "broken.py could not be parsed (SyntaxError" in broken[0]["reason"]
    assert all(r["model"] for r in census["not_applicable"]) and census["stats"]["models"] == 4
    assert "- sglang.srt.models.broken: broken.py could not be parsed" in render.markdown(census)
    assert "<li>sglang.srt.models.broken: broken.py could not be parsed" in render.to_html(census)
    assert "not walked: sglang.srt.models.broken: broken.py" in render.terminal(census)


def test_the_census_refuses_a_deployment_whose_flag_the_sglang_lacks(tmp_path):
    """Checked once per deployment from the sources, before any walk: every cell n/a for that reason."""
    from dynacheck.census.matrix import CensusDeployment
    from dynacheck.census.run import run_census
    from dynacheck.model import Target

    root = _tree(tmp_path)
    ns = Path(__file__).parent / "fixtures" / "deploy_ns" / "nsfx"
    srt = root / "sglang" / "srt"
    (srt / "server_args.py").write_text((ns / "server_args.py").read_text().replace("nsfx", "sglang.srt"))
    shutil.copytree(ns / "arg_groups", srt / "arg_groups")
    deployments = [CensusDeployment(name="bf16/sm90", server_args="--enable-piecewise-cuda-graph", gpu="sm90"),
                   CensusDeployment(name="fast/sm90", server_args="--enable-fast-path", gpu="sm90")]
    census = run_census([Target(str(root), "sglang", "0", str(root), "folder")], deployments[:1],
                        cache_dir=tmp_path / "cache", jobs=1).to_dict()
    assert not census["cells"] and census["not_applicable"]
    assert all("no launch flag --enable-piecewise-cuda-graph" in r["reason"]
               and "arg_groups/fields/" in r["reason"] for r in census["not_applicable"])
    assert "unrecognized arguments" in census["deployments"][0]["refused"]
    from dynacheck.deploy.build import unstartable
    assert unstartable([root], deployments[1].server_args) == ""
    # flags it takes, but a model runner without the piecewise runner (0.5.23): nothing is compiled
    runner = root / "sglang" / "srt" / "model_executor"
    runner.mkdir()
    (runner / "model_runner.py").write_text("class ModelRunner:\n    def init_device_graphs(self):\n        pass\n")
    census = run_census([Target(str(root), "sglang", "0", str(root), "folder")], deployments[1:],
                        cache_dir=tmp_path / "cache", jobs=1).to_dict()
    assert not census["cells"] and "defines no init_piecewise_cuda_graphs" in census["deployments"][0]["refused"]
    (runner / "model_runner.py").write_text("class ModelRunner:\n    def init_piecewise_cuda_graphs(self):\n"
                                            "        pass\n")
    census = run_census([Target(str(root), "sglang", "0", str(root), "folder")], deployments[1:],
                        cache_dir=tmp_path / "cache", jobs=1).to_dict()
    assert census["cells"] and "refused" not in census["deployments"][0]


def test_more_workers_cut_the_chains_into_more_parts_in_proportion():
    """Up to two workers, the layout of before (the first and last chains in two halves); with more,
    one part per worker, the chains cut in proportion to their forwards, each part interleaved."""
    from dynacheck.census.run import _tasks

    matrix = default_deployments()
    chain = [d for d in matrix if d.name.startswith("bf16/")]  # one family
    forwards = [f"f{i}" for i in range(10)]
    wanted = {f: chain for f in forwards}
    for workers in (1, 2):
        halves = _tasks(chain, forwards, wanted, workers)
        assert [walks[0] for _, walks in halves] == [forwards[0::2], forwards[1::2]]
    five = _tasks(chain, forwards, wanted, 5)
    assert [walks[0] for _, walks in five] == [forwards[i::5] for i in range(5)]
    assert all(c == chain and all(w == walks[0] for w in walks) for c, walks in five)
    assert len(_tasks(chain, forwards[:3], {f: chain for f in forwards[:3]}, 8)) == 3  # a part has a forward
    other = [replace(d, name="x" + d.name, server_args=d.server_args + " --tp-size 2") for d in chain]
    assert other[0].family() != chain[0].family()
    both = {f: chain for f in forwards} | {f"g{i}": other for i in range(2)}
    parts = _tasks(chain + other, forwards + ["g0", "g1"], both, 6)
    assert [len(c) and c[0].name for c, _ in parts].count("bf16/sm90") == 5  # 10 forwards against 2
    assert sorted(f for c, walks in parts if c == other for f in walks[0]) == ["g0", "g1"]


@pytest.mark.wheels
@pytest.mark.slow
def test_cells_are_the_same_whatever_the_number_of_jobs(pinned_targets, tmp_path):
    """One task per chain of deployments (bf16/sm90 and bf16/sm100 form one, the second forked from
    the first), its forwards in one order: what an evaluator memoizes cannot depend on which other
    forwards a worker happened to walk first."""
    from dynacheck.census.run import run_census

    models = ["LlamaForCausalLM", "DeepseekV3ForCausalLM", "ExaoneMoEForCausalLM", "BailingMoeForCausalLM"]
    wanted = [d for d in default_deployments() if d.name in ("bf16/sm90", "bf16/sm100", "fp8/sm100")]
    said: dict[int, list[str]] = {1: [], 2: [], 3: []}
    one = run_census(pinned_targets, wanted, cache_dir=tmp_path, jobs=1, models=models, progress=said[1].append)
    two = run_census(pinned_targets, wanted, cache_dir=tmp_path, jobs=2, models=models,  # cache now warm
                     progress=said[2].append)
    three = run_census(pinned_targets, wanted, cache_dir=tmp_path, jobs=3, models=models,  # the chain cut in 3
                       progress=said[3].append)
    assert one.stats["jobs"] == 1 and two.stats["jobs"] == 2 and three.stats["jobs"] == 3
    assert len(one.cells) == len(models) * len(wanted)
    assert one.cells == two.cells == three.cells
    # progress: one line per deployment of each part of the chain, read from the workers as they go
    for jobs, lines in said.items():
        passes = [line for line in lines if "deployment passes walked" in line]
        steps = 3 * max(2, jobs)
        assert [p.split()[1] for p in passes] == [f"{k}/{steps}" for k in range(1, steps + 1)], (jobs, lines)
        assert lines[0].startswith(f"census: {len(models)} model classes") and f"walked in {jobs} process" in lines[0]
        assert f"({len(models) * len(wanted)} forward x deployment pairs" in passes[-1]
    assert any(c["fatal_sites"] for c in one.cells) and any(c["conditional_sites"] for c in one.cells)


@pytest.mark.wheels
@pytest.mark.slow
def test_a_deployment_walked_as_a_fork_has_the_cells_of_a_fresh_walk(pinned_targets, tmp_path):
    """nvfp4/sm120 walked after nvfp4/sm100 (its evaluator forked, keeping what read no GPU fact)
    against nvfp4/sm120 walked alone: the same cells, although the GPU changes them."""
    from dynacheck.census.run import run_census

    models = ["LlamaForCausalLM", "BaichuanForCausalLM", "DeepseekV3ForCausalLM"]
    chain = [d for d in default_deployments() if d.name in ("nvfp4/sm100", "nvfp4/sm120")]
    forked = run_census(pinned_targets, chain, cache_dir=tmp_path, jobs=1, models=models)
    alone = run_census(pinned_targets, chain[1:], cache_dir=tmp_path, jobs=1, models=models)
    on = lambda census, name: [c for c in census.cells if c["deployment"] == name]  # noqa: E731
    assert len(on(forked, "nvfp4/sm120")) == len(models)
    assert on(forked, "nvfp4/sm120") == on(alone, "nvfp4/sm120")
    strip = lambda cells: [{k: v for k, v in c.items() if k != "deployment"} for c in cells]  # noqa: E731
    assert strip(on(forked, "nvfp4/sm100")) != strip(on(forked, "nvfp4/sm120"))  # the GPU decides something


@pytest.mark.wheels
@pytest.mark.slow
def test_a_cell_answered_by_the_walk_before_is_the_cell_walked_alone(pinned_targets, tmp_path, monkeypatch):
    """bf16 on sm90, sm100, sm120 as one chain: a forward whose walk the GPU does not change is answered by
    the deployment before it (static/scan_reuse.py), and every cell equals that deployment walked alone and the
    chain walked with no answer reused."""
    from dynacheck.census.run import run_census
    from dynacheck.static import scan_reuse

    models = ["LlamaForCausalLM", "Qwen2ForCausalLM", "DeepseekV3ForCausalLM"]
    chain = [d for d in default_deployments() if d.name.startswith("bf16/")]
    reused = run_census(pinned_targets, chain, cache_dir=tmp_path, jobs=1, models=models)
    assert reused.stats["scans_reused"] >= len(models)
    for deployment in chain[1:]:
        alone = run_census(pinned_targets, [deployment], cache_dir=tmp_path, jobs=1, models=models)
        assert alone.stats["scans_reused"] == 0
        assert [c for c in reused.cells if c["deployment"] == deployment.name] == alone.cells
    monkeypatch.setattr(scan_reuse, "unchanged", lambda session, spec, before: False)
    walked = run_census(pinned_targets, chain, cache_dir=tmp_path, jobs=1, models=models)
    assert walked.stats["scans_reused"] == 0 and walked.cells == reused.cells


def test_a_census_file_gives_back_the_deployments_it_was_walked_on():
    from dynacheck.census.matrix import deployments_from_census

    records = [d.to_dict() for d in default_deployments()]
    assert deployments_from_census({"deployments": records}) == default_deployments()
    with pytest.raises(UserError):
        deployments_from_census({"deployments": []})


@pytest.mark.wheels
@pytest.mark.slow
def test_a_checkpoint_format_walked_as_a_fork_has_the_cells_of_a_fresh_walk(pinned_targets, tmp_path):
    """fp8 and nvfp4 on sm100 walked after bf16 on sm90 (one chain: each evaluator forked from the one
    before, keeping what read neither the GPU nor the quantization) against each walked alone."""
    from dynacheck.census.run import _tasks, run_census

    models = ["LlamaForCausalLM", "DeepseekV3ForCausalLM", "GlmMoeDsaForCausalLM"]
    chain = [d for d in default_deployments() if d.name in ("bf16/sm90", "fp8/sm100", "nvfp4/sm100")]
    assert len(_tasks(chain, ["e"], {"e": chain})) == 1  # one family: a single chain of forks
    forked = run_census(pinned_targets, chain, cache_dir=tmp_path, jobs=1, models=models)
    for deployment in chain[1:]:
        alone = run_census(pinned_targets, [deployment], cache_dir=tmp_path, jobs=1, models=models)
        on = [c for c in forked.cells if c["deployment"] == deployment.name]
        assert len(on) == len(models) and on == alone.cells
    strip = lambda name: [{k: v for k, v in c.items() if k != "deployment"}  # noqa: E731
                          for c in forked.cells if c["deployment"] == name]
    assert strip("fp8/sm100") != strip("nvfp4/sm100")  # the format decides something


@pytest.mark.wheels
def test_a_census_stores_the_bodies_it_summarized_for_the_next_run(pinned_targets, tmp_path, monkeypatch):
    """A census stores the summaries whose deferred bodies it filled once, at the end of each task
    (not after every scan): the next census over the same cache summarizes no body again."""
    import dynacheck.static.summary as summary
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name == "bf16/sm90"]
    made: list[str] = []
    real = summary.summarize_body
    monkeypatch.setattr(summary, "summarize_body", lambda *args: made.append(args[0]) or real(*args))
    first = run_census(pinned_targets, wanted, cache_dir=tmp_path, jobs=1, models=["LlamaForCausalLM"])
    assert made, "the first census summarizes deferred bodies"
    made.clear()
    second = run_census(pinned_targets, wanted, cache_dir=tmp_path, jobs=1, models=["LlamaForCausalLM"])
    assert made == [] and second.cells == first.cells


def test_the_api_census_report_says_what_safe_covers():
    """A function reads safe when nothing in the scanned code breaks; the report says that calls into
    unscanned packages (FlashInfer 0.7's CuTe DSL) are not followed, beside the count it qualifies."""
    from dynacheck.census.flashinfer_api import api_markdown

    data = {"target": "flashinfer-python==0", "deployment": {"gpu": "sm100"},
            "functions": [{"function": "flashinfer.norm:rmsnorm", "safe": True, "fatal_sites": 0},
                          {"function": "flashinfer.norm:other", "safe": False, "fatal_sites": 2}]}
    text = api_markdown(data)
    count = text.index("1 of 2 exported functions are safe")
    assert text.index("covers the scanned code") > count and "cutlass.cute.compile" in text
    assert "| `flashinfer.norm:rmsnorm` | yes | 0 |" in text


def test_the_model_list_is_stored_and_read_again_only_when_a_file_it_read_changed(tmp_path, monkeypatch):
    import ast

    from dynacheck.static.cache import SummaryCache

    root, cache = _tree(tmp_path / "tree"), SummaryCache(tmp_path / "cache")
    first = registered_models(root, cache=cache)
    parses: list[str] = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **k: parses.append("x") or real(source, *a, **k))
    assert registered_models(root, cache=cache) == first and parses == []  # from the store, nothing parsed
    child = root / "sglang" / "srt" / "models" / "child.py"
    child.write_text(child.read_text().replace("Plain, Empty, ", ""))  # a file it read changed
    changed = {m.name for m in registered_models(root, cache=cache)}
    assert parses and "Plain" not in changed and "ChildForCausalLM" in changed
    parses.clear()
    (root / "sglang" / "srt" / "models" / "extra.py").write_text(
        "class ExtraForCausalLM:\n    def forward(self, x):\n        return x\nEntryClass = ExtraForCausalLM\n")
    assert "ExtraForCausalLM" in {m.name for m in registered_models(root, cache=cache)} and parses  # a new file


def test_a_cell_counts_sites_not_the_chains_that_reach_them():
    """Up to five chains are kept per site; the cell's counts are of `file:line` sites, as the fix plan's."""
    from dynacheck.census.run import cell_record
    from dynacheck.fixes.plan import fix_plan
    from dynacheck.model import Condition, Finding, Fix, Hop, Outcome, ScanResult, Site

    def finding(line: int, via: str, gb: str = "GB0007", condition: bool = False) -> Finding:
        site = Site("lib/m.py", line, "lib.m.f", "subprocess.run", "subprocess.run([])")
        return Finding("DC001", "t", "error", site, (Hop(via, "m.py", 1, "entry"),),
                       Outcome("graph_break", gb, fatal_under_fullgraph=True), (Fix("custom_op", "lib.m.f", "wrap"),),
                       conditions=(Condition("config.x", "", 0, "config"),) if condition else ())

    findings = (finding(3, "m.a"), finding(3, "m.b"), finding(3, "m.c", condition=True),  # one site, three chains
                finding(9, "m.loop", gb="GB7000"),  # a layer loop's fallback: a site of its own
                finding(5, "m.a", condition=True), finding(5, "m.b", condition=True))  # one site, under a condition
    record = cell_record(ScanResult(targets=(), entries=("m:forward",), findings=findings,
                                    fix_plan=fix_plan(findings)))
    assert (record["fatal_sites"], record["conditional_sites"]) == (2, 1)
    assert record["fix"]["fatal_sites"] == record["fatal_sites"]  # counted alike: the fix clears every one
    assert record["first_break"] is None and record["first_fixed"]["line"] == 3  # never the loop's fallback

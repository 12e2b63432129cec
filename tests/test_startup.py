"""A model class whose constructors hand the checkpoint's quant config to a layer that cannot be built
with it does not start (static/startup.py). The fixture is plain Python: building each model for real
is the oracle for what the static reading says."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from rich.console import Console

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.report.console import render_console
from dynacheck.sources.resolve import resolve_target
from dynacheck.static.scan import ScanSession, scan_roots, scan_targets
from dynacheck.static.startup import model_unbuildable
from dynacheck.static.summary import summarize

ROOT = Path(__file__).parent / "fixtures" / "startup"
MODELS = ("Model", "KeepsItModel", "MaybeModel", "RouterModel", "IgnoreModel", "EncoderModel", "AttrModel",
          "PickedModel", "MixedPickModel", "EitherModel", "HalfModel", "KeptLocalModel", "SwapModel", "SwappedModel",
          "MatchModel", "SafeTypedModel", "RaiseModel", "SplatModel", "StarModel", "PassModel")
QUANTIZATIONS = ("", "full", "moeonly")
# the fixture's config dicts: MaybeModel builds its layer on the second; the third picks PickedModel's other class
CHECKPOINTS = ({}, {"use_proj": True}, {"kind": "proj"})
# every way these are built fails with `moeonly` (startup_branches.py; SwapModel: startup._kept_local)
EVERY_WAY = {("moeonly", "PickedModel"), ("moeonly", "EitherModel"), ("moeonly", "KeptLocalModel"),
             ("moeonly", "SwapModel"), ("moeonly", "RaiseModel")}


def _static(scan_cache, flags: str = "") -> dict[tuple[str, str], object]:
    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    out = {}
    for quantization in QUANTIZATIONS:
        args = " ".join(filter(None, (f"--quantization {quantization}" if quantization else "", flags)))
        spec = DeploymentSpec(framework=ROOT / "startfx.toml", gpu="sm100", platform="cuda", server_args=args)
        evaluator = session.engine(spec)[1]
        for name in MODELS:
            out[(quantization, name)] = model_unbuildable(evaluator, "startfx.model", name)
    return out


def _fixture(monkeypatch, name: str):
    monkeypatch.syspath_prepend(str(ROOT))
    for loaded in [m for m in sys.modules if m == "startfx" or m.startswith("startfx.")]:
        monkeypatch.delitem(sys.modules, loaded)
    return importlib.import_module(f"startfx.{name}")


def _built_for_real(monkeypatch, encoder_only: bool = False) -> dict[tuple[str, str], set[bool]]:
    """(quantization, model) -> whether building it raised AssertionError, for each fixture checkpoint,
    with its config made as the framework makes it from the server args."""
    quant = _fixture(monkeypatch, "quant")
    model = importlib.import_module("startfx.model")
    configs = importlib.import_module("startfx.model_config")
    server = importlib.import_module("startfx.server_args").ServerArgs(encoder_only=encoder_only)
    out: dict[tuple[str, str], set[bool]] = {}
    for quantization in QUANTIZATIONS:
        for name in MODELS:
            for checkpoint in CHECKPOINTS:
                config = quant.QUANTIZATION_METHODS[quantization].from_config({"quant_method": quantization}) \
                    if quantization else None
                hf_config = configs.ModelConfig.from_server_args(server, configs.FxConfig(checkpoint)).hf_config
                try:
                    getattr(model, name)(hf_config, quant_config=config)
                    failed = False
                except (AssertionError, ValueError):  # a layer's assert, or a branch that raises (RaiseModel)
                    failed = True
                out.setdefault((quantization, name), set()).add(failed)
    return out


def test_a_model_is_said_not_to_start_exactly_where_building_it_fails_for_every_checkpoint(scan_cache, monkeypatch):
    static = _static(scan_cache)
    real = _built_for_real(monkeypatch)
    claimed = {key for key, found in static.items() if found is not None}
    always_fails = {key for key, outcomes in real.items() if outcomes == {True}}
    assert claimed == always_fails == {("moeonly", "Model"), ("moeonly", "IgnoreModel"), ("moeonly", "EncoderModel"),
                                       ("moeonly", "AttrModel"), ("moeonly", "SplatModel"),
                                       ("moeonly", "PassModel")} | EVERY_WAY
    # these fail only on a checkpoint that asks for the failing layer: a static reading claims nothing there
    for name in ("MaybeModel", "MixedPickModel", "HalfModel", "MatchModel"):
        assert real[("moeonly", name)] == {True, False} and static[("moeonly", name)] is None, name
    # the block type its allocation passes, not the constructor's failing default
    assert real[("moeonly", "SafeTypedModel")] == {False} and static[("moeonly", "SafeTypedModel")] is None
    # a parameter a `**` may fill is not its default
    assert real[("moeonly", "StarModel")] == {False} and static[("moeonly", "StarModel")] is None


def test_the_encoder_only_flag_copied_into_the_config_decides_what_is_built(scan_cache, monkeypatch):
    static = _static(scan_cache, "--encoder-only")
    real = _built_for_real(monkeypatch, encoder_only=True)
    assert real[("moeonly", "EncoderModel")] == {False} and static[("moeonly", "EncoderModel")] is None
    assert {key for key, found in static.items() if found is not None} == \
        {key for key, outcomes in real.items() if outcomes == {True}} == \
        {("moeonly", "Model"), ("moeonly", "IgnoreModel"), ("moeonly", "AttrModel"), ("moeonly", "SplatModel"),
         ("moeonly", "PassModel")} | EVERY_WAY


def test_the_config_copies_are_read_from_the_framework_source(tmp_path):
    from dynacheck.deploy.config_copies import read_config_copies

    assert read_config_copies(ROOT / "startfx" / "model_config.py") == {"encoder_only": "encoder_only"}
    source = (ROOT / "startfx" / "model_config.py").read_text()
    variants = {
        # a copy under a branch may not happen; a parameter reassigned first is not the flag
        "guarded": source.replace("        self.hf_config.encoder_only = encoder_only",
                                  "        if hf_config:\n            self.hf_config.encoder_only = encoder_only"),
        "reassigned": source.replace("        self.hf_config = hf_config\n",
                                     "        self.hf_config = hf_config\n        encoder_only = False\n"),
        "rebound after": source.replace("        self.hf_config.encoder_only = encoder_only\n",
                                        "        self.hf_config.encoder_only = encoder_only\n"
                                        "        self.hf_config = dict(hf_config)\n"),
        "not from the server args": source.replace("encoder_only=server_args.encoder_only", "encoder_only=True"),
        "not python": "class ModelConfig(:\n",
    }
    for name, text in variants.items():
        path = tmp_path / f"{name.replace(' ', '_')}.py"
        path.write_text(text)
        assert read_config_copies(path) == {}, name
    view = source.replace("        return ModelConfig(hf_config=hf_config, encoder_only=server_args.encoder_only)",
                          "        cfg = resolving_view(server_args)\n"
                          "        return ModelConfig(hf_config=hf_config, encoder_only=cfg.encoder_only)")
    (tmp_path / "view.py").write_text(view)
    assert read_config_copies(tmp_path / "view.py") == {"encoder_only": "encoder_only"}
    assert read_config_copies(tmp_path / "missing.py") == {}


def test_hasattr_on_a_scanned_instance_is_decided_only_when_nothing_can_set_the_name(scan_cache, monkeypatch):
    from dynacheck.static.value_types import Value

    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    spec = DeploymentSpec(framework=ROOT / "startfx.toml", gpu="sm100", platform="cuda")
    partial = ScanSession.open(targets, scan_cache).engine(spec)[1].partial
    static = {(cls, name): partial._has_member(Value("inst", module, cls), name) for module, cls, name in (
        ("startfx.quant", "MoeOnlyConfig", "ignore"), ("startfx.quant", "ListedIgnoreConfig", "ignore"),
        ("startfx.quant", "MoeOnlyConfig", "get_quant_method"), ("startfx.quant", "LateIgnoreConfig", "ignore"),
        ("startfx.layers", "Linear", "ignore"))}
    quant = _fixture(monkeypatch, "quant")
    assert static[("MoeOnlyConfig", "ignore")] is hasattr(quant.MoeOnlyConfig(), "ignore") is False
    assert static[("ListedIgnoreConfig", "ignore")] is hasattr(quant.ListedIgnoreConfig(), "ignore") is True
    assert static[("MoeOnlyConfig", "get_quant_method")] is True
    late = quant.LateIgnoreConfig()
    assert static[("LateIgnoreConfig", "ignore")] is None and not hasattr(late, "ignore")
    late.set_ignore(("x",))
    assert hasattr(late, "ignore")  # why it stays undecided
    assert static[("Linear", "ignore")] is None  # a torch.nn.Module: its base is not scanned


def test_the_reason_names_the_layer_its_path_and_the_assert(scan_cache):
    found = _static(scan_cache)[("moeonly", "Model")]
    source = (ROOT / "startfx" / "layers.py").read_text().splitlines()
    assert found.layer == "Linear" and found.path == "self.model.layers[].attn.proj"
    assert source[found.line - 1].strip() == "assert self.quant_method is not None"
    assert source.index("class Linear(LinearBase):") < found.line - 1  # Linear's own assert, not MoE's
    assert found.config == "MoeOnlyConfig"
    text = found.reason("Model", "startfx/layers.py")
    assert f"startfx/layers.py:{found.line}" in text and "`self.model.layers[].attn.proj`" in text


@pytest.mark.parametrize("quantization, model, stops", [("moeonly", "Model", True), ("full", "Model", False),
                                                       ("moeonly", "KeepsItModel", False), ("", "Model", False)])
def test_a_scan_says_when_its_model_does_not_start(scan_cache, quantization, model, stops):
    """A user's scan whose deployment names the model class (a model config's `architectures`) says so
    before its findings, which are then about a server that never comes up."""
    args = f"--quantization {quantization}" if quantization else ""
    spec = DeploymentSpec(framework=ROOT / "startfx.toml", gpu="sm100", platform="cuda", server_args=args,
                          architecture=model)
    result = scan_roots([ROOT], [f"startfx.model:{model}.forward"], cache_dir=scan_cache, deployment=spec)
    said = [p.message for p in result.problems if p.kind == "does_not_start"]
    assert bool(said) == stops
    if stops:
        assert said[0].startswith(f"{model} does not start on this deployment") and "attn.proj" in said[0]
        console = Console(record=True, width=400)
        render_console(result, console)
        first = [line for line in console.export_text().splitlines() if line.strip()]
        assert any(line.startswith(f"{model} does not start") for line in first[:6])  # up top, not at the end


def test_asserts_are_kept_with_their_line_and_guards():
    source = "def f(self, x):\n    assert self.a is not None\n    if x:\n        assert x > 1\n"
    fn = summarize(source, "m", "m.py", False, defer=False).functions["f"]
    assert [(line, bool(guards)) for _, line, guards in fn.asserts] == [(2, False), (4, True)]
    assert fn.asserts[0][0] == ("cmp", ("a", ("n", "self"), "a"), (("IsNot", ("n", "None")),))


@pytest.mark.wheels
def test_sglang_mxfp4_on_cuda_stops_models_that_hand_their_quant_config_to_linear_layers(pinned_targets, tmp_path):
    """sglang 0.5.9: Mxfp4Config.get_quant_method gives a LinearBase None on CUDA (mxfp4.py:268-285), and
    QKVParallelLinear's ColumnParallelLinear.__init__ asserts a method (linear.py:330). GPT-OSS builds its
    attention without the config (gpt_oss.py:396-410); fp8 gives every linear layer a method."""
    from dataclasses import replace

    from dynacheck.census.matrix import default_deployments

    session = ScanSession.open(pinned_targets, tmp_path)
    by_name = {d.name: d for d in default_deployments()}

    def check(deployment: str, module: str, name: str):
        spec = replace(by_name[deployment].spec(), architecture=name)
        return model_unbuildable(session.engine(spec)[1], module, name)

    llama = check("mxfp4/sm90", "sglang.srt.models.llama", "LlamaForCausalLM")
    assert llama is not None and llama.path == "self.model.layers[].self_attn.qkv_proj"
    assert llama.file.endswith("sglang/srt/layers/linear.py") and llama.line == 330
    assert check("mxfp4/sm90", "sglang.srt.models.gpt_oss", "GptOssForCausalLM") is None
    assert check("fp8/sm90", "sglang.srt.models.llama", "LlamaForCausalLM") is None
    assert check("bf16/sm90", "sglang.srt.models.llama", "LlamaForCausalLM") is None
    # every layer class `ALL_DECODER_LAYER_TYPES[config.layers_block_type[idx]]` can give fails
    # (qwen3_next.py:800-803, 826); fp8 builds them all
    nxt = check("mxfp4/sm90", "sglang.srt.models.qwen3_next", "Qwen3NextForCausalLM")
    assert nxt is not None and nxt.choice == "self.model.layers[]" and nxt.line == 330
    assert check("fp8/sm90", "sglang.srt.models.qwen3_next", "Qwen3NextForCausalLM") is None
    # the gate projections a layer factory builds into a local, kept in either isinstance branch
    # (iquest_loopcoder.py:339-353)
    loop = check("mxfp4/sm90", "sglang.srt.models.iquest_loopcoder", "IQuestLoopCoderForCausalLM")
    assert loop is not None and loop.path == "self.model.gate_projections[].gate_proj" and not loop.choice


@pytest.mark.wheels
def test_the_glm5_preset_starts_on_its_checkpoint_and_not_on_mxfp4(pinned_targets, tmp_path):
    """The flagship's deployment (ModelOpt NVFP4) starts; the same model config with --quantization mxfp4
    does not, at DeepseekV2AttentionMLA's kv_b_proj (models/deepseek_v2.py:1178, linear.py:330)."""
    flagship = scan_targets(pinned_targets, [], "glm5", cache_dir=tmp_path, reuse=False)
    assert not [p for p in flagship.problems if p.kind == "does_not_start"]
    mxfp4 = scan_targets(pinned_targets, [], "glm5", cache_dir=tmp_path, reuse=False,
                         deployment=DeploymentSpec(server_args="--quantization mxfp4 --enable-piecewise-cuda-graph"))
    said = [p.message for p in mxfp4.problems if p.kind == "does_not_start"]
    assert len(said) == 1 and said[0].startswith("GlmMoeDsaForCausalLM does not start on this deployment")
    assert "self.model.layers[].self_attn.kv_b_proj" in said[0] and "linear.py:330" in said[0]


@pytest.mark.wheels
def test_a_census_lists_a_model_that_does_not_start_as_not_applicable(pinned_targets, tmp_path):
    from dynacheck.census.matrix import default_deployments
    from dynacheck.census.run import run_census

    wanted = [d for d in default_deployments() if d.name in ("fp8/sm90", "mxfp4/sm90")]
    census = run_census(pinned_targets, wanted, cache_dir=tmp_path, jobs=1,
                        models=["LlamaForCausalLM", "GptOssForCausalLM"])
    cells = {(c["model"], c["deployment"]) for c in census.cells}
    assert cells == {("LlamaForCausalLM", "fp8/sm90"), ("GptOssForCausalLM", "fp8/sm90"),
                     ("GptOssForCausalLM", "mxfp4/sm90")}
    reason = next(n["reason"] for n in census.not_applicable
                  if (n["model"], n["deployment"]) == ("LlamaForCausalLM", "mxfp4/sm90"))
    assert reason.startswith("LlamaForCausalLM does not start on this deployment")
    assert "sglang/srt/layers/linear.py:330" in reason
    assert census.stats["scans"] == 3  # a forward no class of which starts is not walked (Llama's on mxfp4)


def test_locals_handed_to_each_other_in_a_ring_give_no_origin_and_no_crash(scan_cache, tmp_path):
    import shutil

    root = tmp_path / "startup"
    shutil.copytree(ROOT, root)
    model = root / "startfx" / "model.py"
    model.write_text(model.read_text() + '''

class RingAttention(torch.nn.Module):
    def __init__(self, quant_config=None):
        super().__init__()
        x = y
        y = x
        self.proj = Linear(8, quant_config=x)


class RingModel(torch.nn.Module):
    def __init__(self, config, quant_config=None, prefix: str = ""):
        super().__init__()
        self.attn = RingAttention(quant_config=quant_config)
''')
    targets = [resolve_target(str(root), cache_dir=scan_cache)]
    spec = DeploymentSpec(framework=root / "startfx.toml", gpu="sm100", platform="cuda",
                          server_args="--quantization moeonly")
    evaluator = ScanSession.open(targets, scan_cache).engine(spec)[1]
    assert model_unbuildable(evaluator, "startfx.model", "RingModel") is None  # unknown never fails an assert
    assert model_unbuildable(evaluator, "startfx.model", "Model") is not None  # the same session still reads


def test_a_start_up_check_that_fails_is_a_problem_and_the_scan_goes_on(scan_cache, monkeypatch):
    import dynacheck.static.scan as scan

    def broken(*_):
        raise RecursionError("maximum recursion depth exceeded")

    spec = DeploymentSpec(framework=ROOT / "startfx.toml", gpu="sm100", platform="cuda",
                          server_args="--quantization moeonly", architecture="Model")
    whole = scan_roots([ROOT], ["startfx.model:Model.forward"], cache_dir=scan_cache, deployment=spec)
    monkeypatch.setattr(scan, "_does_not_start", broken)
    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    result = scan_targets(targets, ["startfx.model:Model.forward"], None, cache_dir=scan_cache, deployment=spec,
                          reuse=False)  # not the answer the first scan stored
    kinds = [p.kind for p in result.problems]
    assert "startup_check_failed" in kinds and "does_not_start" not in kinds
    assert "RecursionError" in next(p.message for p in result.problems if p.kind == "startup_check_failed")
    assert [f.fingerprint for f in result.findings] == [f.fingerprint for f in whole.findings]


def test_a_model_that_fails_every_way_names_where_its_checkpoint_chooses(scan_cache):
    """The reason says where the checkpoint's config picks what is built, when every pick fails; a layer
    built whichever way a test goes (KeptLocalModel's factory call) names no choice."""
    static = _static(scan_cache)
    picked, either, kept = (static[("moeonly", name)] for name in ("PickedModel", "EitherModel", "KeptLocalModel"))
    assert picked.choice == "self.layers[]" and picked.path in ("self.layers[].attn.proj", "self.layers[].proj")
    assert either.choice == "self" and either.path in ("self.proj", "self.attn.proj")
    assert kept.choice == "" and kept.path == "self.layers[].proj"
    text = picked.reason("PickedModel", "startfx/layers.py")
    assert "the checkpoint's config picks what `self.layers[]` builds, and each pick builds a layer" in text
    assert "picks what EitherModel.__init__ builds" in either.reason("EitherModel", "startfx/layers.py")
    assert "picks" not in kept.reason("KeptLocalModel", "startfx/layers.py")

"""Settings `ServerArgs.__post_init__` derives, decided by deploy/post_init.py without importing the code, and
the piecewise rule that reads them (deploy/piecewise_off.py `derived_turns_off`): SGLang 0.5.10 picks the
flashinfer_trtllm MoE runner on sm100 for some models and checkpoints, then turns piecewise CUDA graphs off.
The same fixture is executed as Python below: the interpreter's verdicts are checked against what the code does."""

from __future__ import annotations

import ast
import dataclasses
import types
from pathlib import Path

import pytest

from dynacheck.census.matrix import CensusDeployment
from dynacheck.census.models import ModelEntry
from dynacheck.census.run import _launches, _not_applicable
from dynacheck.deploy import post_init
from dynacheck.deploy.piecewise_off import derived_turns_off

COMMON = '''from functools import lru_cache, partial


def _check_cuda_device_version(device_capability_majors, cuda_version):
    return True


is_sm100_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8))
)
is_blackwell_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[10, 12], cuda_version=(12, 8))
)
'''
SERVER_ARGS = '''from dataclasses import dataclass

from sglang.srt.utils.common import get_bool_env_var, is_blackwell_supported, is_sm100_supported


@dataclass
class ServerArgs:
    model_path: str = "m"
    quantization: str = None
    device: str = None
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"
    enforce_piecewise_cuda_graph: bool = False
    disable_piecewise_cuda_graph: bool = False
    hicache: bool = False
    speculative_algorithm: str = None
    pp_size: int = 1

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--quantization", type=str, default=ServerArgs.quantization)
        parser.add_argument("--moe-runner-backend", type=str, default=ServerArgs.moe_runner_backend)
        parser.add_argument("--moe-a2a-backend", type=str, default=ServerArgs.moe_a2a_backend)
        parser.add_argument("--enforce-piecewise-cuda-graph", action="store_true")
        parser.add_argument("--speculative-algorithm", type=str, default=None)
        parser.add_argument("--pipeline-parallel-size", "--pp-size", type=int, default=1)

    @classmethod
    def from_cli_args(cls, args):
        args.pp_size = args.pipeline_parallel_size

    def __post_init__(self):
        self._handle_missing_default_values()
        self._handle_piecewise_cuda_graph()
        self._handle_model_specific_adjustments()
        self._handle_unrelated()
        self._handle_moe_kernel_config()

    def _handle_missing_default_values(self):
        if self.device is None:
            self.device = get_device()

    def _handle_piecewise_cuda_graph(self):
        if self.enforce_piecewise_cuda_graph:
            return
        if self.get_model_config().is_piecewise_cuda_graph_disabled_model:
            self.disable_piecewise_cuda_graph = True
        if self.speculative_algorithm is not None:
            self.disable_piecewise_cuda_graph = True
        if self.pp_size > 1:
            self.disable_piecewise_cuda_graph = True

    def _handle_model_specific_adjustments(self):
        if parse_connector_type(self.model_path) == ConnectorType.INSTANCE:
            return
        hf_config = self.get_model_config().hf_config
        model_arch = hf_config.architectures[0]
        if model_arch in ["BigMoeForCausalLM"]:
            if is_sm100_supported():
                quant_method = get_quantization_config(hf_config)
                if self.quantization is None:
                    if quant_method is None and model_arch in ["BigMoeForCausalLM"]:
                        self.quantization = "fp8"
                    else:
                        self.quantization = quant_method
                if self.moe_a2a_backend == "none" and self.moe_runner_backend == "auto" and (
                    self.quantization in ["fp8", "modelopt_fp4"]
                ):
                    self.moe_runner_backend = "flashinfer_trtllm"
        elif "Llama9" in model_arch and self.device != "cpu":
            if is_blackwell_supported() and self.moe_runner_backend == "auto":
                if self.quantization in {"fp8"}:
                    self.moe_runner_backend = "flashinfer_trtllm"
        elif model_arch in ["OddMoeForCausalLM"]:
            if get_bool_env_var("ODD_TRTLLM"):
                self.moe_runner_backend = "flashinfer_trtllm"
            if hf_config.odd_field:
                self.moe_runner_backend = "flashinfer_trtllm"

    def _handle_unrelated(self):
        if self.hicache:
            self.moe_a2a_backend = self.moe_a2a_backend

    def _handle_moe_kernel_config(self):
        if (
            not self.enforce_piecewise_cuda_graph
            and self.moe_runner_backend in ("flashinfer_trtllm", "flashinfer_mxfp4")
            and self.get_model_config().hf_config.architectures[0] != "GptOssForCausalLM"
        ):
            self.disable_piecewise_cuda_graph = True
'''
CASES = [  # (architecture, gpu major, quantization, flags, environment) -> whether piecewise is off
    ("BigMoeForCausalLM", 10, "fp8", "--quantization fp8", {}, True),
    ("BigMoeForCausalLM", 10, "", "", {}, True),  # no quant config: the release defaults it to fp8
    ("BigMoeForCausalLM", 9, "fp8", "--quantization fp8", {}, False),
    ("BigMoeForCausalLM", 10, "mxfp4", "--quantization mxfp4", {}, False),
    ("BigMoeForCausalLM", 10, "fp8", "--quantization fp8 --moe-runner-backend triton", {}, False),
    ("BigMoeForCausalLM", 10, "fp8", "--quantization fp8 --enforce-piecewise-cuda-graph", {}, False),
    ("BigMoeForCausalLMNextN", 10, "fp8", "--quantization fp8", {}, False),  # a name containing a listed one
    ("Llama9ForCausalLM", 12, "fp8", "--quantization fp8", {}, True),  # a substring test
    ("Llama9ForCausalLM", 9, "fp8", "--quantization fp8", {}, False),
    ("OddMoeForCausalLM", 10, "", "", {"ODD_TRTLLM": "1"}, True),
    ("DenseForCausalLM", 10, "fp8", "--quantization fp8", {}, False),
    # the handler's own launch-flag tests, read at its end (the model lists are piecewise_turned_off's)
    ("DenseForCausalLM", 9, "", "--speculative-algorithm EAGLE", {}, True),
    ("DenseForCausalLM", 9, "", "--pp-size 2", {}, True),  # argparse's dest, copied by from_cli_args
    ("DenseForCausalLM", 9, "", "--pp-size 1", {}, False),
    ("DenseForCausalLM", 9, "", "--speculative-algorithm EAGLE --enforce-piecewise-cuda-graph", {}, False),
]


def _release(root: Path, server_args: str = SERVER_ARGS) -> Path:
    srt = root / "sglang" / "srt"
    (srt / "utils").mkdir(parents=True)
    (srt / "server_args.py").write_text(server_args)
    (srt / "utils" / "common.py").write_text(COMMON)
    return root


def _launch(root: Path, architecture: str, major: int, quantization: str, flags: str, env: dict) -> post_init.Launch:
    gpu = {9: "sm90", 10: "sm100", 12: "sm120"}[major]
    deployment = CensusDeployment("d", flags, gpu, env=tuple(env.items()), quantization=quantization)
    return dataclasses.replace(_launches([root], [deployment], None)["d"], architecture=architecture)


@pytest.mark.parametrize("architecture,major,quantization,flags,env,off", CASES)
def test_the_derived_rule_is_decided_as_the_code_runs(tmp_path, architecture, major, quantization, flags, env, off):
    why = derived_turns_off([_release(tmp_path)], _launch(tmp_path, architecture, major, quantization, flags, env))
    assert bool(why) == off
    assert _executed(architecture, major, quantization, flags, env) == off  # the fixture, run as Python
    if off and architecture == "DenseForCausalLM":
        assert why.startswith("SGLang turns piecewise CUDA graphs off on this launch: "
                              "`ServerArgs._handle_piecewise_cuda_graph` (sglang/srt/server_args.py:")
        assert "`self.speculative_algorithm is not None`" in why or "`self.pp_size > 1`" in why
    elif off:
        assert why.startswith("SGLang turns piecewise CUDA graphs off on this launch: "
                              "`ServerArgs._handle_moe_kernel_config` tests")
        assert "because ServerArgs derives `moe_runner_backend = 'flashinfer_trtllm'` (set at sglang/srt/server_args.py:" in why


def test_verdicts_kept_for_one_architecture_are_not_given_to_a_name_containing_it(tmp_path):
    """Verdicts are kept per architecture key (the strings the code compares it with); `BigMoeForCausalLMNextN`
    contains `BigMoeForCausalLM` but is not equal to it, and the list test is an equality."""
    root = _release(tmp_path)
    assert derived_turns_off([root], _launch(root, "BigMoeForCausalLM", 10, "fp8", "--quantization fp8", {}))
    assert derived_turns_off([root], _launch(root, "BigMoeForCausalLMNextN", 10, "fp8", "--quantization fp8", {})) == ""
    assert derived_turns_off([root], _launch(root, "Llama9ForCausalLM", 12, "fp8", "--quantization fp8", {}))
    assert derived_turns_off([root], _launch(root, "Llama9VisionForCausalLM", 12, "fp8", "--quantization fp8", {}))


def test_a_method_called_inside_a_test_or_an_assignment_leaves_what_it_sets_unknown(tmp_path):
    """`_handle_unrelated` (run before the rule: it assigns `moe_a2a_backend`) calls `self._pick_runner()` inside
    an `if` test, and that method may set the runner: the runner is unknown after it, and nothing is claimed."""
    side_effect = SERVER_ARGS.replace('''            self.moe_a2a_backend = self.moe_a2a_backend
''', '''            self.moe_a2a_backend = self.moe_a2a_backend
        if get_bool_env_var("X") and self._pick_runner():
            pass

    def _pick_runner(self):
        self.moe_runner_backend = "triton"
        return True
''', 1)
    assert side_effect != SERVER_ARGS
    root = _release(tmp_path, side_effect)
    launch = _launch(root, "BigMoeForCausalLM", 10, "fp8", "--quantization fp8", {})
    assert _state(root, launch).fields["moe_runner_backend"] is post_init.TOP
    assert derived_turns_off([root], launch) == ""
    plain = _release(tmp_path / "plain")  # without the call it is decided
    assert derived_turns_off([plain], _launch(plain, "BigMoeForCausalLM", 10, "fp8", "--quantization fp8", {}))


def test_a_test_it_cannot_decide_claims_nothing(tmp_path):
    """OddMoe without the variable: `hf_config.odd_field` is unknown, and one way through sets the runner."""
    root = _release(tmp_path)
    assert derived_turns_off([root], _launch(root, "OddMoeForCausalLM", 10, "", "", {})) == ""
    # and an environment that is not known decides no get_bool_env_var
    launch = dataclasses.replace(_launch(root, "OddMoeForCausalLM", 10, "", "", {}), env_complete=False)
    state = _state(root, launch)
    assert state.fields["moe_runner_backend"] is post_init.TOP


def test_the_interpreter_joins_ways_through_and_keeps_the_lines(tmp_path):
    root = _release(tmp_path)
    state = _state(root, _launch(root, "BigMoeForCausalLM", 10, "", "", {}))
    assert state.fields["quantization"] == "fp8" and state.fields["moe_runner_backend"] == "flashinfer_trtllm"
    lines = SERVER_ARGS.splitlines()
    assert [lines[n - 1].strip() for n in state.lines["moe_runner_backend"]] == \
        ['self.moe_runner_backend = "flashinfer_trtllm"']
    # a GPU this launch does not name leaves the sm100 branch open: its fields join to unknown
    unknown_gpu = dataclasses.replace(_launch(root, "BigMoeForCausalLM", 10, "", "", {}), gpu_major=None)
    assert _state(root, unknown_gpu).fields["moe_runner_backend"] is post_init.TOP


def test_the_census_makes_such_a_cell_not_applicable(tmp_path):
    root = _release(tmp_path)
    model = ModelEntry("BigMoeForCausalLM", "sglang.srt.models.big", "sglang.srt.models.big:BigModel.forward",
                       "compiled module", True)
    sm100, sm90 = (CensusDeployment(f"fp8/{g}", "--quantization fp8", g, quantization="fp8") for g in ("sm100", "sm90"))
    launches = _launches([root], [sm100, sm90], None)
    assert "flashinfer_trtllm" in _not_applicable(model, sm100, [root], launches)
    assert _not_applicable(model, sm90, [root], launches) is None


def _state(root: Path, launch: post_init.Launch):
    from dynacheck.deploy import piecewise_off

    server = root / "sglang" / "srt" / "server_args.py"
    klass, methods, rules = piecewise_off._derived_rules(str(server), piecewise_off._stamp(server))
    helpers = piecewise_off._gpu_helpers(str(root / "sglang/srt/utils/common.py"),
                                         piecewise_off._stamp(root / "sglang/srt/utils/common.py"))
    interpreter = post_init.Interpreter(klass, dataclasses.replace(launch, gpu_helpers=helpers), methods)
    moe = next(r for r in rules if r.steps.method == "_handle_moe_kernel_config")
    return post_init.state_before(interpreter, moe.steps)


def _executed(architecture: str, major: int, quantization: str, flags: str, env: dict) -> bool:
    """Run the fixture's ServerArgs as Python, with the helpers the release would import."""
    namespace: dict = {}
    tokens = flags.split()
    source = SERVER_ARGS.replace("from sglang.srt.utils.common import", "# ")
    helpers = {
        "is_sm100_supported": lambda: major == 10, "is_blackwell_supported": lambda: major in (10, 12),
        "get_bool_env_var": lambda name, default="false": env.get(name, default).lower() in ("true", "1"),
        "get_device": lambda: "cuda", "parse_connector_type": lambda path: "",
        "ConnectorType": types.SimpleNamespace(INSTANCE="instance"),
        "get_quantization_config": lambda hf: (hf.quantization_config or {}).get("quant_method"),
    }
    exec(compile(ast.parse(source), "server_args.py", "exec"), helpers | namespace, namespace)
    server_args = namespace["ServerArgs"]
    hf = types.SimpleNamespace(architectures=[architecture], odd_field=False,
                               quantization_config={"quant_method": quantization} if quantization else None)
    server_args.get_model_config = lambda self: types.SimpleNamespace(hf_config=hf,
                                                                      is_piecewise_cuda_graph_disabled_model=False)
    values = {"quantization": quantization or None}
    if "--speculative-algorithm" in tokens:
        values["speculative_algorithm"] = tokens[tokens.index("--speculative-algorithm") + 1]
    if "--pp-size" in tokens:
        values["pp_size"] = int(tokens[tokens.index("--pp-size") + 1])
    if "--moe-runner-backend" in tokens:
        values["moe_runner_backend"] = tokens[tokens.index("--moe-runner-backend") + 1]
    values["enforce_piecewise_cuda_graph"] = "--enforce-piecewise-cuda-graph" in tokens
    return server_args(**values).disable_piecewise_cuda_graph


@pytest.mark.wheels
def test_the_real_release():
    """sglang 0.5.10: DeepSeek V3 and Qwen3 MoE with an fp8 checkpoint on sm100 get the flashinfer_trtllm runner
    and no piecewise CUDA graphs (server_args.py:1641-1650, 1959-1971, 2725-2731); sm90, Llama, and GPT-OSS
    (excluded by name, with its flashinfer_mxfp4 runner) are compiled; 0.5.9 has no such rule."""
    from dynacheck.errors import UserError
    from dynacheck.sources.resolve import resolve_target

    try:
        new, old = (Path(resolve_target(f"sglang=={v}", offline=True).root) for v in ("0.5.10", "0.5.9"))
    except UserError as exc:
        pytest.skip(f"sglang wheels not in the wheel cache: {exc}")

    def off(root: Path, architecture: str, gpu: str, quantization: str) -> str:
        flags = f"--quantization {quantization}" if quantization else ""
        deployment = CensusDeployment("d", flags, gpu, quantization=quantization)
        launch = _launches([root], [deployment], None)["d"]
        return derived_turns_off([root], dataclasses.replace(launch, architecture=architecture))

    assert "(set at sglang/srt/server_args.py:1650)" in off(new, "DeepseekV3ForCausalLM", "sm100", "fp8")
    assert "(set at sglang/srt/server_args.py:1971)" in off(new, "Qwen3MoeForCausalLM", "sm100", "")
    assert off(new, "DeepseekV3ForCausalLM", "sm90", "fp8") == ""
    assert off(new, "LlamaForCausalLM", "sm100", "fp8") == ""
    assert off(new, "GptOssForCausalLM", "sm100", "mxfp4") == ""
    # 0.5.9 has no such rule: the census reads no schema for it and decides nothing
    assert _launches([old], [CensusDeployment("d", "--quantization fp8", "sm100", quantization="fp8")], None) == {}
    sm100 = _launches([new], [CensusDeployment("d", "--quantization fp8", "sm100", quantization="fp8")], None)["d"]
    assert derived_turns_off([old], dataclasses.replace(sm100, architecture="DeepseekV3ForCausalLM")) == ""


def test_a_scan_names_the_flag_its_findings_assume(tmp_path):
    """A single scan of a launch the derived rule turns off says its findings are an enforced launch's, naming the
    flag (the rule's own text does not end with it, as the model lists' reasons do)."""
    from dynacheck.deploy.build import DeploymentSpec
    from dynacheck.static.scan import scan_roots

    root = _release(tmp_path)
    (root / "sglang" / "__init__.py").touch()
    (root / "sglang" / "srt" / "__init__.py").touch()
    (root / "sglang" / "srt" / "models").mkdir()
    (root / "sglang" / "srt" / "models" / "__init__.py").touch()
    (root / "sglang" / "srt" / "models" / "big.py").write_text("class BigModel:\n    def forward(self, x):\n        return x\n")
    (tmp_path / "config.json").write_text('{"architectures": ["BigMoeForCausalLM"]}')
    spec = DeploymentSpec(server_args="--quantization fp8", gpu="sm100", platform="cuda", model_config=tmp_path / "config.json")
    problems = scan_roots([root], ["sglang.srt.models.big:BigModel.forward"], cache_dir=tmp_path / "cache",
                          deployment=spec).problems
    off = [p.message for p in problems if p.kind == "piecewise_off"]
    assert len(off) == 1 and "`ServerArgs._handle_moe_kernel_config` tests" in off[0]
    assert off[0].endswith("the findings are for a launch that adds --enforce-piecewise-cuda-graph")


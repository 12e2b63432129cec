"""The deployment as known values: what the user runs, in the terms the partial evaluator asks about.

Nothing else in the engine knows SGLang's flags or a GPU's capability: the evaluator asks this
object "what is `torch.version.cuda` here?", "is env var X set?", "what does the server-args
object hold?", and gets a value or `UNKNOWN`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UNKNOWN = object()  # a fact the deployment does not fix

# The facts whose reads the evaluator's memo entries record (a bit each): the GPU's compute
# capability and the checkpoint's quantization, the two facts that tell apart the deployments a
# census walks as forks of one evaluator (bf16 / fp8 / nvfp4 / mxfp4 x sm90 / sm100 / sm120).
GPU_FACT = 1
QUANT_FACT = 2  # the --quantization server arg, and the config class it pins (type_pins)
# the model class a census cell walks, as `config.architectures` (SGLang builds the class its config's
# architecture names): read by comparisons with a name (PartialEvaluator._architecture_test); switched in
# place between a census's forwards (ScanSession.engine)
ARCH_FACT = 4
ALL_FACTS = -1  # what a computation cut short may have read
GPU_PROBES = frozenset({"torch.cuda.get_device_capability", "torch.cuda.get_device_properties"})
QUANT_ARGS = frozenset({"quantization"})  # server-args fields read through QUANT_FACT, not the object
_FREE_FIELDS = ("name", "gpu", "refused", "architecture")  # not read by the evaluator, or read through a fact bit
_QUANT_FIELDS = ("quantization", "type_pins", "server_args_given", "server_args")  # compared below

# Compute capability per --gpu name (the major decides SGLang's is_sm*_supported helpers).
GPU_CAPABILITY = {
    "sm80": (8, 0), "sm86": (8, 6), "sm89": (8, 9), "sm90": (9, 0), "sm100": (10, 0), "sm103": (10, 3),
    "sm110": (11, 0), "sm120": (12, 0), "sm121": (12, 1),
}
PLATFORMS = ("cuda", "rocm", "npu", "xpu", "hpu", "cpu", "musa")


@dataclass
class Deployment:
    """Known values of one deployment; an empty one (the default) decides nothing."""

    name: str = ""
    gpu: str = ""  # sm90, sm100, sm120, ... ("" unknown)
    platform: str = ""  # cuda, rocm, npu, ... ("" unknown)
    cuda_version: str = "12.9"  # torch.version.cuda on a CUDA platform
    machine: str = "x86_64"
    env: dict[str, str] = field(default_factory=dict)
    env_complete: bool = False  # True: a variable not in `env` is unset (a deployment was given)
    server_args: dict[str, Any] = field(default_factory=dict)  # ServerArgs field -> value
    server_args_given: tuple[str, ...] = ()  # the launch arguments as the user wrote them
    # namespace path parts of the server args (sglang >= 0.5.23: `get_exec().graph.x` is field x)
    server_args_segments: tuple[str, ...] = ()
    model_config: dict[str, Any] = field(default_factory=dict)  # the HF config.json values
    # HF config fields the framework sets from the server args at start-up (deploy/config_copies.py)
    config_copies: dict[str, Any] = field(default_factory=dict)
    # without a model config: the model class the walk starts in, its config's only known field (a census cell)
    architecture: str = ""
    quantization: str = ""  # SGLang's quantization method name, e.g. modelopt_fp4
    runtime: dict[str, Any] = field(default_factory=dict)  # module.global -> value while the runner compiles
    traced_batch: dict[str, Any] = field(default_factory=dict)  # field -> fact about the batch it traces with
    derived: dict[str, Any] = field(default_factory=dict)  # server-args fields set after parsing (preset-declared)
    # module.function -> "server_args" | "model_config" | "device_capability" (the GPU probe's wrapper)
    accessors: dict[str, str] = field(default_factory=dict)
    object_types: dict[str, str] = field(default_factory=dict)  # class name -> "server_args" | "model_config"
    type_pins: dict[str, str] = field(default_factory=dict)  # base class module:qualname -> concrete class
    compiling: bool = True  # torch.compiler.is_compiling() inside the traced region
    # the compile is the process's first call of the code (no eager warm-up): a registry that fills on
    # first use (`if key not in self._specs:`) is empty then, so its first-call path is taken
    cold: bool = False
    refused: str = ""  # why the framework refuses to load this deployment at all (read from its sources)
    runner_missing: str = ""  # why the runner the framework facts describe is absent (its facts not applied)
    # why the framework serves this model without piecewise CUDA graphs on this launch (deploy/piecewise_off.py)
    piecewise_off: str = ""
    framework: dict[str, Any] = field(default_factory=dict)  # where the framework keeps these facts (presets/sglang.toml)

    @property
    def given(self) -> bool:
        return bool(self.name or self.gpu or self.platform or self.env_complete or self.server_args
                    or self.model_config or self.runtime)

    # ----- platform probes ----------------------------------------------------------------------

    def external(self, name: str) -> Any:
        """The value of an external attribute such as `torch.version.cuda`, or UNKNOWN."""
        if not self.platform:
            return UNKNOWN
        cuda = self.platform == "cuda"
        table = {
            "torch.version.cuda": self.cuda_version if cuda else None,
            "torch.version.hip": "6.3" if self.platform == "rocm" else None,
            "torch.version.musa": None if self.platform != "musa" else "4.0",
            "torch.version.xpu": None,
        }
        return table.get(name, UNKNOWN)

    def external_call(self, name: str) -> Any:
        """The result of calling an external probe such as `torch.cuda.get_device_capability()`."""
        if name == "platform.machine":
            return self.machine
        if name == "torch.compiler.is_compiling" or name == "torch._dynamo.is_compiling":
            return self.compiling if self.given else UNKNOWN
        if not self.platform:
            return UNKNOWN
        if name == "torch.cuda.is_available":
            return self.platform in ("cuda", "rocm")
        if name in ("torch.npu.is_available", "torch.xpu.is_available", "torch.hpu.is_available"):
            return self.platform == name.split(".")[1]
        if name == "torch.cuda.get_device_capability":
            return GPU_CAPABILITY.get(self.gpu, UNKNOWN) if self.platform == "cuda" else UNKNOWN
        return UNKNOWN

    def torch_has(self, attr: str) -> Any:
        """`hasattr(torch, attr)` for the device back-ends a platform adds (npu, xpu, hpu, musa)."""
        if not self.platform:
            return UNKNOWN
        if attr in ("npu", "hpu", "musa"):
            return self.platform == attr
        if attr in ("xpu", "cpu", "cuda"):
            return True  # stock torch has these modules on every platform
        return UNKNOWN

    def env_value(self, name: str, default: Any) -> Any:
        if name in self.env:
            return self.env[name]
        return default if self.env_complete else UNKNOWN

    def fork_difference(self, other: "Deployment") -> int | None:
        """The facts (GPU_FACT, QUANT_FACT) `other` differs in when it differs from this deployment
        in its GPU and checkpoint format at most, else None: an evaluator of this one can then be
        forked for `other`."""
        if self.given != other.given:  # read by the evaluator, and made of the name and GPU too
            return None
        for name in self.__dataclass_fields__:
            if name not in _FREE_FIELDS + _QUANT_FIELDS and getattr(self, name) != getattr(other, name):
                return None
        if _without(self.server_args, QUANT_ARGS) != _without(other.server_args, QUANT_ARGS):
            return None
        dirty = GPU_FACT if self.external_call("torch.cuda.get_device_capability") != \
            other.external_call("torch.cuda.get_device_capability") else 0
        if self.architecture != other.architecture:
            dirty |= ARCH_FACT
        # type_pins follow from the quantization (pinned after the fork: not compared)
        if (self.quantization, {k: self.server_args.get(k) for k in QUANT_ARGS}) != \
                (other.quantization, {k: other.server_args.get(k) for k in QUANT_ARGS}):
            dirty |= QUANT_FACT
        return dirty

    def to_dict(self) -> dict[str, Any]:
        """The facts the scan used, for the JSON output and the report header."""
        if not self.given:
            return {}
        out: dict[str, Any] = {"name": self.name, "gpu": self.gpu, "platform": self.platform,
                               "quantization": self.quantization}
        if self.server_args_given:
            out["server_args"] = " ".join(self.server_args_given)
        if self.env:
            out["env"] = dict(self.env)
        if self.model_config:
            keys = ("architectures", "model_type", "n_group", "topk_group", "num_experts_per_tok",
                    "n_routed_experts", "num_hidden_layers")
            out["model_config"] = {k: self.model_config[k] for k in keys if k in self.model_config}
        if self.runtime:
            out["runtime"] = dict(self.runtime)
        if self.refused:
            out["refused"] = self.refused
        if self.runner_missing:
            out["runner_missing"] = self.runner_missing
        if self.piecewise_off:
            out["piecewise_off"] = self.piecewise_off
        if self.derived:
            out["derived_server_args"] = dict(self.derived)
        return out


def _without(table: dict[str, Any], keys: frozenset) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k not in keys}

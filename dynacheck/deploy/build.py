"""Compose a Deployment from what the user gave (preset, launch arguments, model config, GPU,
platform, env) and what the scanned framework's sources say (ServerArgs, the quantization registry).

Presets are data files under `dynacheck/deploy/presets/`; a framework file (`sglang.toml`) says
where that framework keeps deployment facts. Nothing here imports scanned code.
"""

from __future__ import annotations

import ast
import re
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from dynacheck.deploy.config_copies import read_config_copies
from dynacheck.deploy.facts import GPU_CAPABILITY, PLATFORMS, QUANT_ARGS, Deployment
from dynacheck.deploy.piecewise_off import FALSE_WHEN_COMPILED, derived_turns_off, false_when_compiled, piecewise_turned_off
from dynacheck.deploy.post_init import Launch
from dynacheck.deploy.runner import framework_file, missing_runner
from dynacheck.deploy.server_args import UnknownFlag, apply_arguments, read_schema
from dynacheck.errors import UserError
from dynacheck.sources.text import read_source

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FRAMEWORK_FILES = ("sglang",)


@dataclass
class DeploymentSpec:
    """What the user said about the deployment (CLI flags or `[tool.dynacheck]`)."""

    preset: str | None = None
    server_args: str | None = None
    model_config: Path | None = None
    gpu: str | None = None
    platform: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    framework: Path | None = None  # a framework facts file (default: the preset's, e.g. presets/sglang.toml)
    # a census cell: a launch flag the scanned SGLang lacks makes the deployment one that does not start
    # (argparse exits on it), where a scan's --server-args reports it as the user's mistake
    refuse_unknown_flags: bool = False
    # a census cell's model class: `config.architectures` when no model config is given
    architecture: str | None = None
    # the compile is the first call in a fresh process (the FlashInfer API census: no eager warm-up)
    cold: bool = False

    @property
    def empty(self) -> bool:
        return not (self.preset or self.server_args or self.model_config or self.gpu or self.platform or self.env)


def _presets_dir():
    return resources.files("dynacheck.deploy").joinpath("presets")


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in _presets_dir().iterdir()
                  if p.name.endswith(".toml") and p.name[:-5] not in FRAMEWORK_FILES)


def load_preset(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise UserError(f"Unknown preset {name!r}.", f"Known presets: {', '.join(preset_names())}.")
    return tomllib.loads(_presets_dir().joinpath(f"{name}.toml").read_text("utf-8"))


def load_framework(name: str) -> dict[str, Any]:
    return tomllib.loads(_presets_dir().joinpath(f"{name}.toml").read_text("utf-8"))


def parse_env(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise UserError(f"--env {pair!r} is not NAME=VALUE.", "Example: --env FLASHINFER_LOGLEVEL=1")
        env[name] = value
    return env


def build_deployment(spec: DeploymentSpec, locator, cache=None) -> Deployment:
    """The deployment's facts; an empty spec gives an empty Deployment (nothing decided)."""
    if spec.empty:
        return Deployment(cold=spec.cold)
    preset = load_preset(spec.preset) if spec.preset else {}
    given = preset.get("deployment", {})
    gpu = spec.gpu or given.get("gpu", "")
    platform = spec.platform or given.get("platform", "") or ("cuda" if gpu else "")
    if gpu and gpu not in GPU_CAPABILITY:
        raise UserError(f"Unknown --gpu {gpu!r}.", f"Known: {', '.join(GPU_CAPABILITY)}.")
    if platform and platform not in PLATFORMS:
        raise UserError(f"Unknown --platform {platform!r}.", f"Known: {', '.join(PLATFORMS)}.")
    deployment = Deployment(name=spec.preset or "custom", gpu=gpu, platform=platform, env=dict(spec.env),
                            env_complete=True, cold=spec.cold)
    config_path = spec.model_config
    if config_path is None and given.get("model_config"):
        deployment.model_config = _read_config_text(
            _presets_dir().joinpath(given["model_config"]).read_text("utf-8"), given["model_config"])
    elif config_path is not None:
        deployment.model_config = read_model_config(config_path)
    if not deployment.model_config:
        deployment.architecture = spec.architecture or ""
    framework = preset.get("framework", "sglang")
    if spec.framework is not None:
        try:
            facts = tomllib.loads(spec.framework.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"Could not read the framework facts {spec.framework}: {exc}.") from None
    else:
        facts = load_framework(framework) if framework in FRAMEWORK_FILES else {}
    deployment.framework = facts
    deployment.accessors = dict(facts.get("accessors", {}))
    deployment.object_types = dict(facts.get("object_types", {}))
    roots = [Path(t.root) for t in getattr(locator, "targets", ())]
    deployment.runner_missing = missing_runner(roots, facts)
    if not deployment.runner_missing:  # else no compile of this release sets those globals or traces that batch
        deployment.runtime = dict(facts.get("runtime", {}))
        deployment.traced_batch = dict(facts.get("traced_batch", {}))
    arguments = " ".join(a for a in (given.get("server_args", ""), spec.server_args or "") if a)
    architectures = deployment.model_config.get("architectures") or [""]
    deployment.piecewise_off = piecewise_turned_off(
        roots, deployment.architecture or (architectures[0] if isinstance(architectures, list) else ""), arguments)
    if not deployment.piecewise_off:  # compiled: what would have turned it off is false in the forward
        for name in false_when_compiled(roots, arguments):
            deployment.accessors.setdefault(name, FALSE_WHEN_COMPILED)
    server_file = framework_file(roots, facts.get("server_args_file", ""))
    if server_file is not None:
        schema = read_schema(server_file, cache)
        try:
            deployment.server_args, deployment.server_args_given = apply_arguments(schema, arguments)
        except UnknownFlag as exc:
            if not spec.refuse_unknown_flags and deployment.runner_missing:
                # e.g. the glm5 preset's --enable-piecewise-cuda-graph on sglang 0.5.23: say why it is gone
                raise UserError(f"{exc.message} {deployment.runner_missing[0].upper()}{deployment.runner_missing[1:]}"
                                ", so presets and launch flags written for piecewise CUDA graphs do not apply to it.") \
                    from None  # (no close spellings: none of them is the feature that went away)
            if not spec.refuse_unknown_flags:
                raise
            deployment.server_args, deployment.server_args_given = dict(schema.defaults), tuple(arguments.split())
            deployment.refused = unknown_flag_reason(exc, server_file, schema)
        for name in QUANT_ARGS & schema.resolvable:
            # resolved at start-up from the checkpoint when not given (arg_groups: resolvable=True)
            deployment.server_args.setdefault(name, quantization_of(deployment.model_config) or None)
        deployment.server_args_segments = tuple(sorted(schema.segments))
        for name, value in preset.get("server_args_derived", {}).items():
            if deployment.server_args.get(name) is None:  # what __post_init__ sets when the flag is not given
                deployment.server_args[name] = value
                deployment.derived[name] = value
    elif spec.server_args:
        raise UserError("--server-args needs an SGLang target to read ServerArgs from.",
                        "Add --target sglang==0.5.9 (or the version you run).")
    config_file = framework_file(roots, facts.get("model_config_file", ""))
    if config_file is not None and deployment.server_args:
        deployment.config_copies = {name: deployment.server_args[flag]
                                    for name, flag in read_config_copies(config_file).items()
                                    if flag in deployment.server_args}
    deployment.quantization = str(deployment.server_args.get("quantization") or "") \
        or quantization_of(deployment.model_config)
    if not deployment.piecewise_off and deployment.server_args:  # a rule on what ServerArgs derives at start-up
        deployment.piecewise_off = derived_turns_off(roots, launch_of(deployment))
    return deployment


def launch_of(deployment: Deployment) -> Launch:
    """What deploy/post_init.py is told of a deployment: its server args, architecture, GPU, CUDA, environment,
    and whether its checkpoint is quantized (from config.json when given; a quantized checkpoint when
    --quantization names a method; unknown otherwise)."""
    architectures = deployment.model_config.get("architectures") or [""]
    architecture = deployment.architecture or (architectures[0] if isinstance(architectures, list) else "")
    if deployment.model_config:
        quantized = bool(quantization_of(deployment.model_config))
    else:
        quantized = True if deployment.server_args.get("quantization") else None
    try:
        cuda = tuple(int(part) for part in deployment.cuda_version.split(".")[:2])
    except ValueError:
        cuda = None
    gpu = GPU_CAPABILITY.get(deployment.gpu)
    return Launch(str(architecture or ""), dict(deployment.server_args), deployment.platform,
                  gpu[0] if gpu else None, cuda if cuda and len(cuda) == 2 else None, dict(deployment.env),
                  quantized, env_complete=deployment.env_complete)


def pin_quantization(deployment: Deployment, evaluator, locator) -> None:
    """Pin the framework's quantization base class to the checkpoint's config class (read from the
    framework's registry dict, e.g. SGLang's QUANTIZATION_METHODS["modelopt_fp4"])."""
    facts = deployment.framework
    if not deployment.quantization or not facts.get("quantization_base"):
        return
    module = facts.get("quantization_registry", "")
    path = locator.find(module) if module else None
    if path is None:
        return
    if path.is_dir():
        path = path / "__init__.py"
    name = _registry_name(path, deployment.quantization)
    if not name:
        raise UserError(f"Quantization {deployment.quantization!r} is not in {module}'s registry.")
    for value in evaluator.global_value(module, name, 0):
        if value.kind == "cls":
            target = f"{value.module}:{value.name}"
            deployment.type_pins[facts["quantization_base"]] = target
            evaluator.pins[facts["quantization_base"]] = target
            deployment.refused = deployment.refused or _below_min_capability(deployment, evaluator, value)


def _below_min_capability(deployment: Deployment, evaluator, config_class) -> str:
    """SGLang's loader raises when the GPU is below the quantization config's `get_min_capability()`
    (`model_loader/loader.py`: "is not supported for the current GPU"): the reason, or ""."""
    match = re.fullmatch(r"sm(\d+)", deployment.gpu or "")
    if not match:
        return ""
    for method in evaluator.member(config_class, "get_min_capability", 1):
        if method.kind != "func":
            continue
        got = evaluator.partial.call_function(method, [], {}, 0)
        values = got.values or ()
        if len(values) == 1 and isinstance(next(iter(values)), int) and int(match.group(1)) < next(iter(values)):
            needed = next(iter(values))
            return (f"{deployment.quantization} needs compute capability {needed} "
                    f"({method.module}.{method.name} returns {needed}); the model loader refuses "
                    f"{deployment.gpu} before anything is compiled")
    return ""


def _registry_name(path: Path, quantization: str) -> str:
    try:
        tree = ast.parse(read_source(path))
    except (OSError, SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == quantization and isinstance(value, ast.Name):
                    return value.id
    return ""


def unknown_flag_reason(exc: UnknownFlag, server_file: Path, schema) -> str:
    """Why a deployment with a flag the framework lacks does not start (argparse exits on it)."""
    return (f"this SGLang has no launch flag {exc.flag} (read from {_relative(server_file)}"
            f"{' and arg_groups/fields/' if schema.segments else ''}): its argument parser "
            "exits with 'unrecognized arguments' before a model is loaded")


def unstartable(roots: list[Path], arguments: str, cache=None, framework: str = "sglang") -> str:
    """Why the framework under one of `roots` refuses these launch arguments ("" when it takes them)."""
    server_file = framework_file(roots, load_framework(framework).get("server_args_file", ""))
    if server_file is None:
        return ""
    schema = read_schema(server_file, cache)
    try:
        apply_arguments(schema, arguments)
    except UnknownFlag as exc:
        return unknown_flag_reason(exc, server_file, schema)
    return ""


def _relative(path: Path) -> str:
    """`sglang/srt/server_args.py` out of a path into an unpacked tree."""
    parts = path.parts
    last = len(parts) - 1 - parts[::-1].index("sglang") if "sglang" in parts else len(parts) - 1
    return "/".join(parts[last:])


def read_model_config(path: Path) -> dict[str, Any]:
    """An HF `config.json` (with `quantization_config`), or a folder holding it and hf_quant_config.json."""
    folder = path if path.is_dir() else None
    config_file = folder / "config.json" if folder else path
    try:
        text = config_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"Could not read the model config {config_file}: {exc.strerror or exc}.") from None
    config = _read_config_text(text, str(config_file))
    quant_file = (folder or path.parent) / "hf_quant_config.json"
    if "quantization_config" not in config and quant_file.is_file():
        try:
            quant = json.loads(quant_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            quant = {}
        inner = quant.get("quantization", quant)
        if isinstance(inner, dict):
            config["quantization_config"] = {"quant_method": "modelopt", **inner}
    return config


def _read_config_text(text: str, name: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise UserError(f"The model config {name} is not JSON: {exc}.") from None
    if not isinstance(config, dict):
        raise UserError(f"The model config {name} is not a JSON object.")
    return config


def quantization_of(config: dict[str, Any]) -> str:
    """SGLang's quantization method name for an HF checkpoint config ('' when unquantized)."""
    quant = config.get("quantization_config")
    if not isinstance(quant, dict):
        return ""
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "")).upper()
    if method == "modelopt":
        return "modelopt_fp4" if "FP4" in algo else "modelopt_fp8"
    return method

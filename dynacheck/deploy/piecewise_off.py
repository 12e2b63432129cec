"""Model architectures a SGLang release serves without piecewise CUDA graphs, read from its sources.

From sglang 0.5.10 piecewise CUDA graphs are on by default, and `ServerArgs._handle_piecewise_cuda_graph`
turns them off again for some models unless `--enforce-piecewise-cuda-graph` is given (0.5.10
`server_args.py:1078-1109`): an architecture in `piecewise_cuda_graph_disabled_model_archs`
(`configs/model_config.py:1352`: DeepseekV32, Qwen3Next, GlmMoeDsa, BailingMoeV2_5, LLaDA), and a multimodal
model (`is_multimodal`: an architecture in `multimodal_model_archs`, `:1296`, with multimodal enabled, which it
is by default except for the `mm_disabled_models` of `ModelConfig.__init__`, `:154-170`, unless
`--enable-multimodal`). Such a model's forward is never compiled there, so a census cell of it is not a list of
graph breaks. Conditions that hang on the checkpoint (`is_deepseek_nsa(hf_text_config)` reads `index_topk`,
a vision sub-config) or on launch flags a deployment does not pass (speculative decoding, DP attention, ...)
are not decided here.

Rules that hang on a setting `ServerArgs.__post_init__` derives are read too (`derived_turns_off`): 0.5.10's
`_handle_moe_kernel_config` turns piecewise CUDA graphs off for the `flashinfer_trtllm` and `flashinfer_mxfp4` MoE
runners (`server_args.py:2719-2731`), which `_handle_model_specific_adjustments` picks on sm100 for DeepSeek V3,
Qwen3 MoE, GLM-4 MoE and Llama 4 with some checkpoint formats (`:1641-1650`, `:1959-1971`, `:2008-2022`,
`:1859-1861`); deploy/post_init.py decides them.

Read with `ast`, never imported; a release without `_handle_piecewise_cuda_graph` (0.5.9: opt-in through
`--enable-piecewise-cuda-graph`) turns nothing off.
"""

from __future__ import annotations

import ast
import functools
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from dynacheck.deploy import post_init, post_init_plan
from dynacheck.deploy.runner import framework_file
from dynacheck.sources.text import read_source

SERVER_ARGS = "sglang/srt/server_args.py"
MODEL_CONFIG = "sglang/srt/configs/model_config.py"
COMMON = "sglang/srt/utils/common.py"  # is_sm100_supported and its kin
HANDLER = "_handle_piecewise_cuda_graph"
ENFORCE_FLAG = "--enforce-piecewise-cuda-graph"
MULTIMODAL_FLAG = "--enable-multimodal"
FALSE_WHEN_COMPILED = "false_when_compiled"  # an accessor kind (facts.accessors): the call is False


@dataclass(frozen=True)
class PiecewiseRules:
    """What one release reads to turn piecewise CUDA graphs off, with the lines that say so."""

    handler_line: int = 0  # `def _handle_piecewise_cuda_graph` in server_args.py (0: the release has none)
    enforce_line: int = 0  # `if self.enforce_piecewise_cuda_graph:` that skips the rest
    disabled_test_line: int = 0  # `if self.get_model_config().is_piecewise_cuda_graph_disabled_model:`
    multimodal_test_line: int = 0  # `if self.get_model_config().is_multimodal:`
    disabled_archs: dict[str, int] = field(default_factory=dict)  # architecture -> its line in model_config.py
    multimodal_archs: dict[str, int] = field(default_factory=dict)
    multimodal_off_by_default: dict[str, int] = field(default_factory=dict)  # `mm_disabled_models`
    # module-level predicates of the model config that also turn it off (`or is_deepseek_nsa(self.hf_text_config)`
    # in ModelConfig.__init__): name -> the line; false in any forward the runner does compile
    config_predicates: dict[str, int] = field(default_factory=dict)


def piecewise_turned_off(roots: Iterable[Path], architecture: str, server_args: str) -> str:
    """Why this release serves `architecture` without piecewise CUDA graphs on a deployment launched with
    `server_args` ("" when it compiles it, or when that is not decided by the architecture and the flags)."""
    roots = list(roots)
    server, config = framework_file(roots, SERVER_ARGS), framework_file(roots, MODEL_CONFIG)
    if not architecture or server is None or config is None:
        return ""
    rules = _rules(str(server), _stamp(server), str(config), _stamp(config))
    if not rules.handler_line:
        return ""
    flags = set(_tokens(server_args))
    if ENFORCE_FLAG in flags:
        return ""
    where = f"{SERVER_ARGS}:{rules.handler_line}"
    tail = f"; nothing is compiled unless the launch adds {ENFORCE_FLAG}"
    if rules.disabled_test_line and architecture in rules.disabled_archs:
        return (f"SGLang turns piecewise CUDA graphs off for {architecture}: it is listed in "
                f"`piecewise_cuda_graph_disabled_model_archs` ({MODEL_CONFIG}:{rules.disabled_archs[architecture]}), "
                f"which `ServerArgs.{HANDLER}` reads ({SERVER_ARGS}:{rules.disabled_test_line}, from {where}){tail}")
    multimodal = architecture in rules.multimodal_archs and (
        MULTIMODAL_FLAG in flags or architecture not in rules.multimodal_off_by_default
        or _transformers_impl(_tokens(server_args)))  # `mm_disabled_models` hold for SGLang's own model code only
    if rules.multimodal_test_line and multimodal:
        return (f"SGLang turns piecewise CUDA graphs off for {architecture}, a multimodal model: it is listed in "
                f"`multimodal_model_archs` ({MODEL_CONFIG}:{rules.multimodal_archs[architecture]}), multimodal is on "
                f"for it, and `ServerArgs.{HANDLER}` reads `is_multimodal` ({SERVER_ARGS}:{rules.multimodal_test_line}, "
                f"from {where}){tail}")
    return ""


def _transformers_impl(tokens: list[str]) -> bool:
    """`--model-impl transformers`: ModelConfig keeps multimodal on for every listed model then (`:161-163`)."""
    for i, token in enumerate(tokens):
        value = token.partition("=")[2] if token.startswith("--model-impl=") else \
            tokens[i + 1] if token == "--model-impl" and i + 1 < len(tokens) else ""
        if value.lower() == "transformers":
            return True
    return False


def false_when_compiled(roots: Iterable[Path], server_args: str) -> dict[str, str]:
    """`module.function` -> why, for each model-config predicate that, true, turns piecewise CUDA graphs off on
    this launch: a forward the runner compiles has it false. 0.5.10's `is_deepseek_nsa(config)` (NSA models,
    `index_topk` in the checkpoint's config) is one, so a compiled DeepseekV3 forward builds no NSA indexer,
    whatever its checkpoint; with `--enforce-piecewise-cuda-graph` it decides nothing."""
    roots = list(roots)
    server, config = framework_file(roots, SERVER_ARGS), framework_file(roots, MODEL_CONFIG)
    if server is None or config is None or ENFORCE_FLAG in _tokens(server_args):
        return {}
    rules = _rules(str(server), _stamp(server), str(config), _stamp(config))
    if not rules.handler_line or not rules.disabled_test_line:
        return {}
    module = MODEL_CONFIG[:-3].replace("/", ".")
    return {f"{module}.{name}": (f"true, it turns piecewise CUDA graphs off ({MODEL_CONFIG}:{line}, read at "
                                 f"{SERVER_ARGS}:{rules.disabled_test_line})")
            for name, line in rules.config_predicates.items()}


def _tokens(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments or "")
    except ValueError:  # an unbalanced quote: the flags are read as plain words
        return (arguments or "").split()


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _rules(server: str, server_stamp: tuple, config: str, config_stamp: tuple) -> PiecewiseRules:
    """Once per file version: a census asks for every model class and deployment. A release without the
    handler (0.5.9, every flagship scan) is told by a text search, not a second parse of server_args.py."""
    try:
        if f"def {HANDLER}(" not in read_source(server):
            return PiecewiseRules()
    except OSError:
        return PiecewiseRules()
    server_tree, config_tree = _parsed(server, server_stamp), _parsed(config, config_stamp)
    handler = _function(server_tree, HANDLER) if server_tree is not None else None
    if handler is None or config_tree is None:
        return PiecewiseRules()
    enforce = disabled = multimodal = 0
    for node in ast.walk(handler):
        if not isinstance(node, ast.If):
            continue
        test = ast.unparse(node.test)
        if test == "self.enforce_piecewise_cuda_graph" and any(isinstance(s, ast.Return) for s in node.body):
            enforce = node.lineno
        elif test == "self.get_model_config().is_piecewise_cuda_graph_disabled_model" and _turns_off(node):
            disabled = node.lineno
        elif test == "self.get_model_config().is_multimodal" and _turns_off(node):
            multimodal = node.lineno
    if not enforce:  # the flag this reading honours is not what the release checks: claim nothing
        return PiecewiseRules()
    model_config = next((n for n in config_tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelConfig"), None)
    init = _function(model_config, "__init__") if model_config is not None else None
    predicates = _config_predicates(config_tree, init) if init is not None else {}
    return PiecewiseRules(handler.lineno, enforce, disabled, multimodal,
                          _string_list(config_tree.body, "piecewise_cuda_graph_disabled_model_archs"),
                          _string_list(config_tree.body, "multimodal_model_archs"),
                          _string_list(list(ast.walk(init)) if init is not None else [], "mm_disabled_models"),
                          predicates)


def _config_predicates(tree: ast.Module, init: ast.FunctionDef) -> dict[str, int]:
    """The module-level functions called on the HF config in `self.is_piecewise_cuda_graph_disabled_model = ...`
    (besides the architecture list's own helper), with the line of that assignment."""
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "self.is_piecewise_cuda_graph_disabled_model"
                                                for t in node.targets):
            return {call.func.id: node.lineno for call in ast.walk(node.value)
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in defined
                    and call.func.id != "is_piecewise_cuda_graph_disabled_model" and len(call.args) == 1
                    and ast.unparse(call.args[0]) in ("self.hf_text_config", "self.hf_config")}
    return {}


@functools.lru_cache(maxsize=8)
def _parsed(path: str, stamp: tuple) -> ast.Module | None:
    """Once per file version: the model-list rules and the derived rules both read server_args.py."""
    try:
        return ast.parse(read_source(path))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _turns_off(node: ast.If) -> bool:
    """`self.disable_piecewise_cuda_graph = True` in the branch."""
    return any(isinstance(s, ast.Assign) and ast.unparse(s).replace(" ", "") == "self.disable_piecewise_cuda_graph=True"
               for s in node.body)


def _string_list(statements, name: str) -> dict[str, int]:
    """`name = ["A", "B", ...]` among the statements: each string with its line (the first such assignment)."""
    for node in statements:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                and isinstance(node.value, ast.List):
            return {e.value: e.lineno for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return {}


@dataclass(frozen=True)
class DerivedRule:
    """`if <test>: self.disable_piecewise_cuda_graph = True` in a ServerArgs method `__post_init__` calls,
    with what to interpret to decide it."""

    line: int
    steps: post_init_plan.Plan
    # the handler itself, read at its end: each of its `if <launch flag>: disable = True` (speculative decoding,
    # DP attention, LoRA, ...); its model lists are piecewise_turned_off's, with their own lines
    handler: ast.FunctionDef | None = None


_DECIDED: dict[tuple, str] = {}  # (server_args.py version, rule, the launch's deciding values) -> why


def derived_turns_off(roots: Iterable[Path], launch: post_init.Launch) -> str:
    """Why this release serves the launch without piecewise CUDA graphs by a rule that reads settings
    `__post_init__` derives (the MoE runner it picks, ...), or "" when no such rule is decided true on every
    way through the code (deploy/post_init.py). Each rule is first decided without the architecture: a census
    asks for 178 model classes on each deployment, and most deployments decide it for all of them."""
    roots = list(roots)
    server, common = framework_file(roots, SERVER_ARGS), framework_file(roots, COMMON)
    if server is None:
        return ""
    stamp = _stamp(server)
    klass, methods, rules = _derived_rules(str(server), stamp)
    if not rules:
        return ""
    helpers = _gpu_helpers(str(common), _stamp(common)) if common is not None else {}
    for rule in rules:
        values = tuple(sorted((name, repr(launch.args.get(name, post_init.TOP))) for name in rule.steps.fields))
        base = (str(server), stamp, rule.line, values, launch.platform, launch.gpu_major, launch.cuda_version,
                tuple(sorted(launch.env.items())), launch.quantized_checkpoint)
        for architecture in ("", launch.architecture):
            key = base + (architecture and rule.steps.architecture_key(architecture),)
            if key not in _DECIDED:
                _DECIDED[key] = _decide(klass, methods, rule, replace(launch, architecture=architecture,
                                                                      gpu_helpers=helpers))
            if _DECIDED[key] != "?":
                break
        if _DECIDED[key] not in ("", "?"):
            return _DECIDED[key]
    return ""


def has_derived_rules(server: Path) -> bool:
    """Whether this server_args.py has a piecewise rule on a derived setting (a text search first)."""
    return bool(_derived_rules(str(server), _stamp(server))[2])


def _decide(klass: ast.ClassDef, methods: dict, rule: DerivedRule, launch: post_init.Launch) -> str:
    """Why the rule turns piecewise off ("" when it is false on every way through, "?" when undecided)."""
    interpreter = post_init.Interpreter(klass, launch, methods)
    try:
        state = post_init.state_before(interpreter, rule.steps)
        truth = interpreter.truth(rule.steps.statement.test, state)
    except (post_init.Undecided, RecursionError):
        return "?"
    if truth is not True:
        return "" if truth is False else "?"
    if rule.handler is not None:
        return _handler_reason(rule, interpreter, state)
    read = sorted(post_init.fields_read(rule.steps.statement.test))
    derived = [f"`{name} = {state.fields[name]!r}` (set at {SERVER_ARGS}:"
               f"{', '.join(str(n) for n in sorted(state.lines[name]))})"
               for name in read if state.lines.get(name) and state.fields.get(name) is not post_init.TOP]
    because = f", because ServerArgs derives {' and '.join(derived)}" if derived else ""
    return (f"SGLang turns piecewise CUDA graphs off on this launch: `ServerArgs.{rule.steps.method}` tests "
            f"`{ast.unparse(rule.steps.statement.test)}` ({SERVER_ARGS}:{rule.line}), true here{because}")


def _handler_reason(rule: DerivedRule, interpreter: post_init.Interpreter, state) -> str:
    """Which of the handler's tests are true on this launch (they read launch flags the handler does not set)."""
    tests = [node for node in rule.handler.body if isinstance(node, ast.If) and _turns_off(node)
             and interpreter.truth(node.test, state) is True]
    where = f"`ServerArgs.{HANDLER}` ({SERVER_ARGS}:{rule.line})"
    if not tests:  # nothing in the handler: it was off before it ran (--disable-piecewise-cuda-graph)
        return (f"SGLang serves this launch without piecewise CUDA graphs: `disable_piecewise_cuda_graph` is set "
                f"before {where} runs (the launch passes --disable-piecewise-cuda-graph, or a step before it sets it)")
    said = " and ".join(f"`{ast.unparse(t.test)}` ({SERVER_ARGS}:{t.lineno})" for t in tests)
    return (f"SGLang turns piecewise CUDA graphs off on this launch: {where} tests {said}, true here; "
            f"nothing is compiled unless the launch adds {ENFORCE_FLAG}")


@functools.lru_cache(maxsize=8)
def _derived_rules(server: str, stamp: tuple) -> tuple[ast.ClassDef | None, dict, list[DerivedRule]]:
    """ServerArgs, its methods, and the piecewise-off rules of the methods `__post_init__` calls after
    `_handle_piecewise_cuda_graph` (whose model lists `piecewise_turned_off` reads) that read a field."""
    try:
        if "disable_piecewise_cuda_graph = True" not in read_source(server):
            return None, {}, []
    except OSError:
        return None, {}, []
    tree = _parsed(server, stamp)
    klass = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None) \
        if tree is not None else None
    if klass is None:
        return None, {}, []
    order = post_init_plan.post_init_order(klass)
    methods = {n.name: n for n in klass.body if isinstance(n, ast.FunctionDef)}
    rules = []
    if HANDLER in order and HANDLER in methods:  # the handler's flag tests, read at its end
        outcome = ast.parse("if self.disable_piecewise_cuda_graph:\n    self.disable_piecewise_cuda_graph = True").body[0]
        rules.append(DerivedRule(methods[HANDLER].lineno, post_init_plan.plan(klass, order, HANDLER, outcome,
                                                                              at_end=True), methods[HANDLER]))
    for name in order[order.index(HANDLER) + 1:] if HANDLER in order else []:
        for node in ast.walk(methods.get(name) or ast.Module(body=[], type_ignores=[])):
            if isinstance(node, ast.If) and _turns_off(node) and post_init.fields_read(node.test):
                rules.append(DerivedRule(node.lineno, post_init_plan.plan(klass, order, name, node)))
    return klass, methods, rules


@functools.lru_cache(maxsize=8)
def _gpu_helpers(common: str, stamp: tuple) -> dict:
    tree = _parsed(common, stamp)
    return post_init_plan.gpu_helpers(tree) if tree is not None else {}

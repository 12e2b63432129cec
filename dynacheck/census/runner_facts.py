"""What SGLang's piecewise runner does with a model it cannot compile, read from its source per release.

`init_piecewise_cuda_graphs` (model_executor/model_runner.py) reads `model.model` and then
`language_model.model.layers`. In 0.5.9 either attribute missing raises AttributeError and the
server does not start; 0.5.10 checks both first and turns piecewise CUDA graphs off with a warning.
A draft worker is skipped by `can_run_piecewise_cuda_graph` (0.5.9), by speculative decoding turning
piecewise off in ServerArgs (0.5.10), or by an early return (0.5.13). The census's not-applicable
reasons quote what the scanned release does, with the line, instead of one release's behaviour.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

RUNNER_MODULE = "sglang.srt.model_executor.model_runner"
SERVER_ARGS_MODULE = "sglang.srt.server_args"
_RUNNER_FILE = "model_executor/model_runner.py"


@dataclass(frozen=True)
class RunnerFacts:
    no_model: str  # what happens to a model without `.model`
    no_layers: str  # what happens when the module the runner compiles has no `.layers`
    draft: str  # why a draft worker's model is not compiled


DEFAULT = RunnerFacts(
    no_model="with piecewise CUDA graphs on, the runner raises AttributeError at `model.model = "
             "resolve_language_model(model)` (model_runner.py init_piecewise_cuda_graphs) and the server does not start",
    no_layers="with piecewise CUDA graphs on, the runner raises AttributeError where it iterates "
              "`language_model.model.layers` (model_runner.py init_piecewise_cuda_graphs) and the server does not start",
    draft="a draft worker never builds the piecewise runner",
)


def read(sources) -> RunnerFacts:
    """The runner's behaviour in the SGLang `sources` reads (census.models._Sources)."""
    runner = sources.module(RUNNER_MODULE)
    tree = runner.tree if runner is not None else None
    init = _function(tree, "init_piecewise_cuda_graphs")
    if init is None:
        return DEFAULT
    return RunnerFacts(no_model=_no_model(init), no_layers=_no_layers(init), draft=_draft(tree, init, sources))


def _function(tree, name: str):
    if tree is None:
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _guard(function, *words: str):
    """The first `if` of the function whose test holds every word (e.g. `hasattr(self.model, "model")`)
    and that returns in one of its branches: the runner giving up on the model there."""
    for node in ast.walk(function):
        if isinstance(node, ast.If) and all(word in ast.unparse(node.test) for word in words) \
                and any(isinstance(inner, ast.Return) for inner in ast.walk(node)):
            return node
    return None


def _disabled(node: ast.If) -> str:
    return (f"the runner turns piecewise CUDA graphs off for it with a warning ({_RUNNER_FILE}:{node.lineno}), "
            "so nothing is compiled")


def _no_model(init) -> str:
    guard = _guard(init, "hasattr(self.model", "'model'")
    if guard is not None:
        return _disabled(guard)
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and "resolve_language_model" in ast.unparse(node.value):
            return (f"with piecewise CUDA graphs on, the runner raises AttributeError at `{ast.unparse(node)}` "
                    f"({_RUNNER_FILE}:{node.lineno}) and the server does not start")
    return DEFAULT.no_model


def _no_layers(init) -> str:
    guard = _guard(init, "hasattr(", "'layers'")
    if guard is not None:
        return _disabled(guard)
    for node in ast.walk(init):
        if isinstance(node, ast.For) and ast.unparse(node.iter).endswith(".layers"):
            return (f"with piecewise CUDA graphs on, the runner raises AttributeError at `for ... in "
                    f"{ast.unparse(node.iter)}` ({_RUNNER_FILE}:{node.lineno}) and the server does not start")
    return DEFAULT.no_layers


def _draft(tree, init, sources) -> str:
    early = _guard(init, "self.is_draft_worker")
    if early is not None:
        return f"a draft worker returns before the runner is built ({_RUNNER_FILE}:{early.lineno})"
    can_run = _function(tree, "can_run_piecewise_cuda_graph")
    guard = _guard(can_run, "self.is_draft_worker") if can_run is not None else None
    if guard is not None:
        return f"`can_run_piecewise_cuda_graph` returns False for a draft worker ({_RUNNER_FILE}:{guard.lineno})"
    server_args = sources.module(SERVER_ARGS_MODULE)
    for node in ast.walk(server_args.tree) if server_args is not None and server_args.tree is not None else ():
        if isinstance(node, ast.If) and "speculative_algorithm is not None" in ast.unparse(node.test) \
                and "disable_piecewise_cuda_graph = True" in ast.unparse(node):
            return (f"speculative decoding, which a draft class needs, turns piecewise CUDA graphs off "
                    f"(server_args.py:{node.lineno})")
    return DEFAULT.draft

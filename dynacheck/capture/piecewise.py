"""SGLang-style piecewise compile: Dynamo traces the whole forward (fullgraph), the backend splits the
FX graph at every attention op, runs each piece eagerly, and captures one CUDA graph per piece per
batch size; attention runs eagerly between the graphed pieces (as SGLang's `SGLangBackend` with
`piecewise_cuda_graph_compiler="eager"`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch import fx
from torch.fx.passes.split_module import split_module

from dynacheck.capture.attention import is_attention_node


@dataclass
class Split:
    """A graph split at attention: the top module and the names of its pieces and attention parts."""

    module: fx.GraphModule
    pieces: list[str]
    attention: list[str]
    custom_ops: dict[str, int] = field(default_factory=dict)  # non-aten ops in the traced graph, by name


def split_at_attention(gm: fx.GraphModule) -> Split:
    """Partition nodes: everything between two attention ops is one piece; each attention op its own part."""
    partition_of: dict[fx.Node, int] = {}
    part = 0
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if is_attention_node(node):
            part += 1
            partition_of[node] = part
            part += 1
        else:
            partition_of[node] = part
    split = split_module(gm, None, lambda n: partition_of[n], keep_original_order=True)
    names = [n.target for n in split.graph.nodes if n.op == "call_module"]
    attention = [n for n in names if int(n.rsplit("_", 1)[1]) % 2 == 1]
    pieces = [n for n in names if n not in attention]
    return Split(split, pieces, attention, custom_ops(gm))


def custom_ops(gm: fx.GraphModule) -> dict[str, int]:
    """How often each non-aten op (custom ops such as dynacheck::fp4_quantize) appears in the graph."""
    counts: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            name = node.target.name()
            if name.split("::")[0] not in ("aten", "prims"):
                counts[name] = counts.get(name, 0) + 1
    return counts


@dataclass
class CaptureState:
    """Shared by every compiled variant of one model: what the next call should do."""

    use_cuda_graphs: bool = False
    capturing: bool = False
    pool: Any = None
    stable: set[int] = field(default_factory=set)  # data_ptrs that never move (weights, buffers)
    splits: list[Split] = field(default_factory=list)  # one per Dynamo compile (batch size)


class _Captured:
    """One piece's CUDA graph for one shape: static inputs, which ones to copy in, static outputs."""

    def __init__(self, gm: fx.GraphModule, args: Sequence[Any], stable: set[int], pool: Any):
        self.static: list[Any] = []
        self.copy_in: list[int] = []
        self.pinned: list[tuple[int, int]] = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.data_ptr() not in stable:
                self.static.append(a.clone())
                self.copy_in.append(i)
            else:
                self.static.append(a)
                if isinstance(a, torch.Tensor):
                    self.pinned.append((i, a.data_ptr()))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            gm(*self.static)  # warm-up off the capture: lazy inits, library handles
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.out = gm(*self.static)

    def replay(self, args: Sequence[Any]) -> Any:
        for i, ptr in self.pinned:
            if args[i].data_ptr() != ptr:
                raise RuntimeError(f"input {i} of a captured piece moved; it was assumed static")
        for i in self.copy_in:
            self.static[i].copy_(args[i])
        self.graph.replay()
        return self.out


class PieceRunner(torch.nn.Module):
    """Stands in for one piece: eager until asked to capture, then replays its CUDA graph per shape."""

    def __init__(self, gm: fx.GraphModule, state: CaptureState):
        super().__init__()
        self.gm, self.state = gm, state
        self.graphs: dict[tuple, _Captured] = {}

    def forward(self, *args: Any) -> Any:
        if not self.state.use_cuda_graphs:
            return self.gm(*args)
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        captured = self.graphs.get(key)
        if captured is None:
            if not self.state.capturing:
                return self.gm(*args)
            captured = self.graphs[key] = _Captured(self.gm, args, self.state.stable, self.state.pool)
        out = captured.replay(args)
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.state.stable.add(t.data_ptr())  # static outputs feed later pieces without a copy
        return out


class PiecewiseBackend:
    """A `torch.compile` backend: split at attention, wrap each piece in a `PieceRunner`."""

    def __init__(self, state: CaptureState | None = None):
        self.state = state or CaptureState()

    def __call__(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        split = split_at_attention(gm)
        for name in split.pieces:
            setattr(split.module, name, PieceRunner(getattr(split.module, name), self.state))
        self.state.splits.append(split)
        return split.module


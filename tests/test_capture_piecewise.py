"""Splitting the traced forward at attention, as SGLang's piecewise runner does (CPU: no CUDA graphs)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dynacheck.capture.attention import is_attention_node, mla_attention  # noqa: E402
from dynacheck.capture.model import Glm5Config, Glm5Model  # noqa: E402
from dynacheck.capture.piecewise import PiecewiseBackend, split_at_attention  # noqa: E402


class TwoAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)

    def forward(self, x):
        q = (x @ self.w).view(x.shape[0], 2, 4)
        a = mla_attention(q, q, q, 0.5).reshape(x.shape[0], 8)
        h = torch.relu(a) + x  # residual: x crosses the split
        q2 = (h @ self.w).view(x.shape[0], 2, 4)
        b = mla_attention(q2, q2, q2, 0.5).reshape(x.shape[0], 8)
        return b * 2 + h


def _trace(module, *args):
    graphs = []

    def grab(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm

    torch.compile(module, backend=grab, fullgraph=True, dynamic=False)(*args)
    return graphs[0]


def test_pieces_are_attention_count_plus_one_and_exclude_attention():
    gm, _ = _trace(TwoAttention(), torch.randn(3, 8))
    split = split_at_attention(gm)
    assert len(split.attention) == 2
    assert len(split.pieces) == 3
    for name in split.pieces:
        assert not any(is_attention_node(n) for n in getattr(split.module, name).graph.nodes)
    for name in split.attention:
        nodes = [n for n in getattr(split.module, name).graph.nodes if n.op == "call_function"]
        assert len(nodes) == 1 and is_attention_node(nodes[0])


def test_split_graph_computes_what_the_unsplit_graph_computes():
    m, x = TwoAttention(), torch.randn(5, 8)
    gm, args = _trace(m, x)  # Dynamo lifts the parameter to a graph input: reuse its inputs
    split = split_at_attention(gm)
    assert torch.equal(split.module(*args)[0], gm(*args)[0])
    assert torch.equal(gm(*args)[0], m(x))


def test_backend_on_the_glm5_model_splits_per_layer_and_matches_eager():
    cfg = Glm5Config.tiny(layers=3)
    model = Glm5Model(cfg, dtype=torch.float32)
    x, pos = torch.randn(4, cfg.hidden), torch.arange(4)
    backend = PiecewiseBackend()
    out = torch.compile(model, backend=backend, fullgraph=True, dynamic=False)(x, pos)
    split = backend.state.splits[-1]
    assert len(split.attention) == cfg.layers
    assert len(split.pieces) == cfg.layers + 1
    assert split.custom_ops == {"dynacheck_capture::mla_attention": 3}
    assert torch.equal(out, model(x, pos))


@pytest.mark.slow  # over 10 s on 2 cores
def test_one_compile_per_batch_size():
    cfg = Glm5Config.tiny(layers=2)
    model = Glm5Model(cfg, dtype=torch.float32)
    backend = PiecewiseBackend()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=False)
    for b in (1, 2, 4):
        compiled(torch.randn(b, cfg.hidden), torch.arange(b))
    assert len(backend.state.splits) == 3

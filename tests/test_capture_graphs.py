"""The CUDA-graph bookkeeping of the piecewise runner, simulated on CPU.

A stand-in for `torch.cuda.graph` records every op run during capture (TorchDispatchMode) and
`replay()` reruns them on the same tensors, writing results into the recorded outputs: the static-
memory semantics of a real CUDA graph. If the runner forgot to copy a fresh input into its static
buffer, or fed a piece a tensor that is not the static one it captured, replay would differ from eager.
"""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from dynacheck.capture.model import Glm5Config, Glm5Model  # noqa: E402
from dynacheck.capture.piecewise import CaptureState, PiecewiseBackend  # noqa: E402


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: "FakeGraph"):
        super().__init__()
        self.graph = graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.graph.ops.append((func, args, kwargs, out))
        return out


class FakeGraph:
    def __init__(self):
        self.ops: list = []
        self.replays = 0

    def replay(self):
        self.replays += 1
        for func, args, kwargs, out in self.ops:
            new = func(*args, **kwargs)
            for old_t, new_t in zip(tree_flatten(out)[0], tree_flatten(new)[0]):
                if isinstance(old_t, torch.Tensor) and old_t is not new_t:
                    with torch.no_grad():
                        old_t.copy_(new_t)


@contextlib.contextmanager
def fake_capture(graph: FakeGraph, pool=None):
    with _Recorder(graph):
        yield


class _Stream:
    def wait_stream(self, other):
        pass


@pytest.fixture
def fake_cuda(monkeypatch):
    graphs: list[FakeGraph] = []

    def make_graph():
        graphs.append(FakeGraph())
        return graphs[-1]

    monkeypatch.setattr(torch.cuda, "CUDAGraph", make_graph)
    monkeypatch.setattr(torch.cuda, "graph", fake_capture)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: _Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    return graphs


@pytest.mark.slow  # over 10 s on 2 cores
def test_replay_matches_eager_for_new_inputs_after_capture(fake_cuda):
    torch.manual_seed(0)
    cfg = Glm5Config.tiny(layers=2)
    model = Glm5Model(cfg, dtype=torch.float32).eval()
    state = CaptureState()
    state.stable = {t.data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    compiled = torch.compile(model, backend=PiecewiseBackend(state), fullgraph=True, dynamic=False)
    with torch.no_grad():
        x0, pos = torch.randn(3, cfg.hidden), torch.arange(3)
        compiled(x0, pos)  # compile: pieces eager
        state.use_cuda_graphs = state.capturing = True
        compiled(x0, pos)  # capture every piece for this shape, then replay
        state.capturing = False
        assert len(fake_cuda) == 3  # one graph per piece (2 attention ops -> 3 pieces)
        for _ in range(2):
            x = torch.randn(3, cfg.hidden)
            out = compiled(x, pos).clone()
            assert torch.equal(out, model(x, pos))
        assert all(g.replays == 3 for g in fake_cuda)  # capture's own replay + two calls


def test_a_moved_static_input_is_an_error_not_silent_garbage(fake_cuda):
    from dynacheck.capture.piecewise import _Captured

    gm = torch.fx.symbolic_trace(lambda a, w: a @ w)
    w = torch.randn(4, 4)
    captured = _Captured(gm, (torch.randn(2, 4), w), stable={w.data_ptr()}, pool=None)
    assert captured.copy_in == [0] and captured.pinned == [(1, w.data_ptr())]
    with pytest.raises(RuntimeError, match="moved"):
        captured.replay((torch.randn(2, 4), w.clone()))

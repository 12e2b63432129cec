"""GLM-5 NVFP4 model: structure, traceable MoE routing, and tensor parallelism equal to one rank."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dynacheck.capture import linear  # noqa: E402
from dynacheck.capture.model import Glm5Config, Glm5Model, Moe  # noqa: E402


def test_short_capture_keeps_dense_and_moe_layers():
    last = [Glm5Model(Glm5Config.tiny(layers=n), dtype=torch.float32).layers[-1].kind for n in (1, 2)]
    assert last == ["dense", "moe"]
    kinds = [layer.kind for layer in Glm5Model(Glm5Config.tiny(layers=5), dtype=torch.float32).layers]
    assert kinds == ["dense", "dense", "dense", "moe", "moe"]


def test_full_config_has_glm5_sizes():
    cfg = Glm5Config()
    assert (cfg.hidden, cfg.heads, cfg.q_lora, cfg.kv_lora, cfg.qk_nope, cfg.qk_rope, cfg.v_head) == (
        6144, 64, 2048, 512, 192, 64, 256)
    assert (cfg.dense_intermediate, cfg.moe_intermediate, cfg.experts, cfg.top_k, cfg.first_dense) == (
        12288, 2048, 256, 8, 3)


def test_every_projection_is_nvfp4():
    model = Glm5Model(Glm5Config.tiny(), dtype=torch.float32)
    nvfp4 = [m for m in model.modules() if isinstance(m, linear.Nvfp4Linear)]
    dense = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    # per layer 5 attention projections; dense MLP 2; MoE 2 per expert + 2 shared
    assert not dense and len(nvfp4) == 2 * 5 + 2 + 2 * Glm5Config.tiny().experts + 2
    w = nvfp4[0]
    assert w.weight.dtype == torch.uint8 and w.weight.shape[1] * 2 == w.in_features
    assert w.weight_scale.dtype == torch.float8_e4m3fn


def test_nvfp4_linear_is_close_to_the_dense_product():
    torch.manual_seed(0)
    w, x = torch.randn(64, 128) / 11, torch.randn(8, 128)
    layer = linear.Nvfp4Linear(w, input_amax=float(x.abs().amax()), out_dtype=torch.float32)
    rel = (layer(x) - x @ w.T).norm() / (x @ w.T).norm()
    assert rel < 0.2  # two FP4 roundings (weight and activation); a layout bug gives ~1.4


def test_moe_routing_compiles_without_breaks_and_picks_top_k():
    cfg = Glm5Config.tiny(layers=2)
    moe = Moe(cfg, linear.Shard(), _maker())
    x = torch.randn(5, cfg.hidden)
    combine = torch.compile(moe.route, backend="eager", fullgraph=True)(x)
    assert torch.equal((combine > 0).sum(-1), torch.full((5,), cfg.top_k))
    assert torch.allclose(combine.sum(-1), torch.full((5,), cfg.routed_scaling))


def _maker():
    from dynacheck.capture.model import WeightMaker

    return WeightMaker(0, torch.device("cpu"), torch.float32)


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed job at a time under pytest -n
def test_tensor_parallel_two_ranks_equals_one_rank(tmp_path):
    """tp=2 on gloo: column/row-parallel shards plus traceable all-reduce give the tp=1 output."""
    from dynacheck.cli import main

    outs = {}
    for tp in (1, 2):
        out = tmp_path / f"tp{tp}"
        with pytest.raises(SystemExit) as exc:
            main(["capture", "glm5-nvfp4", "--device", "cpu", "--tp", str(tp), "--batch-sizes", "3",
                  "--dtype", "fp32", "--out", str(out), "--save-outputs"])
        assert exc.value.code == 0
        outs[tp] = torch.load(out / "outputs-rank0.pt")["3"]
    ref = outs[1]
    assert (outs[2] - ref).abs().max() / ref.abs().max() < 1e-3
    rank1 = torch.load(tmp_path / "tp2" / "outputs-rank1.pt")["3"]
    assert torch.equal(rank1, outs[2])

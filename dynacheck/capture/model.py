"""GLM-5 decoder layers (MLA attention, dense MLP, MoE) with every linear in NVFP4, random weights.

Sizes default to `transformers`' `GlmMoeDsaConfig` (FIELD_NOTES "Sizes"). Simplifications, on purpose:
- The DSA indexer (top-2048 sparse token selection) is left out: for sequences of at most 2048 tokens it
  selects every token, so sparse attention equals the dense causal attention used here.
- Embedding and lm_head are left out (GLM-5 NVFP4 checkpoints keep them unquantized); the input is the
  hidden states, the output the final-norm hidden states.
- Routed experts run as per-expert masked dense compute (every expert sees every token, weighted by the
  router's scattered top-k weights) instead of SGLang's fused NVFP4 MoE kernel: traceable with no
  data-dependent control flow; `--experts` shrinks the expert count for speed.
- Router: sigmoid scores plus correction bias, plain top-k (no group-limited routing), normalised,
  scaled by 2.5.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from dynacheck.capture.attention import mla_attention
from dynacheck.capture.linear import Nvfp4Linear, RowParallel, Shard, all_reduce


@dataclass(frozen=True)
class Glm5Config:
    hidden: int = 6144
    heads: int = 64
    q_lora: int = 2048
    kv_lora: int = 512
    qk_nope: int = 192
    qk_rope: int = 64
    v_head: int = 256
    dense_intermediate: int = 12288
    moe_intermediate: int = 2048
    experts: int = 256
    top_k: int = 8
    first_dense: int = 3
    layers: int = 2
    rms_eps: float = 1e-5
    rope_theta: float = 1_000_000.0
    routed_scaling: float = 2.5

    @classmethod
    def tiny(cls, **overrides: int) -> "Glm5Config":
        """Same structure at toy sizes, for CPU tests."""
        base = cls(hidden=128, heads=4, q_lora=64, kv_lora=32, qk_nope=32, qk_rope=16, v_head=32,
                   dense_intermediate=256, moe_intermediate=64, experts=4, top_k=2)
        return replace(base, **overrides)

    def dense_layers(self) -> int:
        """A short capture keeps at least one MoE layer: the first min(first_dense, layers - 1) are dense."""
        return 1 if self.layers == 1 else min(self.first_dense, self.layers - 1)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, dtype: torch.dtype, device: torch.device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype, device=device), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.float()).to(x.dtype)


class WeightMaker:
    """Deterministic full-size random weights, sliced per rank, so every TP size sees the same model."""

    def __init__(self, seed: int, device: torch.device, dtype: torch.dtype):
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.device, self.dtype = device, dtype

    def __call__(self, out_f: int, in_f: int) -> torch.Tensor:
        w = torch.randn(out_f, in_f, generator=self.gen, device=self.device, dtype=torch.float32)
        return (w * in_f**-0.5).to(self.dtype)


def _rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding on the last dim (halves rotated), positions (T,)."""
    half = x.shape[-1] // 2
    inv = 1.0 / theta ** (torch.arange(half, device=x.device, dtype=torch.float32) / half)
    ang = positions.float()[:, None] * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = x.float()[..., :half], x.float()[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


class MlaAttention(nn.Module):
    """Multi-head latent attention with GLM-5's ranks; the attention itself is one named custom op."""

    def __init__(self, cfg: Glm5Config, shard: Shard, make: WeightMaker):
        super().__init__()
        dt, dev = make.dtype, make.device
        self.cfg, self.heads = cfg, cfg.heads // shard.size
        qk = cfg.qk_nope + cfg.qk_rope
        self.q_a_proj = Nvfp4Linear(make(cfg.q_lora, cfg.hidden), out_dtype=dt)
        self.q_a_layernorm = RMSNorm(cfg.q_lora, cfg.rms_eps, dt, dev)
        q_b = make(cfg.heads * qk, cfg.q_lora)
        self.q_b_proj = Nvfp4Linear(shard.rows(q_b).contiguous(), out_dtype=dt, weight_amax=q_b.abs().amax())
        self.kv_a_proj_with_mqa = Nvfp4Linear(make(cfg.kv_lora + cfg.qk_rope, cfg.hidden), out_dtype=dt)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora, cfg.rms_eps, dt, dev)
        kv_b = make(cfg.heads * (cfg.qk_nope + cfg.v_head), cfg.kv_lora)
        self.kv_b_proj = Nvfp4Linear(shard.rows(kv_b).contiguous(), out_dtype=dt, weight_amax=kv_b.abs().amax())
        self.o_proj = RowParallel(make(cfg.hidden, cfg.heads * cfg.v_head), shard, dt)
        self.scale = qk**-0.5

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        cfg, h, t = self.cfg, self.heads, x.shape[0]
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(t, h, cfg.qk_nope + cfg.qk_rope)
        q_nope, q_rope = q.split([cfg.qk_nope, cfg.qk_rope], dim=-1)
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([cfg.kv_lora, cfg.qk_rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent.contiguous())).view(t, h, cfg.qk_nope + cfg.v_head)
        k_nope, v = kv.split([cfg.qk_nope, cfg.v_head], dim=-1)
        q_rope = _rope(q_rope, positions, cfg.rope_theta)
        k_rope = _rope(k_rope.unsqueeze(1), positions, cfg.rope_theta).expand(t, h, cfg.qk_rope)
        q = torch.cat((q_nope, q_rope), dim=-1)
        k = torch.cat((k_nope, k_rope), dim=-1)
        out = mla_attention(q.contiguous(), k.contiguous(), v.contiguous(), self.scale)
        return self.o_proj(out.reshape(t, h * cfg.v_head))


class Mlp(nn.Module):
    """SwiGLU MLP: column-parallel gate_up, row-parallel down (dense layers, experts, shared expert)."""

    def __init__(self, hidden: int, inter: int, shard: Shard, make: WeightMaker, reduce: bool = True):
        super().__init__()
        gate, up, down = make(inter, hidden), make(inter, hidden), make(hidden, inter)
        gate_up = torch.cat((shard.rows(gate), shard.rows(up)), dim=0).contiguous()
        amax = torch.maximum(gate.abs().amax(), up.abs().amax())  # merged gate_up: one global scale
        self.gate_up_proj = Nvfp4Linear(gate_up, out_dtype=make.dtype, weight_amax=amax)
        self.down_proj = Nvfp4Linear(shard.cols(down).contiguous(), out_dtype=make.dtype,
                                     weight_amax=down.abs().amax())
        self.shard, self.reduce = shard, reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        out = self.down_proj(nn.functional.silu(gate) * up)
        return all_reduce(out, self.shard) if self.reduce else out


class Moe(nn.Module):
    """Routed experts (per-expert masked dense compute) plus one shared expert; one all-reduce at the end."""

    def __init__(self, cfg: Glm5Config, shard: Shard, make: WeightMaker):
        super().__init__()
        self.cfg, self.shard = cfg, shard
        self.gate = nn.Parameter(make(cfg.experts, cfg.hidden).float(), requires_grad=False)
        self.e_score_correction_bias = nn.Parameter(
            torch.zeros(cfg.experts, device=make.device), requires_grad=False
        )
        self.experts = nn.ModuleList(
            Mlp(cfg.hidden, cfg.moe_intermediate, shard, make, reduce=False) for _ in range(cfg.experts)
        )
        self.shared_experts = Mlp(cfg.hidden, cfg.moe_intermediate, shard, make, reduce=False)

    def route(self, x: torch.Tensor) -> torch.Tensor:
        """(T, experts) combine weights: top-k of sigmoid(+bias) scattered back, no data-dependent branch."""
        scores = torch.sigmoid(x.float() @ self.gate.T)
        ids = torch.topk(scores + self.e_score_correction_bias, self.cfg.top_k, dim=-1).indices
        w = scores.gather(1, ids)
        w = w / w.sum(-1, keepdim=True) * self.cfg.routed_scaling
        return torch.zeros_like(scores).scatter(1, ids, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        combine = self.route(x).to(x.dtype)
        out = self.shared_experts(x)
        for e, expert in enumerate(self.experts):
            out = out + combine[:, e : e + 1] * expert(x)
        return all_reduce(out, self.shard)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Glm5Config, index: int, shard: Shard, make: WeightMaker):
        super().__init__()
        dt, dev = make.dtype, make.device
        self.input_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps, dt, dev)
        self.self_attn = MlaAttention(cfg, shard, make)
        self.post_attention_layernorm = RMSNorm(cfg.hidden, cfg.rms_eps, dt, dev)
        dense = index < cfg.dense_layers()
        self.kind = "dense" if dense else "moe"
        self.mlp = Mlp(cfg.hidden, cfg.dense_intermediate, shard, make) if dense else Moe(cfg, shard, make)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), positions)
        return x + self.mlp(self.post_attention_layernorm(x))


class Glm5Model(nn.Module):
    """The part SGLang's piecewise runner compiles: decoder layers and the final norm."""

    def __init__(self, cfg: Glm5Config, shard: Shard = Shard(), *, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.bfloat16, seed: int = 0):
        super().__init__()
        device = torch.device(device)
        make = WeightMaker(seed, device, dtype)
        self.cfg = cfg
        self.layers = nn.ModuleList(DecoderLayer(cfg, i, shard, make) for i in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.rms_eps, dtype, device)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            hidden = layer(hidden, positions)
        return self.norm(hidden)

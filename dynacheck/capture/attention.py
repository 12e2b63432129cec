"""The attention op as one named custom op, so the piecewise backend can split the graph there.

SGLang's piecewise runner splits at `unified_attention_with_output`; attention runs eagerly between
the CUDA-graphed pieces. Here the op is causal attention over the batch's tokens (one sequence).
"""

from __future__ import annotations

import torch

OP_NAME = "dynacheck_capture::mla_attention"


@torch.library.custom_op(OP_NAME, mutates_args=())
def mla_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q, k: (T, H, Dqk); v: (T, H, Dv) -> (T, H, Dv), causal."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, scale=scale
    )
    return out.transpose(0, 1).contiguous()


@mla_attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    return q.new_empty((q.shape[0], q.shape[1], v.shape[2]))


def is_attention_node(node: "torch.fx.Node") -> bool:
    """True for a graph node that calls the attention op (any overload)."""
    target = node.target
    if node.op != "call_function":
        return False
    name = getattr(target, "name", None)
    if callable(name):
        name = name()
    return isinstance(name, str) and name.split(".")[0] == OP_NAME

import torch


def clip(t: torch.Tensor, limit: float) -> torch.Tensor:
    if t.max() > limit:
        t = t.clamp(max=limit)
    return t


def f(x):
    return clip(x * 3, 1.0)

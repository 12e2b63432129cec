import torch


def f(x):
    if isinstance(x, torch.Tensor) and x.numel() > 0:
        return x.relu()
    return x

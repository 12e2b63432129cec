import torch


def f(x):
    if x.dim() == 1 and x.dtype == torch.float32:
        return x * 2
    return x

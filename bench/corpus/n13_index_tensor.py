import torch


def f(x):
    idx = torch.arange(4)
    return x[idx] * 2

import torch


def f(x):
    idx = torch.nonzero(x > 0)
    return x.sum() + idx.sum()

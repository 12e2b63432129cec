import torch


def f(x):
    return torch.where(x.sum() > 0, x + 1, x - 1)

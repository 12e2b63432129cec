import torch


def f(x):
    return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))

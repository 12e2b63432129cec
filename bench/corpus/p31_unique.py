import torch


def f(x):
    u = torch.unique(x.round())
    return u.sum() + x

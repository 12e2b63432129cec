import torch


def f(x):
    b = torch.bincount(x.long().abs())
    return b.sum() + x

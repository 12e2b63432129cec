import torch


def f(x):
    idx = x.nonzero()
    return idx.float().sum() + x

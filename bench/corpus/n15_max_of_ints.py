import torch


def f(x):
    m = max(x.shape[0], 4)
    return x[:m] + int(x.size(0))

import torch


def f(x):
    n = x.sum().item()
    if n > 0:
        return x + n
    return x

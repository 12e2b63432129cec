import torch


def f(x):
    y = x.clone()
    y.add_(1)
    return y

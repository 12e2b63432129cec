import torch


def f(x):
    y = x.abs()
    assert y.min() >= 0
    return y

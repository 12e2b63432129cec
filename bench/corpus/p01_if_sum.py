import torch


def f(x):
    if x.sum() > 0:
        return x + 1
    return x - 1

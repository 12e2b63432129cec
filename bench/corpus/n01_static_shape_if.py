import torch


def f(x):
    if x.shape[0] > 2:
        return x + 1
    return x

import torch


def f(x):
    a = x[:4].sum()
    b = x[4:].sum()
    if a > b:
        return x
    return x.flip(0)

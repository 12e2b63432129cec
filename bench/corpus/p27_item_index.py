import torch


def f(x):
    i = x.argmin().item()
    return x[i:]

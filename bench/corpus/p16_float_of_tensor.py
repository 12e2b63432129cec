import torch


def f(x):
    s = float(x.sum())
    return x * s

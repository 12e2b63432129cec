import torch


def f(x):
    tag = repr(x.sum())
    return x * len(tag)

import torch


def f(x):
    a = x.numpy()
    return x + a.sum()

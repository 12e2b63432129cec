import torch


def pick(t, other):
    if t.mean() > other.mean():
        return t
    return other


def f(x):
    return pick(x, x * 2)

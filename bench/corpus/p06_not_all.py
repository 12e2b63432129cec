import torch


def f(x):
    if not (x > 0).all():
        x = x.abs()
    return x

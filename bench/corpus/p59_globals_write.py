import torch


def f(x):
    globals()["last"] = 1
    return x + 1

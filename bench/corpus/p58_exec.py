import torch


def f(x):
    exec("k = 1")
    return x + 1

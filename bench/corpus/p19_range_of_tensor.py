import torch


def f(x):
    n = x.long().sum()
    for _ in range(n):
        x = x + 1
    return x

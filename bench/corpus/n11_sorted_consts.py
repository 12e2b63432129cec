import torch


ORDER = [3, 1, 2]


def f(x):
    for k in sorted(ORDER):
        x = x * k
    return x

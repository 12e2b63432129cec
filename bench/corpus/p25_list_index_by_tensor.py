import torch


TABLE = [1.0, 2.0, 3.0]


def f(x):
    i = x.argmax() % 3
    return x * TABLE[i]

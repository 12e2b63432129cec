import torch


def f(x):
    flag = bool(x.sum())
    return x + 1 if flag else x

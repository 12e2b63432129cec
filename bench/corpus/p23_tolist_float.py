import torch


def f(x):
    vals = x.tolist()
    return x + vals[0]

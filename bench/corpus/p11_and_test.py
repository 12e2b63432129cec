import torch


def f(x):
    ok = x.numel() > 0 and x.sum() > 0
    if ok:
        return x
    return -x
